package resilience

import (
	"math"
	"slices"
	"testing"
	"time"
)

// Trip and Reset: another process's breaker state applied to this one.
func TestBreakerTripAndReset(t *testing.T) {
	tests := []struct {
		name    string
		steps   func(b *Breaker, clk *fakeClock)
		state   State
		changes []string
	}{
		{"trip opens until the time given", func(b *Breaker, clk *fakeClock) { b.Trip(clk.Now().Add(time.Second)) },
			Open, []string{"closed->open"}},
		{"then half-open at that time", func(b *Breaker, clk *fakeClock) {
			b.Trip(clk.Now().Add(time.Second))
			clk.Advance(time.Second)
		}, HalfOpen, []string{"closed->open", "open->half-open"}},
		{"a trip in the past does nothing", func(b *Breaker, clk *fakeClock) { b.Trip(clk.Now().Add(-time.Second)) },
			Closed, nil},
		{"a shorter trip keeps the longer interval", func(b *Breaker, clk *fakeClock) {
			b.Trip(clk.Now().Add(2 * time.Second))
			b.Trip(clk.Now().Add(time.Second))
			clk.Advance(time.Second)
		}, Open, []string{"closed->open"}},
		{"reset closes an open breaker", func(b *Breaker, clk *fakeClock) {
			b.Trip(clk.Now().Add(time.Second))
			if !b.Reset() {
				panic("Reset of an open breaker reported nothing to do")
			}
		}, Closed, []string{"closed->open", "open->closed"}},
		{"reset of a closed breaker does nothing", func(b *Breaker, clk *fakeClock) {
			if b.Reset() {
				panic("Reset of a closed breaker reported a change")
			}
		}, Closed, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk, changes := newTestBreaker(t, BreakerConfig{})
			tt.steps(b, clk)
			wantState(t, b, tt.state)
			if !slices.Equal(*changes, tt.changes) {
				t.Errorf("transitions (-got +want):\n-%v\n+%v", *changes, tt.changes)
			}
		})
	}
}

// A probe admitted before a Trip does not close the breaker it re-opened.
func TestBreakerTripIgnoresEarlierProbe(t *testing.T) {
	b, clk, _ := newTestBreaker(t, BreakerConfig{ConsecutiveFailures: 1, SuccessesToClose: 1, OpenFor: time.Second})
	call(t, b, false)
	clk.Advance(time.Second)
	done, err := b.Allow() // a half-open probe
	if err != nil {
		t.Fatal(err)
	}
	b.Trip(clk.Now().Add(time.Second))
	done(true)
	wantState(t, b, Open)
}

// A shared budget counts requests for the shared bucket, spends only what
// Grant adds, and turns back into a bucket of its own with the requests'
// deposits.
func TestBudgetShare(t *testing.T) {
	empties := 0
	b, err := NewBudget(BudgetConfig{Ratio: 0.5, Burst: 4, OnEmpty: func() { empties++ }})
	if err != nil {
		t.Fatal(err)
	}
	b.Share(true, 1)
	if got := b.Available(); got != 1 {
		t.Errorf("Available after Share(true, 1) (-got +want):\n-%v\n+1", got)
	}
	for range 6 {
		b.OnRequest()
	}
	if got := b.Available(); got != 1 {
		t.Errorf("requests deposited locally while shared: Available %v, want 1", got)
	}
	if !b.TryWithdraw() || b.TryWithdraw() {
		t.Error("a shared budget holding one token did not allow exactly one withdrawal")
	}
	if empties != 1 {
		t.Errorf("OnEmpty calls after a refused withdrawal while shared (-got +want):\n-%d\n+1", empties)
	}
	if n := b.TakeRequests(); n != 6 {
		t.Errorf("TakeRequests (-got +want):\n-%d\n+6", n)
	}
	b.Grant(2.5)
	b.Grant(9) // capped at the burst
	if got := b.Available(); got != 4 {
		t.Errorf("Available after grants (-got +want):\n-%v\n+4", got)
	}
	for b.TryWithdraw() {
	}
	b.OnRequest()
	b.OnRequest()
	b.Share(false, 0)
	if got := b.Available(); math.Abs(got-1) > 1e-9 {
		t.Errorf("Available after Share(false): the two requests counted should deposit 1 token; got %v", got)
	}
	b.OnRequest()
	for b.TryWithdraw() {
	}
	if empties != 2 {
		t.Errorf("OnEmpty called %d times in all, want 2: not for a local budget", empties)
	}
	b.OnRequest()
	b.OnRequest()
	b.OnRequest()
	if got := b.Available(); math.Abs(got-2) > 1e-9 {
		t.Errorf("a local budget's requests deposit their ratio: Available %v, want 0.5 + 3 × 0.5 = 2", got)
	}
	b.Return(3)
	if got := b.Available(); math.Abs(got-3.5) > 1e-9 {
		t.Errorf("Return(3) at ratio 0.5: Available %v, want 3.5", got)
	}
}
