package structured

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Hooks are what the structured-output stage needs of the rest of the
// chain, supplied by its builder (the engine). Every func is required.
type Hooks struct {
	// Record is told the call's part each time the stage changes it, so
	// the attempts below (which ask for Part.Upstream) and the record see
	// it during the call.
	Record func(c *pipeline.Call, p *Part)
	// Answers reports whether the call's answers may be checked and
	// changed (the rollout's full stage).
	Answers func(c *pipeline.Call) bool
	// Legacy reports whether the call takes the legacy path: its contract
	// is then checked but never sent upstream.
	Legacy func(c *pipeline.Call) bool
	// OutputTool reports whether the call's answer came as the forced
	// output tool (JSON mode emulated on an endpoint without one), whose
	// call must be folded into text.
	OutputTool func(c *pipeline.Call) bool
	// Reasker is the call's re-ask path.
	Reasker func(c *pipeline.Call) Reasker
	// Buffered is told, after the stage buffered a stream and closed it,
	// what it delivers in its place: the answer, or the error.
	Buffered func(c *pipeline.Call, resp *llm.Response, err error)
	// Fused reports whether the answer from below was made by fusing
	// fragment answers, which fusion checked: it passes untouched.
	Fused func(c *pipeline.Call) bool
}

// synthChunk is the size of the deltas a buffered answer is re-emitted in.
const synthChunk = 64

// NewStage returns the structured-output stage under cfg: it finds the
// call's output contract (SpecFor, compiling with comp; a schema the
// client gave that does not compile is the call's 400), and at the
// rollout's full stage checks the answer that comes back (Check; m counts
// the outcomes): a response directly; a stream buffered whole, checked and
// replayed (strict, the default), or passed through and checked at its end
// (relaxed), unless it came as the forced output tool, which only a
// buffered answer can fold into text. The stage is safe for concurrent
// use; it calls next once.
func NewStage(cfg Config, comp *Compiler, m *Metrics, h Hooks) pipeline.Stage {
	return func(next pipeline.Handler) pipeline.Handler {
		return &stage{cfg: cfg, comp: comp, m: m, h: h, next: next}
	}
}

type stage struct {
	cfg  Config
	comp *Compiler
	m    *Metrics
	h    Hooks
	next pipeline.Handler
}

func (s *stage) Serve(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
	var schema json.RawMessage
	if c.Behavior != nil {
		schema = c.Behavior.OutputSchema
	}
	sp, err := SpecFor(ctx, s.comp, s.cfg, c.Request, schema)
	if err != nil {
		return nil, err
	}
	if sp == nil || !s.h.Answers(c) {
		// Answers pass untouched below the full stage.
		return s.next.Serve(ctx, c)
	}
	part := &Part{Spec: sp, Trace: sp.Trace()}
	if !s.h.Legacy(c) && sp.Upstream(c.Request) {
		part.Upstream = sp
	}
	s.h.Record(c, part)
	ans, err := s.next.Serve(ctx, c)
	if err != nil || s.h.Fused(c) {
		return ans, err
	}
	if ans.Events == nil {
		return s.check(ctx, c, sp, ans, part)
	}
	if s.cfg.RelaxedStreams && !s.h.OutputTool(c) {
		part.Relaxed = sp
		s.h.Record(c, part)
		out := *ans
		out.Events = s.relaxed(c, sp, ans.Events, part)
		return &out, nil
	}
	return s.strict(ctx, c, sp, ans, part)
}

// check checks a response and records what it found. The answer keeps
// ans's upstream header; a re-ask's answer is credited to its endpoint.
func (s *stage) check(ctx context.Context, c *pipeline.Call, sp *Spec, ans *pipeline.Answer, part *Part) (*pipeline.Answer, error) {
	out, err := Check(ctx, s.cfg, s.m, c.Request, sp, ans, part, s.h.Reasker(c))
	part.Replaced = err == nil && part.Reasked && out != ans
	s.h.Record(c, part)
	if err != nil || out == ans {
		return out, err
	}
	kept := *ans
	kept.Response = out.Response
	if part.Replaced {
		kept.Endpoint = out.Endpoint
	}
	return &kept, nil
}

// strict buffers the whole stream, checks the answer (re-asking once if
// needed), closes the stream and replays the answer to deliver.
func (s *stage) strict(ctx context.Context, c *pipeline.Call, sp *Spec, ans *pipeline.Answer, part *Part) (*pipeline.Answer, error) {
	resp, err := Accumulate(ans.Events)
	var out *pipeline.Answer
	if err == nil {
		if s.h.OutputTool(c) {
			translate.FoldOutputTool(resp)
		}
		in := *ans
		in.Events, in.Response = nil, resp
		out, err = s.check(ctx, c, sp, &in, part)
	}
	ans.Events.Close()
	if err != nil {
		s.h.Buffered(c, nil, err)
		return nil, err
	}
	s.h.Buffered(c, out.Response, nil)
	replay := *out
	replay.Events, replay.Response = pipeline.Slice(Synthesize(out.Response, synthChunk)), nil
	return &replay, nil
}

// relaxed passes src through and checks, at message_stop, the text (or,
// for a forced tool, the tool-input JSON) the client received; a repair
// that would have changed it can no longer be applied, so it is a
// violation too.
func (s *stage) relaxed(c *pipeline.Call, sp *Spec, src pipeline.Events, part *Part) pipeline.Events {
	v := NewStreamValidator(sp.Schema, Options{})
	return pipeline.Tap(src, func(ev *llm.Event) {
		switch {
		case ev.Type == llm.EventBlockDelta && ev.DeltaType == llm.DeltaText,
			ev.Type == llm.EventBlockDelta && ev.DeltaType == llm.DeltaInputJSON && sp.Tool != "":
			v.Add(ev.Delta)
		case ev.Type == llm.EventMessageStop:
			res := v.Finish()
			s.m.Observe(res)
			if !res.Valid || res.Changed {
				part.Violation = true
				s.m.Failed.Add(1)
			}
			part.Checked = true
			s.h.Record(c, part)
		}
	})
}

// SchemaValid reports, for a relaxed stream after its end, whether the
// answer the client received was valid; ok is false when no relaxed check
// applied or the stream has not ended.
func (p *Part) SchemaValid() (valid, ok bool) {
	if p == nil || p.Relaxed == nil || !p.Checked {
		return false, false
	}
	return !p.Violation, true
}

// Accumulate reads ev to its end and builds the complete answer; an error
// event ends it with the event's error (a 502 when it carries none). It
// does not close ev.
func Accumulate(ev pipeline.Events) (*llm.Response, error) {
	var a llm.Accumulator
	for {
		e, err := ev.Next()
		if err != nil {
			break
		}
		if e.Type == llm.EventError {
			if e.Err == nil {
				return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: "upstream stream failed"}
			}
			return nil, e.Err
		}
		a.Add(e)
	}
	return a.Response(), nil
}

// Synthesize turns a complete answer back into stream events, cutting text
// and tool input into deltas of about chunk bytes (never inside a UTF-8
// character), so the reassembled answer is exactly resp.
func Synthesize(resp *llm.Response, chunk int) []*llm.Event {
	start := *resp
	start.Content = nil
	start.Usage = llm.Usage{InputTokens: resp.Usage.InputTokens, CacheReadTokens: resp.Usage.CacheReadTokens, CacheWriteTokens: resp.Usage.CacheWriteTokens}
	evs := []*llm.Event{{Type: llm.EventMessageStart, Message: &start}}
	for i, b := range resp.Content {
		startBlock := b
		var dt llm.DeltaType
		var body string
		switch b.Type {
		case llm.BlockText:
			startBlock.Text, dt, body = "", llm.DeltaText, b.Text
		case llm.BlockToolUse:
			startBlock.Input, dt, body = json.RawMessage("{}"), llm.DeltaInputJSON, string(b.Input)
		case llm.BlockThinking:
			startBlock.Thinking, dt, body = "", llm.DeltaThinking, b.Thinking
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStart, Index: i, Block: &startBlock})
		for _, piece := range Deltas([]byte(body), chunk) {
			evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: dt, Delta: piece})
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStop, Index: i})
	}
	u := resp.Usage
	evs = append(evs, &llm.Event{Type: llm.EventMessageDelta, StopReason: resp.StopReason, StopSequence: resp.StopSequence, Usage: &u},
		&llm.Event{Type: llm.EventMessageStop})
	return evs
}
