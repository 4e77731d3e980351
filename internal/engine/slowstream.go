package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	rl "github.com/keelmesh/keel/internal/relay"
)

// Slow-stream hedging, the attempt side (relay.Pacer): the legs learn
// each endpoint's normal pace, say when a leg is slow, and race a slow
// leg against a continuation on another endpoint. The relay decides the
// race (internal/relay/race.go).

// SlowGap is the gap above which the current leg is slow: its endpoint's
// normal pace times the threshold; 0 while the pace is unknown or when
// the call may not hedge.
func (l *legs) SlowGap() time.Duration {
	x := l.x
	if x.e.slowStreamOff || !x.mayHedge() {
		return 0
	}
	return x.e.slowStream.SlowGap(l.cur.ep.Pace.Gap())
}

// Paced teaches the current leg's endpoint its normal pace.
func (l *legs) Paced(gap time.Duration) { l.cur.ep.Pace.Observe(gap) }

// Race books a hedge (the call's attempt cap, less the one attempt a
// recovery may need; an endpoint available; the route's hedge budget) and
// starts the continuation of cut: on an endpoint other than the slow
// leg's while one is available, else on the same (a fresh request is a
// fresh draw). The slow leg is read by a pump from now on, so that the
// relay can wait on both legs at once.
func (l *legs) Race(cut rl.Cut) rl.Race {
	x := l.x
	if x.Attempts() >= x.e.maxAttempts-1 || !x.BookHedge() {
		// The last attempt is kept for a recovery: a slow stream still
		// answers, a cut one does not.
		return nil
	}
	a := l.cur
	x.mu.Lock()
	clear(x.picks.tried)
	x.picks.tried[a.idx] = true
	x.mu.Unlock()
	bctx, bcancel := context.WithCancelCause(l.ctx)
	r := &race{l: l, a: a, bcancel: bcancel, out: cut.Output, after: x.e.now().Sub(a.start),
		patience: 2 * x.e.hedge.Delay(a.ep.Health.P95(true))}
	l.startPump()
	r.ap = l.pump
	delivered := cut.Delivered
	t := &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptHedge, AllowTried: !x.HasUntried(x.e.now())}, cont: &delivered, contOut: cut.Output}
	made := false
	r.bp = rl.NewPump(func() (*llm.Event, error) {
		if made {
			return r.next()
		}
		made = true
		b, err := x.runTry(bctx, t)
		if err != nil {
			return nil, err
		}
		r.mu.Lock()
		lost := r.lost
		if !lost {
			r.b = b
			r.leg = rl.Leg{Splice: b.splice}
			if n := len(b.req.Messages); !b.splice && n > 0 && b.req.Messages[n-1].Role == llm.RoleAssistant {
				r.leg.Echo = b.req.Messages[n-1].Text()
			}
		}
		r.mu.Unlock()
		if lost {
			x.loser(b)
			b.discard()
			return nil, context.Canceled
		}
		r.first = b.first
		return r.next()
	})
	return r
}

// race is a slow-stream hedge in flight (relay.Race): a, the slow leg,
// read by the pump ap, against b, its continuation, attempted and read by
// bp.
type race struct {
	l       *legs
	a       *attempt
	ap, bp  *rl.Pump
	bcancel context.CancelCauseFunc
	// patience is twice the hedge delay of a's endpoint; out the output
	// tokens the client has.
	patience time.Duration
	out      int
	// after is how long a had run when the race started (the hedge
	// event's delay).
	after time.Duration

	// first is b's events read before it was made, replayed by bp.
	first []*llm.Event

	mu   sync.Mutex // guards following
	b    *attempt
	leg  rl.Leg
	lost bool
}

func (r *race) Current() <-chan rl.Item { return r.ap.Items() }
func (r *race) Hedge() <-chan rl.Item   { return r.bp.Items() }

// next is the continuation's next event: the ones its attempt read
// first, then its stream's.
func (r *race) next() (*llm.Event, error) {
	if len(r.first) > 0 {
		ev := r.first[0]
		r.first = r.first[1:]
		return ev, nil
	}
	return r.b.res.Stream.Next()
}

// Patience is how long from now the continuation may take to extend the
// text (relay.Patience, at its endpoint's normal pace, else the slow
// leg's).
func (r *race) Patience() time.Duration {
	r.mu.Lock()
	b, splice := r.b, r.leg.Splice
	r.mu.Unlock()
	var gap time.Duration
	if b != nil {
		if gap = b.ep.Pace.Gap(); gap == 0 {
			gap = r.a.ep.Pace.Gap()
		}
	}
	return rl.Patience(r.patience, b != nil, splice, r.out, gap)
}

func (r *race) Leg() rl.Leg {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leg
}

// Won makes the continuation the current leg; the slow one, whose own
// usage was u, is cancelled and costed as a hedge race's loser.
func (r *race) Won(u llm.Usage) {
	l, x := r.l, r.l.x
	r.ap.End(r.a.cancel)
	r.a.end = x.e.now()
	l.costOf(r.a, u)
	x.loser(r.a)
	r.a.discard()
	r.mu.Lock()
	l.cur, l.buf, l.pump = r.b, nil, r.bp
	r.mu.Unlock()
	x.mu.Lock()
	x.rec.HedgeWon = true
	x.rec.Attempts[r.b.recIdx].Winner = true
	x.rec.Attempts[r.a.recIdx].Winner = false
	x.mu.Unlock()
	x.Hedged(r.a, r.b, r.after, true)
}

// Lost cancels the continuation (own usage u); the slow leg goes on.
func (r *race) Lost(u llm.Usage) {
	x := r.l.x
	r.mu.Lock()
	r.lost = true
	b := r.b
	r.mu.Unlock()
	r.bcancel(errLostRace)
	r.bp.Halt()
	r.bp.Wait() // an attempt made meanwhile is discarded by the pump
	if b != nil {
		b.end = x.e.now()
		r.l.costOf(b, u)
		x.loser(b)
		b.discard()
		x.Hedged(r.a, b, r.after, false)
	}
}

// errLostRace cancels a continuation that lost a slow-stream race before
// it was made: its attempt is a cancelled loser (send).
var errLostRace = errors.New("the slow-stream race was decided")

// loser records a, which lost a race, as a cancelled loser unless its
// outcome is known.
func (x *exec) loser(a *attempt) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r := &x.rec.Attempts[a.recIdx]; !x.sealed && r.Outcome == "" {
		r.End, r.Outcome = x.e.now(), "cancelled_loser"
	}
}

// startPump has a pump read the current leg from now on.
func (l *legs) startPump() {
	a, buf := l.cur, l.buf
	l.buf = nil
	l.pump = rl.NewPump(rl.Prepend(buf, a.res.Stream.Next))
}
