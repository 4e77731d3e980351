package policy

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
)

// The policies are tested alone: a scripted next plays the rest of the
// chain, a fake call answers the policy's questions, and virtual time
// (testing/synctest) measures every wait exactly.

type fakeAttempt struct {
	n      int // the pass that made it
	window int // its endpoint's context window
}

type fakeTry struct{ p Pass }

func (t *fakeTry) Pass() *Pass { return &t.p }

// fakeCall is a call of a route whose endpoints the test describes by
// answers: untried, available now, and when the first cooling one is back.
type fakeCall struct {
	st       RetryState
	retries  Retries
	oneShot  bool
	attempts int
	untried  bool
	avail    bool
	soonest  time.Time
	waited   time.Duration
	outgrown []int
	// refuse, when set, is every breaker's refusal.
	refuse error
}

func (c *fakeCall) RetryState() *RetryState     { return &c.st }
func (c *fakeCall) Retries() *Retries           { return &c.retries }
func (c *fakeCall) OneShot() bool               { return c.oneShot }
func (c *fakeCall) Attempts() int               { return c.attempts }
func (c *fakeCall) HasUntried(time.Time) bool   { return c.untried }
func (c *fakeCall) AnyAvailable(time.Time) bool { return c.avail }
func (c *fakeCall) Soonest(time.Time) time.Time { return c.soonest }
func (c *fakeCall) Waited(d time.Duration)      { c.waited += d }
func (c *fakeCall) Outgrow(a *fakeAttempt)      { c.outgrown = append(c.outgrown, a.window) }
func (c *fakeCall) NoCandidate(nc *NoCandidate) error {
	return &MeshError{Code: "no_candidate", Why: nc.Error()}
}
func (c *fakeCall) Exhausted(code, why string) error {
	return &MeshError{Code: code, Why: why, Attempts: c.attempts}
}
func (c *fakeCall) Admit(*fakeTry) error { return c.refuse }
func (c *fakeCall) TakeRetry() error     { return c.retries.Take(c.attempts) }
func (c *fakeCall) String() string       { return fmt.Sprintf("%d attempts", c.attempts) }

// seen is one pass as next saw it.
type seen struct {
	Kind       AttemptKind
	AllowTried bool
	Wait       time.Duration
	At         time.Duration // virtual time since the call started
}

// script is a scripted next: pass i returns results[i] (an attempt is
// made, and counted, for every result but a *NoCandidate).
type script struct {
	results []error
	passes  []seen
	start   time.Time
}

func (s *script) next(_ context.Context, c *fakeCall, t *fakeTry) (*fakeAttempt, error) {
	n := len(s.passes)
	if n >= len(s.results) {
		panic(fmt.Sprintf("pass %d not scripted", n))
	}
	s.passes = append(s.passes, seen{t.p.Kind, t.p.AllowTried, t.p.Wait, time.Since(s.start)})
	t.p.Wait = 0 // the booking takes it
	err := s.results[n]
	var nc *NoCandidate
	if errors.As(err, &nc) {
		return nil, err
	}
	c.attempts++
	return &fakeAttempt{n: n, window: 1000 * (n + 1)}, err
}

func status(code int) error {
	return &provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: &llm.APIError{Status: code, Type: llm.ErrAPI}}
}

func budget(t *testing.T, burst float64) *resilience.Budget {
	t.Helper()
	b, err := resilience.NewBudget(resilience.BudgetConfig{Ratio: 0.5, Burst: burst})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// retryRun runs the retry policy over the script for a fresh call.
func retryRun(t *testing.T, ctx context.Context, c *fakeCall, s *script, tokens float64) (*fakeAttempt, error) {
	t.Helper()
	c.retries.Init(budget(t, tokens), 4)
	return retryRunWith(t, ctx, c, s)
}

// retryRunWith runs the retry policy over the script for call c as set.
func retryRunWith(t *testing.T, ctx context.Context, c *fakeCall, s *script) (*fakeAttempt, error) {
	t.Helper()
	bo, err := resilience.NewBackoff(resilience.BackoffConfig{Rand: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	c.retries.maxAttempts = 4
	r := &Retry{MaxAttempts: 4, Backoff: bo, Now: time.Now}
	s.start = time.Now()
	step := Chain(s.next, RetryPolicy[*fakeCall, *fakeTry, *fakeAttempt](r))
	return step(ctx, c, &fakeTry{p: Pass{Kind: AttemptPrimary}})
}

func meshCode(err error) string {
	var me *MeshError
	if errors.As(err, &me) {
		return me.Code
	}
	return ""
}

func TestRetryFailoverAfterRefusalIsFree(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{untried: true}
		s := &script{results: []error{status(429), status(503), nil}}
		a, err := retryRun(t, t.Context(), c, s, 1)
		if err != nil || a.n != 2 {
			t.Fatalf("attempt %v, error %v; want the third pass's success", a, err)
		}
		want := []seen{{Kind: AttemptPrimary}, {Kind: AttemptRetry}, {Kind: AttemptRetry}}
		if fmt.Sprint(s.passes) != fmt.Sprint(want) {
			t.Errorf("passes (-got +want):\n-%v\n+%v", s.passes, want)
		}
		if c.retries.Count() != 0 || !c.retries.Wait() {
			t.Errorf("failover took %d retries or spent the budget's one token", c.retries.Count())
		}
	})
}

func TestRetryOfWorkDrawsTheBudgetAndBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Nothing untried: the same endpoints again, after the backoff
		// (base 100ms, Rand 0.5: 50ms, then 100ms).
		c := &fakeCall{}
		s := &script{results: []error{status(500), status(500), nil}}
		a, err := retryRun(t, t.Context(), c, s, 5)
		if err != nil || a.n != 2 {
			t.Fatalf("attempt %v, error %v; want the third pass's success", a, err)
		}
		ms := time.Millisecond
		want := []seen{{Kind: AttemptPrimary}, {AttemptRetry, true, 50 * ms, 50 * ms}, {AttemptRetry, true, 100 * ms, 150 * ms}}
		if fmt.Sprint(s.passes) != fmt.Sprint(want) {
			t.Errorf("passes (-got +want):\n-%v\n+%v", s.passes, want)
		}
		if c.retries.Count() != 2 || c.waited != 150*ms {
			t.Errorf("retries %d, waited %v; want 2, 150ms", c.retries.Count(), c.waited)
		}
	})
}

func TestRetryToUntriedNeedsNoBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{untried: true}
		s := &script{results: []error{status(500), nil}}
		if _, err := retryRun(t, t.Context(), c, s, 5); err != nil {
			t.Fatal(err)
		}
		if want := []seen{{Kind: AttemptPrimary}, {Kind: AttemptRetry}}; fmt.Sprint(s.passes) != fmt.Sprint(want) {
			t.Errorf("passes (-got +want):\n-%v\n+%v", s.passes, want)
		}
		if c.retries.Count() != 1 {
			t.Errorf("a retry of work to an untried endpoint took %d retries, want 1", c.retries.Count())
		}
	})
}

func TestRetryStopsWhenTheBudgetIsSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{untried: true}
		s := &script{results: []error{status(500), status(500)}}
		a, err := retryRun(t, t.Context(), c, s, 1)
		if meshCode(err) != llm.MeshBudgetExhausted || a == nil || a.n != 1 {
			t.Fatalf("attempt %v, error %v; want the second attempt and %s", a, err, llm.MeshBudgetExhausted)
		}
	})
}

func TestRetryStopsWhenAttemptsAreSpent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{untried: true}
		s := &script{results: []error{status(429), status(429), status(429), status(429)}}
		_, err := retryRun(t, t.Context(), c, s, 10)
		if meshCode(err) != llm.MeshFallbackExhausted || len(s.passes) != 4 {
			t.Fatalf("%d passes, error %v; want 4 and %s", len(s.passes), err, llm.MeshFallbackExhausted)
		}
	})
}

func TestRetryPassesOnWhatIsNotRetryable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		err     error
		oneShot bool
	}{
		{name: "bad request", err: status(400)},
		{name: "auth", err: status(401)},
		{name: "one-shot call", err: status(500), oneShot: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := &fakeCall{untried: true, oneShot: tc.oneShot}
				s := &script{results: []error{tc.err}}
				a, err := retryRun(t, t.Context(), c, s, 10)
				if err != tc.err || a == nil {
					t.Errorf("attempt %v, error %v; want the attempt and its own error", a, err)
				}
			})
		})
	}
}

func TestRetryAllowsTriedWhenOnlyTheyAreLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{avail: true}
		s := &script{results: []error{&NoCandidate{Err: errors.New("all tried")}, nil}}
		if _, err := retryRun(t, t.Context(), c, s, 1); err != nil {
			t.Fatal(err)
		}
		if want := []seen{{Kind: AttemptPrimary}, {Kind: AttemptPrimary, AllowTried: true}}; fmt.Sprint(s.passes) != fmt.Sprint(want) {
			t.Errorf("passes (-got +want):\n-%v\n+%v", s.passes, want)
		}
	})
}

func TestRetryWaitsForACooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{soonest: time.Now().Add(2 * time.Second)}
		cooling := &NoCandidate{Err: errors.New("cooling")}
		s := &script{results: []error{cooling, nil}}
		if _, err := retryRun(t, t.Context(), c, s, 1); err != nil {
			t.Fatal(err)
		}
		want := []seen{{Kind: AttemptPrimary}, {AttemptPrimary, true, 2 * time.Second, 2 * time.Second}}
		if fmt.Sprint(s.passes) != fmt.Sprint(want) || c.waited != 2*time.Second {
			t.Errorf("passes (-got +want):\n-%v\n+%v\nwaited %v", s.passes, want, c.waited)
		}
	})
}

func TestRetryCooldownLimits(t *testing.T) {
	cooling := &NoCandidate{Err: errors.New("cooling")}
	t.Run("a second wait takes a token", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &fakeCall{soonest: time.Now().Add(time.Second)}
			c.st.waits.Store(1)
			s := &script{results: []error{cooling}}
			c.retries.budget = budget(t, 1)
			c.retries.Wait() // another call took the one token
			if _, err := retryRunWith(t, t.Context(), c, s); meshCode(err) != llm.MeshBudgetExhausted {
				t.Errorf("error %v, want %s", err, llm.MeshBudgetExhausted)
			}
		})
	})
	t.Run("past the deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			c := &fakeCall{soonest: time.Now().Add(2 * time.Second)}
			s := &script{results: []error{cooling}}
			if _, err := retryRun(t, ctx, c, s, 1); meshCode(err) != llm.MeshTimeout {
				t.Errorf("error %v, want %s", err, llm.MeshTimeout)
			}
		})
	})
	t.Run("too long without a deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &fakeCall{soonest: time.Now().Add(MaxCooldownWait + time.Second)}
			s := &script{results: []error{cooling}}
			if _, err := retryRun(t, t.Context(), c, s, 1); meshCode(err) != "no_candidate" {
				t.Errorf("error %v, want the call's no-candidate error", err)
			}
		})
	})
	t.Run("filtered is final", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := &fakeCall{avail: true, soonest: time.Now().Add(time.Second)}
			s := &script{results: []error{&NoCandidate{Err: errors.New("filtered"), Filtered: true}}}
			if _, err := retryRun(t, t.Context(), c, s, 1); meshCode(err) != "no_candidate" || len(s.passes) != 1 {
				t.Errorf("%d passes, error %v; want 1 and the call's no-candidate error", len(s.passes), err)
			}
		})
	})
}

func TestRetryBackoffEndsWithTheCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		c := &fakeCall{}
		s := &script{results: []error{status(500)}}
		time.AfterFunc(10*time.Millisecond, cancel)
		a, err := retryRun(t, ctx, c, s, 5)
		if a != nil || !errors.Is(err, context.Canceled) {
			t.Errorf("attempt %v, error %v; want none and context.Canceled", a, err)
		}
	})
}

func TestFallbackOutgrowsTheWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &fakeCall{}
		s := &script{results: []error{status(400), nil}, start: time.Now()}
		tooLong := &provider.Error{Kind: provider.KindStatus, API: &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "context_length_exceeded"}}
		s.results[0] = tooLong
		step := Chain(s.next, Fallback[*fakeCall, *fakeTry, *fakeAttempt])
		a, err := step(t.Context(), c, &fakeTry{p: Pass{Kind: AttemptPrimary, AllowTried: true}})
		if err != nil || a.n != 1 {
			t.Fatalf("attempt %v, error %v; want the second pass's success", a, err)
		}
		if want := []seen{{Kind: AttemptPrimary, AllowTried: true}, {Kind: AttemptFallback}}; fmt.Sprint(s.passes) != fmt.Sprint(want) {
			t.Errorf("passes (-got +want):\n-%v\n+%v", s.passes, want)
		}
		if fmt.Sprint(c.outgrown) != "[1000]" {
			t.Errorf("outgrown %v, want [1000] (the first endpoint's window)", c.outgrown)
		}
	})
}

func TestFallbackLeavesOtherFailures(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{name: "retryable", err: status(500)},
		{name: "bad request", err: status(400)},
		{name: "no candidate", err: &NoCandidate{Err: errors.New("none")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &fakeCall{}
			s := &script{results: []error{tc.err}, start: time.Now()}
			step := Chain(s.next, Fallback[*fakeCall, *fakeTry, *fakeAttempt])
			if _, err := step(context.Background(), c, &fakeTry{p: Pass{Kind: AttemptPrimary}}); err != tc.err || len(c.outgrown) != 0 {
				t.Errorf("error %v, outgrown %v; want the pass's own error, none", err, c.outgrown)
			}
		})
	}
}

func TestBreakerRefusalIsAFailover(t *testing.T) {
	open := fmt.Errorf("endpoint e: %w", resilience.ErrOpen)
	c := &fakeCall{refuse: open}
	s := &script{results: []error{nil}}
	step := Chain(s.next, Breaker[*fakeCall, *fakeTry, *fakeAttempt])
	a, err := step(context.Background(), c, &fakeTry{})
	f := Classify(err)
	if a != nil || len(s.passes) != 0 || f.Kind != KindBreakerOpen || f.Decision != DecideRetry || !f.Refusal || f.EndpointFault() || !errors.Is(err, resilience.ErrOpen) {
		t.Errorf("attempt %v, %d sent, failure %+v; want nothing sent and a breaker-open refusal", a, len(s.passes), f)
	}
	c.refuse = nil
	if a, err := step(context.Background(), c, &fakeTry{}); err != nil || a == nil {
		t.Errorf("admitted: attempt %v, error %v", a, err)
	}
}

// TestRetriesAreOnePlace: the attempt cap and the route's budget, in
// that order, for whoever retries (the retry policy, a continuation, a
// re-ask).
func TestRetriesAreOnePlace(t *testing.T) {
	var r Retries
	r.Init(budget(t, 2), 3)
	if err := r.Take(3); !errors.Is(err, ErrAttemptsSpent) {
		t.Errorf("Take at the cap: %v, want ErrAttemptsSpent", err)
	}
	for i := range 2 {
		if err := r.Take(1); err != nil {
			t.Fatalf("take %d: %v", i, err)
		}
	}
	if err := r.Take(1); !errors.Is(err, ErrBudgetExhausted) {
		t.Errorf("Take with the budget spent: %v, want ErrBudgetExhausted", err)
	}
	if r.Count() != 2 || r.Wait() {
		t.Errorf("count %d (want 2); a wait got a token from a spent budget", r.Count())
	}
}
