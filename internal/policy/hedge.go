package policy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// MaxHedges bounds the hedges per pass: a second one when the first hedge
// is slow too (the p99.9 of a heavy tail), both within the route's hedge
// budget.
const MaxHedges = 2

// HedgeCall is what hedging needs of the call it serves. Every method but
// Hedgeable, Hedging and HedgeTry may be called from a hedge's goroutine
// or the hedge timer's.
type HedgeCall[T Try, A comparable] interface {
	// Hedgeable reports whether the pass t may be hedged.
	Hedgeable(t T) bool
	// Hedging hands the pass t the hedger that its bookings report to
	// (nil when the pass is over).
	Hedging(t T, hg Booker[A])
	// HedgeTry is the pass a hedge of t runs, reporting its booking to hg.
	HedgeTry(t T, hg Booker[A]) T
	// HedgeDelay is how long the first attempt a may run before a hedge.
	HedgeDelay(a A) time.Duration
	// BookHedge reserves a hedge and counts it: false when the call may
	// not make one now (its attempt cap, no endpoint available, the
	// route's hedge budget, the call ended). A hedge goes to an endpoint
	// not yet tried while there is one, else to one already in use: a
	// fresh request is a fresh draw (The Tail at Scale).
	BookHedge() bool
	// Cancel cancels a's context; Discard releases a, which lost the race
	// after it succeeded.
	Cancel(a A)
	Discard(a A)
	// EndRace, under the call's lock, cancels each attempt of all but w
	// that is still running and records it a cancelled loser.
	EndRace(w A, all []A)
	// Winner records w as the pass's winner; HedgeWon that a hedge won.
	Winner(w A)
	HedgeWon()
	// Hedged reports the hedge h of the attempt inline, and whether it won.
	Hedged(inline, h A, delay time.Duration, won bool)
}

// Booker is told of every attempt a hedged pass books.
type Booker[A any] interface {
	// Booked reports an attempt booked for the pass (hedge: by a hedge).
	Booked(a A, hedge bool)
	// Closed reports that the pass was decided: a hedge not yet booked
	// books none. The booking reads it under the call's lock.
	Closed() bool
}

// Hedge races the first attempt of a pass against hedges: when the attempt
// has not answered (for a stream: sent its first content) after the
// endpoint's hedge delay (its live p95), a hedge goes to another endpoint
// (the same one when no other is available), and after as long again a
// second one. The first success wins; the others
// are cancelled and closed. The first attempt runs on the call's goroutine
// (no hand-off in the common case where it answers in time); hedges run in
// their own. Its per-pass state is a Hedger.
func Hedge[C HedgeCall[T, A], T Try, A comparable](next Step[C, T, A]) Step[C, T, A] {
	return func(ctx context.Context, c C, t T) (A, error) {
		if !c.Hedgeable(t) {
			return next(ctx, c, t)
		}
		hg := &Hedger[C, T, A]{c: c, ctx: ctx, next: next, t: t}
		c.Hedging(t, hg)
		a, err := next(ctx, c, t)
		c.Hedging(t, nil)
		return hg.finish(a, err)
	}
}

type hedgeResult[A any] struct {
	a   A
	err error
}

// Hedger is one hedged pass. mu guards the fields below it; the timer's
// goroutine launches hedges, hedge goroutines report on results.
type Hedger[C HedgeCall[T, A], T Try, A comparable] struct {
	c    C
	ctx  context.Context
	next Step[C, T, A]
	t    T

	mu sync.Mutex
	// results is made, under mu, as the first hedge launches (most passes
	// launch none); it is read only once pending said a hedge ran.
	results chan hedgeResult[A]
	timer   *time.Timer
	delay   time.Duration
	// all is the pass's attempts, the inline one first, then the booked
	// hedges (in buf: a pass books at most 1 + MaxHedges).
	all       []A
	buf       [1 + MaxHedges]A
	hasInline bool
	launched  int
	pending   int // hedge goroutines not yet reported
	winner    A
	hasWinner bool
	done      bool

	// closed is set as the pass is decided, before the call's record is
	// settled under the call's lock (EndRace): a hedge that books under
	// that lock either books before or sees closed and books nothing, so
	// the record's attempts do not grow after the call returned.
	closed atomic.Bool
}

// Closed reports that the pass was decided.
func (hg *Hedger[C, T, A]) Closed() bool { return hg.closed.Load() }

// Booked is called for every attempt of the pass: the first is the inline
// one, whose endpoint sets the hedge delay.
func (hg *Hedger[C, T, A]) Booked(a A, hedge bool) {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hedge {
		hg.all = append(hg.all, a)
		if hg.done || hg.hasWinner {
			hg.c.Cancel(a) // booked after the race was decided
		}
		return
	}
	if hg.hasInline || hg.done {
		return
	}
	hg.all, hg.hasInline = append(hg.buf[:0], a), true
	hg.delay = hg.c.HedgeDelay(a)
	hg.timer = time.AfterFunc(hg.delay, hg.fire)
}

// fire launches a hedge if the pass is still undecided and the call may
// make one.
func (hg *Hedger[C, T, A]) fire() {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hg.done || hg.hasWinner || hg.launched >= MaxHedges || !hg.c.BookHedge() {
		return
	}
	if hg.results == nil {
		hg.results = make(chan hedgeResult[A], MaxHedges)
	}
	hg.launched++
	hg.pending++
	ht := hg.c.HedgeTry(hg.t, hg)
	go func() {
		a, err := hg.next(hg.ctx, hg.c, ht)
		if err == nil {
			hg.won(a)
		}
		hg.results <- hedgeResult[A]{a, err}
	}()
	if hg.launched < MaxHedges {
		hg.timer.Reset(hg.delay)
	}
}

// won claims the pass for a; the first success wins and cancels the
// others.
func (hg *Hedger[C, T, A]) won(a A) bool {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hg.hasWinner {
		return hg.winner == a
	}
	hg.winner, hg.hasWinner = a, true
	if hg.timer != nil {
		hg.timer.Stop()
	}
	for _, h := range hg.all {
		if h != a {
			hg.c.Cancel(h)
		}
	}
	return true
}

// finish decides the pass after the inline attempt returned (a, err):
// its success if it won, else the first hedge to succeed, else the most
// recent failure once nothing is in flight.
func (hg *Hedger[C, T, A]) finish(a A, err error) (A, error) {
	var zero A
	if err == nil && !hg.won(a) {
		hg.c.Discard(a) // a hedge answered first
		a = zero
	}
	for {
		hg.mu.Lock()
		w, has, pending := hg.winner, hg.hasWinner, hg.pending
		hg.mu.Unlock()
		if has && w == a {
			return hg.decide(a, true), nil
		}
		if pending == 0 {
			hg.decide(zero, false)
			return a, err
		}
		select {
		case r := <-hg.results:
			hg.mu.Lock()
			hg.pending--
			won := r.err == nil && hg.hasWinner && hg.winner == r.a
			hg.mu.Unlock()
			if won {
				hg.c.HedgeWon()
				return hg.decide(r.a, true), nil
			}
			if r.err == nil {
				hg.c.Discard(r.a)
				continue
			}
			if r.a != zero && (err != nil || a == zero) {
				// Keep the most recent failure of an attempt that was
				// made (a hedge that found no endpoint says nothing).
				a, err = r.a, r.err
			}
		case <-hg.ctx.Done():
			hg.decide(zero, false)
			return zero, hg.ctx.Err()
		}
	}
}

// decide ends the pass with winner w (has: there is one): the timer stops,
// every other attempt still running is cancelled, marked a cancelled
// loser and drained.
func (hg *Hedger[C, T, A]) decide(w A, has bool) A {
	hg.mu.Lock()
	hg.done = true
	if hg.timer != nil {
		hg.timer.Stop()
	}
	hg.closed.Store(true)
	hg.c.EndRace(w, hg.all)
	n := hg.pending
	hg.pending = 0
	// (A hedge booked after this appends past these; hedges keeps them.)
	all := hg.all
	hg.mu.Unlock()
	if n > 0 {
		go func() {
			var zero A
			for range n {
				if r := <-hg.results; r.a != zero && r.err == nil {
					hg.c.Discard(r.a)
				}
			}
		}()
	}
	if has {
		hg.c.Winner(w)
	}
	if hg.hasInline {
		for _, h := range all[1:] {
			hg.c.Hedged(all[0], h, hg.delay, has && h == w)
		}
	}
	return w
}
