package policy

import "context"

// FallbackCall is what the fallback policy needs of the call it serves.
type FallbackCall[A any] interface {
	// Outgrow makes the call's routing ask for a bigger context window
	// than a's endpoint has.
	Outgrow(a A)
}

// Fallback moves the call to another model when only one may serve: a
// prompt too long for this model's context window (a DecideFallback
// failure). The next pass is of kind "fallback", untried endpoints only;
// when no model with a bigger window is left, the pass finds no candidate
// and the retry policy inside says so. Fallback keeps no state of its own.
func Fallback[C FallbackCall[A], T Try, A comparable](next Step[C, T, A]) Step[C, T, A] {
	return func(ctx context.Context, c C, t T) (A, error) {
		var zero A
		for {
			a, err := next(ctx, c, t)
			f := Classify(err)
			if a == zero || f == nil || f.Decision != DecideFallback || ctx.Err() != nil {
				return a, err
			}
			c.Outgrow(a)
			p := t.Pass()
			p.Kind, p.AllowTried = AttemptFallback, false
		}
	}
}
