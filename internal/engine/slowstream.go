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
	var first []*llm.Event
	started := false
	r.bp = newPump(func() (*llm.Event, error) {
		if !started {
			started = true
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
			first = b.first
		}
		if len(first) > 0 {
			ev := first[0]
			first = first[1:]
			return ev, nil
		}
		return r.b.res.Stream.Next()
	})
	return r
}

// race is a slow-stream hedge in flight (relay.Race): a, the slow leg,
// read by the pump ap, against b, its continuation, attempted and read by
// bp.
type race struct {
	l       *legs
	a       *attempt
	ap, bp  *pump
	bcancel context.CancelCauseFunc
	// patience is twice the hedge delay of a's endpoint; out the output
	// tokens the client has.
	patience time.Duration
	out      int
	// after is how long a had run when the race started (the hedge
	// event's delay).
	after time.Duration

	mu   sync.Mutex // guards following
	b    *attempt
	leg  rl.Leg
	lost bool
}

func (r *race) Current() <-chan rl.Item { return r.ap.ch }
func (r *race) Hedge() <-chan rl.Item   { return r.bp.ch }

// Patience is how long from now the continuation may take to extend the
// text: twice the hedge delay to its first event; then, for a re-asked
// answer, which must first repeat the text the client has, as long again
// plus twice the time its endpoint takes to stream that text at its
// normal pace.
func (r *race) Patience() time.Duration {
	r.mu.Lock()
	b, splice := r.b, r.leg.Splice
	r.mu.Unlock()
	if b == nil || !splice {
		return r.patience
	}
	gap := b.ep.Pace.Gap()
	if gap == 0 {
		gap = r.a.ep.Pace.Gap()
	}
	return r.patience + 2*time.Duration(r.out+1)*gap
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
	r.ap.end(r.a)
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
	r.bp.halt()
	<-r.bp.done // an attempt made meanwhile is discarded by the pump
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

// pump reads a leg in its own goroutine, so that a reader can wait on two
// legs at once. Its last item is the error that ended the leg, which err
// keeps for reads after ch is closed.
type pump struct {
	ch   chan rl.Item
	stop chan struct{}
	done chan struct{} // closed when the goroutine returned
	once sync.Once
	err  error
}

// pumpDepth is how many events a pump reads ahead of its reader.
const pumpDepth = 64

func newPump(read func() (*llm.Event, error)) *pump {
	p := &pump{ch: make(chan rl.Item, pumpDepth), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			ev, err := read()
			if err != nil {
				p.err = err
			}
			select {
			case p.ch <- rl.Item{Ev: ev, Err: err}:
			case <-p.stop:
				return
			}
			if err != nil {
				close(p.ch)
				return
			}
		}
	}()
	return p
}

// next is the pump's next read.
func (p *pump) next() (*llm.Event, error) {
	it, ok := <-p.ch
	if !ok {
		return nil, p.err
	}
	return it.Ev, it.Err
}

// halt stops the pump's goroutine once its read returns (the caller
// cancels the leg so that it does).
func (p *pump) halt() { p.once.Do(func() { close(p.stop) }) }

// end cancels a, the leg p reads, and returns once p's goroutine did: the
// leg's stream may then be closed (a stream is read and closed by one
// goroutine at a time).
func (p *pump) end(a *attempt) {
	a.cancel()
	p.halt()
	<-p.done
}

// startPump has a pump read the current leg from now on.
func (l *legs) startPump() {
	a, buf := l.cur, l.buf
	l.buf = nil
	l.pump = newPump(func() (*llm.Event, error) {
		if len(buf) > 0 {
			ev := buf[0]
			buf = buf[1:]
			return ev, nil
		}
		return a.res.Stream.Next()
	})
}
