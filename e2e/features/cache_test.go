package features_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// countingRT counts the calls (POSTs) that reach the upstream.
type countingRT struct {
	rt    http.RoundTripper
	posts atomic.Int64
}

func (c *countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost {
		c.posts.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// cachedMesh is an embedded mesh with the response cache on, in front of
// the zero-latency simulator, and the count of upstream calls.
func cachedMesh(t *testing.T) (*keel.Mesh, *countingRT) {
	t.Helper()
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	up := &countingRT{rt: fleet.Transport()}
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	cfg.Cache.Enabled = true
	m, err := keel.New(cfg, keel.WithUpstream(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, up
}

// answer is what one SDK call returned: the text, the response header.
type answer struct {
	text   string
	header http.Header
}

// askAnthropic asks through the Anthropic SDK, streamed or not.
func askAnthropic(t *testing.T, m *keel.Mesh, stream bool, temp float64, opts ...aoption.RequestOption) answer {
	t.Helper()
	c := anthropic.NewClient(aoption.WithHTTPClient(m.HTTPClient()), aoption.WithAPIKey("client-key"),
		aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
	var resp *http.Response
	// This SDK version has no temperature field: set it in the body.
	opts = append(opts, aoption.WithResponseInto(&resp), aoption.WithJSONSet("temperature", temp))
	params := anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 200,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))}}
	ctx := context.Background()
	if !stream {
		msg, err := c.Messages.New(ctx, params, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if len(msg.Content) != 1 {
			t.Fatalf("content = %+v, want one text block", msg.Content)
		}
		return answer{msg.Content[0].Text, resp.Header}
	}
	st := c.Messages.NewStreaming(ctx, params, opts...)
	defer st.Close()
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.StopReason == "" {
		t.Fatalf("streamed message = %+v, want one text block and a stop reason", acc)
	}
	return answer{acc.Content[0].Text, resp.Header}
}

// askOpenAI asks through the OpenAI SDK, streamed or not.
func askOpenAI(t *testing.T, m *keel.Mesh, stream bool, temp float64, opts ...ooption.RequestOption) answer {
	t.Helper()
	c := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
	var resp *http.Response
	opts = append(opts, ooption.WithResponseInto(&resp))
	params := openai.ChatCompletionNewParams{Model: "sim-sonnet", MaxCompletionTokens: openai.Int(200), Temperature: openai.Float(temp),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about keels.")}}
	ctx := context.Background()
	if !stream {
		cc, err := c.Chat.Completions.New(ctx, params, opts...)
		if err != nil {
			t.Fatal(err)
		}
		return answer{cc.Choices[0].Message.Content, resp.Header}
	}
	st := c.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer st.Close()
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].FinishReason == "" {
		t.Fatalf("streamed completion = %+v, want one choice with a finish reason", acc.ChatCompletion)
	}
	return answer{acc.Choices[0].Message.Content, resp.Header}
}

// TestCacheIdenticalRequestOneUpstreamCall: the second of two identical
// temperature-0 requests is answered from the cache — both wire formats,
// streamed or not in either order (the stream flag is not in the key, a
// stored answer is re-streamed as SSE the official SDKs parse).
func TestCacheIdenticalRequestOneUpstreamCall(t *testing.T) {
	for _, tc := range []struct {
		name          string
		openai        bool
		first, second bool // stream?
	}{
		{name: "anthropic/plain-then-plain"},
		{name: "anthropic/plain-then-stream", second: true},
		{name: "anthropic/stream-then-plain", first: true},
		{name: "anthropic/stream-then-stream", first: true, second: true},
		{name: "openai/plain-then-plain", openai: true},
		{name: "openai/plain-then-stream", openai: true, second: true},
		{name: "openai/stream-then-plain", openai: true, first: true},
		{name: "openai/stream-then-stream", openai: true, first: true, second: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, up := cachedMesh(t)
			ask := func(stream bool) answer {
				if tc.openai {
					return askOpenAI(t, m, stream, 0)
				}
				return askAnthropic(t, m, stream, 0)
			}
			a := ask(tc.first)
			b := ask(tc.second)
			if n := up.posts.Load(); n != 1 {
				t.Errorf("upstream calls = %d, want 1", n)
			}
			if a.text == "" || b.text != a.text {
				t.Errorf("second answer %q, want the first %q", b.text, a.text)
			}
			if got := a.header.Get("X-Mesh-Cache"); got != "miss" {
				t.Errorf("first X-Mesh-Cache = %q, want miss", got)
			}
			if got := b.header.Get("X-Mesh-Cache"); got != "hit" {
				t.Errorf("second X-Mesh-Cache = %q, want hit", got)
			}
			if !tc.second {
				if got, want := b.header.Get("X-Mesh-Cost"), server.FormatCost(0); got != want {
					t.Errorf("hit X-Mesh-Cost = %q, want %q", got, want)
				}
			}
		})
	}
}

// TestCacheBypass: the client's opt-outs and the policy send identical
// requests upstream each time, with X-Mesh-Cache: bypass.
func TestCacheBypass(t *testing.T) {
	for _, tc := range []struct {
		name string
		temp float64
		opts []aoption.RequestOption
	}{
		{name: "Cache-Control no-cache", opts: []aoption.RequestOption{aoption.WithHeader("Cache-Control", "no-cache")}},
		{name: "Cache-Control no-store", opts: []aoption.RequestOption{aoption.WithHeader("Cache-Control", "no-store")}},
		{name: "mesh_behavior cache false", opts: []aoption.RequestOption{aoption.WithJSONSet("mesh_behavior", map[string]any{"cache": false})}},
		{name: "X-Mesh-Behavior cache false", opts: []aoption.RequestOption{aoption.WithHeader("X-Mesh-Behavior", `{"cache":false}`)}},
		{name: "temperature 1", temp: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, up := cachedMesh(t)
			for i := range 2 {
				a := askAnthropic(t, m, i == 1, tc.temp, tc.opts...)
				if got := a.header.Get("X-Mesh-Cache"); got != "bypass" {
					t.Errorf("call %d: X-Mesh-Cache = %q, want bypass", i+1, got)
				}
			}
			if n := up.posts.Load(); n != 2 {
				t.Errorf("upstream calls = %d, want 2", n)
			}
		})
	}
}

// TestCacheNoCacheRefreshes: Cache-Control: no-cache does not read the
// cache but stores its fresh answer; no-store and mesh_behavior.cache:
// false store nothing.
func TestCacheNoCacheRefreshes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		opt       aoption.RequestOption
		wantCalls int64
		wantThen  string
	}{
		{name: "no-cache stores", opt: aoption.WithHeader("Cache-Control", "no-cache"), wantCalls: 1, wantThen: "hit"},
		{name: "no-store does not", opt: aoption.WithHeader("Cache-Control", "no-store"), wantCalls: 2, wantThen: "miss"},
		{name: "mesh_behavior cache false does not", opt: aoption.WithJSONSet("mesh_behavior", map[string]any{"cache": false}), wantCalls: 2, wantThen: "miss"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, up := cachedMesh(t)
			askAnthropic(t, m, false, 0, tc.opt)
			a := askAnthropic(t, m, false, 0)
			if got := a.header.Get("X-Mesh-Cache"); got != tc.wantThen {
				t.Errorf("plain call after: X-Mesh-Cache = %q, want %q", got, tc.wantThen)
			}
			if n := up.posts.Load(); n != tc.wantCalls {
				t.Errorf("upstream calls = %d, want %d", n, tc.wantCalls)
			}
		})
	}
}

// TestCacheOffNoHeader: without a cache: section nothing is cached and no
// X-Mesh-Cache is sent.
func TestCacheOffNoHeader(t *testing.T) {
	fleet, _ := sim.New(sim.ZeroLatency())
	up := &countingRT{rt: fleet.Transport()}
	m, err := keel.New(simfleet.Config(fleet, "http://sim.invalid"), keel.WithUpstream(up))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	for range 2 {
		if a := askAnthropic(t, m, false, 0); a.header.Get("X-Mesh-Cache") != "" {
			t.Errorf("X-Mesh-Cache = %q with the cache off, want none", a.header.Get("X-Mesh-Cache"))
		}
	}
	if n := up.posts.Load(); n != 2 {
		t.Errorf("upstream calls = %d, want 2", n)
	}
}
