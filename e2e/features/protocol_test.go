package features_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel/sim"
)

const anthBody = `{"model":"sim-sonnet","max_tokens":64,"messages":[{"role":"user","content":"Hello"}]}`
const oaiBody = `{"model":"sim-sonnet","messages":[{"role":"user","content":"Hello"}]}`

// splitEvents splits an SSE body into events (the text between blank lines)
// and reports whether the body ended with a blank line.
func splitEvents(body []byte) (events []string, terminated bool) {
	s := string(body)
	terminated = strings.HasSuffix(s, "\n\n")
	for _, ev := range strings.Split(strings.TrimRight(s, "\n"), "\n\n") {
		if ev != "" {
			events = append(events, ev)
		}
	}
	return events, terminated
}

// PROTOCOLS.md §0: each point has a subtest.
func TestProtocolSection0(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())

	t.Run("1-2/both API versions and both auth headers", func(t *testing.T) {
		cases := []struct{ name, version, authH, authV string }{
			{"2023-06-01 x-api-key", "2023-06-01", "x-api-key", "k1"},
			{"2026-10-21 bearer", "2026-10-21", "Authorization", "Bearer k2"},
			{"2023-06-01 bearer", "2023-06-01", "Authorization", "Bearer k3"},
			{"2026-10-21 x-api-key", "2026-10-21", "x-api-key", "k4"},
		}
		for _, c := range cases {
			resp, b := e.post(t, "/v1/messages", anthBody, "anthropic-version", c.version, c.authH, c.authV)
			if resp.StatusCode != 200 {
				t.Fatalf("%s: status %d: %s", c.name, resp.StatusCode, b)
			}
			up := e.rec.last()
			if got := up.Get("anthropic-version"); got != c.version {
				t.Errorf("%s: upstream anthropic-version %q, want the client's %q", c.name, got, c.version)
			}
			// Upstream auth is the provider's configured key, never the client's.
			if got := up.Get("x-api-key"); got != "sk-ant-upstream-secret" || up.Get("Authorization") != "" {
				t.Errorf("%s: upstream auth x-api-key=%q authorization=%q", c.name, got, up.Get("Authorization"))
			}
		}
		// Under 2026-10-21 sampling parameters are a 400 upstream: Keel drops them and says so.
		body := `{"model":"sim-sonnet","max_tokens":64,"temperature":0.2,"top_k":5,"messages":[{"role":"user","content":"Hello"}]}`
		resp, b := e.post(t, "/v1/messages", body, "anthropic-version", "2026-10-21")
		if resp.StatusCode != 200 || resp.Header.Get("X-Mesh-Dropped") != "temperature,top_k" {
			t.Errorf("2026-10-21 with temperature: status %d dropped %q: %s", resp.StatusCode, resp.Header.Get("X-Mesh-Dropped"), b)
		}
		resp, _ = e.post(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
		if resp.Header.Get("X-Mesh-Dropped") != "" {
			t.Errorf("2023-06-01 dropped %q, want nothing", resp.Header.Get("X-Mesh-Dropped"))
		}
	})

	t.Run("3-4/every Anthropic event has an event line and a blank-line terminator", func(t *testing.T) {
		body := strings.Replace(anthBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)
		resp, b := e.post(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Fatalf("content-type %q", ct)
		}
		events, terminated := splitEvents(b)
		if !terminated {
			t.Errorf("stream does not end with a blank line: %q", tail(b))
		}
		if len(events) < 6 {
			t.Fatalf("only %d events: %s", len(events), b)
		}
		names := []string{}
		for _, ev := range events {
			lines := strings.Split(ev, "\n")
			if !strings.HasPrefix(lines[0], "event: ") || len(lines) < 2 || !strings.HasPrefix(lines[1], "data: ") {
				t.Fatalf("event without an event: line: %q", ev)
			}
			name := strings.TrimPrefix(lines[0], "event: ")
			var data struct{ Type string }
			if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &data); err != nil || data.Type != name {
				t.Errorf("event %q carries type %q (%v)", name, data.Type, err)
			}
			names = append(names, name)
		}
		if names[0] != "message_start" || names[len(names)-1] != "message_stop" {
			t.Errorf("events %v", names)
		}
	})

	t.Run("4-5/OpenAI chunks end with blank lines, [DONE], and never carry an error key", func(t *testing.T) {
		body := `{"model":"sim-opus","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"Hello"}]}`
		resp, b := e.post(t, "/v1/chat/completions", body)
		if resp.StatusCode != 200 {
			t.Fatalf("status %d %s", resp.StatusCode, b)
		}
		events, terminated := splitEvents(b)
		if !terminated || events[len(events)-1] != "data: [DONE]" {
			t.Fatalf("stream must end with data: [DONE] and a blank line: %q", tail(b))
		}
		sawUsage := false
		for _, ev := range events[:len(events)-1] {
			if strings.HasPrefix(ev, ":") {
				continue // an SSE comment (a translated ping): openai-go ignores it
			}
			if strings.HasPrefix(ev, "event:") || !strings.HasPrefix(ev, "data: ") {
				t.Fatalf("OpenAI chunk %q is not a lone data line", ev)
			}
			var m map[string]json.RawMessage
			if err := json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &m); err != nil {
				t.Fatal(err)
			}
			if _, ok := m["error"]; ok {
				t.Errorf("chunk has an error key: %s", ev)
			}
			if u, ok := m["usage"]; ok && string(u) != "null" {
				sawUsage = true
			}
		}
		if !sawUsage {
			t.Error("no usage chunk though include_usage was asked")
		}
	})

	t.Run("6/openai-go through the RoundTripper with its default base URL", func(t *testing.T) {
		// The default base URL is https://api.openai.com/v1/: the embedded
		// transport serves it in-process, so no origin check trips and no
		// packet leaves the machine.
		c := openai.NewClient(ooption.WithHTTPClient(e.mesh.HTTPClient()), ooption.WithAPIKey("x"))
		cc, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "sim-haiku",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		if err != nil || cc.Choices[0].Message.Content == "" {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("7/errors Keel already failed over say x-should-retry: false and the SDK does not multiply them", func(t *testing.T) {
		e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindRateLimit, Rate: 1, Model: "sim-haiku", RetryAfter: sim.Duration(time.Second)}})
		defer e.fleet.SetFaults(nil)
		before := e.rec.count()
		c := anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("x"), aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
		var raw *http.Response
		_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "sim-haiku", MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}, aoption.WithResponseInto(&raw))
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
			t.Fatalf("err %v, want a 429 API error", err)
		}
		if raw == nil || raw.Header.Get("X-Should-Retry") != "false" || raw.Header.Get("X-Mesh-Error-Code") != "MESH_FALLBACK_EXHAUSTED" {
			t.Fatalf("headers %v", raw)
		}
		// One SDK attempt: Keel tried each of sim-haiku's three regions,
		// then one more after the retry-after, and stopped at its 4 attempts.
		// With the SDK's 2 retries on top it would be 12.
		if got := e.rec.count() - before; got != 4 {
			t.Errorf("%d upstream attempts, want 4 (Keel's limit, no SDK retries)", got)
		}
		// openai-go parses the mesh's error too, mesh_error_code included.
		oc := openai.NewClient(ooption.WithBaseURL(e.proxy.URL+"/v1"), ooption.WithAPIKey("x"), ooption.WithMaxRetries(0))
		_, oerr := oc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "sim-haiku",
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
		var oapi *openai.Error
		if !errors.As(oerr, &oapi) || oapi.StatusCode != 429 || !strings.Contains(oapi.RawJSON(), "MESH_FALLBACK_EXHAUSTED") {
			t.Errorf("openai-go: %v, want a parsed 429 carrying mesh_error_code", oerr)
		}

	})

	t.Run("8/non-streaming answers and errors are application/json", func(t *testing.T) {
		for _, c := range []struct{ path, body string }{
			{"/v1/messages", anthBody}, {"/v1/chat/completions", oaiBody},
			{"/v1/messages", `{`}, {"/v1/chat/completions", `{`},
		} {
			resp, _ := e.post(t, c.path, c.body, "anthropic-version", "2023-06-01")
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("%s %s: content-type %q", c.path, c.body, ct)
			}
		}
	})

	t.Run("9/streaming is decided by the body, not Accept", func(t *testing.T) {
		stream := strings.Replace(anthBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)
		resp, _ := e.post(t, "/v1/messages", stream, "Accept", "application/json", "anthropic-version", "2023-06-01")
		if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("stream:true with Accept: application/json gave %q", ct)
		}
		resp, _ = e.post(t, "/v1/chat/completions", oaiBody, "Accept", "text/event-stream")
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("no stream with Accept: text/event-stream gave %q", ct)
		}
	})
}

func tail(b []byte) string {
	if len(b) > 80 {
		b = b[len(b)-80:]
	}
	return string(b)
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	big := `{"model":"sim-sonnet","max_tokens":5,"messages":[{"role":"user","content":"` + strings.Repeat("a", 11<<20) + `"}]}`
	cases := []struct {
		name, method, path, body string
		status                   int
		errType                  string
	}{
		{"anthropic malformed JSON", "POST", "/v1/messages", `{"model":`, 400, "invalid_request_error"},
		{"openai malformed JSON", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_request_error"},
		{"missing max_tokens", "POST", "/v1/messages", `{"model":"sim-sonnet","messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error"},
		{"anthropic unknown model", "POST", "/v1/messages", `{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, 404, "not_found_error"},
		{"openai unknown model", "POST", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404, "invalid_request_error"},
		{"anthropic too large", "POST", "/v1/messages", big, 413, "request_too_large"},
		{"openai too large", "POST", "/v1/chat/completions", big, 413, "invalid_request_error"},
		{"anthropic wrong method", "GET", "/v1/messages", "", 405, "invalid_request_error"},
		{"openai wrong method", "PUT", "/v1/chat/completions", "", 405, "invalid_request_error"},
		{"unknown mesh_behavior key", "POST", "/v1/messages", `{"model":"sim-sonnet","max_tokens":5,"mesh_behavior":{"hedgee":true},"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, b := doRaw(t, e.proxy.URL+c.path, c.method, c.body, "anthropic-version", "2023-06-01")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if strings.HasPrefix(c.path, "/v1/messages") {
				var eb struct {
					Type  string
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal(b, &eb); err != nil || eb.Type != "error" || eb.Error.Type != c.errType || eb.Error.Message == "" {
					t.Errorf("Anthropic error shape wrong: %s (%v)", b, err)
				}
			} else {
				var eb struct {
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal(b, &eb); err != nil || eb.Error.Type != c.errType || eb.Error.Message == "" {
					t.Errorf("OpenAI error shape wrong: %s (%v)", b, err)
				}
			}
			if c.status == 405 && resp.Header.Get("Allow") != "POST" {
				t.Errorf("Allow %q", resp.Header.Get("Allow"))
			}
			// The server keeps serving.
			if resp, b := e.post(t, "/v1/messages", anthBody, "anthropic-version", "2023-06-01"); resp.StatusCode != 200 {
				t.Fatalf("follow-up request failed: %d %s", resp.StatusCode, b)
			}
		})
	}
}

func TestModelsHealthReady(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	resp, b := doRaw(t, e.proxy.URL+"/v1/models", "GET", "")
	var list struct {
		Object string
		Data   []struct{ ID string }
	}
	if err := json.Unmarshal(b, &list); err != nil || resp.StatusCode != 200 || list.Object != "list" {
		t.Fatalf("models: %d %s", resp.StatusCode, b)
	}
	var ids []string
	for _, d := range list.Data {
		ids = append(ids, d.ID)
	}
	if strings.Join(ids, ",") != "auto,sim-claude,sim-default,sim-haiku,sim-llama,sim-opus,sim-sonnet" {
		t.Errorf("models %v", ids)
	}
	// Every listed model answers both client formats (issue 7 item 4:
	// sim-llama is OpenAI-only upstream, sim-claude Anthropic-only).
	for _, id := range ids {
		if r, b := e.post(t, "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, id), "anthropic-version", "2023-06-01"); r.StatusCode != 200 {
			t.Errorf("%s from an Anthropic client: %d %s", id, r.StatusCode, b)
		}
		if r, b := e.post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}]}`, id)); r.StatusCode != 200 {
			t.Errorf("%s from an OpenAI client: %d %s", id, r.StatusCode, b)
		}
	}
	// The Anthropic SDK can list them too.
	c := anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("x"), aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil || len(page.Data) != 7 {
		t.Fatalf("anthropic models: %v %+v", err, page)
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if resp, _ := doRaw(t, e.proxy.URL+p, "GET", ""); resp.StatusCode != 200 {
			t.Errorf("%s: %d", p, resp.StatusCode)
		}
	}
	e.mesh.SetReady(false)
	if resp, _ := doRaw(t, e.proxy.URL+"/readyz", "GET", ""); resp.StatusCode != 503 {
		t.Errorf("draining /readyz: %d", resp.StatusCode)
	}
}

// A client that disconnects mid-stream cancels its upstream request at once.
func TestClientDisconnectCancelsUpstream(t *testing.T) {
	cfg := sim.DefaultConfig()
	for i := range cfg.Regions {
		cfg.Regions[i].Latency.PerToken = sim.Duration(200 * time.Millisecond) // a long stream
		cfg.Regions[i].Latency.TTFT = sim.Duration(time.Millisecond)
		cfg.Regions[i].Latency.TTFTSigma = 0
	}
	e := newEnv(t, cfg)
	ctx, cancel := context.WithCancel(context.Background())
	body := strings.Replace(anthBody, `"max_tokens":64`, `"max_tokens":64,"stream":true`, 1)
	req, _ := http.NewRequestWithContext(ctx, "POST", e.proxy.URL+"/v1/messages", strings.NewReader(body))
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadBytes('\n')
	if err != nil || !bytes.HasPrefix(line, []byte("event: message_start")) {
		t.Fatalf("first line %q %v", line, err)
	}
	if n := e.fleet.InFlight(); n != 1 {
		t.Fatalf("simulator in-flight %d, want 1 while streaming", n)
	}
	cancel()
	resp.Body.Close()
	// The cancellation crosses two real sockets; bound the wait well below
	// the ~10 s the stream would otherwise take.
	deadline := time.Now().Add(3 * time.Second)
	for e.fleet.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("upstream still in flight %d after the client left", e.fleet.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
