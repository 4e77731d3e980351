package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/sim"
)

// convRecorder keeps the path and body of every upstream attempt.
type convRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls []upstreamCall
}

type upstreamCall struct {
	path string
	body []byte
}

func (r *convRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		var err error
		if b, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	r.mu.Lock()
	r.calls = append(r.calls, upstreamCall{path: req.URL.Path, body: b})
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

// last returns the last attempt whose path ends in suffix.
func (r *convRecorder) last(t *testing.T, suffix string) upstreamCall {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.calls) - 1; i >= 0; i-- {
		if strings.HasSuffix(r.calls[i].path, suffix) {
			return r.calls[i]
		}
	}
	t.Fatalf("no upstream call to *%s among %d", suffix, len(r.calls))
	return upstreamCall{}
}

// convAlias tries an OpenAI-Responses endpoint (rsp-sonnet, us-east), then
// an Anthropic one (claude-eu: the simulator's sim-sonnet in eu-west).
const convAlias = "conv"

// withConvFleet adds the Responses provider, the models rsp-sonnet and
// claude-eu, and the ordered alias conv over them.
func withConvFleet(cfg *config.Config) {
	base := strings.TrimSuffix(providerBase(cfg, simfleet.OpenAIProvider), "/v1")
	cfg.Providers = append(cfg.Providers, config.Provider{Name: responsesProvider, Type: "openai", API: config.APIResponses, BaseURL: base + "/v1"})
	cfg.Models = append(cfg.Models,
		config.Model{Name: "rsp-sonnet", Capability: 3, ContextWindow: 200_000,
			Endpoints: []config.Endpoint{{Provider: responsesProvider, Region: "us-east", UpstreamModel: "sim-sonnet", BaseURL: base + "/r/us-east/v1"}}},
		config.Model{Name: "claude-eu", Capability: 3, ContextWindow: 200_000,
			Endpoints: []config.Endpoint{{Provider: simfleet.AnthropicProvider, Region: "eu-west", UpstreamModel: "sim-sonnet", BaseURL: base + "/r/eu-west"}}})
	cfg.Aliases = append(cfg.Aliases, config.Alias{Name: convAlias, Models: []string{"rsp-sonnet", "claude-eu"}, Strategy: config.StrategyOrdered})
	cfg.ApplyDefaults()
}

// convMesh is a mesh over fleet (in memory) with the conv alias, its
// upstream attempts recorded; tweak picks the conversation store.
func convMesh(t *testing.T, fleet *sim.Fleet, tweak func(*config.Config), opts ...keel.Option) (*keel.Mesh, *convRecorder) {
	t.Helper()
	rec := &convRecorder{next: fleet.Transport()}
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	withConvFleet(cfg)
	if tweak != nil {
		tweak(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg, append(opts, keel.WithUpstream(rec))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, rec
}

func weatherTools(t *testing.T) []responses.ToolUnionParam {
	var params map[string]any
	if err := json.Unmarshal([]byte(weatherSchema), &params); err != nil {
		t.Fatal(err)
	}
	return []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Description: openai.String("Weather for a city"), Parameters: params, Strict: openai.Bool(false)}}}
}

const convPrompt = "Please use get_weather for Oslo."

// Issue 24 item 4, must show: previous_response_id is answered after the
// endpoint that served the first turn is down, by another provider in
// another wire format, with the history expanded — the user's turn, the
// function call and its output — as the upstream body shows; through the
// official openai-go SDK (Responses.New with PreviousResponseID,
// Responses.Get, Responses.Delete), embedded and over a socket, with the
// conversations in memory, in the request log's SQLite file, and in Redis
// shared by two replicas (the first turn on one, the follow-up on the
// other).
func TestPreviousResponseSurvivesFailover(t *testing.T) {
	type replicas struct{ first, second *keel.Mesh }
	stores := []struct {
		name  string
		store string
		open  func(t *testing.T, fleet *sim.Fleet) (replicas, *convRecorder)
	}{
		{"memory", "memory", func(t *testing.T, fleet *sim.Fleet) (replicas, *convRecorder) {
			m, rec := convMesh(t, fleet, nil)
			return replicas{m, m}, rec
		}},
		{"sqlite", "sqlite", func(t *testing.T, fleet *sim.Fleet) (replicas, *convRecorder) {
			m, rec := convMesh(t, fleet, func(c *config.Config) {
				on := true
				c.RequestLog = config.RequestLog{Enabled: &on, Path: filepath.Join(t.TempDir(), "keel-requests.db")}
			})
			return replicas{m, m}, rec
		}},
		{"redis", "redis", func(t *testing.T, fleet *sim.Fleet) (replicas, *convRecorder) {
			rs := redistest.Start(t)
			shared := func(c *config.Config) {
				// A generous timeout: the 250ms default is a production
				// bound, and a loaded CI machine can exceed it.
				c.Redis = config.Redis{URL: config.Secret(rs.URL()), KeyPrefix: "conv-test:", Timeout: config.Duration(5 * time.Second)}
				c.ApplyDefaults()
			}
			a, _ := convMesh(t, fleet, shared)
			b, rec := convMesh(t, fleet, shared)
			return replicas{a, b}, rec
		}},
	}
	for _, st := range stores {
		for _, mode := range []string{"embedded", "proxy"} {
			t.Run(st.name+"/"+mode, func(t *testing.T) {
				fleet, err := sim.New(sim.ZeroLatency())
				if err != nil {
					t.Fatal(err)
				}
				ms, rec := st.open(t, fleet)
				client := func(m *keel.Mesh) openai.Client {
					if mode == "embedded" {
						return openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
					}
					proxy := httptest.NewServer(m.Handler())
					t.Cleanup(proxy.Close)
					return openai.NewClient(ooption.WithBaseURL(proxy.URL+"/v1"), ooption.WithAPIKey("client-key"), ooption.WithMaxRetries(0))
				}
				// Over the socket turn 1 streams (stored from the events,
				// passed through byte for byte); embedded it does not.
				convFailover(t, fleet, client(ms.first), client(ms.second), rec, mode == "proxy")
			})
		}
	}
}

func convFailover(t *testing.T, fleet *sim.Fleet, first, second openai.Client, rec *convRecorder, streamFirst bool) {
	ctx := context.Background()
	tools := weatherTools(t)

	// Turn 1 on the OpenAI-Responses endpoint: the model calls get_weather.
	var hr *http.Response
	p1 := responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(512), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(convPrompt)},
	}
	r1 := &responses.Response{}
	if streamFirst {
		st := first.Responses.NewStreaming(ctx, p1, ooption.WithResponseInto(&hr))
		for st.Next() {
			if ev := st.Current(); ev.Type == "response.completed" {
				*r1 = ev.Response
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		var err error
		if r1, err = first.Responses.New(ctx, p1, ooption.WithResponseInto(&hr)); err != nil {
			t.Fatal(err)
		}
	}
	if r1.ID == "" {
		t.Fatal("turn 1 has no response id")
	}
	if p := hr.Header.Get("X-Mesh-Provider"); p != responsesProvider {
		t.Fatalf("turn 1 served by %q, want the Responses endpoint %q", p, responsesProvider)
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range r1.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.Name != "get_weather" || call.CallID == "" {
		t.Fatalf("turn 1 output %+v has no get_weather call", r1.Output)
	}

	// The endpoint that served it goes down.
	if err := fleet.SetRegionDown("us-east", true); err != nil {
		t.Fatal(err)
	}

	// Turn 2 sends only the function's output and previous_response_id.
	r2, err := second.Responses.New(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(512), Tools: tools,
		PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			functionOutput(call.CallID, "12°C and sunny"),
		}},
	}, ooption.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if p := hr.Header.Get("X-Mesh-Provider"); p != simfleet.AnthropicProvider {
		t.Fatalf("turn 2 served by %q, want the Anthropic endpoint", p)
	}
	// The response object Keel encoded echoes the request's settings, as
	// OpenAI's does.
	if r2.PreviousResponseID != r1.ID || !storeEchoed(t, r2.RawJSON()) {
		t.Errorf("turn 2 echoes previous_response_id %q, store in %s; want %q, true", r2.PreviousResponseID, r2.RawJSON(), r1.ID)
	}
	// The Anthropic upstream got the whole conversation, and no
	// previous_response_id (it would not know it).
	up := rec.last(t, "/r/eu-west/v1/messages")
	if bytes.Contains(up.body, []byte("previous_response_id")) || bytes.Contains(up.body, []byte(r1.ID)) {
		t.Fatalf("upstream body names the previous response: %s", up.body)
	}
	upReq, err := wire.For(llm.FormatAnthropic).ParseRequest(up.body)
	if err != nil {
		t.Fatalf("upstream body %s: %v", up.body, err)
	}
	msgs := upReq.Messages
	if len(msgs) != 3 {
		t.Fatalf("upstream got %d messages, want user, assistant (tool call), user (tool result): %s", len(msgs), up.body)
	}
	if u := msgs[0]; u.Role != llm.RoleUser || u.Text() != convPrompt {
		t.Errorf("first message %+v, want the user's turn 1", u)
	}
	var use *llm.Block
	for i, b := range msgs[1].Content {
		if b.Type == llm.BlockToolUse {
			use = &msgs[1].Content[i]
		}
	}
	if msgs[1].Role != llm.RoleAssistant || use == nil || use.ID != call.CallID || use.Name != "get_weather" {
		t.Fatalf("second message %+v, want the assistant's get_weather call %s", msgs[1], call.CallID)
	}
	jsonEqual(t, "tool_use input", use.Input, []byte(call.Arguments.OfString))
	if tr := msgs[2]; tr.Role != llm.RoleUser || len(tr.Content) != 1 || tr.Content[0].Type != llm.BlockToolResult ||
		tr.Content[0].ToolUseID != call.CallID || llm.BlocksText(tr.Content[0].Content) != "12°C and sunny" {
		t.Fatalf("third message %+v, want the tool_result of %s", tr, call.CallID)
	}
	// The answer is the one the simulator gives that whole conversation.
	if want := fleet.Answer(upReq).Text(); r2.OutputText() != want || want == "" {
		t.Fatalf("turn 2 text %q, want the simulator's answer to the expanded history %q", r2.OutputText(), want)
	}

	// Turn 3, streamed, continues turn 2 (a chain of two), and is stored
	// before the client has response.completed: Get finds it at once.
	st := second.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(512), PreviousResponseID: openai.String(r2.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Thanks! And tomorrow?")},
	})
	var r3 responses.Response
	for st.Next() {
		if ev := st.Current(); ev.Type == "response.completed" {
			r3 = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	up = rec.last(t, "/r/eu-west/v1/messages")
	if upReq, err = wire.For(llm.FormatAnthropic).ParseRequest(up.body); err != nil {
		t.Fatal(err)
	}
	if msgs := upReq.Messages; len(msgs) != 5 || msgs[3].Role != llm.RoleAssistant || msgs[3].Text() != r2.OutputText() || msgs[4].Text() != "Thanks! And tomorrow?" {
		t.Fatalf("turn 3 upstream messages %s, want turn 1, turn 2's answer, then the new user turn", up.body)
	}
	got, err := first.Responses.Get(ctx, r3.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r3.ID || got.OutputText() != r3.OutputText() || r3.OutputText() == "" {
		t.Fatalf("Get(%s) = %s %q, want the streamed answer %q", r3.ID, got.ID, got.OutputText(), r3.OutputText())
	}
	if r3.PreviousResponseID != r2.ID || got.PreviousResponseID != r2.ID || !storeEchoed(t, got.RawJSON()) {
		t.Errorf("turn 3 echoes previous_response_id %q (stored %q, %s), want %q and store true", r3.PreviousResponseID, got.PreviousResponseID, got.RawJSON(), r2.ID)
	}

	// Delete turn 1: Get is then a 404, and turn 2 (which holds its
	// own copy of the history) still continues.
	if err := first.Responses.Delete(ctx, r1.ID); err != nil {
		t.Fatal(err)
	}
	_, err = second.Responses.Get(ctx, r1.ID, responses.ResponseGetParams{})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Fatalf("Get after Delete: %v, want 404", err)
	}
	if _, err := second.Responses.New(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(512), PreviousResponseID: openai.String(r2.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("One more?")},
	}); err != nil {
		t.Fatalf("continuing turn 2 after turn 1 was deleted: %v", err)
	}

	// An id Keel does not hold is OpenAI's 404, whatever the endpoint.
	_, err = second.Responses.New(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(512), PreviousResponseID: openai.String(r1.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hello?")},
	})
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "previous_response_not_found" ||
		apiErr.Param != "previous_response_id" || apiErr.Type != "invalid_request_error" || apiErr.Message != "Previous response with id '"+r1.ID+"' not found." {
		t.Fatalf("deleted previous_response_id: %v, want OpenAI's 404 previous_response_not_found", err)
	}
}

// store: false keeps nothing: the id cannot be continued or read; the
// refused follow-up is recorded like any refused call (request log,
// metrics).
func TestStoreFalseKeepsNothing(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var refused []*callrec.Record
	m, _ := convMesh(t, fleet, nil, keel.WithObserver(callrec.ObserverFunc(func(r *callrec.Record) {
		if r.Status == http.StatusNotFound {
			mu.Lock()
			refused = append(refused, r)
			mu.Unlock()
		}
	})))
	c := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
	ctx := context.Background()
	r, err := c.Responses.New(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(200), Store: openai.Bool(false),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Say hi.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	var apiErr *openai.Error
	if _, err := c.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("Get of a store:false response: %v, want 404", err)
	}
	_, err = c.Responses.New(ctx, responses.ResponseNewParams{
		Model: convAlias, MaxOutputTokens: openai.Int(200), PreviousResponseID: openai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Again.")},
	})
	if !errors.As(err, &apiErr) || apiErr.Code != "previous_response_not_found" {
		t.Fatalf("continuing a store:false response: %v, want previous_response_not_found", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(refused) != 1 || refused[0].Format != llm.FormatResponses || refused[0].Model != convAlias || refused[0].Err.Code != "previous_response_not_found" {
		t.Fatalf("records of 404s: %+v, want the refused follow-up", refused)
	}
}

// responses.store_ttl and responses.max_conversations bound what a mesh
// keeps: a conversation past its TTL (the mesh's injected clock) or pushed
// out by newer ones is OpenAI's 404 to a follow-up.
func TestStoredConversationsBounded(t *testing.T) {
	ctx := context.Background()
	ask := func(c openai.Client, prev, text string) (*responses.Response, error) {
		p := responses.ResponseNewParams{Model: convAlias, MaxOutputTokens: openai.Int(200),
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(text)}}
		if prev != "" {
			p.PreviousResponseID = openai.String(prev)
		}
		return c.Responses.New(ctx, p)
	}
	notFound := func(t *testing.T, err error) {
		t.Helper()
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "previous_response_not_found" {
			t.Fatalf("follow-up: %v, want 404 previous_response_not_found", err)
		}
	}
	t.Run("ttl", func(t *testing.T) {
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		now := time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		m, _ := convMesh(t, fleet, func(c *config.Config) { c.Responses.TTL = time.Hour }, keel.WithClock(clock))
		c := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
		r, err := ask(c, "", "Say hi.")
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		now = now.Add(time.Hour - time.Second)
		mu.Unlock()
		if _, err := ask(c, r.ID, "Again."); err != nil {
			t.Fatalf("a second before the TTL: %v", err)
		}
		mu.Lock()
		now = now.Add(time.Second)
		mu.Unlock()
		_, err = ask(c, r.ID, "Again.")
		notFound(t, err)
	})
	t.Run("max_conversations", func(t *testing.T) {
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		m, _ := convMesh(t, fleet, func(c *config.Config) { c.Responses.MaxConversations = 2 })
		c := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
		var ids []string
		for _, q := range []string{"Say hi.", "Say hello.", "Say hey."} {
			r, err := ask(c, "", q)
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.ID)
		}
		_, err = ask(c, ids[0], "Again.")
		notFound(t, err)
		if _, err := c.Responses.Get(ctx, ids[2], responses.ResponseGetParams{}); err != nil {
			t.Fatalf("the newest: %v", err)
		}
	})
}

// The same failover onto a Chat Completions endpoint (an OpenAI-compatible
// server: vLLM, Ollama …): the expanded history reaches it as a user
// message, an assistant message with tool_calls and a tool message.
func TestPreviousResponseFailoverToChatCompletions(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	m, rec := convMesh(t, fleet, func(c *config.Config) {
		base := strings.TrimSuffix(providerBase(c, simfleet.OpenAIProvider), "/v1")
		c.Models = append(c.Models, config.Model{Name: "llama-eu", Capability: 2, ContextWindow: 128_000,
			Endpoints: []config.Endpoint{{Provider: simfleet.OpenAIProvider, Region: "eu-west", UpstreamModel: "sim-llama", BaseURL: base + "/r/eu-west/v1"}}})
		for i := range c.Aliases {
			if c.Aliases[i].Name == convAlias {
				c.Aliases[i].Models = []string{"rsp-sonnet", "llama-eu"}
			}
		}
		c.ApplyDefaults()
	})
	c := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
	ctx := context.Background()
	tools := weatherTools(t)
	r1, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: convAlias, MaxOutputTokens: openai.Int(512), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(convPrompt)}})
	if err != nil {
		t.Fatal(err)
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range r1.Output {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.CallID == "" {
		t.Fatalf("turn 1 output %+v has no function call", r1.Output)
	}
	if err := fleet.SetRegionDown("us-east", true); err != nil {
		t.Fatal(err)
	}
	var hr *http.Response
	r2, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: convAlias, MaxOutputTokens: openai.Int(512), Tools: tools,
		PreviousResponseID: openai.String(r1.ID),
		Input:              responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{functionOutput(call.CallID, "12°C and sunny")}},
	}, ooption.WithResponseInto(&hr))
	if err != nil {
		t.Fatal(err)
	}
	if p := hr.Header.Get("X-Mesh-Provider"); p != simfleet.OpenAIProvider {
		t.Fatalf("turn 2 served by %q, want the Chat Completions endpoint", p)
	}
	up := rec.last(t, "/r/eu-west/v1/chat/completions")
	var sent struct {
		Messages []struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Function struct{ Name, Arguments string }
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(up.body, &sent); err != nil {
		t.Fatal(err)
	}
	msgs := sent.Messages
	if len(msgs) != 3 || msgs[0].Role != "user" || !strings.Contains(string(msgs[0].Content), convPrompt) ||
		msgs[1].Role != "assistant" || len(msgs[1].ToolCalls) != 1 || msgs[1].ToolCalls[0].ID != call.CallID || msgs[1].ToolCalls[0].Function.Name != "get_weather" ||
		msgs[2].Role != "tool" || msgs[2].ToolCallID != call.CallID || !strings.Contains(string(msgs[2].Content), "12°C and sunny") {
		t.Fatalf("Chat upstream body %s: want user, assistant tool_calls %s, tool result", up.body, call.CallID)
	}
	if bytes.Contains(up.body, []byte("previous_response_id")) {
		t.Fatalf("upstream body names the previous response: %s", up.body)
	}
	upReq, err := wire.For(llm.FormatOpenAI).ParseRequest(up.body)
	if err != nil {
		t.Fatal(err)
	}
	if want := fleet.Answer(upReq).Text(); r2.OutputText() != want || want == "" {
		t.Fatalf("turn 2 text %q, want the simulator's answer to the expanded history %q", r2.OutputText(), want)
	}
}

// storeEchoed reports whether a response object says "store": true.
func storeEchoed(t *testing.T, raw string) bool {
	t.Helper()
	var obj struct {
		Store *bool `json:"store"`
	}
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		t.Fatalf("response object %s: %v", raw, err)
	}
	return obj.Store != nil && *obj.Store
}

// A config built in Go (not validated) that names a store the rest of it
// cannot back is refused by keel.New, never a panic or a stray file.
func TestResponsesStoreNeedsItsBackend(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	for _, store := range []string{"redis", "sqlite"} {
		cfg := simfleet.Config(fleet, "http://sim.invalid")
		cfg.Responses.Store = store
		m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
		if err == nil {
			m.Close()
			t.Fatalf("responses.store %s without its backend: keel.New succeeded", store)
		}
		if !strings.Contains(err.Error(), "responses.store") {
			t.Errorf("responses.store %s: %v, want an error naming responses.store", store, err)
		}
	}
}
