package policy

import (
	"context"
	"time"
)

// Pass is what the policies read and steer in one pass through the chain:
// the attempt kind the next booking records, whether endpoints already
// tried in this run may compete again, and the wait that preceded it.
type Pass struct {
	// Kind is the attempt kind the next booking records.
	Kind       AttemptKind
	AllowTried bool
	// Wait is the time waited before the next attempt (backoff or a
	// cooldown); the booking records it and resets it.
	Wait time.Duration
}

// Try is a pass as the caller carries it: whatever else it holds (the
// request, a continuation's text), the policies steer its Pass.
type Try interface{ Pass() *Pass }

// Step runs the rest of the chain for call c and pass t, returning the
// attempt made (also with a failure, when one was made) and its error.
type Step[C any, T Try, A comparable] func(ctx context.Context, c C, t T) (A, error)

// Wrapper is a policy: it wraps the rest of the chain (failsafe-go's
// executor).
type Wrapper[C any, T Try, A comparable] func(next Step[C, T, A]) Step[C, T, A]

// Chain folds ws around last, outermost first.
func Chain[C any, T Try, A comparable](last Step[C, T, A], ws ...Wrapper[C, T, A]) Step[C, T, A] {
	s := last
	for i := len(ws) - 1; i >= 0; i-- {
		s = ws[i](s)
	}
	return s
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
