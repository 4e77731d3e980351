package policy

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/resilience"
)

// MaxCooldownWait bounds a wait for an endpoint's retry-after when the
// call has no deadline.
const MaxCooldownWait = 30 * time.Second

// Retry tries a pass again after a retryable failure. Failover after a
// fast refusal (429, 529, 503, connection refused: no work done) to an
// untried endpoint is free; a retry of work (a 500, a timeout, a cut, or
// the same endpoint again) is taken from the call's Retries, so
// amplification stays bounded. When every endpoint is cooling down,
// ejected or open, it waits for the one that comes back first if that is
// within the call's deadline, rather than failing a call no attempt was
// made for. A Retry is immutable and safe for concurrent use.
type Retry struct {
	// MaxAttempts caps the waits for a cooldown per call.
	MaxAttempts int
	Backoff     *resilience.Backoff
	Now         func() time.Time
}

// RetryState is one call's state of the retry policy. Safe for
// concurrent use (a continuation may run on another goroutine than the
// call's).
type RetryState struct {
	// waits counts the waits for an endpoint cooling down.
	waits atomic.Int32
}

// RetryCall is what the retry policy needs of the call it serves.
type RetryCall interface {
	RetryState() *RetryState
	Retries() *Retries
	// OneShot reports a call that is never retried (a shadow call).
	OneShot() bool
	// Attempts is the attempts made so far.
	Attempts() int
	// HasUntried reports an endpoint available now that this run has not
	// tried; AnyAvailable one available now, tried or not.
	HasUntried(now time.Time) bool
	AnyAvailable(now time.Time) bool
	// Soonest is when the first endpoint cooling down comes back (zero if
	// none is cooling).
	Soonest(now time.Time) time.Time
	// NoCandidate and Exhausted build the call's error when no attempt
	// can be made.
	NoCandidate(nc *NoCandidate) error
	Exhausted(code, why string) error
	// Waited adds d to the call's queue wait.
	Waited(d time.Duration)
}

// RetryPolicy is r around the rest of the chain.
func RetryPolicy[C RetryCall, T Try, A comparable](r *Retry) Wrapper[C, T, A] {
	return func(next Step[C, T, A]) Step[C, T, A] {
		return func(ctx context.Context, c C, t T) (A, error) {
			var zero A
			for {
				a, err := next(ctx, c, t)
				if err == nil {
					return a, nil
				}
				if ctx.Err() != nil {
					return a, ctx.Err()
				}
				var nc *NoCandidate
				if errors.As(err, &nc) {
					if err := r.noCandidate(ctx, c, t.Pass(), nc); err != nil {
						return zero, err
					}
					continue
				}
				switch v, stop := r.again(ctx, c, t.Pass(), Classify(err)); v {
				case answer:
					return a, err
				case giveUp:
					return a, stop
				case abort:
					return zero, stop
				}
			}
		}
	}
}

// verdict is what the retry policy does after a failed attempt.
type verdict uint8

const (
	retryNow verdict = iota // go again
	answer                  // the failure is the pass's answer
	giveUp                  // the call's error replaces the failure
	abort                   // the caller left while waiting: no attempt
)

// noCandidate decides what follows a pass that found no endpoint to book:
// nil to go again (tried endpoints allowed, or after a wait for a
// cooldown), else the call's error.
func (r *Retry) noCandidate(ctx context.Context, c RetryCall, p *Pass, nc *NoCandidate) error {
	if nc.Filtered || nc.Exhausted || c.OneShot() {
		return c.NoCandidate(nc)
	}
	now := r.Now()
	if !p.AllowTried && c.AnyAvailable(now) {
		// Only endpoints an earlier pass tried are left (a re-ask, a
		// one-endpoint route): they may serve again.
		p.AllowTried = true
		return nil
	}
	st := c.RetryState()
	until := c.Soonest(now)
	d := until.Sub(now)
	if until.IsZero() || d <= 0 || int(st.waits.Load()) >= r.MaxAttempts {
		return c.NoCandidate(nc)
	}
	if st.waits.Load() > 0 && !c.Retries().Wait() {
		// The first wait for a retry-after is free (nothing was sent);
		// waiting again, behind other calls' refusals, is a retry like
		// any other.
		return c.Exhausted(llm.MeshBudgetExhausted, "retry budget exhausted while every endpoint is cooling down")
	}
	if dl, ok := ctx.Deadline(); ok && now.Add(d).After(dl) {
		return c.Exhausted(llm.MeshTimeout, "no endpoint can be tried again before the deadline")
	} else if !ok && d > MaxCooldownWait {
		return c.NoCandidate(nc)
	}
	st.waits.Add(1)
	if err := sleep(ctx, d); err != nil {
		return err
	}
	c.Waited(d)
	p.Wait += d
	p.AllowTried = true
	return nil
}

// again decides what follows a failed attempt f, and stop is the call's
// error when the verdict is giveUp or abort.
func (r *Retry) again(ctx context.Context, c RetryCall, p *Pass, f *Failure) (v verdict, stop error) {
	if f.Decision != DecideRetry || c.OneShot() {
		return answer, nil
	}
	if c.Attempts() >= r.MaxAttempts {
		return giveUp, c.Exhausted(llm.MeshFallbackExhausted, "every attempt failed")
	}
	untried := c.HasUntried(r.Now())
	if p.Kind == AttemptPrimary {
		p.Kind = AttemptRetry
	}
	if f.Refusal && untried {
		p.AllowTried = false
		return retryNow, nil // failover: the refused work was never done
	}
	if err := c.Retries().Take(c.Attempts()); err != nil {
		return giveUp, c.Exhausted(llm.MeshBudgetExhausted, "retry budget exhausted")
	}
	if untried {
		p.AllowTried = false
		return retryNow, nil
	}
	d := r.Backoff.Delay(c.Retries().Count()-1, f.RetryAfter)
	if dl, ok := ctx.Deadline(); ok && r.Now().Add(d).After(dl) {
		return giveUp, c.Exhausted(llm.MeshTimeout, "no endpoint can be tried again before the deadline")
	}
	if err := sleep(ctx, d); err != nil {
		return abort, err
	}
	c.Waited(d)
	p.Wait += d
	p.AllowTried = true
	return retryNow, nil
}
