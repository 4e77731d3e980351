package features_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

const weatherSchema = `{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`

// sdkModes are the two ways in: the proxy by base URL, and the embedded
// HTTPClient with the SDK's default base URL (never reached: the mesh
// serves the call in-process).
func anthropicClients(e *env) map[string]anthropic.Client {
	return map[string]anthropic.Client{
		"proxy": anthropic.NewClient(aoption.WithBaseURL(e.proxy.URL), aoption.WithAPIKey("client-key"),
			aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry()),
		"embedded": anthropic.NewClient(aoption.WithHTTPClient(e.mesh.HTTPClient()), aoption.WithAPIKey("client-key"),
			aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry()),
	}
}

func openaiClients(e *env) map[string]openai.Client {
	return map[string]openai.Client{
		"proxy":    openai.NewClient(ooption.WithBaseURL(e.proxy.URL+"/v1"), ooption.WithAPIKey("client-key")),
		"embedded": openai.NewClient(ooption.WithHTTPClient(e.mesh.HTTPClient()), ooption.WithAPIKey("client-key")),
	}
}

func weatherTool() llm.Tool {
	return llm.Tool{Name: "get_weather", Description: "Weather for a city", InputSchema: json.RawMessage(weatherSchema)}
}

func jsonEqual(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Fatalf("%s: got invalid JSON %q: %v", what, got, err)
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want invalid JSON %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func TestAnthropicSDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	for mode, c := range anthropicClients(e) {
		t.Run(mode+"/text", func(t *testing.T) {
			want := sim.Answer(e.simCfg, userText("sim-sonnet", "Tell me about keels.", 256))
			msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{
				Model: "sim-sonnet", MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Tell me about keels."))},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(msg.Content) != 1 || msg.Content[0].Text != want.Text() {
				t.Fatalf("content = %+v, want text %q", msg.Content, want.Text())
			}
			if msg.StopReason != anthropic.StopReason(want.StopReason) || msg.Usage.InputTokens != int64(want.Usage.InputTokens) || msg.Usage.OutputTokens != int64(want.Usage.OutputTokens) {
				t.Errorf("stop %q usage %d/%d, want %q %d/%d", msg.StopReason, msg.Usage.InputTokens, msg.Usage.OutputTokens, want.StopReason, want.Usage.InputTokens, want.Usage.OutputTokens)
			}
		})
		t.Run(mode+"/stream", func(t *testing.T) {
			want := sim.Answer(e.simCfg, userText("sim-haiku", "Stream me something.", 256))
			st := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
				Model: "sim-haiku", MaxTokens: 256,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Stream me something."))},
			})
			var acc anthropic.Message
			events := 0
			for st.Next() {
				events++
				if err := acc.Accumulate(st.Current()); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Content) != 1 || acc.Content[0].Text != want.Text() {
				t.Fatalf("content = %+v, want %q", acc.Content, want.Text())
			}
			if acc.Usage.OutputTokens != int64(want.Usage.OutputTokens) || acc.Usage.InputTokens != int64(want.Usage.InputTokens) {
				t.Errorf("usage %d/%d, want %d/%d", acc.Usage.InputTokens, acc.Usage.OutputTokens, want.Usage.InputTokens, want.Usage.OutputTokens)
			}
			if events < 4 {
				t.Errorf("only %d events", events)
			}
		})
		for _, stream := range []bool{false, true} {
			name := mode + "/tool"
			if stream {
				name += "-stream"
			}
			t.Run(name, func(t *testing.T) {
				req := userText("sim-opus", "Please use get_weather for Paris.", 512)
				req.Tools = []llm.Tool{weatherTool()}
				want := sim.Answer(e.simCfg, req)
				var props map[string]any
				json.Unmarshal([]byte(`{"city":{"type":"string"}}`), &props)
				params := anthropic.MessageNewParams{
					Model: "sim-opus", MaxTokens: 512,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Please use get_weather for Paris."))},
					Tools: []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather for a city"),
						InputSchema: anthropic.ToolInputSchemaParam{Properties: props, Required: []string{"city"}}}}},
				}
				var msg anthropic.Message
				if stream {
					msg, _ = streamAnthropic(t, c, params)
				} else {
					m, err := c.Messages.New(ctx, params)
					if err != nil {
						t.Fatal(err)
					}
					msg = *m
				}
				if len(msg.Content) != len(want.Content) {
					t.Fatalf("got %d blocks, want %d: %+v", len(msg.Content), len(want.Content), msg.Content)
				}
				sawTool := false
				for i, b := range want.Content {
					got := msg.Content[i]
					if string(b.Type) != got.Type {
						t.Fatalf("block %d type %q, want %q", i, got.Type, b.Type)
					}
					switch b.Type {
					case llm.BlockText:
						if got.Text != b.Text {
							t.Errorf("block %d text %q, want %q", i, got.Text, b.Text)
						}
					case llm.BlockToolUse:
						sawTool = true
						if got.Name != b.Name || got.ID != b.ID {
							t.Errorf("tool %q id %q, want %q %q", got.Name, got.ID, b.Name, b.ID)
						}
						jsonEqual(t, "tool input", got.Input, b.Input)
					}
				}
				if !sawTool || msg.StopReason != anthropic.StopReasonToolUse {
					t.Errorf("no tool call or stop %q", msg.StopReason)
				}
			})
		}
	}
}

func TestOpenAISDK(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	for mode, c := range openaiClients(e) {
		t.Run(mode+"/text", func(t *testing.T) {
			want := sim.Answer(e.simCfg, userText("sim-sonnet", "Tell me about hulls.", 300))
			cc, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
				Model: "sim-sonnet", MaxCompletionTokens: openai.Int(300),
				Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Tell me about hulls.")},
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != want.Text() {
				t.Fatalf("choices = %+v, want %q", cc.Choices, want.Text())
			}
			if cc.Choices[0].FinishReason != "stop" || cc.Usage.PromptTokens != int64(want.Usage.PromptTokens()) || cc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) {
				t.Errorf("finish %q usage %d/%d, want stop %d/%d", cc.Choices[0].FinishReason, cc.Usage.PromptTokens, cc.Usage.CompletionTokens, want.Usage.PromptTokens(), want.Usage.OutputTokens)
			}
		})
		t.Run(mode+"/stream", func(t *testing.T) {
			want := sim.Answer(e.simCfg, userText("sim-haiku", "Stream about sails.", 300))
			st := c.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
				Model: "sim-haiku", MaxCompletionTokens: openai.Int(300),
				Messages:      []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Stream about sails.")},
				StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
			})
			var acc openai.ChatCompletionAccumulator
			for st.Next() {
				acc.AddChunk(st.Current())
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want.Text() {
				t.Fatalf("choices = %+v, want %q", acc.Choices, want.Text())
			}
			if acc.Usage.CompletionTokens != int64(want.Usage.OutputTokens) || acc.Usage.PromptTokens != int64(want.Usage.PromptTokens()) {
				t.Errorf("usage %d/%d, want %d/%d", acc.Usage.PromptTokens, acc.Usage.CompletionTokens, want.Usage.PromptTokens(), want.Usage.OutputTokens)
			}
		})
		for _, stream := range []bool{false, true} {
			name := mode + "/tool"
			if stream {
				name += "-stream"
			}
			t.Run(name, func(t *testing.T) {
				req := userText("sim-opus", "Please use get_weather for Oslo.", 512)
				req.Tools = []llm.Tool{weatherTool()}
				want := sim.Answer(e.simCfg, req)
				var params shared.FunctionParameters
				json.Unmarshal([]byte(weatherSchema), &params)
				p := openai.ChatCompletionNewParams{
					Model: "sim-opus", MaxCompletionTokens: openai.Int(512),
					Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Please use get_weather for Oslo.")},
					Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
						Name: "get_weather", Description: openai.String("Weather for a city"), Parameters: params})},
				}
				var msg openai.ChatCompletionMessage
				var finish string
				if stream {
					st := c.Chat.Completions.NewStreaming(ctx, p)
					var acc openai.ChatCompletionAccumulator
					for st.Next() {
						acc.AddChunk(st.Current())
					}
					if err := st.Err(); err != nil {
						t.Fatal(err)
					}
					msg, finish = acc.Choices[0].Message, acc.Choices[0].FinishReason
				} else {
					cc, err := c.Chat.Completions.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					msg, finish = cc.Choices[0].Message, cc.Choices[0].FinishReason
				}
				var wantTools []llm.Block
				for _, b := range want.Content {
					if b.Type == llm.BlockToolUse {
						wantTools = append(wantTools, b)
					}
				}
				if msg.Content != want.Text() {
					t.Errorf("content %q, want %q", msg.Content, want.Text())
				}
				if finish != "tool_calls" || len(msg.ToolCalls) != len(wantTools) || len(wantTools) == 0 {
					t.Fatalf("finish %q, %d tool calls, want tool_calls and %d", finish, len(msg.ToolCalls), len(wantTools))
				}
				for i, w := range wantTools {
					got := msg.ToolCalls[i]
					if got.ID != w.ID || got.Function.Name != w.Name {
						t.Errorf("tool call %d = %s %s, want %s %s", i, got.ID, got.Function.Name, w.ID, w.Name)
					}
					jsonEqual(t, "arguments", []byte(got.Function.Arguments), w.Input)
				}
			})
		}
	}
}
