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

// outputSpec is a call's output contract (structured.Spec).
type outputSpec = structured.Spec

// askSchema returns req asking ep's model for the call's contract in the
// form ep takes (structured.Spec.Ask), and whether that is the forced
// output tool (whose call is folded back into text).
func (x *exec) askSchema(req *llm.Request, ep *endpoint, kind policy.AttemptKind) (*llm.Request, bool) {
	t := structured.Target{Mode: ep.StructuredOutputs, JSONMode: wire.For(ep.Format).JSONMode()}
	return x.spec.Ask(req, t, kind.String(), x.e.st.RelaxedStreams)
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
