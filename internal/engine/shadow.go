package engine

import (
	"context"

	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/shadow"
)

// Shadow traffic is a stage of internal/shadow (sampling, the worker
// pool, the comparison); the engine runs each shadow call below the
// client-facing stages (Engine.inner) and holds it to what a shadow may
// spend: it reads and writes no response cache, deposits into and draws
// from no retry or hedge budget, is never retried, hedged or continued
// (one attempt, failover to another endpoint included in "never"), and
// feeds neither the safety valve, nor key accounting, nor the request log,
// nor the per-call observers (RequestDone). Its attempts do feed the
// health and breakers of the endpoints they reach, and the attempt events:
// they are real traffic on those endpoints, and the router should know
// what it saw. Its cost is reported in ShadowResult.ShadowCost, apart from
// the client's.

// shadowStage is the pool's stage over the engine's routes and record;
// nil when no alias has a shadow.
func (e *Engine) shadowStage() pipeline.Stage {
	if e.shadows == nil {
		return nil
	}
	return e.shadows.Stage(func(model string) *shadow.Route { return e.shadowRoutes[model] },
		func(pc *pipeline.Call, p *shadow.Part) { callOf(pc).shadow = p })
}

// shadowFinish hands a finished client call to the pool.
func (e *Engine) shadowFinish(c *callState) {
	if e.shadows == nil {
		return
	}
	rec := &c.rec
	e.shadows.Finish(c.shadow, shadow.Primary{RequestID: rec.RequestID, Request: rec.Request, Response: rec.Response,
		Failed: rec.Err != nil, Model: rec.ServedModel, Cost: rec.Cost})
}

// runShadow runs a shadow call below the client-facing stages.
func (e *Engine) runShadow(ctx context.Context, pc *pipeline.Call, legacy bool) shadow.Ran {
	call := Call{RequestID: pc.ID, ClientHeader: pc.Header, Behavior: pc.Behavior, TraceParent: pc.TraceParent, KeyID: pc.KeyID, Team: pc.Team}
	c := e.newCall(pc.Request, call)
	c.rec.TraceParent = ""
	c.shadowRun, c.shadowLegacy = true, legacy
	_, err := e.inner.Serve(ctx, &c.pc)
	served := c.served
	if err != nil {
		served = nil
	}
	ran := shadow.Ran{Response: c.rec.Response, Took: e.now().Sub(c.rec.Start), Cost: e.callCost(&c.rec, served)}
	if served != nil {
		ran.Model = served.Model
	}
	if err != nil {
		ran.Err = asAPIError(err)
	}
	return ran
}

// DrainShadows waits until no shadow call is queued or running, or ctx
// ends. Calls that finish meanwhile may queue more.
func (e *Engine) DrainShadows(ctx context.Context) error {
	if e.shadows == nil {
		return nil
	}
	return e.shadows.Drain(ctx)
}
