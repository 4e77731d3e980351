package engine

import (
	"context"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// StructuredOptions tune structured-output handling (structured.Settings, built from structured.Config).
type StructuredOptions = structured.Settings

// StructuredMetrics returns the structured-output counters.
func (e *Engine) StructuredMetrics() *structured.Metrics { return e.smetrics }

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
	a, err := x.Run(ctx, rq, policy.AttemptReask)
	if err != nil {
		return nil, true
	}
	a.Succeeded()
	r2 := a.Result().Response
	if r2 == nil {
		return nil, true
	}
	if a.Tool() {
		translate.FoldOutputTool(r2)
	}
	x.Record().Usage.OutputTokens += r2.Usage.OutputTokens
	r.ep = a.Endpoint()
	return &pipeline.Answer{Response: r2, Endpoint: r.ep.Endpoint}, true
}
