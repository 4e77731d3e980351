package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

// Issue 25: a structured-output feature must never make a call worse than
// the same call direct (STYLE 23).

const qaPrompt = "仅输出 JSON，包含两个字段：question 和 answer。"

func anthropicText(text string, stop llm.StopReason) reply {
	r := anthropicJSON(text)
	r.body = strings.Replace(r.body, `"stop_reason":"end_turn"`, `"stop_reason":"`+string(stop)+`"`, 1)
	return r
}

// TestImpliedSchemaCountIsNotAKey: issue 25 defect 1. The prompt
// 仅输出 JSON，包含两个字段：question 和 answer。 made Keel send a schema whose
// only key was 两 ("two"), and the model answered {"两": …}. Under the
// default (implied: guess) nothing is sent upstream and the client gets
// the model's answer; under implied: send the schema sent requires question
// and answer. Either way the reading is question and answer, never 两.
func TestImpliedSchemaCountIsNotAKey(t *testing.T) {
	for _, send := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			answer := `{"question":"What is Keel?","answer":"A mesh."}`
			a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON(answer))}
			h := newHarness(t, a)
			e := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{SendImplied: send}})}, h.endpoints("m", "a")...)
			req := ask(llm.FormatAnthropic, "m", false)
			req.System = []llm.Block{{Type: llm.BlockText, Text: qaPrompt}}
			out, ae := callWith(t, e, req, nil)
			if ae != nil {
				t.Fatal(ae)
			}
			if got := out.Record.Structured.Contract.Required; !slices.Equal(got, []string{"question", "answer"}) {
				t.Fatalf("send=%v: read %q, want question and answer", send, got)
			}
			sent := dig(a.lastBody(), "output_config", "format", "schema")
			b, _ := json.Marshal(sent)
			if !send {
				if sent != nil {
					t.Fatalf("implied: guess sent %s upstream", b)
				}
			} else {
				var s struct {
					Properties map[string]any `json:"properties"`
					Required   []string       `json:"required"`
				}
				json.Unmarshal(b, &s)
				if !slices.Equal(s.Required, []string{"question", "answer"}) || len(s.Properties) != 2 || strings.Contains(string(b), "两") {
					t.Fatalf("schema sent upstream %s, want keys question and answer", b)
				}
			}
			if got := out.Response.Text(); got != answer {
				t.Fatalf("send=%v: client got %q, want %q", send, got, answer)
			}
		})
	}
}

// TestImpliedSchemaNeverFailsTheCall: issue 25 defect 2. An implied schema
// is a guess: when repair (and, for a keyless demand, the re-ask) do not
// give a valid answer, the client gets the model's own first answer (as
// direct) and the record
// names the keys (X-Mesh-Schema-Violation); a 502 stays for
// structured_output.implied: strict. A guess that is not sure (keys the
// prompt does not write as identifiers) is not sent upstream.
func TestImpliedSchemaNeverFailsTheCall(t *testing.T) {
	prose := "Sure, here is what I found about the incident."
	for _, strict := range []bool{false, true} {
		for _, sys := range []string{
			"Respond in JSON format. The output must include risk_level, mitigation_steps, confidence_score.",
			"以 JSON 格式输出，必须包含 风险等级、建议。",
			"Respond in JSON.",
		} {
			synctest.Test(t, func(t *testing.T) {
				a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON(prose))}
				h := newHarness(t, a)
				e := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{StrictImplied: strict, SendImplied: strict}})}, h.endpoints("m", "a")...)
				req := ask(llm.FormatAnthropic, "m", false)
				req.System = []llm.Block{{Type: llm.BlockText, Text: sys}}
				out, ae := callWith(t, e, req, nil)
				// implied: guess never re-asks for keys it read (a
				// guess); a keyless demand and strict re-ask once.
				want := 2
				if !strict && sys != "Respond in JSON." {
					want = 1
				}
				if a.count() != want {
					t.Errorf("%q: %d upstream calls, want %d", sys, a.count(), want)
				}
				if strict {
					if ae == nil || ae.MeshCode != llm.MeshSchemaViolation {
						t.Fatalf("%q strict: error %v, want MESH_SCHEMA_VIOLATION", sys, ae)
					}
					return
				}
				if ae != nil {
					t.Fatalf("%q: error %v, want the model's answer", sys, ae)
				}
				if got := out.Response.Text(); got != prose {
					t.Errorf("%q: client got %q, want the model's answer %q", sys, got, prose)
				}
				if !out.Record.SchemaViolation() || out.Record.Structured.Source() != "implied" {
					t.Errorf("%q: violation %v, source %q", sys, out.Record.SchemaViolation(), out.Record.Structured.Source())
				}
				if strings.Contains(sys, "风险等级") {
					if out.Record.Structured.Contract.Sent {
						t.Errorf("%q: an unsure implied schema was sent upstream", sys)
					}
					if !slices.Equal(out.Record.Structured.Contract.Required, []string{"风险等级", "建议"}) {
						t.Errorf("%q: required %q", sys, out.Record.Structured.Contract.Required)
					}
				}
			})
		}
	}
}

// TestClientCutJSONIsNotReasked: issue 25 defect 6 (last item). A JSON
// answer cut by the client's own max_tokens was re-asked with the same
// max_tokens, cut again and turned into a 502; direct, the client had the
// model's answer with finish_reason length. It still gets that: one
// upstream call, the answer as given, stop max_tokens — for a schema the
// client gave as well.
func TestClientCutJSONIsNotReasked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cut := `{"risk_level":"high","confidence_score":0.` // ends inside a number: no lossless close
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicText(cut+"9 and", llm.StopMaxTokens))}
		h := newHarness(t, a)
		e := h.engine(Options{}, h.endpoints("m", "a")...)
		req := ask(llm.FormatAnthropic, "m", false)
		out, ae := callWith(t, e, req, &Behavior{OutputSchema: json.RawMessage(`{"type":"object","properties":{"risk_level":{"type":"string"},"confidence_score":{"type":"number"},"notes":{"type":"string"}},"required":["risk_level","confidence_score","notes"]}`)})
		if ae != nil {
			t.Fatalf("error %v, want the cut answer", ae)
		}
		if a.count() != 1 {
			t.Errorf("%d upstream calls, want 1 (no re-ask of a cut answer)", a.count())
		}
		if out.Response.StopReason != llm.StopMaxTokens || out.Response.Text() != cut+"9 and" {
			t.Errorf("answer %q stop %q, want the model's cut answer", out.Response.Text(), out.Response.StopReason)
		}
		if !out.Record.SchemaViolation() {
			t.Error("the cut invalid answer is not marked as a violation")
		}
	})
}

// TestJSONModeOnAnAnthropicEndpoint: issue 25 defect 2. OpenAI JSON mode
// to an Anthropic endpoint was dropped (X-Mesh-Dropped:
// response_format:json_object), the prose answer failed validation and the
// call became a 502. The endpoint is asked in a form it understands — a
// forced output tool with an open object, Anthropic structured outputs for
// an instructor-style schema, an instruction where it takes neither — and
// an answer that is still not JSON is delivered as the model gave it.
func TestJSONModeOnAnAnthropicEndpoint(t *testing.T) {
	obj := `{"title":"Keel","year":2026}`
	toolAnswer := reply{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"keel_output","input":` + obj +
		`}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`}
	bookSchema := `{"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"}},"required":["title","year"]}`
	cases := []struct {
		name   string
		schema string
		mode   provider.SchemaMode
		answer reply
		want   string
		check  func(t *testing.T, body map[string]any)
	}{
		{"open object as a forced tool", "", "", toolAnswer, obj, func(t *testing.T, body map[string]any) {
			tools, _ := body["tools"].([]any)
			if len(tools) != 1 || dig(tools[0].(map[string]any), "input_schema", "type") != "object" || dig(body, "tool_choice", "name") != "keel_output" {
				t.Errorf("tools %v tool_choice %v", body["tools"], body["tool_choice"])
			}
		}},
		{"instructor schema as structured output", bookSchema, provider.SchemaNative, anthropicJSON(obj), obj, func(t *testing.T, body map[string]any) {
			if dig(body, "output_config", "format", "schema", "properties", "year", "type") != "integer" {
				t.Errorf("output_config %v", body["output_config"])
			}
		}},
		{"instruction where neither is taken", "", provider.SchemaNone, anthropicJSON("Keel is a mesh."), "Keel is a mesh.", func(t *testing.T, body map[string]any) {
			if sys, _ := json.Marshal(body["system"]); !strings.Contains(string(sys), "JSON object") {
				t.Errorf("system %s carries no JSON instruction", sys)
			}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(c.answer)}
				h := newHarness(t, a)
				eps := h.endpoints("m", "a")
				eps[0].StructuredOutputs = c.mode
				e := h.engine(Options{}, eps...)
				req := ask(llm.FormatOpenAI, "m", false)
				req.ResponseFormat = &llm.ResponseFormat{Type: "json_object"}
				if c.schema != "" {
					req.ResponseFormat.Extra = llm.Extra{"schema": json.RawMessage(c.schema)}
				}
				out, ae := callWith(t, e, req, nil)
				if ae != nil {
					t.Fatalf("error %v", ae)
				}
				body := a.lastBody()
				if _, ok := body["response_format"]; ok {
					t.Error("response_format sent to an Anthropic endpoint")
				}
				c.check(t, body)
				if len(out.Record.Dropped()) > 0 {
					t.Errorf("dropped %v", out.Record.Dropped())
				}
				if got := out.Response.Text(); got != c.want {
					t.Errorf("answer %q, want %q", got, c.want)
				}
			})
		})
	}
}

// TestJSONModeSchemaMemberIsValidated: instructor's json_object carries a
// schema; an answer against it is repaired (here: a number given as a
// string), and one that stays invalid is delivered, never a 502.
func TestJSONModeSchemaMemberIsValidated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatOpenAI, script: always(openaiJSON(`{"title":"Keel","year":"2026"}`))}
		h := newHarness(t, a)
		e := h.engine(Options{}, h.endpoints("m", "a")...)
		req := ask(llm.FormatOpenAI, "m", false)
		req.ResponseFormat = &llm.ResponseFormat{Type: "json_object", Extra: llm.Extra{"schema": json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"},"year":{"type":"integer"}},"required":["title","year"]}`)}}
		out, ae := callWith(t, e, req, nil)
		if ae != nil {
			t.Fatal(ae)
		}
		if got := out.Response.Text(); got != `{"title":"Keel","year":2026}` {
			t.Errorf("answer %q, want the year coerced to the schema's integer", got)
		}
		if out.Record.Structured.Source() != "given" || out.Record.Structured.Contract.Origin != "response_format.json_object.schema" {
			t.Errorf("schema %q %+v", out.Record.Structured.Source(), out.Record.Structured)
		}
	})
}

// TestFragmentedGuessNeverFails: found by the differential harness. With
// fragmentation on, a long input under an implied schema (or JSON mode)
// whose fragments all answered prose ended in 502 MESH_SCHEMA_VIOLATION
// ("no replica of any of the 3 fragments answered a JSON object") where
// direct answered. The answers are fused as text and delivered, marked as
// a violation; a schema the client gave still fails.
func TestFragmentedGuessNeverFails(t *testing.T) {
	for _, given := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			prose := always(anthropicJSON("The report says nothing happened."))
			a := &scripted{id: "a", format: llm.FormatAnthropic, script: prose}
			b := &scripted{id: "b", format: llm.FormatAnthropic, script: prose}
			h := newHarness(t, a, b)
			e := h.engine(Options{Stages: stages(t, chain.Config{Fragment: fragment.Settings{TargetTokens: 200, Redundancy: 2}}),
				Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, h.endpoints("m", "a", "b")...)
			req := ask(llm.FormatAnthropic, "al", false)
			req.Messages[0].Content[0].Text = longDoc()
			req.System = []llm.Block{{Type: llm.BlockText, Text: "Respond in JSON with the keys status and summary."}}
			on := true
			beh := &Behavior{Fragment: &on}
			if given {
				beh.OutputSchema = json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`)
			}
			out, err := e.Do(t.Context(), req, Call{RequestID: "t", Behavior: beh})
			if given {
				if err == nil || err.(*llm.APIError).MeshCode != llm.MeshSchemaViolation {
					t.Fatalf("given schema: error %v, want MESH_SCHEMA_VIOLATION", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("implied schema: error %v, want the fused answers", err)
			}
			if out.Record.Fragments == nil {
				t.Fatal("the record has no fragments part")
			}
			if out.Record.Fragments.Count < 3 || !strings.Contains(out.Response.Text(), "The report says nothing happened.") || !out.Record.SchemaViolation() {
				t.Errorf("%d fragments, violation %v, answer %.200q", out.Record.Fragments.Count, out.Record.SchemaViolation(), out.Response.Text())
			}
		})
	}
}

// TestFragmentedJSONModeReachesEveryFragment: found by the differential
// harness. JSON mode to an Anthropic endpoint with fragmentation on: the
// fragments were sent without it (translation dropped response_format),
// answered prose, and the fused answer was no JSON where direct was. Each
// fragment is asked in the endpoint's form (the forced output tool) and the
// fused answer is a JSON object.
func TestFragmentedJSONModeReachesEveryFragment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := func(n int, body map[string]any) reply {
			if dig(body, "tool_choice", "name") != "keel_output" {
				return anthropicJSON("Prose: the model was not asked for JSON.")
			}
			return reply{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"keel_output","input":{"status":"ok"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`}
		}
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: answer}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: answer}
		h := newHarness(t, a, b)
		e := h.engine(Options{Stages: stages(t, chain.Config{Fragment: fragment.Settings{TargetTokens: 200, Redundancy: 2}}),
			Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, h.endpoints("m", "a", "b")...)
		req := ask(llm.FormatOpenAI, "al", false)
		req.Messages[0].Content[0].Text = longDoc()
		req.ResponseFormat = &llm.ResponseFormat{Type: "json_object"}
		on := true
		out, err := e.Do(t.Context(), req, Call{RequestID: "t", Behavior: &Behavior{Fragment: &on}})
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if out.Record.Fragments == nil {
			t.Fatal("the record has no fragments part")
		}
		if json.Unmarshal([]byte(out.Response.Text()), &v) != nil || v["status"] != "ok" || out.Record.Fragments.OK != out.Record.Fragments.Count {
			t.Fatalf("answer %q, %d/%d fragments: want one fused JSON object", out.Response.Text(), out.Record.Fragments.OK, out.Record.Fragments.Count)
		}
	})
}

// TestJSONModeRelaxedStreamIsFolded: found by the differential harness.
// Under structured_output.stream_mode: relaxed, JSON mode to an Anthropic
// endpoint fell back to an instruction (a forced tool call cannot be
// streamed through as text) and the answer was prose where direct was
// JSON. The forced output tool is used and that one stream is buffered and
// folded, as strict mode does.
func TestJSONModeRelaxedStreamIsFolded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, body map[string]any) reply {
			if dig(body, "tool_choice", "name") != "keel_output" {
				return anthropicStream([]string{"Prose:", " not", " JSON."}, 0, true)
			}
			return anthropicToolStream("keel_output", `{"status":"ok"}`)
		}}
		h := newHarness(t, a)
		e := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{RelaxedStreams: true}})}, h.endpoints("m", "a")...)
		req := ask(llm.FormatOpenAI, "m", true)
		req.ResponseFormat = &llm.ResponseFormat{Type: "json_object"}
		res := call(t, e, req)
		if res.err != nil || res.text != `{"status":"ok"}` {
			t.Fatalf("answer %q, error %v; want the folded JSON object", res.text, res.err)
		}
	})
}

// anthropicToolStream streams one tool_use block whose input is input.
func anthropicToolStream(name, input string) reply {
	ev := func(typ, data string) sseEvent { return sseEvent{data: "event: " + typ + "\ndata: " + data + "\n\n"} }
	in, _ := json.Marshal(input)
	return reply{events: []sseEvent{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":7,"output_tokens":0}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"`+name+`","input":{}}}`),
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":`+string(in)+`}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":3}}`),
		ev("message_stop", `{"type":"message_stop"}`),
	}}
}
