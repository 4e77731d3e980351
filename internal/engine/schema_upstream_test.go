package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/chain"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

// Defect 13.2: mesh_behavior.output_schema validated the answer but never
// reached the model, so the model answered prose, the re-ask failed too
// and the call ended in MESH_SCHEMA_VIOLATION. The schema Keel validates
// is sent in the form each endpoint takes; the re-ask carries it too.

var riskSchema = json.RawMessage(`{"type":"object","properties":{"risk_level":{"type":"string"},"confidence_score":{"type":"number"}},"required":["risk_level","confidence_score"]}`)

func openaiJSON(text string) reply {
	b, _ := json.Marshal(text)
	return reply{body: `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":` + string(b) +
		`},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`}
}

func callWith(t *testing.T, e *Engine, req *llm.Request, b *Behavior) (*Outcome, *llm.APIError) {
	t.Helper()
	out, err := e.Do(context.Background(), req, Call{RequestID: "t", Behavior: b})
	if err != nil {
		return nil, err.(*llm.APIError)
	}
	return out, nil
}

func dig(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}

func TestOutputSchemaIsSentUpstreamPerEndpoint(t *testing.T) {
	valid := `{"risk_level":"high","confidence_score":0.9}`
	cases := []struct {
		name         string
		client, ep   llm.Format
		mode         provider.SchemaMode
		answer       reply
		check        func(t *testing.T, body map[string]any)
		wantAttempts int
	}{
		{"anthropic native: output_config.format, objects closed", llm.FormatAnthropic, llm.FormatAnthropic, "", anthropicJSON(valid),
			func(t *testing.T, body map[string]any) {
				if dig(body, "output_config", "format", "type") != "json_schema" || dig(body, "output_config", "format", "schema", "additionalProperties") != false {
					t.Errorf("output_config = %v", body["output_config"])
				}
			}, 1},
		{"openai native: response_format json_schema", llm.FormatOpenAI, llm.FormatOpenAI, provider.SchemaNative, openaiJSON(valid),
			func(t *testing.T, body map[string]any) {
				if dig(body, "response_format", "type") != "json_schema" || dig(body, "response_format", "json_schema", "schema", "required") == nil {
					t.Errorf("response_format = %v", body["response_format"])
				}
				if _, ok := body["output_config"]; ok {
					t.Error("output_config sent to an OpenAI endpoint")
				}
			}, 1},
		{"openai client to anthropic endpoint: translated and closed", llm.FormatOpenAI, llm.FormatAnthropic, "", anthropicJSON(valid),
			func(t *testing.T, body map[string]any) {
				if dig(body, "output_config", "format", "schema", "additionalProperties") != false {
					t.Errorf("output_config = %v", body["output_config"])
				}
			}, 1},
		{"anthropic client to openai endpoint", llm.FormatAnthropic, llm.FormatOpenAI, "", openaiJSON(valid),
			func(t *testing.T, body map[string]any) {
				if dig(body, "response_format", "type") != "json_schema" {
					t.Errorf("response_format = %v", body["response_format"])
				}
			}, 1},
		{"tool: a forced keel_output call folded into text", llm.FormatAnthropic, llm.FormatAnthropic, provider.SchemaTool,
			reply{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"toolu_1","name":"keel_output","input":` + valid +
				`}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`},
			func(t *testing.T, body map[string]any) {
				tools, _ := body["tools"].([]any)
				if len(tools) != 1 || dig(tools[0].(map[string]any), "name") != "keel_output" || dig(body, "tool_choice", "name") != "keel_output" {
					t.Errorf("tools = %v, tool_choice = %v", body["tools"], body["tool_choice"])
				}
			}, 1},
		{"none: not sent", llm.FormatAnthropic, llm.FormatAnthropic, provider.SchemaNone, anthropicJSON(valid),
			func(t *testing.T, body map[string]any) {
				if _, ok := body["output_config"]; ok {
					t.Errorf("output_config sent: %v", body["output_config"])
				}
			}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &scripted{id: "a", format: c.ep, script: always(c.answer)}
				h := newHarness(t, a)
				eps := h.endpoints("m", "a")
				eps[0].StructuredOutputs = c.mode
				e := h.engine(Options{}, eps...)
				out, ae := callWith(t, e, ask(c.client, "m", false), &Behavior{OutputSchema: riskSchema})
				if ae != nil {
					t.Fatalf("error %v", ae)
				}
				c.check(t, a.lastBody())
				if got := out.Response.Text(); got != valid {
					t.Errorf("answer %q, want %q", got, valid)
				}
				if out.Response.StopReason != llm.StopEndTurn {
					t.Errorf("stop_reason %q", out.Response.StopReason)
				}
				if n := len(out.Record.Attempts); n != c.wantAttempts {
					t.Errorf("%d attempts, want %d", n, c.wantAttempts)
				}
				if out.Record.Structured.Source() != "given" || out.Record.Structured == nil || out.Record.Structured.Contract.Sent != (c.mode != provider.SchemaNone) {
					t.Errorf("schema source %q, structured %+v", out.Record.Structured.Source(), out.Record.Structured)
				}
			})
		})
	}
}

// An implied schema (a "must include" system prompt) is sent as well under
// structured_output.implied: send (the default, guess, only reports it:
// TestImpliedSchemaCountIsNotAKey); a schema the client put in its own wire
// format is left as the client sent it; below the full rollout stage
// nothing is added.
func TestImpliedSchemaIsSentAndClientFormatsAreKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON(`{"risk_level":"low","mitigation_steps":[],"confidence_score":1}`))}
		h := newHarness(t, a)
		e := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{SendImplied: true}})}, h.endpoints("m", "a")...)
		req := ask(llm.FormatAnthropic, "m", false)
		req.System = []llm.Block{{Type: llm.BlockText, Text: "Respond in JSON format. The output must include risk_level, mitigation_steps, confidence_score."}}
		out, ae := callWith(t, e, req, nil)
		if ae != nil {
			t.Fatal(ae)
		}
		req2, _ := dig(a.lastBody(), "output_config", "format", "schema", "required").([]any)
		if len(req2) != 3 || req2[2] != "confidence_score" {
			t.Fatalf("implied schema sent upstream: %v", a.lastBody()["output_config"])
		}
		if st := out.Record.Structured; out.Record.Structured.Source() != "implied" || st == nil || !strings.Contains(st.Contract.Sentence, "must include") || len(st.Contract.Required) != 3 {
			t.Fatalf("record: source %q, %+v", out.Record.Structured.Source(), st)
		}

		// The client's own output_config: passed as sent, not closed or merged.
		own := json.RawMessage(`{"format":{"type":"json_schema","schema":{"type":"object","properties":{"x":{}},"additionalProperties":false}}}`)
		req = ask(llm.FormatAnthropic, "m", false)
		req.Extra = llm.Extra{"output_config": own}
		a.script = always(anthropicJSON(`{"x":1}`))
		if out, ae = callWith(t, e, req, &Behavior{OutputSchema: riskSchema}); ae == nil {
			t.Fatalf("answer %q validated against output_schema should fail", out.Response.Text())
		}
		b, _ := json.Marshal(a.lastBody()["output_config"])
		if !strings.Contains(string(b), `"x"`) || strings.Contains(string(b), "risk_level") {
			t.Fatalf("client's output_config was changed: %s", b)
		}
	})
}

// The re-ask carries the schema; a call that ends in a schema violation
// keeps the first invalid answer and is costed.
func TestReaskCarriesSchemaAndViolationIsExplained(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatOpenAI, script: always(openaiJSON(`{"risk_level":"high"}`))}
		h := newHarness(t, a)
		eps := h.endpoints("m", "a")
		eps[0].Price, eps[0].APIKey = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15}, "sk-test-0123456789abcdefghij"
		e := h.engine(Options{}, eps...)
		req := ask(llm.FormatOpenAI, "m", false)
		req.Messages[0].Content[0].Text = "My key is sk-ant-api03-secretsecretsecret, what is the risk?"
		var rec *Record
		e.obs = callrec.ObserverFunc(func(r *Record) { rec = r })
		_, ae := callWith(t, e, req, &Behavior{OutputSchema: riskSchema, Debug: true})
		if ae == nil || ae.MeshCode != llm.MeshSchemaViolation || !strings.Contains(ae.Message, "confidence_score") {
			t.Fatalf("error = %v, want MESH_SCHEMA_VIOLATION naming confidence_score", ae)
		}
		if a.count() != 2 {
			t.Fatalf("%d upstream calls, want 2 (answer, re-ask)", a.count())
		}
		if dig(a.lastBody(), "response_format", "type") != "json_schema" {
			t.Fatalf("re-ask without the schema: %v", a.lastBody()["response_format"])
		}
		if rec == nil || rec.Structured == nil || rec.Structured.Contract == nil || rec.Structured.Contract.InvalidAnswer != `{"risk_level":"high"}` {
			t.Fatalf("record structured = %+v", rec.Structured)
		}
		if len(rec.Attempts) != 2 || rec.Attempts[1].Kind != "reask" {
			t.Fatalf("attempts %+v", rec.Attempts)
		}
		for i, at := range rec.Attempts {
			if at.Bytes <= 0 || at.Cost <= 0 {
				t.Errorf("attempt %d: bytes %d, cost %g", i, at.Bytes, at.Cost)
			}
			if !strings.Contains(at.UpstreamRequest, `"response_format"`) || strings.Contains(at.UpstreamRequest, "secretsecret") {
				t.Errorf("attempt %d upstream_request = %s", i, at.UpstreamRequest)
			}
		}
		if want := 2 * (7*3 + 3*15) / 1e6; rec.Cost < want*0.999 || rec.Cost > want*1.001 {
			t.Fatalf("failed call cost %g, want %g", rec.Cost, want)
		}
	})
}

// A schema violation of the whole answer (prose where JSON was asked for)
// names a real path in its message, never an empty one (issue 25: "could
// not be repaired: : not valid JSON").
func TestViolationMessageNamesARealPath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatOpenAI, script: always(openaiJSON(`Sure, the risk is high.`))}
		h := newHarness(t, a)
		e := h.engine(Options{}, h.endpoints("m", "a")...)
		_, ae := callWith(t, e, ask(llm.FormatOpenAI, "m", false), &Behavior{OutputSchema: riskSchema})
		if ae == nil || ae.MeshCode != llm.MeshSchemaViolation {
			t.Fatalf("error = %v, want MESH_SCHEMA_VIOLATION", ae)
		}
		if strings.Contains(ae.Message, ": : ") || !strings.Contains(ae.Message, "could not be repaired: (root): not valid JSON") {
			t.Errorf("message %q, want the root path named", ae.Message)
		}
	})
}

// Issue 26: the schema limits were process-wide (structured.SetLimits), so
// the last mesh built, or a reload, sized every other mesh's compile slots.
// Each engine applies its own limits and slots (structured.Compiler; the
// slots' independence is tested there): a schema one engine refuses,
// another built after it with wider limits accepts, and the first still
// refuses it.
func TestSchemaLimitsArePerEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatOpenAI, script: always(openaiJSON(`{"risk_level":"high","confidence_score":0.9}`))}
		h := newHarness(t, a)
		narrow := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{Limits: structured.Limits{MaxProperties: 1, MaxConcurrentCompiles: 1}}})}, h.endpoints("m", "a")...)
		wide := h.engine(Options{Stages: stages(t, chain.Config{Structured: structured.Settings{Limits: structured.Limits{MaxProperties: 10, MaxConcurrentCompiles: 4}}})}, h.endpoints("m", "a")...)
		if _, ae := callWith(t, wide, ask(llm.FormatOpenAI, "m", false), &Behavior{OutputSchema: riskSchema}); ae != nil {
			t.Fatalf("engine with max 10 properties: %v", ae)
		}
		_, ae := callWith(t, narrow, ask(llm.FormatOpenAI, "m", false), &Behavior{OutputSchema: riskSchema})
		if ae == nil || ae.Status != 400 || !strings.Contains(ae.Message, "structured_output.max_schema_properties") {
			t.Fatalf("engine with max 1 property, built before the other: %v, want 400 naming max_schema_properties", ae)
		}
		if got := narrow.st.Schemas.Limits(); got.MaxProperties != 1 || got.MaxConcurrentCompiles != 1 {
			t.Errorf("narrow engine's limits %+v after the wide one was built, want MaxProperties 1 and 1 compile slot", got)
		}
	})
}
