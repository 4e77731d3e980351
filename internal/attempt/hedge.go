package attempt

import (
	"time"

	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/policy"
)

// The hedge policy's view of the call (policy.HedgeCall): hedging itself,
// the race and its per-pass state, is policy.Hedge's.

// Hedgeable reports whether the pass t may be hedged.
func (x *Exec) Hedgeable(t *try) bool {
	return (t.pass.Kind == policy.AttemptPrimary || t.pass.Kind == policy.AttemptRetry) && x.mayHedge()
}

// mayHedge reports whether the call may hedge at all: hedging on, for the
// call too, not on the safety valve's plain path or a shadow, and a route
// of two endpoints or more.
func (x *Exec) mayHedge() bool {
	return !x.Legacy && !x.Shadow && !off(x.r.d.HedgingOff) && len(x.route.Cands) >= 2 &&
		(x.call.Behavior == nil || x.call.Behavior.Hedge == nil || *x.call.Behavior.Hedge)
}

// Hedging hands the pass t its hedger (nil when the pass is over).
func (x *Exec) Hedging(t *try, hg policy.Booker[*Attempt]) { t.hg = hg }

// HedgeTry is the pass a hedge of t runs: to an endpoint not yet tried
// while one is available, else to any available endpoint, one already in
// use included. A slow call is mostly a property of that request (a busy
// replica behind the endpoint, a long queue it landed in), not of the
// endpoint: a fresh request to the same endpoint is a fresh draw from its
// latency distribution (Dean and Barroso, "The Tail at Scale", CACM 2013:
// hedged requests go to any replica). So a two-endpoint route can hedge a
// second time when both of its first attempts are slow.
func (x *Exec) HedgeTry(t *try, hg policy.Booker[*Attempt]) *try {
	return &try{req: t.req, pass: policy.Pass{Kind: policy.AttemptHedge, AllowTried: !x.HasUntried(x.r.d.Now())}, hg: hg}
}

// HedgeDelay is the adaptive hedge delay for the first attempt a: its
// endpoint's live p95 (time to first token for a stream), within the
// configured bounds.
func (x *Exec) HedgeDelay(a *Attempt) time.Duration {
	return x.r.d.Hedge.Delay(a.ep.Health.P95(x.req.Stream))
}

// BookHedge reserves a hedge: room in the call's attempts, an endpoint
// available (untried or not: see HedgeTry), a token of the route's hedge
// budget, and a call not ended; it counts the hedge on the record.
func (x *Exec) BookHedge() bool { return x.book(x.route.Hedges.TryWithdraw) }

// book is BookHedge with budget the call-count budget drawn on (a
// slow-stream race draws on its own: slowstream.go).
func (x *Exec) book(budget func() bool) bool {
	x.mu.Lock()
	room := x.attempts < x.r.d.MaxAttempts
	x.mu.Unlock()
	// coldHedge: the dollar budget pays its cold prompt (cacheroute.go).
	if !room || !x.AnyAvailable(x.r.d.Now()) || !budget() || !x.coldHedge() {
		return false
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sealed {
		return false
	}
	x.rec.Hedges++
	return true
}

// Cancel cancels a's context.
func (x *Exec) Cancel(a *Attempt) { a.cancel() }

// Discard releases a, which succeeded but lost the race.
func (x *Exec) Discard(a *Attempt) { a.discard() }

// EndRace cancels each attempt of all but w still running and records it
// a cancelled loser.
func (x *Exec) EndRace(w *Attempt, all []*Attempt) {
	now := x.r.d.Now()
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, h := range all {
		if h == w || h.settled {
			continue
		}
		h.cancel()
		if r := &x.rec.Attempts[h.recIdx]; r.Outcome == "" {
			r.End, r.Outcome = now, "cancelled_loser"
		}
	}
}

// Winner records w as the pass's winner.
func (x *Exec) Winner(w *Attempt) {
	x.mu.Lock()
	x.rec.Attempts[w.recIdx].Winner = true
	x.mu.Unlock()
}

// HedgeWon records that a hedge won.
func (x *Exec) HedgeWon() {
	x.mu.Lock()
	x.rec.HedgeWon = true
	x.mu.Unlock()
}

// Hedged reports the hedge h of the attempt inline to the observers.
func (x *Exec) Hedged(inline, h *Attempt, delay time.Duration, won bool) {
	if on := x.r.d.OnHedge; on != nil {
		on(observe.HedgeEvent{RequestID: x.call.RequestID, Endpoint: inline.ep.ID, HedgeEndpoint: h.ep.ID, Delay: delay, Won: won})
	}
}
