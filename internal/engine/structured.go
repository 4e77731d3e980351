package engine

import (
	"context"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// StructuredOptions tune structured-output handling (structured.Settings, built from structured.Config).
type StructuredOptions = structured.Settings

// outputSpec is a call's output contract (structured.Spec).
type outputSpec = structured.Spec

// askSchema returns req asking ep's model for the call's contract in the
// form ep takes (structured.Spec.Ask), and whether that is the forced
// output tool (whose call is folded back into text).
func (x *exec) askSchema(req *llm.Request, ep *endpoint, kind policy.AttemptKind) (*llm.Request, bool) {
	t := structured.Target{Mode: ep.StructuredOutputs, JSONMode: wire.For(ep.Format).JSONMode()}
	return x.spec.Ask(req, t, kind.String(), x.e.structOpts.RelaxedStreams)
}

// StructuredMetrics returns the structured-output counters.
func (e *Engine) StructuredMetrics() *structured.Metrics { return e.smetrics }

// structuredStage is the structured-output stage (structured.NewStage)
// over this engine's calls: its part goes into the call's record, the
// contract it sends upstream into the call's exec, and a re-ask's answer
// that replaced the first is credited to the re-ask's endpoint.
func (e *Engine) structuredStage() pipeline.Stage {
	return structured.NewStage(e.structOpts, e.schemas, e.smetrics, structured.Hooks{
		Record: func(pc *pipeline.Call, p *structured.Part) {
			c := callOf(pc)
			rec := &c.rec
			if c.structured == nil {
				// Before the attempts: what they ask for upstream.
				c.structured, c.x.spec = p, p.Upstream
				rec.AddStructured().Contract = p.Trace
			}
			st := rec.Structured
			st.Repairs, st.Reasked, st.Violation = p.Repairs, p.Reasked, p.Violation
			if p.Replaced {
				c.reasked, c.served = c.reask.ep, c.reask.ep
			}
		},
		Answers:    func(pc *pipeline.Call) bool { return callOf(pc).rec.Stage == StageFull },
		Legacy:     func(pc *pipeline.Call) bool { return callOf(pc).x.legacy },
		OutputTool: func(pc *pipeline.Call) bool { c := callOf(pc); return c.relay != nil && c.relay.legs.cur.tool },
		Reasker: func(pc *pipeline.Call) structured.Reasker {
			c := callOf(pc)
			c.reask = &reasker{c: c}
			return c.reask
		},
		Buffered: func(pc *pipeline.Call, resp *llm.Response, err error) {
			c := callOf(pc)
			if err != nil {
				c.rec.Response = nil // a refused answer is not what the client got
				return
			}
			c.rec.Usage = resp.Usage
		},
		Fused: func(pc *pipeline.Call) bool { return callOf(pc).fused },
	})
}

// reasker sends a re-ask as one more attempt of c (structured.Reasker):
// when the attempt and retry budgets allow, up a tier when the alias
// escalates. ep is the endpoint that answered it.
type reasker struct {
	c  *callState
	ep *endpoint
}

func (r *reasker) Reask(ctx context.Context, rq *llm.Request) (*pipeline.Answer, bool) {
	x := r.c.x
	if x.TakeRetry() != nil {
		return nil, false
	}
	r.c.escalate()
	a, err := x.run(ctx, rq, policy.AttemptReask)
	if err != nil {
		return nil, true
	}
	a.settle(nil)
	a.release()
	r2 := a.res.Response
	if r2 == nil {
		return nil, true
	}
	if a.tool {
		translate.FoldOutputTool(r2)
	}
	x.rec.Usage.OutputTokens += r2.Usage.OutputTokens
	r.ep = a.ep
	return &pipeline.Answer{Response: r2, Endpoint: a.ep.Endpoint}, true
}

// synthesize turns a complete answer back into stream events
// (structured.Synthesize).
func synthesize(resp *llm.Response, chunk int) []*llm.Event {
	return structured.Synthesize(resp, chunk)
}

// cutUTF8 cuts s to at most n bytes, never inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
