package structured

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// scriptedReasker is a fake attempt path for re-asks: it refuses when
// denied (the budgets), else answers with answer (nil: the attempt failed).
type scriptedReasker struct {
	denied bool
	answer *llm.Response
	ep     *provider.Endpoint
	got    []*llm.Request
}

func (r *scriptedReasker) Reask(_ context.Context, req *llm.Request) (*pipeline.Answer, bool) {
	if r.denied {
		return nil, false
	}
	r.got = append(r.got, req)
	if r.answer == nil {
		return nil, true
	}
	return &pipeline.Answer{Response: r.answer, Endpoint: r.ep}, true
}

func textResponse(text string, stop llm.StopReason) *llm.Response {
	return &llm.Response{ID: "r", Content: []llm.Block{{Type: llm.BlockText, Text: text}}, StopReason: stop}
}

const pointSchema = `{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}},"required":["x","y"]}`

func pointSpec(t *testing.T) *Spec {
	t.Helper()
	return &Spec{Schema: mustCompile(t, pointSchema), Raw: json.RawMessage(pointSchema), Source: "response_format.json_schema"}
}

func userRequest(text string) *llm.Request {
	return &llm.Request{Model: "m", Stream: true, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}},
		{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "{"}}}}}
}

// checkCase is one TestCheck case.
type checkCase struct {
	name   string
	cfg    Config
	spec   func(*Spec)
	answer *llm.Response
	reask  scriptedReasker
	// want
	text      string // the delivered answer's text
	err       string // a substring of the error, "" for none
	reasks    int
	reasked   bool
	violation bool
	repairs   []string
}

func TestCheck(t *testing.T) {
	cases := []checkCase{
		{name: "valid as received", answer: textResponse(`{"x":1,"y":2}`, llm.StopEndTurn), text: `{"x":1,"y":2}`},
		{name: "repaired losslessly", answer: textResponse("```json\n{\"x\":1,\"y\":2}\n```", llm.StopEndTurn), text: `{"x":1,"y":2}`, repairs: []string{"extract"}},
		{name: "re-asked and fixed", answer: textResponse(`{"x":1}`, llm.StopEndTurn), reask: scriptedReasker{answer: textResponse(`{"x":1,"y":5}`, llm.StopEndTurn)},
			text: `{"x":1,"y":5}`, reasks: 1, reasked: true},
		{name: "re-ask invalid too: 502", answer: textResponse(`{"x":1}`, llm.StopEndTurn), reask: scriptedReasker{answer: textResponse(`{"y":1}`, llm.StopEndTurn)},
			err: "could not be repaired: (root): missing property 'x'", reasks: 1, reasked: true, violation: true},
		{name: "budget refuses the re-ask: 502", answer: textResponse(`{"x":1}`, llm.StopEndTurn), reask: scriptedReasker{denied: true},
			err: "(root): missing property 'y'", violation: true},
		{name: "re-ask attempt failed: 502", answer: textResponse(`{"x":1}`, llm.StopEndTurn),
			err: "missing property 'y'", reasks: 1, reasked: true, violation: true},
		{name: "cut by max_tokens: no re-ask, the answer as direct", answer: textResponse(`{"x":1,"y":`, llm.StopMaxTokens),
			text: `{"x":1,"y":`, violation: true},
		{name: "re-ask off", cfg: Config{DisableReask: true}, answer: textResponse(`{"x":1}`, llm.StopEndTurn), err: "missing property 'y'", violation: true},
		{name: "pass violations", cfg: Config{PassViolations: true}, answer: textResponse(`{"x":1}`, llm.StopEndTurn), reask: scriptedReasker{denied: true},
			text: `{"x":1}`, violation: true},
		{name: "JSON mode never fails", spec: func(sp *Spec) { sp.JSONMode = true }, answer: textResponse(`not json`, llm.StopEndTurn), reask: scriptedReasker{denied: true},
			text: `not json`, violation: true},
		{name: "implied never fails", spec: func(sp *Spec) { sp.Implied = &Implied{Sentence: "Reply in JSON"} }, answer: textResponse(`{"x":1}`, llm.StopEndTurn),
			reask: scriptedReasker{denied: true}, text: `{"x":1}`, violation: true},
		{name: "implied strict fails", cfg: Config{StrictImplied: true}, spec: func(sp *Spec) { sp.Implied = &Implied{Sentence: "Reply in JSON"} },
			answer: textResponse(`{"x":1}`, llm.StopEndTurn), reask: scriptedReasker{denied: true}, err: "missing property 'y'", violation: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp := pointSpec(t)
			if tc.spec != nil {
				tc.spec(sp)
			}
			part := &Part{Trace: sp.Trace()}
			m := &Metrics{}
			before := tc.answer.Text()
			in := &pipeline.Answer{Response: tc.answer}
			out, err := Check(context.Background(), tc.cfg, m, userRequest("a point please"), sp, in, part, &tc.reask)
			if tc.answer.Text() != before {
				t.Errorf("the answer given was modified: %q, was %q", tc.answer.Text(), before)
			}
			tc.assertOutcome(t, out, err, part)
			tc.assertCounts(t, part, m)
		})
	}
}

// assertOutcome checks the answer or error Check returned.
func (tc *checkCase) assertOutcome(t *testing.T, out *pipeline.Answer, err error, part *Part) {
	t.Helper()
	switch {
	case tc.err != "":
		ae, ok := err.(*llm.APIError)
		if !ok || ae.Status != http.StatusBadGateway || ae.MeshCode != llm.MeshSchemaViolation || !strings.Contains(ae.Message, tc.err) {
			t.Fatalf("err = %v, want a 502 MESH_SCHEMA_VIOLATION containing %q", err, tc.err)
		}
		if ae.MeshHeaders["X-Mesh-Schema"] != part.Trace.Source {
			t.Errorf("X-Mesh-Schema %q, want %q", ae.MeshHeaders["X-Mesh-Schema"], part.Trace.Source)
		}
	case err != nil:
		t.Fatalf("err = %v", err)
	case out.Response.Text() != tc.text:
		t.Errorf("text %q, want %q", out.Response.Text(), tc.text)
	}
}

// assertCounts checks what Check recorded and counted, and the re-asks it
// sent.
func (tc *checkCase) assertCounts(t *testing.T, part *Part, m *Metrics) {
	t.Helper()
	if len(tc.reask.got) != tc.reasks || part.Reasked != tc.reasked || part.Violation != tc.violation {
		t.Errorf("re-asks %d reasked %v violation %v, want %d %v %v", len(tc.reask.got), part.Reasked, part.Violation, tc.reasks, tc.reasked, tc.violation)
	}
	if strings.Join(part.Repairs, ",") != strings.Join(tc.repairs, ",") {
		t.Errorf("repairs %v, want %v", part.Repairs, tc.repairs)
	}
	if tc.violation != (part.Trace.InvalidAnswer != "") && !tc.reasked {
		t.Errorf("invalid answer kept %q with violation %v", part.Trace.InvalidAnswer, tc.violation)
	}
	if got := m.Failed.Load(); (got == 1) != tc.violation {
		t.Errorf("Failed counted %d, violation %v", got, tc.violation)
	}
	if got := m.Reasked.Load(); (got == 1) != tc.reasked {
		t.Errorf("Reasked counted %d, want %v", got, tc.reasked)
	}
	for _, rq := range tc.reask.got {
		if rq.Stream {
			t.Error("a re-ask streams")
		}
		if n := len(rq.Messages); n != 3 || rq.Messages[1].Text() != `{"x":1}` || !strings.Contains(rq.Messages[2].Text(), "missing property 'y'") {
			t.Errorf("re-ask messages %+v: want the prompt without its prefill, the invalid answer and the complaints", rq.Messages)
		}
	}
}

// A forced tool that was not called is said so in the trace and the
// re-ask, and a repaired tool input replaces the input of a copy.
func TestCheckForcedTool(t *testing.T) {
	sp := pointSpec(t)
	sp.Tool, sp.Source = "point", "forced_tool"
	part := &Part{Trace: sp.Trace()}
	r := &scriptedReasker{answer: &llm.Response{Content: []llm.Block{{Type: llm.BlockToolUse, Name: "point", Input: json.RawMessage(`{"x":1,"y":2,}`)}}}}
	out, err := Check(context.Background(), Config{}, &Metrics{}, userRequest("a point"), sp, &pipeline.Answer{Response: textResponse("I would rather not.", llm.StopEndTurn)}, part, r)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out.Response.Content[0].Input); got != `{"x":1,"y":2}` {
		t.Errorf("tool input %s, want the trailing comma removed", got)
	}
	if string(r.answer.Content[0].Input) != `{"x":1,"y":2,}` {
		t.Error("the re-ask's answer was modified in place")
	}
	if part.Trace.InvalidAnswer != "(no point call)" {
		t.Errorf("invalid answer %q", part.Trace.InvalidAnswer)
	}
	if p := r.got[0].Messages[2].Text(); !strings.HasPrefix(p, "Your point call had invalid input.") {
		t.Errorf("re-ask prompt %q", p)
	}
}

// The kept invalid answer is cut at 4 KiB, never inside a character.
func TestCheckInvalidAnswerCut(t *testing.T) {
	sp := pointSpec(t)
	part := &Part{Trace: sp.Trace()}
	long := strings.Repeat("é", 3000) // 6,000 bytes
	Check(context.Background(), Config{DisableReask: true}, &Metrics{}, userRequest("x"), sp, &pipeline.Answer{Response: textResponse(long, llm.StopEndTurn)}, part, &scriptedReasker{})
	if got := part.Trace.InvalidAnswer; len(got) != maxInvalidAnswer || !strings.HasPrefix(long, got) {
		t.Errorf("kept %d bytes, want %d of the answer", len(got), maxInvalidAnswer)
	}
	if got := cutUTF8("aé", 2); got != "a" {
		t.Errorf("cutUTF8 = %q, want %q", got, "a")
	}
}
