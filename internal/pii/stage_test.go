package pii

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

const stageEmail = "alice.smith@example.com"

// emailFinder finds e-mail addresses by a small pattern.
var emailFinder = FinderFunc(func(_ context.Context, text string) ([]Match, error) {
	var ms []Match
	for _, ix := range regexp.MustCompile(`[a-z.]+@[a-z]+\.[a-z]+`).FindAllStringIndex(text, -1) {
		ms = append(ms, Match{Kind: Email, Start: ix[0], End: ix[1]})
	}
	return ms, nil
})

func userAsk(text string) *llm.Request {
	return &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
}

// fakeNext is the rest of the chain: it keeps the request it was given
// and answers with answer.
type fakeNext struct {
	got    *llm.Request
	calls  int
	answer func(req *llm.Request) *pipeline.Answer
}

func (f *fakeNext) Serve(_ context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
	f.calls++
	f.got = c.Request
	return f.answer(c.Request), nil
}

func newTestStage(t *testing.T, o Options, part **Part) pipeline.Stage {
	t.Helper()
	st, err := NewStage(o, Hooks{Record: func(_ *pipeline.Call, p Part) { *part = &p }})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestStageRedactsDownRestoresUp: the stages below get placeholders only
// (the caller's request untouched), the answer comes back with the values,
// and the record's part holds the report and the masked request.
func TestStageRedactsDownRestoresUp(t *testing.T) {
	var part *Part
	next := &fakeNext{answer: func(*llm.Request) *pipeline.Answer {
		return &pipeline.Answer{Response: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "Writing to [EMAIL_1] now."}}}}
	}}
	req := userAsk("Mail " + stageEmail + " please")
	ans, err := newTestStage(t, Options{Detector: emailFinder}, &part)(next).Serve(context.Background(), &pipeline.Call{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	if got := next.got.Messages[0].Text(); got != "Mail [EMAIL_1] please" {
		t.Fatalf("next got %q", got)
	}
	if req.Messages[0].Text() != "Mail "+stageEmail+" please" {
		t.Fatal("the caller's request was modified")
	}
	if got := ans.Response.Text(); got != "Writing to "+stageEmail+" now." {
		t.Fatalf("answer %q", got)
	}
	if part == nil || part.Report.Action != ActionRedact || len(part.Report.Findings) != 1 || part.Request != next.got {
		t.Fatalf("part %+v", part)
	}
}

// events is a stream below the stage.
type events struct {
	evs    []*llm.Event
	closed bool
}

func (e *events) Next() (*llm.Event, error) {
	if len(e.evs) == 0 {
		return nil, io.EOF
	}
	ev := e.evs[0]
	e.evs = e.evs[1:]
	return ev, nil
}
func (e *events) Close() error { e.closed = true; return nil }

func streamOf(blocks ...llm.Block) []*llm.Event {
	evs := []*llm.Event{{Type: llm.EventMessageStart, Message: &llm.Response{}}}
	for i, b := range blocks {
		start := b
		dt, body := llm.DeltaText, b.Text
		start.Text = ""
		if b.Type == llm.BlockToolUse {
			start.Input, dt, body = nil, llm.DeltaInputJSON, string(b.Input)
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStart, Index: i, Block: &start})
		for _, p := range pieces(body, 1) { // a byte per delta: every placeholder split
			evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: dt, Delta: p})
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStop, Index: i})
	}
	return append(evs, &llm.Event{Type: llm.EventMessageDelta, StopReason: "end_turn"}, &llm.Event{Type: llm.EventMessageStop})
}

// TestStageRestoresAcrossDeltas: a placeholder split over SSE deltas (one
// byte each) reaches the client whole and restored, in text and, escaped
// for JSON, in tool arguments; text held back at a block's end (a
// bracket that was no placeholder) is sent before its stop; closing the
// stage's stream closes the one below.
func TestStageRestoresAcrossDeltas(t *testing.T) {
	var part *Part
	below := &events{evs: streamOf(
		llm.Block{Type: llm.BlockText, Text: "To [EMAIL_1], ok [EMA"},
		llm.Block{Type: llm.BlockToolUse, ID: "t", Name: "send", Input: json.RawMessage(`{"to":"[EMAIL_1]"}`)},
	)}
	next := &fakeNext{answer: func(*llm.Request) *pipeline.Answer { return &pipeline.Answer{Events: below} }}
	req := userAsk("Mail " + stageEmail)
	req.Stream = true
	ans, err := newTestStage(t, Options{Detector: emailFinder}, &part)(next).Serve(context.Background(), &pipeline.Call{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	var text, input strings.Builder
	var order []llm.EventType
	for {
		ev, err := ans.Events.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		order = append(order, ev.Type)
		if ev.Type == llm.EventBlockDelta {
			if strings.Contains(ev.Delta, "[EMAIL_1]") || ev.Delta == "" {
				t.Fatalf("delta %q", ev.Delta)
			}
			if ev.Index == 0 {
				text.WriteString(ev.Delta)
			} else {
				input.WriteString(ev.Delta)
			}
		}
		if ev.Type == llm.EventBlockStop && ev.Index == 0 && !strings.HasSuffix(text.String(), "[EMA") {
			t.Fatalf("block 0 stopped before its held text was sent: %q", text.String())
		}
	}
	if got := text.String(); got != "To "+stageEmail+", ok [EMA" {
		t.Fatalf("text %q", got)
	}
	var in map[string]string
	if err := json.Unmarshal([]byte(input.String()), &in); err != nil || in["to"] != stageEmail {
		t.Fatalf("tool input %q: %v", input.String(), err)
	}
	if order[len(order)-1] != llm.EventMessageStop {
		t.Fatalf("last event %v", order[len(order)-1])
	}
	ans.Events.Close()
	if !below.closed {
		t.Fatal("closing the stage's stream left the one below open")
	}
}

// TestStageRefusals: block refuses with the values masked in the record;
// a failed detection fails closed (503) or, with fail_open, sends the
// request as it came and keeps none of it; a client may not weaken the
// route's action; next is never called on a refusal.
func TestStageRefusals(t *testing.T) {
	failing := FinderFunc(func(context.Context, string) ([]Match, error) { return nil, errors.New("down") })
	open := true
	for _, tc := range []struct {
		name   string
		o      Options
		b      *pipeline.Behavior
		status int
		code   string
		check  func(t *testing.T, p *Part, next *fakeNext, req *llm.Request)
	}{
		{name: "block", o: Options{Detector: emailFinder, Action: ActionBlock}, status: http.StatusBadRequest, code: llm.MeshPIIBlocked,
			check: func(t *testing.T, p *Part, _ *fakeNext, _ *llm.Request) {
				if p.Request == nil || strings.Contains(p.Request.Messages[0].Text(), stageEmail) || !strings.Contains(p.Request.Messages[0].Text(), "[EMAIL]") {
					t.Fatalf("record request %+v", p.Request)
				}
			}},
		{name: "fails closed", o: Options{Detector: failing}, status: http.StatusServiceUnavailable, code: llm.MeshPIIUnavailable,
			check: func(t *testing.T, p *Part, _ *fakeNext, _ *llm.Request) {
				if !p.Report.Failed || p.Report.RawUpstream || p.Request != nil {
					t.Fatalf("part %+v %+v", p, p.Report)
				}
			}},
		{name: "fail open", o: Options{Detector: failing, FailOpen: true},
			check: func(t *testing.T, p *Part, next *fakeNext, req *llm.Request) {
				if next.got != req || !p.Report.Failed || !p.Report.RawUpstream || p.Request != nil {
					t.Fatalf("next got the original: %v; part %+v %+v", next.got == req, p, p.Report)
				}
			}},
		{name: "weaker than the route", o: Options{Detector: emailFinder, Routes: map[string]Route{"m": {Action: ActionBlock}}},
			b: &pipeline.Behavior{PII: ActionRedact}, status: http.StatusBadRequest, code: llm.MeshBadRequest},
		{name: "detection off", o: Options{}, b: &pipeline.Behavior{PII: ActionMask}, status: http.StatusBadRequest, code: llm.MeshBadRequest},
		{name: "route off", o: Options{Detector: failing, Routes: map[string]Route{"m": {Action: ActionOff, FailOpen: &open}}},
			check: func(t *testing.T, p *Part, next *fakeNext, req *llm.Request) {
				if p != nil || next.got != req {
					t.Fatalf("an off route ran detection: part %+v", p)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var part *Part
			next := &fakeNext{answer: func(*llm.Request) *pipeline.Answer { return &pipeline.Answer{Response: &llm.Response{}} }}
			req := userAsk("Mail " + stageEmail)
			_, err := newTestStage(t, tc.o, &part)(next).Serve(context.Background(), &pipeline.Call{Request: req, Behavior: tc.b})
			if tc.status != 0 {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != tc.status || ae.MeshCode != tc.code || next.calls != 0 {
					t.Fatalf("err %v, next called %d times; want %d %s and no call", err, next.calls, tc.status, tc.code)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if tc.check != nil {
				tc.check(t, part, next, req)
			}
		})
	}
}
