package policy

import (
	"errors"
	"sync/atomic"

	"github.com/keelmesh/keel/internal/resilience"
)

// Sentinel errors of Retries.Take.
var (
	// ErrAttemptsSpent: the call made as many attempts as it may.
	ErrAttemptsSpent = errors.New("the call's attempts are spent")
	// ErrBudgetExhausted: the route's retry budget has no token left.
	ErrBudgetExhausted = errors.New("the route's retry budget is exhausted")
)

// Retries is one call's retries of work, each drawn on its route's retry
// budget, so amplification stays bounded (gRPC retry throttling). It is the
// one place that logic lives: the retry policy, a stream's continuation and
// a structured-output re-ask all take their retries here. Safe for
// concurrent use.
type Retries struct {
	budget      *resilience.Budget
	maxAttempts int
	n           atomic.Int32
}

// Init sets the route's budget and the call's attempt cap.
func (r *Retries) Init(budget *resilience.Budget, maxAttempts int) {
	r.budget, r.maxAttempts = budget, maxAttempts
}

// Take takes one retry of work for a call that has made attempts
// attempts: ErrAttemptsSpent when they are all made, ErrBudgetExhausted
// when the route's budget refuses.
func (r *Retries) Take(attempts int) error {
	if attempts >= r.maxAttempts {
		return ErrAttemptsSpent
	}
	if !r.budget.TryWithdraw() {
		return ErrBudgetExhausted
	}
	r.n.Add(1)
	return nil
}

// Wait takes a token for waiting again, behind other calls' refusals, for
// an endpoint that is cooling down: a retry like any other for the
// budget, though no attempt is retried.
func (r *Retries) Wait() bool { return r.budget.TryWithdraw() }

// Count is the retries taken so far.
func (r *Retries) Count() int { return int(r.n.Load()) }
