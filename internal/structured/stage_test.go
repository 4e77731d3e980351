package structured

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// fakeChain is the rest of the chain below the stage: it answers with resp
// (or resp re-emitted as a stream when the call streams), counting calls
// and closes, and records what the stage's hooks were told.
type fakeChain struct {
	resp    *llm.Response
	events  []*llm.Event // a stream's events, when set (else resp's)
	ep      *provider.Endpoint
	header  http.Header
	calls   int
	closes  int
	answers bool // Hooks.Answers
	legacy  bool
	tool    bool
	fused   bool
	reask   scriptedReasker
	parts   int
	part    *Part
	buf     *llm.Response
	bufErr  error
	upWhile *Spec // Part.Upstream as the next handler saw it
}

type countClose struct {
	pipeline.Events
	n *int
}

func (c countClose) Close() error { *c.n++; return c.Events.Close() }

func (f *fakeChain) Serve(_ context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
	f.calls++
	if f.part != nil {
		f.upWhile = f.part.Upstream
	}
	ans := &pipeline.Answer{Endpoint: f.ep, Header: f.header}
	if !c.Request.Stream {
		ans.Response = f.resp
		return ans, nil
	}
	evs := f.events
	if evs == nil {
		evs = Synthesize(f.resp, 5)
	}
	ans.Events = countClose{pipeline.Slice(evs), &f.closes}
	return ans, nil
}

func (f *fakeChain) hooks() Hooks {
	return Hooks{
		Record:     func(_ *pipeline.Call, p *Part) { f.parts++; f.part = p },
		Answers:    func(*pipeline.Call) bool { return f.answers },
		Legacy:     func(*pipeline.Call) bool { return f.legacy },
		OutputTool: func(*pipeline.Call) bool { return f.tool },
		Reasker:    func(*pipeline.Call) Reasker { return &f.reask },
		Buffered:   func(_ *pipeline.Call, resp *llm.Response, err error) { f.buf, f.bufErr = resp, err },
		Fused:      func(*pipeline.Call) bool { return f.fused },
	}
}

func serveStage(t *testing.T, cfg Config, f *fakeChain, stream bool, behavior json.RawMessage) (*pipeline.Answer, error, *Metrics) {
	t.Helper()
	m := &Metrics{}
	h := pipeline.Chain(f, NewStage(cfg, NewCompiler(cfg.Limits), m, f.hooks()))
	req := userRequest("a point please")
	req.Stream = stream
	c := &pipeline.Call{Request: req, ID: "t"}
	if behavior != nil {
		c.Behavior = &pipeline.Behavior{OutputSchema: behavior}
	}
	ans, err := h.Serve(context.Background(), c)
	return ans, err, m
}

// readAll reads a stream's text and closes it.
func readAll(t *testing.T, ev pipeline.Events) string {
	t.Helper()
	var a llm.Accumulator
	for {
		e, err := ev.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		a.Add(e)
	}
	ev.Close()
	return a.Response().Text()
}

var (
	epA = &provider.Endpoint{ID: "a"}
	epB = &provider.Endpoint{ID: "b"}
)

// No contract: untouched, nothing recorded.
func TestStageNoContract(t *testing.T) {
	f := &fakeChain{resp: textResponse("prose", llm.StopEndTurn), answers: true}
	ans, err, _ := serveStage(t, Config{}, f, false, nil)
	if err != nil || ans.Response != f.resp || f.parts != 0 || f.calls != 1 {
		t.Fatalf("answer %v err %v parts %d calls %d", ans, err, f.parts, f.calls)
	}
}

// Below the full stage: untouched.
func TestStageBelowFullStage(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse("prose", llm.StopEndTurn)}
	ans, err, _ := serveStage(t, Config{}, f, false, schema)
	if err != nil || ans.Response != f.resp || f.parts != 0 {
		t.Fatalf("answer %v err %v parts %d", ans, err, f.parts)
	}
}

// A schema that does not compile is the call's 400, next not called.
func TestStageBadSchema(t *testing.T) {
	f := &fakeChain{resp: textResponse("{}", llm.StopEndTurn), answers: true}
	_, err, _ := serveStage(t, Config{}, f, false, json.RawMessage(`{"type":12}`))
	if ae, ok := err.(*llm.APIError); !ok || ae.Status != http.StatusBadRequest || f.calls != 0 {
		t.Fatalf("err %v, calls %d; want a 400 and no call", err, f.calls)
	}
}

// Repaired, sent upstream, header kept.
func TestStageRepairs(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse("```json\n{\"x\":1,\"y\":2}\n```", llm.StopEndTurn), answers: true, ep: epA, header: http.Header{"X-Up": {"1"}}}
	ans, err, m := serveStage(t, Config{}, f, false, schema)
	if err != nil || ans.Response.Text() != `{"x":1,"y":2}` || ans.Endpoint != epA || ans.Header.Get("X-Up") != "1" {
		t.Fatalf("answer %+v err %v", ans, err)
	}
	if f.upWhile == nil || f.part.Trace.Origin != "mesh_behavior.output_schema" || strings.Join(f.part.Repairs, ",") != "extract" {
		t.Errorf("part %+v (upstream while below: %v)", f.part, f.upWhile != nil)
	}
	if m.Repaired.Load() != 1 {
		t.Errorf("repaired counted %d, want 1", m.Repaired.Load())
	}
}

// Legacy path: checked, never sent upstream.
func TestStageLegacyPath(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse(`{"x":1,"y":2}`, llm.StopEndTurn), answers: true, legacy: true}
	if _, err, _ := serveStage(t, Config{}, f, false, schema); err != nil || f.upWhile != nil || f.part == nil {
		t.Fatalf("err %v upstream %v part %v", err, f.upWhile, f.part)
	}
}

// Re-asked: the re-ask's answer, credited to its endpoint.
func TestStageReasked(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse(`{"x":1}`, llm.StopEndTurn), answers: true, ep: epA, header: http.Header{"X-Up": {"1"}}}
	f.reask.answer = textResponse(`{"x":1,"y":3}`, llm.StopEndTurn)
	f.reask.ep = epB
	ans, err, _ := serveStage(t, Config{}, f, false, schema)
	if err != nil || ans.Response.Text() != `{"x":1,"y":3}` || ans.Endpoint != epB || ans.Header.Get("X-Up") != "1" {
		t.Fatalf("answer %+v err %v", ans, err)
	}
	if !f.part.Reasked || !f.part.Replaced || f.part.Violation {
		t.Errorf("part %+v", f.part)
	}
}

// Violation: 502.
func TestStageViolation(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse(`{"x":1}`, llm.StopEndTurn), answers: true, reask: scriptedReasker{denied: true}}
	_, err, _ := serveStage(t, Config{}, f, false, schema)
	if ae, ok := err.(*llm.APIError); !ok || ae.MeshCode != llm.MeshSchemaViolation || !f.part.Violation {
		t.Fatalf("err %v part %+v", err, f.part)
	}
}

// A fused answer passes untouched.
func TestStageFusedAnswer(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	f := &fakeChain{resp: textResponse(`not json`, llm.StopEndTurn), answers: true, fused: true}
	ans, err, _ := serveStage(t, Config{}, f, false, schema)
	if err != nil || ans.Response != f.resp || f.reask.got != nil {
		t.Fatalf("answer %v err %v", ans, err)
	}
}

func TestStageStrictStream(t *testing.T) {
	schema := json.RawMessage(pointSchema)
	t.Run("buffered, repaired, replayed; the source closed once", func(t *testing.T) {
		resp := textResponse("Sure: {\"x\":1,\"y\":2,}", llm.StopEndTurn)
		resp.Usage = llm.Usage{InputTokens: 7, OutputTokens: 5}
		f := &fakeChain{resp: resp, answers: true, ep: epA}
		ans, err, _ := serveStage(t, Config{}, f, true, schema)
		if err != nil {
			t.Fatal(err)
		}
		if f.closes != 1 || f.buf == nil || f.buf.Usage.OutputTokens != 5 {
			t.Errorf("source closed %d times, buffered %+v", f.closes, f.buf)
		}
		if !pipeline.Ready(ans.Events) || ans.Endpoint != epA {
			t.Error("the replay is not ready or lost its endpoint")
		}
		if got := readAll(t, ans.Events); got != `{"x":1,"y":2}` {
			t.Errorf("replayed %q", got)
		}
		if f.closes != 1 {
			t.Errorf("source closed %d times after the replay was closed, want 1", f.closes)
		}
	})
	t.Run("a forced output tool is folded into text", func(t *testing.T) {
		resp := &llm.Response{Content: []llm.Block{{Type: llm.BlockToolUse, ID: "t1", Name: "keel_output", Input: json.RawMessage(`{"x":1,"y":2}`)}}, StopReason: llm.StopToolUse}
		f := &fakeChain{resp: resp, answers: true, tool: true}
		ans, err, _ := serveStage(t, Config{RelaxedStreams: true}, f, true, schema)
		if err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, ans.Events); got != `{"x":1,"y":2}` {
			t.Errorf("replayed %q, want the tool input as text", got)
		}
	})
	t.Run("an upstream failure is the call's error", func(t *testing.T) {
		fail := &llm.APIError{Status: 529, Type: llm.ErrOverloaded, Message: "overloaded"}
		f := &fakeChain{answers: true, events: []*llm.Event{{Type: llm.EventMessageStart, Message: &llm.Response{}}, {Type: llm.EventError, Err: fail}}}
		_, err, _ := serveStage(t, Config{}, f, true, schema)
		if err != fail || f.closes != 1 || f.bufErr != fail {
			t.Fatalf("err %v closes %d buffered err %v", err, f.closes, f.bufErr)
		}
	})
	t.Run("a violation is the call's error, the source closed", func(t *testing.T) {
		f := &fakeChain{resp: textResponse(`{"x":1}`, llm.StopEndTurn), answers: true, reask: scriptedReasker{denied: true}}
		_, err, _ := serveStage(t, Config{}, f, true, schema)
		if ae, ok := err.(*llm.APIError); !ok || ae.MeshCode != llm.MeshSchemaViolation || f.closes != 1 || f.bufErr != err {
			t.Fatalf("err %v closes %d", err, f.closes)
		}
	})
}

func TestStageRelaxedStream(t *testing.T) {
	for _, tc := range []struct {
		name  string
		text  string
		valid bool
	}{
		{"valid", `{"x":1,"y":2}`, true},
		{"invalid", `{"x":1}`, false},
		{"repairable is still a violation: the client has it as sent", "```\n{\"x\":1,\"y\":2}\n```", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeChain{resp: textResponse(tc.text, llm.StopEndTurn), answers: true}
			ans, err, m := serveStage(t, Config{RelaxedStreams: true}, f, true, json.RawMessage(pointSchema))
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := f.part.SchemaValid(); ok {
				t.Error("SchemaValid known before the end")
			}
			if got := readAll(t, ans.Events); got != tc.text {
				t.Errorf("passed through %q, want %q", got, tc.text)
			}
			valid, ok := f.part.SchemaValid()
			if !ok || valid != tc.valid || f.closes != 1 {
				t.Errorf("SchemaValid %v %v closes %d, want %v true 1", valid, ok, f.closes, tc.valid)
			}
			if got := m.Failed.Load() == 1; got == tc.valid {
				t.Errorf("failed counted %d", m.Failed.Load())
			}
		})
	}
}
