package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelmesh/keel/internal/llm"
)

func startFleet(t *testing.T, cfg Config) (*Fleet, *Server) {
	t.Helper()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := f.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return f, s
}

func anthropicClient(base string, opts ...aoption.RequestOption) anthropic.Client {
	return anthropic.NewClient(append([]aoption.RequestOption{
		aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry(),
		aoption.WithBaseURL(base), aoption.WithAPIKey("sk-sim"), aoption.WithMaxRetries(0),
	}, opts...)...)
}

func openaiClient(base string, opts ...ooption.RequestOption) openai.Client {
	return openai.NewClient(append([]ooption.RequestOption{
		ooption.WithBaseURL(base), ooption.WithAPIKey("sk-sim"), ooption.WithMaxRetries(0),
	}, opts...)...)
}

var weatherSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"city": map[string]any{"type": "string"},
		"days": map[string]any{"type": "integer", "minimum": 1, "maximum": 7},
	},
	"required": []string{"city"},
}

// expected is what the fleet must answer to a user turn, optionally with
// the weather tool.
func expected(t *testing.T, cfg Config, model, text string, withTool bool) *llm.Response {
	req := userReq(model, text)
	if withTool {
		schema, _ := json.Marshal(weatherSchema)
		req.Tools = []llm.Tool{{Name: "get_weather", Description: "Weather now", InputSchema: schema}}
	}
	return Answer(cfg, req)
}

func TestSDKAnthropic(t *testing.T) {
	cfg := ZeroLatency()
	_, srv := startFleet(t, cfg)
	ctx := context.Background()
	for _, region := range []string{"", "eu-west", "ap-south"} {
		for _, tool := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("region=%q/tool=%v/stream=%v", region, tool, stream)
				t.Run(name, func(t *testing.T) {
					prompt := "Hello from " + region
					if tool {
						prompt = "please get_weather for Oslo"
					}
					want := expected(t, cfg, "sim-sonnet", prompt, tool)
					params := anthropic.MessageNewParams{
						Model:     "sim-sonnet",
						MaxTokens: 1024,
						Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
					}
					if tool {
						params.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
							Name:        "get_weather",
							Description: anthropic.String("Weather now"),
							InputSchema: anthropic.ToolInputSchemaParam{Properties: weatherSchema["properties"], Required: []string{"city"}},
						}}}
					}
					var hr *http.Response
					client := anthropicClient(srv.BaseURL(region, FormatAnthropic), aoption.WithResponseInto(&hr))
					var msg anthropic.Message
					if stream {
						s := client.Messages.NewStreaming(ctx, params)
						for s.Next() {
							if err := msg.Accumulate(s.Current()); err != nil {
								t.Fatal(err)
							}
						}
						if err := s.Err(); err != nil {
							t.Fatal(err)
						}
						s.Close()
					} else {
						m, err := client.Messages.New(ctx, params)
						if err != nil {
							t.Fatal(err)
						}
						msg = *m
					}
					wantRegion := region
					if region == "" {
						wantRegion = "us-east"
					}
					if got := hr.Header.Get("X-Sim-Region"); got != wantRegion {
						t.Errorf("x-sim-region = %q, want %q", got, wantRegion)
					}
					if hr.Header.Get("Request-Id") == "" || hr.Header.Get("Anthropic-Ratelimit-Requests-Remaining") == "" {
						t.Errorf("missing request-id or rate-limit headers: %v", hr.Header)
					}
					if msg.ID != want.ID || string(msg.Model) != "sim-sonnet" {
						t.Errorf("id %q model %q, want %q sim-sonnet", msg.ID, msg.Model, want.ID)
					}
					if len(msg.Content) != len(want.Content) {
						t.Fatalf("got %d blocks, want %d: %+v", len(msg.Content), len(want.Content), msg.Content)
					}
					for i, b := range msg.Content {
						w := want.Content[i]
						if string(b.Type) != string(w.Type) || b.Text != w.Text || b.ID != w.ID || b.Name != w.Name {
							t.Errorf("block %d = %s %q %q %q, want %s %q %q %q", i, b.Type, b.Text, b.ID, b.Name, w.Type, w.Text, w.ID, w.Name)
						}
						if w.Type == llm.BlockToolUse && !jsonEqual(b.Input, w.Input) {
							t.Errorf("tool input %s, want %s", b.Input, w.Input)
						}
					}
					if string(msg.StopReason) != string(want.StopReason) {
						t.Errorf("stop_reason %q, want %q", msg.StopReason, want.StopReason)
					}
					if msg.Usage.InputTokens != int64(want.Usage.InputTokens) || msg.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
						t.Errorf("usage %d/%d, want %d/%d", msg.Usage.InputTokens, msg.Usage.OutputTokens, want.Usage.InputTokens, want.Usage.OutputTokens)
					}
				})
			}
		}
	}
}

func TestSDKOpenAI(t *testing.T) {
	cfg := ZeroLatency()
	_, srv := startFleet(t, cfg)
	ctx := context.Background()
	for _, region := range []string{"", "eu-west"} {
		for _, tool := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				name := fmt.Sprintf("region=%q/tool=%v/stream=%v", region, tool, stream)
				t.Run(name, func(t *testing.T) {
					prompt := "Hello from " + region
					if tool {
						prompt = "please get_weather for Oslo"
					}
					want := expected(t, cfg, "sim-haiku", prompt, tool)
					params := openai.ChatCompletionNewParams{
						Model:               "sim-haiku",
						MaxCompletionTokens: openai.Int(1024),
						Messages:            []openai.ChatCompletionMessageParamUnion{openai.UserMessage(prompt)},
					}
					if tool {
						params.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
							Name: "get_weather", Description: openai.String("Weather now"), Parameters: weatherSchema,
						})}
					}
					var hr *http.Response
					client := openaiClient(srv.BaseURL(region, FormatOpenAI), ooption.WithResponseInto(&hr))
					var cc openai.ChatCompletion
					if stream {
						params.StreamOptions.IncludeUsage = openai.Bool(true)
						s := client.Chat.Completions.NewStreaming(ctx, params)
						var acc openai.ChatCompletionAccumulator
						for s.Next() {
							acc.AddChunk(s.Current())
						}
						if err := s.Err(); err != nil {
							t.Fatal(err)
						}
						s.Close()
						cc = acc.ChatCompletion
					} else {
						c, err := client.Chat.Completions.New(ctx, params)
						if err != nil {
							t.Fatal(err)
						}
						cc = *c
					}
					if hr.Header.Get("X-Request-Id") == "" || hr.Header.Get("X-Ratelimit-Remaining-Requests") == "" {
						t.Errorf("missing x-request-id or rate-limit headers: %v", hr.Header)
					}
					if len(cc.Choices) != 1 {
						t.Fatalf("got %d choices", len(cc.Choices))
					}
					m := cc.Choices[0].Message
					if m.Content != want.Text() {
						t.Errorf("content %q, want %q", m.Content, want.Text())
					}
					var wantCalls []llm.Block
					for _, b := range want.Content {
						if b.Type == llm.BlockToolUse {
							wantCalls = append(wantCalls, b)
						}
					}
					if len(m.ToolCalls) != len(wantCalls) {
						t.Fatalf("got %d tool calls, want %d", len(m.ToolCalls), len(wantCalls))
					}
					for i, tc := range m.ToolCalls {
						w := wantCalls[i]
						if tc.ID != w.ID || tc.Function.Name != w.Name || !jsonEqual([]byte(tc.Function.Arguments), w.Input) {
							t.Errorf("tool call %d = %s %s %s, want %s %s %s", i, tc.ID, tc.Function.Name, tc.Function.Arguments, w.ID, w.Name, w.Input)
						}
					}
					wantFinish := "stop"
					if tool {
						wantFinish = "tool_calls"
					}
					if cc.Choices[0].FinishReason != wantFinish {
						t.Errorf("finish_reason %q, want %q", cc.Choices[0].FinishReason, wantFinish)
					}
					if cc.Usage.PromptTokens != int64(want.Usage.InputTokens) || cc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
						t.Errorf("usage %d/%d, want %d/%d", cc.Usage.PromptTokens, cc.Usage.CompletionTokens, want.Usage.InputTokens, want.Usage.OutputTokens)
					}
				})
			}
		}
	}
}

// Both SDKs parse the model lists.
func TestSDKModels(t *testing.T) {
	cfg := ZeroLatency()
	cfg.Models = append(cfg.Models, ModelSpec{Name: "sim-local", Capability: 2, Regions: []string{"eu-west"}, Formats: []string{"openai"}})
	_, srv := startFleet(t, cfg)
	ctx := context.Background()

	ac := anthropicClient(srv.BaseURL("", FormatAnthropic))
	ap, err := ac.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range ap.Data {
		got = append(got, m.ID)
	}
	if want := []string{"sim-opus", "sim-sonnet", "sim-haiku", "sim-claude"}; !reflect.DeepEqual(got, want) {
		t.Errorf("anthropic models %v, want %v", got, want)
	}

	oc := openaiClient(srv.BaseURL("eu-west", FormatOpenAI))
	op, err := oc.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, m := range op.Data {
		got = append(got, m.ID)
	}
	if want := []string{"sim-opus", "sim-sonnet", "sim-haiku", "sim-llama", "sim-local"}; !reflect.DeepEqual(got, want) {
		t.Errorf("openai models %v, want %v", got, want)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// The SDKs work over the in-memory Transport too, streaming included, and
// see reset faults as connection errors.
func TestSDKOverTransport(t *testing.T) {
	cfg := ZeroLatency()
	f := mustNew(t, cfg)
	hc := &http.Client{Transport: f.Transport()}
	ctx := context.Background()
	want := expected(t, cfg, "sim-opus", "in memory", false)

	ac := anthropicClient(f.BaseURL("ap-south", FormatAnthropic), aoption.WithHTTPClient(hc))
	s := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
		Model: "sim-opus", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("in memory"))},
	})
	var msg anthropic.Message
	for s.Next() {
		msg.Accumulate(s.Current())
	}
	if err := s.Err(); err != nil || len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
		t.Errorf("anthropic stream: %v %+v, want %q", err, msg.Content, want.Text())
	}
	s.Close()

	oc := openaiClient(f.BaseURL("ap-south", FormatOpenAI), ooption.WithHTTPClient(hc))
	cc, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "sim-opus", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("in memory")},
	})
	if err != nil || cc.Choices[0].Message.Content != want.Text() || cc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
		t.Errorf("openai: %v %+v", err, cc)
	}

	f.AddFault(Fault{Kind: KindRateLimit, Count: 1, RetryAfter: Duration(1500 * time.Millisecond)})
	_, err = oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model: "sim-opus", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("in memory")},
	})
	var oe *openai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 {
		t.Errorf("rate limited call: %v, want a 429 *openai.Error", err)
	}

	f.SetRegionDown("ap-south", true)
	_, err = ac.Messages.New(ctx, anthropic.MessageNewParams{
		Model: "sim-opus", MaxTokens: 1024,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("in memory"))},
	})
	if !errors.Is(err, syscall.ECONNRESET) {
		t.Errorf("call to a down region: %v, want ECONNRESET", err)
	}
}
