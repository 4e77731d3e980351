package policy

import "context"

// BreakerCall is what the breaker policy needs of the call it serves.
type BreakerCall[T any] interface {
	// Admit asks the breaker of the endpoint booked for t and, when it
	// admits the attempt, counts it; a refusal is the breaker's error
	// naming the endpoint (nothing was sent).
	Admit(t T) error
}

// Breaker sends the attempt on only when its endpoint's breaker admits
// it; a refusal is a KindBreakerOpen failure, which the retry policy
// treats as a failover (nothing was sent, no budget spent). Breaker keeps
// no state of its own: each endpoint's breaker is the endpoint's.
func Breaker[C BreakerCall[T], T Try, A comparable](next Step[C, T, A]) Step[C, T, A] {
	return func(ctx context.Context, c C, t T) (A, error) {
		if err := c.Admit(t); err != nil {
			var zero A
			return zero, BreakerOpen(err)
		}
		return next(ctx, c, t)
	}
}
