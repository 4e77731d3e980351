package features_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
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

// Must show (issue 25, defect 1): the system prompt
// 仅输出 JSON，包含两个字段：question 和 answer。 made Keel send a schema keyed
// 两 ("two") and the model answered {"两": …}. Through Keel to the
// simulator, over both client formats. Under the default (implied: guess,
// session 9) no schema goes upstream and the client gets the model's own
// answer, X-Mesh-Schema-Violation naming the keys read — question and
// answer, never 两. Under implied: send, the schema sent upstream has the
// keys question and answer (and no 两), and the client's answer is a JSON
// object with exactly those two keys.
func TestImpliedCountedFieldsUpstreamAndAnswer(t *testing.T) {
	const sys = "仅输出 JSON，包含两个字段：question 和 answer。"
	for _, mode := range []structured.ImpliedMode{structured.ImpliedGuess, structured.ImpliedSend} {
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		up := &bodyRecorder{next: fleet.Transport()}
		cfg := simfleet.Config(fleet, "http://"+sim.TransportHost)
		cfg.StructuredOutput.Implied = mode
		m, err := keel.New(cfg, keel.WithUpstream(up))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		for _, f := range []string{"anthropic", "openai"} {
			t.Run(string(mode)+"/"+f, func(t *testing.T) {
				path, body := "/v1/messages", `{"model":"sim-sonnet","max_tokens":300,"system":"`+sys+`","messages":[{"role":"user","content":"出一道关于地理的题。"}]}`
				format := llm.FormatAnthropic
				if f == "openai" {
					path, body = "/v1/chat/completions", `{"model":"sim-sonnet","messages":[{"role":"system","content":"`+sys+`"},{"role":"user","content":"出一道关于地理的题。"}]}`
					format = llm.FormatOpenAI
				}
				req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid"+path, strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("anthropic-version", "2023-06-01")
				resp, err := m.HTTPClient().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				up.mu.Lock()
				sent := []byte(up.reqs[len(up.reqs)-1])
				up.mu.Unlock()
				var text string
				if f == "openai" {
					text = openaiText(t, b, false)
				} else {
					text = anthropicText(t, b, false)
				}
				if mode == structured.ImpliedGuess {
					if strings.Contains(string(sent), `"output_config"`) || strings.Contains(string(sent), `"response_format"`) {
						t.Fatalf("implied: guess sent a schema upstream: %s", sent)
					}
					if got := resp.Header.Get("X-Mesh-Schema-Violation"); got != "question,answer" {
						t.Fatalf("X-Mesh-Schema-Violation %q, want the keys read, question,answer", got)
					}
					preq, err := wire.For(format).ParseRequest([]byte(body))
					if err != nil {
						t.Fatal(err)
					}
					if want := sim.Answer(sim.ZeroLatency(), preq).Text(); text != want {
						t.Fatalf("client answer %q, want the model's own %q", text, want)
					}
					return
				}
				var ub struct {
					OutputConfig struct {
						Format struct {
							Schema struct {
								Required   []string       `json:"required"`
								Properties map[string]any `json:"properties"`
							} `json:"schema"`
						} `json:"format"`
					} `json:"output_config"`
				}
				json.Unmarshal(sent, &ub)
				sc := ub.OutputConfig.Format.Schema
				scb, _ := json.Marshal(sc)
				if strings.Contains(string(scb), "两") || len(sc.Properties) != 2 || sc.Properties["question"] == nil || sc.Properties["answer"] == nil {
					t.Fatalf("schema sent upstream: %s", sent)
				}
				var ans map[string]any
				if err := json.Unmarshal([]byte(text), &ans); err != nil || len(ans) != 2 || ans["question"] == nil || ans["answer"] == nil {
					t.Fatalf("client answer %q: want an object with question and answer", text)
				}
			})
		}
	}
}

// Issue 25, defect 2: an implied schema Keel could not satisfy never fails
// the call. A guess (keys read from prose: not sent upstream) over a model
// that answers prose: the client gets the model's own answer, streamed or
// not, identical to the direct answer, with X-Mesh-Schema-Violation naming
// the keys.
func TestImpliedGuessDeliversTheModelsAnswer(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	const sys = "You review pull requests. Answer in JSON. Include the verdict and the reasons."
	for _, stream := range []bool{false, true} {
		body := fmt.Sprintf(`{"model":"sim-sonnet","max_tokens":200,"stream":%v,"system":%q,"messages":[{"role":"user","content":"Review: renamed a variable."}]}`, stream, sys)
		resp, b := e.post(t, "/v1/messages", body, "anthropic-version", "2023-06-01")
		if resp.StatusCode != 200 {
			t.Fatalf("stream=%v: status %d: %s", stream, resp.StatusCode, b)
		}
		if got := resp.Header.Get("X-Mesh-Schema-Violation"); got != "verdict,reasons" {
			t.Errorf("stream=%v: X-Mesh-Schema-Violation = %q, want verdict,reasons", stream, got)
		}
		req, err := wire.For(llm.FormatAnthropic).ParseRequest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		want := sim.Answer(e.simCfg, req).Text()
		if got := anthropicText(t, b, stream); got != want {
			t.Errorf("stream=%v: answer %q, want the model's own answer %q", stream, got, want)
		}
	}
}

// anthropicText is the text of an Anthropic answer body or event stream.
func anthropicText(t *testing.T, b []byte, stream bool) string {
	t.Helper()
	if !stream {
		var m struct{ Content []struct{ Text string } }
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%v: %s", err, b)
		}
		var sb strings.Builder
		for _, c := range m.Content {
			sb.WriteString(c.Text)
		}
		return sb.String()
	}
	var sb strings.Builder
	for line := range strings.Lines(string(b)) {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Type  string
			Delta struct{ Type, Text string }
		}
		if json.Unmarshal([]byte(data), &ev) == nil && ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
			sb.WriteString(ev.Delta.Text)
		}
	}
	return sb.String()
}
