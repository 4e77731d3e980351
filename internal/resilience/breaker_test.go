package resilience

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeClock is a manually advanced clock for the Now field.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestBreaker returns a breaker on a fake clock that records its
// transitions.
func newTestBreaker(t *testing.T, cfg BreakerConfig) (*Breaker, *fakeClock, *[]string) {
	t.Helper()
	clk := newFakeClock()
	var changes []string
	cfg.Now = clk.Now
	cfg.OnStateChange = func(from, to State) { changes = append(changes, from.String()+"->"+to.String()) }
	b, err := NewBreaker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b, clk, &changes
}

// call makes one call through b and reports whether it was admitted.
func call(t *testing.T, b *Breaker, ok bool) bool {
	t.Helper()
	done, err := b.Allow()
	if err != nil {
		if !errors.Is(err, ErrOpen) {
			t.Fatalf("Allow() error = %v, want ErrOpen", err)
		}
		return false
	}
	done(ok)
	return true
}

func wantState(t *testing.T, b *Breaker, want State) {
	t.Helper()
	if got := b.State(); got != want {
		t.Fatalf("State() (-got +want):\n-%v\n+%v", got, want)
	}
}

func TestBreakerOpens(t *testing.T) {
	type step struct {
		ok    bool
		count int
		after time.Duration // clock advance before the calls
	}
	tests := []struct {
		name  string
		cfg   BreakerConfig
		steps []step
		want  State
	}{
		{name: "five consecutive failures", steps: []step{{ok: false, count: 5}}, want: Open},
		{name: "four consecutive failures stay closed", steps: []step{{ok: false, count: 4}}, want: Closed},
		{name: "a success resets the run", steps: []step{{ok: false, count: 4}, {ok: true, count: 1}, {ok: false, count: 4}}, want: Closed},
		{
			name:  "failure rate at min requests",
			cfg:   BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{{ok: true, count: 5}, {ok: false, count: 5}},
			want:  Open,
		},
		{
			name:  "failure rate below min requests",
			cfg:   BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{{ok: true, count: 4}, {ok: false, count: 5}},
			want:  Closed,
		},
		{
			name:  "failure rate below threshold",
			cfg:   BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{{ok: true, count: 11}, {ok: false, count: 10}},
			want:  Closed,
		},
		{
			name: "interleaved failures reach the rate",
			cfg:  BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{
				{ok: true, count: 1}, {ok: false, count: 1}, {ok: true, count: 1}, {ok: false, count: 1},
				{ok: true, count: 1}, {ok: false, count: 1}, {ok: true, count: 1}, {ok: false, count: 1},
				{ok: true, count: 1}, {ok: false, count: 1},
			},
			want: Open,
		},
		{
			name:  "old failures leave the window",
			cfg:   BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{{ok: false, count: 4}, {ok: true, count: 1}, {after: 10 * time.Second, ok: false, count: 5}},
			want:  Closed,
		},
		{
			name:  "failures inside the window add up",
			cfg:   BreakerConfig{ConsecutiveFailures: -1},
			steps: []step{{ok: false, count: 4}, {ok: true, count: 1}, {after: 8 * time.Second, ok: false, count: 5}},
			want:  Open,
		},
		{
			name:  "custom consecutive failures",
			cfg:   BreakerConfig{ConsecutiveFailures: 2},
			steps: []step{{ok: false, count: 2}},
			want:  Open,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, clk, _ := newTestBreaker(t, tt.cfg)
			for _, s := range tt.steps {
				clk.Advance(s.after)
				for range s.count {
					if !call(t, b, s.ok) {
						t.Fatal("call rejected before the last step")
					}
				}
			}
			wantState(t, b, tt.want)
		})
	}
}

func TestBreakerLifecycle(t *testing.T) {
	b, clk, changes := newTestBreaker(t, BreakerConfig{})
	for range 5 {
		call(t, b, false)
	}
	wantState(t, b, Open)
	if call(t, b, true) {
		t.Fatal("open breaker admitted a call")
	}
	clk.Advance(5*time.Second - time.Nanosecond)
	wantState(t, b, Open)
	clk.Advance(time.Nanosecond)
	wantState(t, b, HalfOpen)

	// Two probes at once, a third is refused.
	done1, err1 := b.Allow()
	done2, err2 := b.Allow()
	if err1 != nil || err2 != nil {
		t.Fatalf("probes refused: %v, %v", err1, err2)
	}
	if _, err := b.Allow(); !errors.Is(err, ErrOpen) {
		t.Fatalf("third concurrent probe: error = %v, want ErrOpen", err)
	}
	done1(true)
	wantState(t, b, HalfOpen)
	// A finished probe frees its slot.
	done3, err := b.Allow()
	if err != nil {
		t.Fatalf("probe after a slot freed: %v", err)
	}
	done2(true)
	wantState(t, b, Closed)
	done3(false) // a probe of the previous half-open period: ignored
	wantState(t, b, Closed)
	if !call(t, b, true) {
		t.Fatal("closed breaker refused a call")
	}
	want := []string{"closed->open", "open->half-open", "half-open->closed"}
	if !slices.Equal(*changes, want) {
		t.Errorf("transitions (-got +want):\n-%v\n+%v", *changes, want)
	}
}

// TestBreakerOpenIntervalGrows checks that each failed half-open doubles the
// open interval up to MaxOpenFor, and that a close resets it.
func TestBreakerOpenIntervalGrows(t *testing.T) {
	b, clk, _ := newTestBreaker(t, BreakerConfig{OpenFor: time.Second, MaxOpenFor: 5 * time.Second})
	for range 5 {
		call(t, b, false)
	}
	for _, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		clk.Advance(want - time.Millisecond)
		wantState(t, b, Open)
		clk.Advance(time.Millisecond)
		wantState(t, b, HalfOpen)
		if !call(t, b, false) { // the probe fails: re-open
			t.Fatal("half-open breaker refused a probe")
		}
		wantState(t, b, Open)
	}
	clk.Advance(5 * time.Second)
	call(t, b, true)
	call(t, b, true)
	wantState(t, b, Closed)
	for range 5 {
		call(t, b, false)
	}
	clk.Advance(time.Second)
	wantState(t, b, HalfOpen)
}

// TestBreakerCloseForgetsWindow checks that failures seen before an open do
// not count against the breaker after it closes.
func TestBreakerCloseForgetsWindow(t *testing.T) {
	b, clk, _ := newTestBreaker(t, BreakerConfig{ConsecutiveFailures: -1, SuccessesToClose: 1, HalfOpenProbes: 1})
	for range 10 {
		call(t, b, false)
	}
	wantState(t, b, Open)
	clk.Advance(5 * time.Second)
	call(t, b, true)
	wantState(t, b, Closed)
	for range 4 {
		call(t, b, false)
	}
	wantState(t, b, Closed)
}

// TestBreakerLateClosedResults checks that results of calls admitted while
// closed do not act as probes once the breaker is half-open.
func TestBreakerLateClosedResults(t *testing.T) {
	b, clk, _ := newTestBreaker(t, BreakerConfig{})
	slow, err := b.Allow()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		call(t, b, false)
	}
	clk.Advance(5 * time.Second)
	wantState(t, b, HalfOpen)
	slow(true)
	slow2, _ := b.Allow()
	wantState(t, b, HalfOpen)
	slow2(false)
	wantState(t, b, Open)
}

// TestBreakerConcurrentProbes runs in a synctest bubble with the default
// clock: many goroutines race for the half-open probe slots, and exactly
// HalfOpenProbes get one.
func TestBreakerConcurrentProbes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := NewBreaker(BreakerConfig{HalfOpenProbes: 3})
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			done, _ := b.Allow()
			done(false)
		}
		time.Sleep(5 * time.Second)
		var mu sync.Mutex
		var dones []func(bool)
		var wg sync.WaitGroup
		for range 50 {
			wg.Go(func() {
				if done, err := b.Allow(); err == nil {
					mu.Lock()
					dones = append(dones, done)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(dones) != 3 {
			t.Fatalf("admitted probes = %d, want 3", len(dones))
		}
		for _, d := range dones {
			d(true)
		}
		if got := b.State(); got != Closed {
			t.Errorf("State() = %v, want closed", got)
		}
	})
}

// TestBreakerConcurrentClosed hammers the closed path from many goroutines;
// run it with -race. Every goroutine fails its third call of three, so no
// prefix of the interleaving reaches a failure rate of one half.
func TestBreakerConcurrentClosed(t *testing.T) {
	b, err := NewBreaker(BreakerConfig{ConsecutiveFailures: -1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if done, err := b.Allow(); err == nil {
					done(i%3 != 2)
				}
			}
		})
	}
	wg.Wait()
	wantState(t, b, Closed)
}

func TestStateString(t *testing.T) {
	for _, tt := range []struct {
		s    State
		want string
	}{{Closed, "closed"}, {Open, "open"}, {HalfOpen, "half-open"}, {State(9), "State(9)"}} {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() (-got +want):\n-%s\n+%s", got, tt.want)
			}
		})
	}
}

func BenchmarkBreakerAllow(b *testing.B) {
	br, err := NewBreaker(BreakerConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			done, err := br.Allow()
			if err != nil {
				panic(fmt.Sprint(err))
			}
			done(true)
		}
	})
}

// TestBreakerStateChangeOutsideLock checks that OnStateChange runs with the
// breaker's lock released — it may call the Breaker, which would deadlock
// under the lock — and that a transition the callback itself causes is
// reported after the one being reported, not inside it.
func TestBreakerStateChangeOutsideLock(t *testing.T) {
	clk := newFakeClock()
	var b *Breaker
	var got []string
	cfg := BreakerConfig{Now: clk.Now, OpenFor: time.Second}
	cfg.OnStateChange = func(from, to State) {
		got = append(got, "enter "+from.String()+"->"+to.String())
		if to == Open {
			// The open interval ends inside the callback: State turns the
			// breaker half-open, a transition of its own.
			clk.Advance(time.Second)
		}
		got = append(got, "state "+b.State().String())
		got = append(got, "exit "+from.String()+"->"+to.String())
	}
	var err error
	if b, err = NewBreaker(cfg); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		call(t, b, false)
	}
	want := []string{
		"enter closed->open", "state half-open", "exit closed->open",
		"enter open->half-open", "state half-open", "exit open->half-open",
	}
	if !slices.Equal(got, want) {
		t.Errorf("callbacks (-got +want):\n-%q\n+%q", got, want)
	}
	wantState(t, b, HalfOpen)
}

// TestBreakerStateChangesInOrder drives a breaker from many goroutines and
// checks that the callbacks never overlap (the race detector would see the
// unguarded variables) and form one chain: each from is the previous to.
func TestBreakerStateChangesInOrder(t *testing.T) {
	clk := newFakeClock()
	last, n := Closed, 0
	cfg := BreakerConfig{Now: clk.Now, OpenFor: time.Millisecond, MaxOpenFor: time.Millisecond, ConsecutiveFailures: 2, HalfOpenProbes: 4}
	cfg.OnStateChange = func(from, to State) {
		if from != last {
			t.Errorf("transition %d: %v->%v after a transition to %v", n, from, to, last)
		}
		last = to
		n++
	}
	b, err := NewBreaker(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if done, err := b.Allow(); err == nil {
					done((i+g)%3 == 0)
				}
				if i%50 == 0 {
					clk.Advance(time.Millisecond)
				}
				b.State()
			}
		})
	}
	wg.Wait()
	if s := b.State(); s != last {
		t.Errorf("state %v, last reported transition to %v", s, last)
	}
	if n < 10 {
		t.Errorf("%d transitions, want the test to cause many", n)
	}
}
