package engine

import (
	"context"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
)

// maxHedges bounds the hedges per attempt: a second one when the first
// hedge is slow too (the p99.9 of a heavy tail), both within the route's
// hedge budget.
const maxHedges = 2

// hedgePolicy races the first attempt of a call against hedges: when the
// attempt has not answered (for a stream: sent its first content) after the
// endpoint's live p95, a hedge goes to another endpoint, and after as long
// again a second one. The first success wins; the others are cancelled and
// closed. The first attempt runs on the call's goroutine (no hand-off in
// the common case where it answers in time); hedges run in their own.
func hedgePolicy(next step) step {
	return func(ctx context.Context, x *exec, t *try) (*attempt, error) {
		if !x.hedgeable(t) {
			return next(ctx, x, t)
		}
		hg := &hedger{x: x, ctx: ctx, next: next, req: t.req, results: make(chan hedgeResult, maxHedges)}
		t.hg = hg
		a, err := next(ctx, x, t)
		t.hg = nil
		return hg.finish(a, err)
	}
}

// hedgeable reports whether this pass may be hedged.
func (x *exec) hedgeable(t *try) bool {
	e := x.e
	return (t.pass.Kind == "primary" || t.pass.Kind == "retry") && !x.legacy && !x.shadow && !e.hedgingOff.Load() && len(x.rs.cands) >= 2 &&
		(x.call.Behavior == nil || x.call.Behavior.Hedge == nil || *x.call.Behavior.Hedge)
}

type hedgeResult struct {
	a   *attempt
	err error
}

// hedger is one hedged pass. mu guards the fields below it; the timer's
// goroutine launches hedges, hedge goroutines report on results.
type hedger struct {
	x       *exec
	ctx     context.Context
	next    step
	req     *llm.Request
	results chan hedgeResult

	mu       sync.Mutex
	t        *time.Timer
	delay    time.Duration
	inline   *attempt
	hedges   []*attempt // booked hedges
	launched int
	pending  int // hedge goroutines not yet reported
	winner   *attempt
	done     bool

	// closed is set under x.mu (not mu) when the pass is decided: a hedge
	// goroutine that had not booked its attempt yet books none, so the
	// record's attempts do not grow after the call returned (the server
	// reads them for its headers without a lock).
	closed bool
}

// booked is called by the route policy for every attempt of the pass: the
// first is the inline one, whose endpoint sets the hedge delay.
func (hg *hedger) booked(a *attempt, hedge bool) {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hedge {
		hg.hedges = append(hg.hedges, a)
		if hg.done || hg.winner != nil {
			a.cancel() // booked after the race was decided
		}
		return
	}
	if hg.inline != nil || hg.done {
		return
	}
	hg.inline = a
	hg.delay = hg.x.e.hedge.Delay(a.ep.Health.P95(hg.x.req.Stream))
	hg.t = time.AfterFunc(hg.delay, hg.fire)
}

// fire launches a hedge if the pass is still undecided, the budget and
// the attempt cap allow, and another endpoint is available.
func (hg *hedger) fire() {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	x := hg.x
	if hg.done || hg.winner != nil || hg.launched >= maxHedges {
		return
	}
	x.mu.Lock()
	room := x.attempts < x.e.maxAttempts
	x.mu.Unlock()
	if !room || !x.HasUntried(x.e.now()) || !x.rs.hedges.TryWithdraw() {
		return
	}
	x.mu.Lock()
	if x.sealed {
		x.mu.Unlock()
		return
	}
	x.rec.Hedges++
	x.mu.Unlock()
	hg.launched++
	hg.pending++
	ht := &try{req: hg.req, pass: policy.Pass{Kind: "hedge"}, hg: hg}
	go func() {
		a, err := hg.next(hg.ctx, x, ht)
		if err == nil {
			hg.won(a)
		}
		hg.results <- hedgeResult{a, err}
	}()
	if hg.launched < maxHedges {
		hg.t.Reset(hg.delay)
	}
}

// won claims the pass for a; the first success wins and cancels the
// others.
func (hg *hedger) won(a *attempt) bool {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hg.winner != nil {
		return hg.winner == a
	}
	hg.winner = a
	if hg.t != nil {
		hg.t.Stop()
	}
	if hg.inline != nil && hg.inline != a {
		hg.inline.cancel()
	}
	for _, h := range hg.hedges {
		if h != a && h.cancel != nil {
			h.cancel()
		}
	}
	return true
}

// finish decides the pass after the inline attempt returned (a, err):
// its success if it won, else the first hedge to succeed, else the most
// recent failure once nothing is in flight.
func (hg *hedger) finish(a *attempt, err error) (*attempt, error) {
	x := hg.x
	if err == nil && !hg.won(a) {
		a.discard() // a hedge answered first
		a = nil
	}
	for {
		hg.mu.Lock()
		w, pending := hg.winner, hg.pending
		hg.mu.Unlock()
		if w != nil && w == a {
			return hg.decide(a), nil
		}
		if pending == 0 {
			hg.decide(nil)
			return a, err
		}
		select {
		case r := <-hg.results:
			hg.mu.Lock()
			hg.pending--
			won := r.err == nil && hg.winner == r.a
			hg.mu.Unlock()
			if won {
				x.mu.Lock()
				x.rec.HedgeWon = true
				x.mu.Unlock()
				return hg.decide(r.a), nil
			}
			if r.err == nil {
				r.a.discard()
				continue
			}
			if r.a != nil && (err != nil || a == nil) {
				// Keep the most recent failure of an attempt that was
				// made (a hedge that found no endpoint says nothing).
				a, err = r.a, r.err
			}
		case <-hg.ctx.Done():
			hg.decide(nil)
			return nil, hg.ctx.Err()
		}
	}
}

// decide ends the pass with winner w: the timer stops, every other attempt
// still running is cancelled, marked a cancelled loser and drained.
func (hg *hedger) decide(w *attempt) *attempt {
	x := hg.x
	hg.mu.Lock()
	hg.done = true
	if hg.t != nil {
		hg.t.Stop()
	}
	now := x.e.now()
	x.mu.Lock()
	hg.closed = true
	for _, h := range append([]*attempt{hg.inline}, hg.hedges...) {
		if h == nil || h == w || h.settled {
			continue
		}
		h.cancel()
		if r := &x.rec.Attempts[h.recIdx]; r.Outcome == "" {
			r.End, r.Outcome = now, "cancelled_loser"
		}
	}
	x.mu.Unlock()
	n := hg.pending
	hg.pending = 0
	hedges := append([]*attempt(nil), hg.hedges...)
	hg.mu.Unlock()
	if n > 0 {
		go func() {
			for range n {
				if r := <-hg.results; r.a != nil && r.err == nil {
					r.a.discard()
				}
			}
		}()
	}
	if w != nil {
		x.mu.Lock()
		x.rec.Attempts[w.recIdx].Winner = true
		x.mu.Unlock()
	}
	if x.e.events.hedgeObs != nil && hg.inline != nil {
		for _, h := range hedges {
			x.e.events.hedge(HedgeEvent{RequestID: x.call.RequestID, Endpoint: hg.inline.ep.ID, HedgeEndpoint: h.ep.ID, Delay: hg.delay, Won: h == w})
		}
	}
	return w
}
