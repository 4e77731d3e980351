package keel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelmesh/keel/sim"
)

// Must show (issue 25): OpenAI JSON mode through the official openai-go
// SDK to a model the simulator serves only over the Anthropic format
// (whose Messages API rejects response_format: sim/doc.go) answers
// parseable JSON, streaming and not, with nothing dropped; with an
// instructor-style schema member (response_format {type: json_object,
// schema}) the answer validates against that schema.
func TestOpenAIJSONModeOnAnAnthropicEndpoint(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	ctx := context.Background()
	bookSchema := `{"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"},"tags":{"type":"array","items":{"type":"string"}}},"required":["title","year","tags"]}`
	for _, withSchema := range []bool{false, true} {
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("schema=%v/stream=%v", withSchema, stream), func(t *testing.T) {
				rf := shared.ResponseFormatJSONObjectParam{}
				if withSchema {
					var sc map[string]any
					json.Unmarshal([]byte(bookSchema), &sc)
					rf.SetExtraFields(map[string]any{"schema": sc})
				}
				p := openai.ChatCompletionNewParams{
					Model: "sim-claude",
					Messages: []openai.ChatCompletionMessageParamUnion{
						openai.SystemMessage("You answer in JSON."),
						openai.UserMessage(fmt.Sprintf("Describe a book about ships (%v %v).", withSchema, stream)),
					},
					ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &rf},
				}
				c := openaiClients(e)["proxy"]
				var content string
				if stream {
					st := c.Chat.Completions.NewStreaming(ctx, p)
					var acc openai.ChatCompletionAccumulator
					for st.Next() {
						acc.AddChunk(st.Current())
					}
					if err := st.Err(); err != nil {
						t.Fatal(err)
					}
					content = acc.Choices[0].Message.Content
				} else {
					cc, err := c.Chat.Completions.New(ctx, p)
					if err != nil {
						t.Fatal(err)
					}
					content = cc.Choices[0].Message.Content
				}
				var obj map[string]any
				if err := json.Unmarshal([]byte(content), &obj); err != nil {
					t.Fatalf("answer %q is not a JSON object: %v", content, err)
				}
				if len(obj) == 0 {
					t.Fatalf("answer %q is an empty object: the model's answer is missing", content)
				}
				if withSchema {
					if v := mustSchema(t, bookSchema).Validate([]byte(content)); len(v) != 0 {
						t.Fatalf("answer %s does not match the instructor schema: %v", content, v)
					}
				}
			})
		}
	}
	// Nothing was dropped on the way: the raw call shows the headers.
	resp, b := e.post(t, "/v1/chat/completions", `{"model":"sim-claude","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"Describe a ship."}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	if d := resp.Header.Get("X-Mesh-Dropped"); d != "" {
		t.Errorf("X-Mesh-Dropped = %q, want nothing dropped", d)
	}
}
