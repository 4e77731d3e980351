package engine

import (
	"github.com/keelmesh/keel/internal/attempt"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
)

// The attempt lifecycle is package attempt's (the call's attempts through
// the policy chain, booking, hedging, settling, the stream relay and its
// continuations and races); the engine builds its Runner once, over one
// Deps, and starts an Exec per admitted call on the call's route.

// exec is one call's attempts; relay a streamed call's relay.
type (
	exec  = attempt.Exec
	relay = attempt.Relay
)

// newRunner is the engine's attempt lifecycle, the retry policy retry
// folded into its chain.
func (e *Engine) newRunner(retry *policy.Retry) *attempt.Runner {
	d := attempt.Deps{Client: e.client, Now: e.now, Rand: e.rnd, Retry: retry, MaxAttempts: e.maxAttempts,
		Hedge: e.hedge, HedgingOff: &e.hedgingOff, RecoveryOff: &e.recoveryOff, SlowStreamOff: e.slowStreamOff, SlowStream: e.slowStream, Races: e.races,
		CacheRoute: e.cacheRt, Prices: e.prices, MarkDown: e.markDown,
		Calibrations: e.cals, ParamPolicy: e.paramPol, NormalizationOff: e.normOff, RelaxedStreams: e.st.RelaxedStreams,
		Deadline: errDeadline}
	// Nil when nobody listens: the attempts build no event then.
	if e.events.attemptObs != nil {
		d.OnAttempt = e.events.attempt
	}
	if e.events.hedgeObs != nil {
		d.OnHedge = e.events.hedge
	}
	return attempt.New(d)
}

// newExec starts a call's attempts on rs.
func (e *Engine) newExec(rs *routeState, req *llm.Request, call Call, rec *Record) *exec {
	return e.attempts.NewExec(rs.route(), req, attempt.Call{RequestID: call.RequestID, Header: call.ClientHeader, Behavior: call.Behavior}, rec)
}

// route is rs as the attempts run on it.
func (rs *routeState) route() attempt.Route {
	return attempt.Route{Name: rs.name, Translation: rs.translation, Cands: rs.cands, Strategy: rs.strategy, Retries: rs.retries, Hedges: rs.hedges, Key: rs}
}

// The call as its stream's relay sees it (attempt.Streamed).

func (c *callState) Reasked() *endpoint { return c.reasked }
func (c *callState) Ended(served *endpoint, ae *llm.APIError) {
	c.served, c.err = served, ae
}
