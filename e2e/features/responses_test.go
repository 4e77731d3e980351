package features_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

// responsesProvider is an openai provider called through the Responses API.
const responsesProvider = "sim-responses"

// withResponsesEndpoint adds the provider responsesProvider and a model
// rsp-sonnet served by it (the simulator's sim-sonnet through
// POST /r/{us-east,eu-west}/v1/responses), beside the fleet's sim-sonnet (an
// Anthropic endpoint) and sim-llama (a Chat Completions endpoint).
func withResponsesEndpoint(cfg *config.Config) {
	base := strings.TrimSuffix(providerBase(cfg, simfleet.OpenAIProvider), "/v1")
	cfg.Providers = append(cfg.Providers, config.Provider{Name: responsesProvider, Type: "openai", API: config.APIResponses, BaseURL: base + "/v1"})
	cfg.Models = append(cfg.Models, config.Model{Name: "rsp-sonnet", Capability: 3, ContextWindow: 200_000,
		Endpoints: []config.Endpoint{
			{Provider: responsesProvider, Region: "us-east", UpstreamModel: "sim-sonnet", BaseURL: base + "/r/us-east/v1"},
			{Provider: responsesProvider, Region: "eu-west", UpstreamModel: "sim-sonnet", BaseURL: base + "/r/eu-west/v1"},
		}})
	cfg.ApplyDefaults()
}

func providerBase(cfg *config.Config, name string) string {
	for _, p := range cfg.Providers {
		if p.Name == name {
			return p.BaseURL
		}
	}
	return ""
}

// responsesTargets are the three kinds of endpoint a Responses client is
// served by: keel model name, simulator model answering.
var responsesTargets = []struct{ name, model, simModel string }{
	{"responses-endpoint", "rsp-sonnet", "sim-sonnet"},
	{"anthropic-endpoint", "sim-sonnet", "sim-sonnet"},
	{"chat-endpoint", "sim-llama", "sim-llama"},
}

func TestResponsesSDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	ctx := context.Background()
	for mode, c := range openaiClients(e) {
		for _, tg := range responsesTargets {
			t.Run(mode+"/"+tg.name+"/text", func(t *testing.T) {
				want := sim.Answer(e.simCfg, userText(tg.simModel, "Tell me about hulls.", 300))
				r, err := c.Responses.New(ctx, responses.ResponseNewParams{
					Model: tg.model, MaxOutputTokens: openai.Int(300),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me about hulls.")},
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := r.OutputText(); got != want.Text() {
					t.Fatalf("output_text = %q, want %q", got, want.Text())
				}
				if r.Status != "completed" || r.Usage.OutputTokens != int64(want.Usage.OutputTokens) || r.Usage.InputTokens != int64(want.Usage.PromptTokens()) {
					t.Errorf("status %q usage %d/%d, want completed %d/%d", r.Status, r.Usage.InputTokens, r.Usage.OutputTokens, want.Usage.PromptTokens(), want.Usage.OutputTokens)
				}
			})
			t.Run(mode+"/"+tg.name+"/stream", func(t *testing.T) {
				want := sim.Answer(e.simCfg, userText(tg.simModel, "Stream about sails.", 300))
				st := c.Responses.NewStreaming(ctx, responses.ResponseNewParams{
					Model: tg.model, MaxOutputTokens: openai.Int(300),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Stream about sails.")},
				})
				var text strings.Builder
				var final responses.Response
				seq := int64(0)
				for st.Next() {
					ev := st.Current()
					if ev.SequenceNumber != seq {
						t.Fatalf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
					}
					seq++
					switch ev.Type {
					case "response.output_text.delta":
						text.WriteString(ev.Delta)
					case "response.completed":
						final = ev.Response
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				if text.String() != want.Text() || final.OutputText() != want.Text() {
					t.Fatalf("deltas %q, completed %q, want %q", text.String(), final.OutputText(), want.Text())
				}
				if final.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
					t.Errorf("usage output %d, want %d", final.Usage.OutputTokens, want.Usage.OutputTokens)
				}
			})
			for _, stream := range []bool{false, true} {
				name := mode + "/" + tg.name + "/tool"
				if stream {
					name += "-stream"
				}
				t.Run(name, func(t *testing.T) { responsesToolRoundTrip(t, c, tg.model, stream) })
			}
			t.Run(mode+"/"+tg.name+"/json_schema", func(t *testing.T) {
				var schema map[string]any
				json.Unmarshal([]byte(`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}`), &schema)
				r, err := c.Responses.New(ctx, responses.ResponseNewParams{
					Model: tg.model, MaxOutputTokens: openai.Int(300),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Name a city.")},
					Text: responses.ResponseTextConfigParam{Format: responses.ResponseFormatTextConfigUnionParam{
						OfJSONSchema: &responses.ResponseFormatTextJSONSchemaConfigParam{Name: "city", Schema: schema, Strict: openai.Bool(true)}}},
				})
				if err != nil {
					t.Fatal(err)
				}
				var got map[string]any
				if err := json.Unmarshal([]byte(r.OutputText()), &got); err != nil {
					t.Fatalf("output %q is not JSON: %v", r.OutputText(), err)
				}
				if _, ok := got["city"].(string); !ok || len(got) != 1 {
					t.Errorf("output %v does not match the schema", got)
				}
			})
		}
	}
}

// responsesToolRoundTrip: the model calls get_weather, the client sends the
// call and its output back, and the model answers in text.
func responsesToolRoundTrip(t *testing.T, c openai.Client, model string, stream bool) {
	ctx := context.Background()
	var params map[string]any
	json.Unmarshal([]byte(weatherSchema), &params)
	tools := []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name: "get_weather", Description: openai.String("Weather for a city"), Parameters: params, Strict: openai.Bool(false)}}}
	first := responses.ResponseNewParams{
		Model: model, MaxOutputTokens: openai.Int(512), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please use get_weather for Oslo.")},
	}
	var out []responses.ResponseOutputItemUnion
	if stream {
		st := c.Responses.NewStreaming(ctx, first)
		for st.Next() {
			if ev := st.Current(); ev.Type == "response.completed" {
				out = ev.Response.Output
			}
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		r, err := c.Responses.New(ctx, first)
		if err != nil {
			t.Fatal(err)
		}
		out = r.Output
	}
	var call responses.ResponseOutputItemUnion
	for _, it := range out {
		if it.Type == "function_call" {
			call = it
		}
	}
	if call.Name != "get_weather" || call.CallID == "" {
		t.Fatalf("output %+v has no get_weather call", out)
	}
	var args map[string]any
	if err := json.Unmarshal([]byte(call.Arguments.OfString), &args); err != nil {
		t.Fatalf("arguments %q: %v", call.Arguments.OfString, err)
	}
	second := responses.ResponseNewParams{
		Model: model, MaxOutputTokens: openai.Int(512), Tools: tools,
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("Please use get_weather for Oslo.", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfFunctionCall(call.Arguments.OfString, call.CallID, call.Name),
			functionOutput(call.CallID, "12°C and sunny"),
		}},
	}
	r, err := c.Responses.New(ctx, second)
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() == "" || r.Status != "completed" {
		t.Fatalf("after the tool output: status %q text %q", r.Status, r.OutputText())
	}
	for _, it := range r.Output {
		if it.Type == "function_call" {
			t.Errorf("the model called %s again after its output", it.Name)
		}
	}
}

func functionOutput(callID, output string) responses.ResponseInputItemUnionParam {
	it := responses.ResponseInputItemParamOfFunctionCallOutput(output)
	it.OfFunctionCallOutput.CallID = openai.String(callID)
	return it
}

// Chat Completions and Messages clients served by a Responses-only
// endpoint (providers[].api: responses): text, streams and a tool call.
func TestResponsesEndpointServesChatAndMessagesClients(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	ctx := context.Background()
	oc := openaiClients(e)["proxy"]
	ac := anthropicClients(e)["proxy"]
	want := sim.Answer(e.simCfg, userText("sim-sonnet", "Tell me about hulls.", 300))

	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "rsp-sonnet", MaxCompletionTokens: openai.Int(300),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about hulls.")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != want.Text() || cc.Choices[0].FinishReason != "stop" {
		t.Errorf("chat choices = %+v, want %q", cc.Choices, want.Text())
	}
	if cc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
		t.Errorf("chat usage %d, want %d", cc.Usage.CompletionTokens, want.Usage.OutputTokens)
	}

	st := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "rsp-sonnet", MaxCompletionTokens: openai.Int(300),
		Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about hulls.")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want.Text() || acc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
		t.Errorf("chat stream = %+v usage %d, want %q", acc.Choices, acc.Usage.CompletionTokens, want.Text())
	}

	msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "rsp-sonnet", MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about hulls."))},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() || msg.StopReason != "end_turn" {
		t.Errorf("messages content = %+v stop %q, want %q", msg.Content, msg.StopReason, want.Text())
	}

	as := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "rsp-sonnet", MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about hulls."))},
	})
	var am anthropic.Message
	for as.Next() {
		if err := am.Accumulate(as.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := as.Err(); err != nil {
		t.Fatal(err)
	}
	if len(am.Content) != 1 || am.Content[0].Text != want.Text() || am.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
		t.Errorf("messages stream = %+v usage %d, want %q", am.Content, am.Usage.OutputTokens, want.Text())
	}

	// a tool call, asked by a Messages client, answered through Responses
	tmsg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "rsp-sonnet", MaxTokens: 300,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please use get_weather for Oslo."))},
		Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather",
			InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if tmsg.StopReason != "tool_use" || len(tmsg.Content) == 0 || tmsg.Content[len(tmsg.Content)-1].Name != "get_weather" {
		t.Errorf("tool call = %+v stop %q", tmsg.Content, tmsg.StopReason)
	}
}

// Must show: a Responses stream cut mid-way and recovered on another
// endpoint gives the client exactly the uninterrupted text, numbered
// without a gap and ended by response.completed — from a Responses
// upstream (which starts a new answer: Keel skips what was delivered) and
// from an Anthropic one (which continues the partial answer).
func TestResponsesStreamRecoveredMidway(t *testing.T) {
	for _, tc := range []struct{ name, model, format string }{
		{"responses upstream", "rsp-sonnet", "responses"},
		{"anthropic upstream", "sim-sonnet", "anthropic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
			c := openaiClients(e)["proxy"]
			params := responses.ResponseNewParams{
				Model: tc.model, MaxOutputTokens: openai.Int(60), Temperature: openai.Float(0),
				Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me a long story about a lighthouse keeper.")},
			}
			clean := readResponsesStream(t, c, params)
			if clean.terminal != "response.completed" || len(strings.Fields(clean.text)) < 12 {
				t.Fatalf("clean stream: %s %q", clean.terminal, clean.text)
			}
			if err := e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindStreamCut, Model: "sim-sonnet", Format: tc.format, AfterTokens: 6, Count: 1}}); err != nil {
				t.Fatal(err)
			}
			cut := readResponsesStream(t, c, params)
			if n := e.fleet.Faults(); len(n) != 0 {
				t.Fatalf("the cut never happened: %+v", n)
			}
			switch cut.terminal {
			case "response.completed":
				if cut.text != clean.text || cut.final != clean.text {
					t.Fatalf("recovered text %q (completed %q), want exactly %q", cut.text, cut.final, clean.text)
				}
				if cut.recovered != "1" {
					t.Errorf("X-Mesh-Recovered = %q, want 1", cut.recovered)
				}
			case "response.failed":
				t.Fatalf("at temperature 0 the stream must recover; failed after %q", cut.text)
			default:
				t.Fatalf("stream ended with %q", cut.terminal)
			}
		})
	}
}

// A stream no endpoint can finish ends with response.failed after a
// prefix of the answer, never with response.completed.
func TestResponsesStreamUnrecoverableEndsFailed(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	c := openaiClients(e)["proxy"]
	params := responses.ResponseNewParams{
		Model: "rsp-sonnet", MaxOutputTokens: openai.Int(60), Temperature: openai.Float(0),
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Tell me a long story about a lighthouse keeper.")},
	}
	clean := readResponsesStream(t, c, params)
	if err := e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindStreamCut, Model: "sim-sonnet", Format: "responses", AfterTokens: 6}}); err != nil {
		t.Fatal(err)
	}
	cut := readResponsesStream(t, c, params)
	if cut.terminal != "response.failed" || cut.text == "" || !strings.HasPrefix(clean.text, cut.text) {
		t.Fatalf("ended with %q after %q; want response.failed after a prefix of %q", cut.terminal, cut.text, clean.text)
	}
}

type streamRead struct{ text, final, terminal, recovered string }

// readResponsesStream reads a Responses stream through the SDK, checking
// that sequence numbers run from 0 without a gap.
func readResponsesStream(t *testing.T, c openai.Client, p responses.ResponseNewParams) streamRead {
	t.Helper()
	var hr *http.Response
	st := c.Responses.NewStreaming(context.Background(), p, option.WithResponseInto(&hr))
	var r streamRead
	var text strings.Builder
	seq := int64(0)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != seq {
			t.Fatalf("event %s has sequence_number %d, want %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed", "response.failed", "response.incomplete":
			r.terminal, r.final = ev.Type, ev.Response.OutputText()
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	r.text = text.String()
	if hr != nil {
		r.recovered = hr.Trailer.Get("X-Mesh-Recovered")
	}
	return r
}

// The resilience policies serve a Responses client as they serve the
// other two: a region down is failed over, a 429 retried, an identical
// call answered from the cache, personal data redacted before the
// upstream sees it, a key's absence refused in OpenAI's error shape, and
// the call's cost reported.
func TestResponsesPolicies(t *testing.T) {
	ask := func(t *testing.T, e *env, body string, hdr ...string) (*http.Response, []byte) {
		t.Helper()
		return doRaw(t, e.proxy.URL+"/v1/responses", http.MethodPost, body, hdr...)
	}
	const body = `{"model":"rsp-sonnet","input":"Tell me about hulls.","max_output_tokens":100}`
	t.Run("fallback", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
		if err := e.fleet.SetRegionDown("us-east", true); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			resp, b := ask(t, e, body)
			if resp.StatusCode != 200 || resp.Header.Get("X-Mesh-Region") != "eu-west" || !strings.Contains(string(b), `"status":"completed"`) {
				t.Fatalf("call %d: %d region %q %s", i, resp.StatusCode, resp.Header.Get("X-Mesh-Region"), b)
			}
		}
	})
	t.Run("retry", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
		if err := e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindRateLimit, Format: "responses", Count: 1, RetryAfter: sim.Duration(time.Millisecond)}}); err != nil {
			t.Fatal(err)
		}
		resp, b := ask(t, e, body)
		if resp.StatusCode != 200 || resp.Header.Get("X-Mesh-Attempts") != "2" {
			t.Fatalf("%d attempts %q: %s", resp.StatusCode, resp.Header.Get("X-Mesh-Attempts"), b)
		}
	})
	t.Run("cache", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint, func(c *config.Config) { c.Cache.Enabled = true })
		cold := strings.Replace(body, `"input"`, `"temperature":0,"input"`, 1)
		_, first := ask(t, e, cold)
		resp, again := ask(t, e, cold)
		if resp.Header.Get("X-Mesh-Cache") != "hit" || string(again) != string(first) {
			t.Fatalf("cache %q; first %s, again %s", resp.Header.Get("X-Mesh-Cache"), first, again)
		}
	})
	t.Run("pii", func(t *testing.T) {
		m, rec := piiMesh(t, withResponsesEndpoint)
		proxy := httptest.NewServer(m.Handler())
		defer proxy.Close()
		resp, b := doRaw(t, proxy.URL+"/v1/responses", http.MethodPost,
			`{"model":"rsp-sonnet","input":[{"role":"user","content":"My email is alice.smith@example.com, please note it."}]}`)
		if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("X-Mesh-PII"), "EMAIL=1") {
			t.Fatalf("%d X-Mesh-PII %q: %s", resp.StatusCode, resp.Header.Get("X-Mesh-PII"), b)
		}
		reqs, _ := rec.all()
		if len(reqs) == 0 {
			t.Fatal("nothing reached the upstream")
		}
		for _, r := range reqs {
			if strings.Contains(r, "alice.smith@example.com") {
				t.Errorf("the upstream saw the address: %s", r)
			}
		}
	})
	t.Run("keys and cost", func(t *testing.T) {
		e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint, func(c *config.Config) { c.Server.RequireKeys = true })
		resp, b := ask(t, e, body)
		var er struct {
			Error struct{ Type, Code, Message string } `json:"error"`
		}
		if resp.StatusCode != 401 || json.Unmarshal(b, &er) != nil || er.Error.Message == "" || resp.Header.Get("X-Mesh-Error-Code") != "MESH_KEY_INVALID" {
			t.Fatalf("without a key: %d %s", resp.StatusCode, b)
		}
		e2 := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
		resp, _ = ask(t, e2, body)
		if c := resp.Header.Get("X-Mesh-Cost"); c == "" || c == "0" {
			t.Errorf("X-Mesh-Cost = %q", c)
		}
	})
}

// POST /responses is served as /v1/responses is (OpenAI-compatible base
// URLs without /v1); a bad request gets OpenAI's error shape.
func TestResponsesPaths(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	resp, b := doRaw(t, e.proxy.URL+"/responses", http.MethodPost, `{"model":"rsp-sonnet","input":"Hi"}`)
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"object":"response"`) {
		t.Fatalf("/responses: %d %s", resp.StatusCode, b)
	}
	resp, b = doRaw(t, e.proxy.URL+"/v1/responses", http.MethodPost, `{"model":"rsp-sonnet","input":42}`)
	var er struct {
		Error struct{ Type, Param, Message string } `json:"error"`
	}
	if resp.StatusCode != 400 || json.Unmarshal(b, &er) != nil || er.Error.Type != "invalid_request_error" || er.Error.Param != "input" {
		t.Fatalf("bad input: %d %s", resp.StatusCode, b)
	}
}

// A Codex CLI turn (developer message, encrypted reasoning, a call and its
// output, function, built-in and custom tools, reasoning settings, store
// false, streamed) is served by each kind of endpoint: the stream ends with
// response.completed and X-Mesh-Dropped names what the endpoint could not
// take.
func TestResponsesCodexTurn(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	codex, err := os.ReadFile("../../internal/wire/responses/testdata/request/codex.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range responsesTargets {
		t.Run(tg.name, func(t *testing.T) {
			body := strings.Replace(string(codex), `"model":"gpt-5-codex"`, `"model":"`+tg.model+`"`, 1)
			resp, b := doRaw(t, e.proxy.URL+"/v1/responses", http.MethodPost, body)
			if resp.StatusCode != 200 || !strings.Contains(string(b), "event: response.completed") {
				t.Fatalf("%d %s", resp.StatusCode, b)
			}
			dropped := resp.Header.Get("X-Mesh-Dropped")
			if tg.name == "responses-endpoint" {
				if dropped != "" {
					t.Errorf("same format dropped %q", dropped)
				}
				return
			}
			for _, d := range []string{"reasoning.encrypted_content", "custom.format:grammar"} {
				if !strings.Contains(dropped, d) {
					t.Errorf("X-Mesh-Dropped = %q, want it to name %s", dropped, d)
				}
			}
		})
	}
}

// Personal data in a Responses call reaches no upstream and comes back to
// the client restored, in answers and streams, from a Responses endpoint
// (whose stream Keel passes on until a restored delta must be encoded)
// and an Anthropic one.
func TestResponsesPIIRoundTrip(t *testing.T) {
	m, up := piiMesh(t, withResponsesEndpoint)
	c := openai.NewClient(option.WithHTTPClient(m.HTTPClient()), option.WithAPIKey("k"), option.WithMaxRetries(0))
	for _, model := range []string{"rsp-sonnet", "sim-sonnet"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
				p := responses.ResponseNewParams{Model: model, MaxOutputTokens: openai.Int(512), Instructions: openai.String(piiSystem),
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String(piiPrompt())}}
				var got string
				if stream {
					r := readResponsesStream(t, c, p)
					if r.terminal != "response.completed" || r.final != r.text {
						t.Fatalf("stream ended %s, completed text %q, deltas %q", r.terminal, r.final, r.text)
					}
					got = r.text
				} else {
					r, err := c.Responses.New(context.Background(), p)
					if err != nil {
						t.Fatal(err)
					}
					got = r.OutputText()
				}
				reqs, _ := up.all()
				sent := reqs[len(reqs)-1]
				for k, v := range piiFields {
					if strings.Contains(sent, v) {
						t.Errorf("the upstream received the %s", k)
					}
				}
				var fields map[string]string
				if err := json.Unmarshal([]byte(got), &fields); err != nil {
					t.Fatalf("answer %q: %v", got, err)
				}
				for k, v := range piiFields {
					if fields[k] != v {
						t.Errorf("client got %s = %q, want %q", k, fields[k], v)
					}
				}
			})
		}
	}
}

// A Responses client's custom (freeform) tool, Codex's apply_patch, works
// on an Anthropic or Chat endpoint: offered as a tool of one string, its
// call comes back as a custom_tool_call with the text input (answers and
// streams), and the call and its output sent back reach the endpoint as a
// tool call and its result.
func TestResponsesCustomToolOnOtherFormats(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	c := openaiClients(e)["proxy"]
	ctx := context.Background()
	tools := []responses.ToolUnionParam{{OfCustom: &responses.CustomToolParam{Name: "apply_patch", Description: openai.String("Apply a patch to files")}}}
	for _, model := range []string{"sim-sonnet", "sim-llama"} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/stream=%v", model, stream), func(t *testing.T) {
				p := responses.ResponseNewParams{Model: model, MaxOutputTokens: openai.Int(300), Tools: tools,
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("Please use apply_patch to fix the bug.")}}
				var out []responses.ResponseOutputItemUnion
				if stream {
					st := c.Responses.NewStreaming(ctx, p)
					for st.Next() {
						if ev := st.Current(); ev.Type == "response.completed" {
							out = ev.Response.Output
						}
					}
					if err := st.Err(); err != nil {
						t.Fatal(err)
					}
				} else {
					r, err := c.Responses.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					out = r.Output
				}
				var call responses.ResponseOutputItemUnion
				for _, it := range out {
					if it.Type == "custom_tool_call" {
						call = it
					}
				}
				if call.Name != "apply_patch" || call.CallID == "" || call.Input == "" || strings.HasPrefix(call.Input, "{") {
					t.Fatalf("output %+v has no apply_patch custom call with text input", out)
				}
				r, err := c.Responses.New(ctx, responses.ResponseNewParams{Model: model, MaxOutputTokens: openai.Int(300), Tools: tools,
					Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
						responses.ResponseInputItemParamOfMessage("Please use apply_patch to fix the bug.", responses.EasyInputMessageRoleUser),
						responses.ResponseInputItemParamOfCustomToolCall(call.CallID, call.Input, call.Name),
						responses.ResponseInputItemParamOfCustomToolCallOutput(call.CallID, "Done. Applied 1 hunk."),
					}}})
				if err != nil {
					t.Fatal(err)
				}
				if r.Status != "completed" || r.OutputText() == "" {
					t.Fatalf("after the patch: %s %q", r.Status, r.OutputText())
				}
			})
		}
	}
}

// Structured output from text.format: a broken JSON answer from a
// Responses endpoint is repaired or re-asked, never passed off; the
// client reads valid JSON in output_text, streamed or not.
func TestResponsesStructuredRepair(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), withResponsesEndpoint)
	for _, stream := range []bool{false, true} {
		fixed := 0
		for i := 0; i < 20; i++ {
			e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindMalformedJSON, Count: 1}})
			body := fmt.Sprintf(`{"model":"rsp-sonnet","stream":%v,"input":"assess %d","text":{"format":{"type":"json_schema","name":"r","schema":%s}}}`, stream, i, riskSchema)
			resp, b := doRaw(t, e.proxy.URL+"/v1/responses", http.MethodPost, body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			text := ""
			if stream {
				if !strings.Contains(string(b), "event: response.completed") {
					t.Fatalf("stream did not complete: %s", b)
				}
				var done struct {
					Response struct {
						Output []struct {
							Content []struct{ Text string } `json:"content"`
						} `json:"output"`
					} `json:"response"`
				}
				i := strings.LastIndex(string(b), "data: ")
				json.Unmarshal([]byte(strings.TrimSpace(string(b)[i+6:])), &done)
				if len(done.Response.Output) > 0 && len(done.Response.Output[0].Content) > 0 {
					text = done.Response.Output[0].Content[0].Text
				}
			} else {
				r, err := responseOutputText(b)
				if err != nil {
					t.Fatal(err)
				}
				text = r
			}
			if v := mustSchema(t, riskSchema).Validate([]byte(text)); len(v) != 0 {
				t.Fatalf("stream %v: invalid answer reached the client: %q", stream, text)
			}
			if resp.Header.Get("X-Mesh-Repaired") != "" || resp.Header.Get("X-Mesh-Reasked") == "true" || resp.Trailer.Get("X-Mesh-Schema-Valid") != "" {
				fixed++
			}
		}
		if fixed == 0 && !stream {
			t.Errorf("no broken answer was repaired or re-asked in 20")
		}
	}
}

// responseOutputText returns a response object's output text.
func responseOutputText(b []byte) (string, error) {
	var r struct {
		Output []struct {
			Type    string                  `json:"type"`
			Content []struct{ Text string } `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			sb.WriteString(c.Text)
		}
	}
	return sb.String(), nil
}

// Hedging and the breaker serve a Responses client as the others: a slow
// primary is hedged (X-Mesh-Hedged: won after the ceiling), and an
// endpoint failing three times in a row is cut off (503
// MESH_CIRCUIT_OPEN in OpenAI's error shape) until open_for passes.
func TestResponsesHedgeAndBreaker(t *testing.T) {
	body := `{"model":"MODEL","input":"x","max_output_tokens":16}`
	t.Run("hedge", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			simCfg := sim.DefaultConfig()
			for i := range simCfg.Regions {
				simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond)}
			}
			simCfg.Regions[0].Latency.TTFT = sim.Duration(time.Second) // us-east: slow primary
			s := newSimMesh(t, simCfg, func(c *config.Config) {
				withResponsesEndpoint(c)
				c.Resilience.Hedge.Ceiling = 50 * time.Millisecond
				c.Aliases = []config.Alias{{Name: "primary-east", Models: []string{"rsp-sonnet"}, Strategy: "ordered"}}
			})
			defer s.mesh.Close()
			r := s.call(t, "/v1/responses", strings.Replace(body, "MODEL", "primary-east", 1))
			if r.status != 200 || r.header.Get("X-Mesh-Hedged") != "won" || r.took != 60*time.Millisecond {
				t.Fatalf("%d hedged %q took %v, want won after 50ms + 10ms: %s", r.status, r.header.Get("X-Mesh-Hedged"), r.took, r.body)
			}
		})
	})
	t.Run("breaker", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			simCfg := sim.ZeroLatency()
			simCfg.Faults = []sim.Fault{{Kind: sim.KindServerError, Status: 500, Format: "responses"}}
			s := newSimMesh(t, simCfg, func(c *config.Config) {
				withResponsesEndpoint(c)
				for i := range c.Models {
					if c.Models[i].Name == "rsp-sonnet" {
						c.Models[i].Endpoints = c.Models[i].Endpoints[:1]
					}
				}
				c.Resilience.Breaker.ConsecutiveFailures = 3
				c.Resilience.Breaker.OpenFor = 5 * time.Second
			})
			defer s.mesh.Close()
			call := strings.Replace(body, "MODEL", "rsp-sonnet", 1)
			if first := s.call(t, "/v1/responses", call); first.status != 500 {
				t.Fatalf("first call: %d %s", first.status, first.body)
			}
			sent := len(s.up.posts())
			open := s.call(t, "/v1/responses", call)
			var er struct {
				Error struct{ Type, Message string } `json:"error"`
			}
			if open.status != 503 || open.header.Get("X-Mesh-Error-Code") != "MESH_CIRCUIT_OPEN" || json.Unmarshal(open.body, &er) != nil || er.Error.Message == "" {
				t.Fatalf("with the breaker open: %d %s", open.status, open.body)
			}
			if len(s.up.posts()) != sent {
				t.Errorf("a call went upstream while the breaker was open")
			}
			s.fleet.SetFaults(nil)
			time.Sleep(5 * time.Second) // open_for passes: half-open
			for i := range 3 {
				if r := s.call(t, "/v1/responses", call); r.status != 200 {
					t.Fatalf("call %d after open_for: %d %s", i, r.status, r.body)
				}
			}
		})
	})
}

// A shadowed alias shadows a Responses client's calls too: the client gets
// its own model's answer, the shadow model is asked the same, and the
// comparison is stored.
func TestResponsesShadowed(t *testing.T) {
	store := filepath.Join(t.TempDir(), "shadow.db")
	m := shadowMesh(t, sim.ZeroLatency(), 100, store)
	for i := range 5 {
		_, score := shadowBody(i)
		in, _ := json.Marshal(fmt.Sprintf("case: %d\nrisk_level: low\nconfidence_score: %g\nmitigation_steps: isolate host %d", i, score, i))
		body := `{"model":"risk","instructions":"Extract the fields as JSON.","input":` + string(in) +
			`,"text":{"format":{"type":"json_schema","name":"risk","schema":` + shadowSchema + `}}}`
		req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/responses", strings.NewReader(body))
		req.Header.Set("content-type", "application/json")
		req.Header.Set("authorization", fmt.Sprintf("Bearer client-%d", i))
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text, _ := responseOutputText(b)
		var got map[string]any
		if resp.StatusCode != 200 || json.Unmarshal([]byte(text), &got) != nil || got["confidence_score"] != score {
			t.Fatalf("call %d: %d %s", i, resp.StatusCode, b)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Engine().DrainShadows(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := sqlite.ReadShadow(context.Background(), store, sqlite.ShadowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if rep := shadow.Build(res); rep.Calls != 5 || rep.Compared != 5 {
		t.Errorf("shadowed %d, compared %d (outcomes %v), want 5 and 5", rep.Calls, rep.Compared, rep.Outcomes)
	}
}
