package attempt

import (
	"context"
	"errors"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	rl "github.com/keelmesh/keel/internal/relay"
)

// Slow-stream hedging, the attempt side (relay.Pacer): the legs learn
// each endpoint's normal pace, say when a leg is slow, and race a slow
// leg against a continuation on another endpoint. The relay decides the
// race (internal/relay/race.go).

// SlowGap is the gap above which the current leg is slow: its endpoint's
// normal pace (until it has one, its model's on the route's other
// endpoints: health.PeerGap) times the threshold; 0 while the pace is
// unknown or when the call may not hedge.
func (l *legs) SlowGap() time.Duration {
	x := l.x
	if x.r.d.SlowStreamOff || !x.mayHedge() {
		return 0
	}
	ep, cands := l.cur.ep, x.route.Cands
	gap := ep.Pace.Gap()
	if gap == 0 {
		gap = health.PeerGap(len(cands), func(i int) *health.Pace {
			if cands[i].Model != ep.Model {
				return nil
			}
			return &cands[i].Pace
		})
	}
	return x.r.d.SlowStream.SlowGap(gap)
}

// Paced teaches the current leg's endpoint its normal pace.
func (l *legs) Paced(gap time.Duration) { l.cur.ep.Pace.Observe(gap) }

// Race books a hedge (the call's attempt cap, less the one attempt a
// recovery may need; an endpoint available; the route's race budget) and
// starts the continuation of cut: on an endpoint other than the slow
// leg's while one is available, else on the same (a fresh request is a
// fresh draw). The slow leg is read by a pump from now on, so that the
// relay can wait on both legs at once.
func (l *legs) Race(cut rl.Cut) rl.Race {
	x := l.x
	if x.Attempts() >= x.r.d.MaxAttempts-1 || !x.book(func() bool { return x.r.d.Races.TryWithdraw(x.route.Key) }) {
		// The last attempt is kept for a recovery: a slow stream still
		// answers, a cut one does not.
		return nil
	}
	a := l.cur
	x.mu.Lock()
	clear(x.picks.Tried)
	x.picks.Tried[a.idx] = true
	x.mu.Unlock()
	bctx, bcancel := context.WithCancelCause(l.ctx)
	r := &race{l: l, a: a, bcancel: bcancel, out: cut.Output, after: x.r.d.Now().Sub(a.start),
		patience: 2 * x.r.d.Hedge.Delay(a.ep.Health.P95(true))}
	l.startPump()
	delivered := cut.Delivered
	t := &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptHedge, AllowTried: !x.HasUntried(x.r.d.Now())}, cont: &delivered, contOut: cut.Output}
	r.Contest = rl.StartContest(l.pump, func() (rl.Made[*Attempt], error) {
		b, err := x.runTry(bctx, t)
		if err != nil {
			return rl.Made[*Attempt]{}, err
		}
		leg := rl.Leg{Splice: b.splice}
		if n := len(b.req.Messages); !b.splice && n > 0 && b.req.Messages[n-1].Role == llm.RoleAssistant {
			leg.Echo = b.req.Messages[n-1].Text()
		}
		return rl.Made[*Attempt]{Attempt: b, Leg: leg, First: b.first, Next: b.res.Stream.Next}, nil
	}, func(b *Attempt) {
		x.loser(b)
		b.discard()
	})
	return r
}

// race is a slow-stream hedge in flight (relay.Race): a, the slow leg,
// against its continuation (the Contest's pumps read both).
type race struct {
	*rl.Contest[*Attempt]
	l       *legs
	a       *Attempt
	bcancel context.CancelCauseFunc
	// patience is twice the hedge delay of a's endpoint; out the output
	// tokens the client has.
	patience time.Duration
	out      int
	// after is how long a had run when the race started (the hedge
	// event's delay).
	after time.Duration
}

// Patience is how long from now the continuation may take to extend the
// text (relay.Patience, at its endpoint's normal pace, else the slow
// leg's).
func (r *race) Patience() time.Duration {
	b, leg, made := r.Continuation()
	var gap time.Duration
	if made {
		if gap = b.ep.Pace.Gap(); gap == 0 {
			gap = r.a.ep.Pace.Gap()
		}
	}
	return rl.Patience(r.patience, made, leg.Splice, r.out, gap)
}

// Won makes the continuation the current leg; the slow one, whose own
// usage was u, is cancelled and costed as a hedge race's loser.
func (r *race) Won(u llm.Usage) {
	l, x := r.l, r.l.x
	ap, bp := r.Pumps()
	ap.End(r.a.cancel)
	r.a.end = x.r.d.Now()
	l.costOf(r.a, u)
	x.loser(r.a)
	r.a.discard()
	b, _, _ := r.Continuation()
	l.cur, l.buf, l.pump = b, nil, bp
	x.cacheContinued(b)
	x.mu.Lock()
	x.rec.HedgeWon = true
	x.rec.Attempts[b.recIdx].Winner = true
	x.rec.Attempts[r.a.recIdx].Winner = false
	x.mu.Unlock()
	x.Hedged(r.a, b, r.after, true)
}

// Lost cancels the continuation (own usage u); the slow leg goes on.
func (r *race) Lost(u llm.Usage) {
	x := r.l.x
	if b, made := r.Lose(func() { r.bcancel(errLostRace) }); made {
		b.end = x.r.d.Now()
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
func (x *Exec) loser(a *Attempt) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if r := &x.rec.Attempts[a.recIdx]; !x.sealed && r.Outcome == "" {
		r.End, r.Outcome = x.r.d.Now(), "cancelled_loser"
	}
}

// startPump has a pump read the current leg from now on.
func (l *legs) startPump() {
	a, buf := l.cur, l.buf
	l.buf = nil
	l.pump = rl.NewPump(rl.Prepend(buf, a.res.Stream.Next))
}
