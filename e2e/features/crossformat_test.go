package features_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// Models of the cross-format fleet: each is served in one wire format only.
const (
	openaiOnlyModel    = "sim-llama"  // an OpenAI-compatible server (vLLM, Ollama …)
	anthropicOnlyModel = "sim-claude" // the Anthropic API
)

// crossSimConfig is the zero-latency default fleet, whose sim-llama is
// served only in the OpenAI format and sim-claude only in the Anthropic
// format (issue 7 item 4), both in us-east and eu-west here.
func crossSimConfig() sim.Config {
	c := sim.ZeroLatency()
	for i := range c.Models {
		switch c.Models[i].Name {
		case openaiOnlyModel:
			c.Models[i].Formats, c.Models[i].Regions = []string{"openai"}, []string{"us-east", "eu-west"}
		case anthropicOnlyModel:
			c.Models[i].Formats, c.Models[i].Regions = []string{"anthropic"}, []string{"us-east", "eu-west"}
		}
	}
	return c
}

// newCrossEnv is newEnv with a config tweak: the simulator on a loopback
// socket, the mesh in front of it and `keel serve`'s handler on loopback.
func newCrossEnv(t *testing.T, simCfg sim.Config, tweak func(*config.Config)) *env {
	t.Helper()
	if tweak == nil {
		return newEnv(t, simCfg)
	}
	return newEnv(t, simCfg, tweak)
}

const (
	crossWeatherSchema = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city","days"]}`
	crossTimeSchema    = `{"type":"object","properties":{"tz":{"type":"string"}},"required":["tz"]}`
	// The simulator calls every tool the last user text names, in order.
	crossPrompt = "Use get_weather and get_time for Oslo, please."
)

// crossRequest is the canonical request equivalent to what the SDK tests
// send, for sim.Answer.
func crossRequest(model string, maxTokens int) *llm.Request {
	req := userText(model, crossPrompt, maxTokens)
	req.Tools = []llm.Tool{
		{Name: "get_weather", Description: "Weather for a city", InputSchema: json.RawMessage(crossWeatherSchema)},
		{Name: "get_time", Description: "Local time", InputSchema: json.RawMessage(crossTimeSchema)},
	}
	return req
}

func schemaParts(t *testing.T, schema string) (map[string]any, []string) {
	t.Helper()
	var s struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil {
		t.Fatal(err)
	}
	return s.Properties, s.Required
}

func anthropicCrossParams(t *testing.T, model string) anthropic.MessageNewParams {
	wp, wr := schemaParts(t, crossWeatherSchema)
	tp, tr := schemaParts(t, crossTimeSchema)
	return anthropic.MessageNewParams{
		Model: anthropic.Model(model), MaxTokens: 512,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(crossPrompt))},
		Tools: []anthropic.ToolUnionParam{
			{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather for a city"), InputSchema: anthropic.ToolInputSchemaParam{Properties: wp, Required: wr}}},
			{OfTool: &anthropic.ToolParam{Name: "get_time", Description: anthropic.String("Local time"), InputSchema: anthropic.ToolInputSchemaParam{Properties: tp, Required: tr}}},
		},
	}
}

func openaiCrossParams(t *testing.T, model string) openai.ChatCompletionNewParams {
	var wp, tp shared.FunctionParameters
	if err := json.Unmarshal([]byte(crossWeatherSchema), &wp); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(crossTimeSchema), &tp); err != nil {
		t.Fatal(err)
	}
	return openai.ChatCompletionNewParams{
		Model: model, MaxCompletionTokens: openai.Int(512),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(crossPrompt)},
		Tools: []openai.ChatCompletionToolUnionParam{
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather", Description: openai.String("Weather for a city"), Parameters: wp}),
			openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_time", Description: openai.String("Local time"), Parameters: tp}),
		},
	}
}

// streamAnthropic runs one streaming call with the official Anthropic SDK
// and returns the accumulated message and the response header.
func streamAnthropic(t *testing.T, c anthropic.Client, params anthropic.MessageNewParams) (anthropic.Message, http.Header) {
	t.Helper()
	var hr *http.Response
	st := c.Messages.NewStreaming(context.Background(), params, aoption.WithResponseInto(&hr))
	defer st.Close()
	var msg anthropic.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if hr == nil {
		t.Fatal("no HTTP response recorded")
	}
	return msg, hr.Header
}

// checkAnthropicMessage compares what the SDK built with the simulator's
// answer: every block, tool ids and names, tool inputs by value, stop
// reason and usage.
func checkAnthropicMessage(t *testing.T, msg anthropic.Message, want *llm.Response) {
	t.Helper()
	if len(msg.Content) != len(want.Content) {
		t.Fatalf("SDK built %d blocks, want %d: %+v", len(msg.Content), len(want.Content), msg.Content)
	}
	tools := 0
	for i, b := range want.Content {
		got := msg.Content[i]
		if got.Type != string(b.Type) {
			t.Fatalf("block %d type %q, want %q", i, got.Type, b.Type)
		}
		switch b.Type {
		case llm.BlockText:
			if got.Text != b.Text {
				t.Errorf("block %d text (-got +want):\n-%q\n+%q", i, got.Text, b.Text)
			}
		case llm.BlockToolUse:
			tools++
			if got.ID != b.ID || got.Name != b.Name {
				t.Errorf("block %d tool %s %s, want %s %s", i, got.ID, got.Name, b.ID, b.Name)
			}
			jsonEqual(t, "tool input", got.Input, b.Input)
		}
	}
	if tools != 2 {
		t.Errorf("the answer has %d tool calls, want 2 parallel calls", tools)
	}
	if msg.StopReason != anthropic.StopReasonToolUse {
		t.Errorf("stop reason %q, want tool_use", msg.StopReason)
	}
	if msg.Usage.InputTokens != int64(want.Usage.InputTokens) || msg.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
		t.Errorf("usage %d/%d, want %d/%d", msg.Usage.InputTokens, msg.Usage.OutputTokens, want.Usage.InputTokens, want.Usage.OutputTokens)
	}
}

// Must show: the official anthropic-sdk-go client, streaming with two
// parallel tool calls, served by an OpenAI-format endpoint through
// `keel serve`'s handler, reassembles exactly the expected tool inputs and
// text; non-streaming too; X-Mesh-Model names the serving model.
func TestCrossFormatAnthropicClientOpenAIEndpoint(t *testing.T) {
	e := newCrossEnv(t, crossSimConfig(), nil)
	c := anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("client-key"),
		aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
	want := sim.Answer(e.simCfg, crossRequest(openaiOnlyModel, 512))
	t.Run("stream", func(t *testing.T) {
		msg, h := streamAnthropic(t, c, anthropicCrossParams(t, openaiOnlyModel))
		checkAnthropicMessage(t, msg, want)
		if got := h.Get("X-Mesh-Model"); got != openaiOnlyModel {
			t.Errorf("X-Mesh-Model %q, want %q", got, openaiOnlyModel)
		}
		if got := h.Get("X-Mesh-Provider"); got != simfleet.OpenAIProvider {
			t.Errorf("X-Mesh-Provider %q, want %q", got, simfleet.OpenAIProvider)
		}
	})
	t.Run("non-stream", func(t *testing.T) {
		var hr *http.Response
		msg, err := c.Messages.New(context.Background(), anthropicCrossParams(t, openaiOnlyModel), aoption.WithResponseInto(&hr))
		if err != nil {
			t.Fatal(err)
		}
		checkAnthropicMessage(t, *msg, want)
		if got := hr.Header.Get("X-Mesh-Model"); got != openaiOnlyModel {
			t.Errorf("X-Mesh-Model %q, want %q", got, openaiOnlyModel)
		}
	})
	if e.rec.last().Get("Anthropic-Version") != "" {
		t.Error("the upstream call went out in the Anthropic format")
	}
}

// Must show: the openai-go client served by an Anthropic-only model,
// streaming and not, with two parallel tool calls.
func TestCrossFormatOpenAIClientAnthropicEndpoint(t *testing.T) {
	e := newCrossEnv(t, crossSimConfig(), nil)
	c := openai.NewClient(ooption.WithBaseURL(e.proxy.URL+"/v1"), ooption.WithAPIKey("client-key"))
	want := sim.Answer(e.simCfg, crossRequest(anthropicOnlyModel, 512))
	var wantTools []llm.Block
	for _, b := range want.Content {
		if b.Type == llm.BlockToolUse {
			wantTools = append(wantTools, b)
		}
	}
	if len(wantTools) != 2 {
		t.Fatalf("the simulator answers %d tool calls, want 2", len(wantTools))
	}
	for _, stream := range []bool{true, false} {
		name := "non-stream"
		if stream {
			name = "stream"
		}
		t.Run(name, func(t *testing.T) {
			var hr *http.Response
			p := openaiCrossParams(t, anthropicOnlyModel)
			var msg openai.ChatCompletionMessage
			var finish string
			var usage openai.CompletionUsage
			if stream {
				p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
				st := c.Chat.Completions.NewStreaming(context.Background(), p, ooption.WithResponseInto(&hr))
				var acc openai.ChatCompletionAccumulator
				for st.Next() {
					if !acc.AddChunk(st.Current()) {
						t.Fatalf("accumulator rejected chunk %+v", st.Current())
					}
				}
				if err := st.Err(); err != nil {
					t.Fatal(err)
				}
				st.Close()
				msg, finish, usage = acc.Choices[0].Message, acc.Choices[0].FinishReason, acc.Usage
			} else {
				cc, err := c.Chat.Completions.New(context.Background(), p, ooption.WithResponseInto(&hr))
				if err != nil {
					t.Fatal(err)
				}
				msg, finish, usage = cc.Choices[0].Message, cc.Choices[0].FinishReason, cc.Usage
			}
			if msg.Content != want.Text() {
				t.Errorf("content (-got +want):\n-%q\n+%q", msg.Content, want.Text())
			}
			if finish != "tool_calls" || len(msg.ToolCalls) != len(wantTools) {
				t.Fatalf("finish %q with %d tool calls, want tool_calls with %d", finish, len(msg.ToolCalls), len(wantTools))
			}
			for i, w := range wantTools {
				got := msg.ToolCalls[i]
				if got.ID != w.ID || got.Function.Name != w.Name {
					t.Errorf("tool call %d = %s %s, want %s %s", i, got.ID, got.Function.Name, w.ID, w.Name)
				}
				jsonEqual(t, "arguments", []byte(got.Function.Arguments), w.Input)
			}
			if usage.PromptTokens != int64(want.Usage.PromptTokens()) || usage.CompletionTokens != int64(want.Usage.OutputTokens) {
				t.Errorf("usage %d/%d, want %d/%d", usage.PromptTokens, usage.CompletionTokens, want.Usage.PromptTokens(), want.Usage.OutputTokens)
			}
			if got := hr.Header.Get("X-Mesh-Model"); got != anthropicOnlyModel {
				t.Errorf("X-Mesh-Model %q, want %q", got, anthropicOnlyModel)
			}
		})
	}
	if e.rec.last().Get("Anthropic-Version") == "" {
		t.Error("the upstream call did not go out in the Anthropic format")
	}
}

// Must show: a fallback chain mixing providers. The alias lists the
// Anthropic-only model first; it is overloaded everywhere, so Anthropic
// clients (streaming, several at once) are served by the OpenAI-only model
// with no client-visible error, and X-Mesh-Model says so; the primary was
// tried and answered 529.
func TestCrossFormatFallbackChain(t *testing.T) {
	simCfg := crossSimConfig()
	// One region: each call needs a single fallback, within the default
	// retry budget's burst (10) for the clients below.
	simCfg.Models[len(simCfg.Models)-1].Regions = []string{"us-east"}
	simCfg.Faults = []sim.Fault{{Kind: sim.KindOverloaded, Model: anthropicOnlyModel}}
	e := newCrossEnv(t, simCfg, func(c *config.Config) {
		c.Aliases = append(c.Aliases, config.Alias{Name: "mixed", Models: []string{anthropicOnlyModel, openaiOnlyModel}, Strategy: config.StrategyOrdered})
	})
	c := anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("client-key"),
		aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry(), aoption.WithMaxRetries(0))
	want := sim.Answer(e.simCfg, crossRequest(openaiOnlyModel, 512))
	const clients = 8
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.Run("client", func(t *testing.T) {
				msg, h := streamAnthropic(t, c, anthropicCrossParams(t, "mixed"))
				checkAnthropicMessage(t, msg, want)
				if got := h.Get("X-Mesh-Model"); got != openaiOnlyModel {
					t.Errorf("client %d: X-Mesh-Model %q, want %q", i, got, openaiOnlyModel)
				}
				// Once the primary is known overloaded the router may skip it,
				// so X-Mesh-Fallback is not required of every call.
			})
		}()
	}
	wg.Wait()
	if st := e.fleet.Stats(); st.Total.ByFault[sim.KindOverloaded] == 0 {
		t.Errorf("the Anthropic-only model was never tried: %+v", st)
	}
}

// Issue 7 item 3, issue 25: content the target format cannot express (a
// server tool) is by default a 400 naming it; with translation: drop it is
// dropped and named; never a silent change of meaning.
func TestCrossFormatTranslationPolicy(t *testing.T) {
	// A server tool has no OpenAI equivalent. (Sampling parameters such as
	// top_k are normalization's business: see normalization.parameter_policy.)
	body := `{"model":"%s","max_tokens":50,"tools":[{"type":"web_search_20260318","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`
	for _, c := range []struct {
		name, policy string
		status       int
	}{{"default refuses content", "", 400}, {"drop", "drop", 200}, {"reject", "reject", 400}} {
		t.Run(c.name, func(t *testing.T) {
			e := newCrossEnv(t, crossSimConfig(), func(cfg *config.Config) {
				for i := range cfg.Models {
					if cfg.Models[i].Name == "sim-llama" {
						cfg.Models[i].Translation = c.policy
					}
				}
			})
			resp, b := e.post(t, "/v1/messages", fmt.Sprintf(body, "sim-llama"), "anthropic-version", "2023-06-01")
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, b)
			}
			if c.status == 200 && resp.Header.Get("X-Mesh-Dropped") != "server_tool:web_search_20260318" {
				t.Errorf("X-Mesh-Dropped %q, want server_tool:web_search_20260318", resp.Header.Get("X-Mesh-Dropped"))
			}
			if c.status == 400 && (!strings.Contains(string(b), "web_search_20260318") || !strings.Contains(string(b), `"type":"invalid_request_error"`)) {
				t.Errorf("reject body does not name the server tool in the Anthropic error shape: %s", b)
			}
		})
	}
}
