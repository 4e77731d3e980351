package policy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// hatt is an attempt of the hedge tests.
type hatt struct {
	n      int
	kind   AttemptKind
	ctx    context.Context
	cancel context.CancelFunc
}

func (a *hatt) String() string { return fmt.Sprintf("%s#%d", a.kind, a.n) }

type htry struct {
	p  Pass
	hg Booker[*hatt]
}

func (t *htry) Pass() *Pass { return &t.p }

// leg is one scripted attempt: it answers after latency, with err.
type leg struct {
	latency time.Duration
	err     error
}

// hcall is a call whose attempts follow legs in booking order; it records
// what the hedger asks of it.
type hcall struct {
	delay  time.Duration
	hedges int // hedges the budget allows
	legs   []leg

	mu        sync.Mutex
	booked    []*hatt
	cancelled []*hatt
	discarded []*hatt
	losers    []*hatt
	winner    *hatt
	hedgeWon  bool
	events    []string
	start     time.Time
}

func (c *hcall) Hedgeable(t *htry) bool            { return t.p.Kind == AttemptPrimary }
func (c *hcall) Hedging(t *htry, hg Booker[*hatt]) { t.hg = hg }
func (c *hcall) HedgeTry(t *htry, hg Booker[*hatt]) *htry {
	return &htry{p: Pass{Kind: AttemptHedge}, hg: hg}
}
func (c *hcall) HedgeDelay(*hatt) time.Duration { return c.delay }
func (c *hcall) BookHedge() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hedges == 0 {
		return false
	}
	c.hedges--
	return true
}
func (c *hcall) Cancel(a *hatt) {
	c.mu.Lock()
	c.cancelled = append(c.cancelled, a)
	c.mu.Unlock()
	a.cancel()
}
func (c *hcall) Discard(a *hatt) {
	c.mu.Lock()
	c.discarded = append(c.discarded, a)
	c.mu.Unlock()
	a.cancel()
}
func (c *hcall) EndRace(w *hatt, all []*hatt) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range all {
		if a != w {
			a.cancel()
			c.losers = append(c.losers, a)
		}
	}
}
func (c *hcall) Winner(w *hatt) { c.mu.Lock(); c.winner = w; c.mu.Unlock() }
func (c *hcall) HedgeWon()      { c.mu.Lock(); c.hedgeWon = true; c.mu.Unlock() }
func (c *hcall) Hedged(inline, h *hatt, delay time.Duration, won bool) {
	c.mu.Lock()
	c.events = append(c.events, fmt.Sprintf("%v→%v after %v won=%v", inline, h, delay, won))
	c.mu.Unlock()
}

// send books the next scripted attempt for t and plays its leg.
func (c *hcall) send(ctx context.Context, _ *hcall, t *htry) (*hatt, error) {
	c.mu.Lock()
	if t.p.Kind == AttemptHedge && t.hg.Closed() {
		c.mu.Unlock()
		return nil, errors.New("closed")
	}
	a := &hatt{n: len(c.booked), kind: t.p.Kind}
	a.ctx, a.cancel = context.WithCancel(ctx)
	c.booked = append(c.booked, a)
	l := c.legs[a.n]
	c.mu.Unlock()
	if t.hg != nil {
		t.hg.Booked(a, t.p.Kind == AttemptHedge)
	}
	tm := time.NewTimer(l.latency)
	defer tm.Stop()
	select {
	case <-tm.C:
		return a, l.err
	case <-a.ctx.Done():
		return a, a.ctx.Err()
	}
}

func hedgeRun(ctx context.Context, c *hcall) (*hatt, error, time.Duration) {
	step := Chain(c.send, Hedge[*hcall, *htry, *hatt])
	start := time.Now()
	a, err := step(ctx, c, &htry{p: Pass{Kind: AttemptPrimary}})
	return a, err, time.Since(start)
}

func names(as []*hatt) string {
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = a.String()
	}
	slices.Sort(s)
	return fmt.Sprint(s)
}

func TestHedgeNotNeededWhenTheAttemptAnswersInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hcall{delay: 100 * time.Millisecond, hedges: 2, legs: []leg{{latency: 50 * time.Millisecond}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != nil || a.n != 0 || took != 50*time.Millisecond {
			t.Fatalf("attempt %v, error %v after %v; want the first at 50ms", a, err, took)
		}
		synctest.Wait()
		if len(c.booked) != 1 || c.hedges != 2 || c.winner != a || c.hedgeWon || len(c.events) != 0 {
			t.Errorf("booked %v, budget left %d, winner %v, hedge won %v, events %v", c.booked, c.hedges, c.winner, c.hedgeWon, c.events)
		}
	})
}

func TestHedgeWinsTheRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hcall{delay: 200 * time.Millisecond, hedges: 2, legs: []leg{{latency: time.Second}, {latency: 100 * time.Millisecond}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != nil || a.kind != AttemptHedge || took != 300*time.Millisecond {
			t.Fatalf("attempt %v, error %v after %v; want the hedge at 300ms (delay 200ms + 100ms)", a, err, took)
		}
		synctest.Wait()
		if names(c.losers) != "[primary#0]" || names(c.cancelled) != "[primary#0]" {
			t.Errorf("losers %v, cancelled %v; want the first attempt cancelled as the hedge won, and a loser", c.losers, c.cancelled)
		}
		if c.winner != a || !c.hedgeWon {
			t.Errorf("winner %v, hedge won %v", c.winner, c.hedgeWon)
		}
		if want := "[primary#0→hedge#1 after 200ms won=true]"; fmt.Sprint(c.events) != want {
			t.Errorf("events (-got +want):\n-%v\n+%v", c.events, want)
		}
	})
}

func TestHedgeSecondAfterAsLongAgainAndNoMore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		c := &hcall{delay: 100 * ms, hedges: 5, legs: []leg{{latency: time.Second}, {latency: time.Second}, {latency: 50 * ms}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != nil || a.n != 2 || took != 250*ms {
			t.Fatalf("attempt %v, error %v after %v; want the second hedge at 250ms", a, err, took)
		}
		synctest.Wait()
		if len(c.booked) != 1+MaxHedges || c.hedges != 5-MaxHedges {
			t.Errorf("booked %v, budget left %d; want %d hedges", c.booked, c.hedges, MaxHedges)
		}
		if got := names(c.losers); got != "[hedge#1 primary#0]" {
			t.Errorf("losers %s, want the first attempt and the first hedge", got)
		}
	})
}

func TestHedgeNeedsItsBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hcall{delay: 100 * time.Millisecond, legs: []leg{{latency: time.Second}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != nil || a.n != 0 || took != time.Second || len(c.booked) != 1 {
			t.Errorf("attempt %v, error %v after %v, booked %v; want the first alone at 1s", a, err, took, c.booked)
		}
	})
}

func TestHedgeKeepsTheLastFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		first, second := errors.New("first failed"), errors.New("hedge failed")
		ms := time.Millisecond
		c := &hcall{delay: 100 * ms, hedges: 1, legs: []leg{{300 * ms, first}, {400 * ms, second}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != second || a.n != 1 || took != 500*ms {
			t.Errorf("attempt %v, error %v after %v; want the hedge's failure at 500ms", a, err, took)
		}
		if c.winner != nil {
			t.Errorf("winner %v, want none", c.winner)
		}
	})
}

func TestHedgeFirstFailsHedgeServes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := time.Millisecond
		c := &hcall{delay: 100 * ms, hedges: 1, legs: []leg{{150 * ms, errors.New("500")}, {200 * ms, nil}}}
		a, err, took := hedgeRun(t.Context(), c)
		if err != nil || a.n != 1 || took != 300*ms || !c.hedgeWon {
			t.Errorf("attempt %v, error %v after %v, hedge won %v; want the hedge at 300ms", a, err, took, c.hedgeWon)
		}
	})
}

func TestHedgeEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		ms := time.Millisecond
		c := &hcall{delay: 100 * ms, hedges: 1, legs: []leg{{time.Second, nil}, {time.Second, nil}}}
		time.AfterFunc(250*ms, cancel)
		// The caller's leaving and the attempts' cancelled answers arrive
		// together: the pass ends with the caller's error either way (an
		// attempt's failure, if read first, is a cancellation too).
		_, err, took := hedgeRun(ctx, c)
		if !errors.Is(err, context.Canceled) || took != 250*ms {
			t.Errorf("error %v after %v; want context.Canceled at 250ms", err, took)
		}
		synctest.Wait() // the hedge's result is drained: no goroutine left
	})
}

// TestHedgeBookedAfterTheDecisionIsCancelled: a hedge whose booking comes
// after the pass was decided finds it closed; one that booked meanwhile is
// cancelled at once.
func TestHedgeBookedAfterTheDecisionIsCancelled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hcall{}
		hg := &Hedger[*hcall, *htry, *hatt]{c: c, ctx: t.Context(), results: make(chan hedgeResult[*hatt], MaxHedges)}
		if hg.Closed() {
			t.Fatal("closed before the decision")
		}
		hg.decide(nil, false)
		if !hg.Closed() {
			t.Fatal("open after the decision")
		}
		late := &hatt{n: 9, kind: AttemptHedge}
		late.ctx, late.cancel = context.WithCancel(t.Context())
		hg.Booked(late, true)
		if late.ctx.Err() == nil {
			t.Error("a hedge booked after the decision runs on")
		}
	})
}
