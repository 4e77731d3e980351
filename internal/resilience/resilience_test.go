package resilience

import (
	"errors"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConstructorsRejectBadConfig(t *testing.T) {
	tests := []struct {
		name string
		err  error
	}{
		{"backoff negative base", second(NewBackoff(BackoffConfig{Base: -1}))},
		{"backoff max below base", second(NewBackoff(BackoffConfig{Base: time.Second, Max: time.Millisecond}))},
		{"budget ratio too small", second(NewBudget(BudgetConfig{Ratio: 0.0001}))},
		{"budget negative ratio", second(NewBudget(BudgetConfig{Ratio: -0.2}))},
		{"budget burst below one", second(NewBudget(BudgetConfig{Burst: 0.5}))},
		{"breaker failure rate above one", second(NewBreaker(BreakerConfig{FailureRate: 1.5}))},
		{"breaker negative buckets", second(NewBreaker(BreakerConfig{Buckets: -1}))},
		{"breaker window too short", second(NewBreaker(BreakerConfig{Window: time.Millisecond, Buckets: 10}))},
		{"breaker negative min requests", second(NewBreaker(BreakerConfig{MinRequests: -1}))},
		{"breaker max open below open", second(NewBreaker(BreakerConfig{OpenFor: time.Minute, MaxOpenFor: time.Second}))},
		{"breaker negative probes", second(NewBreaker(BreakerConfig{HalfOpenProbes: -2}))},
		{"breaker negative successes", second(NewBreaker(BreakerConfig{SuccessesToClose: -2}))},
		{"hedge floor above ceiling", HedgePolicy{Floor: 3 * time.Second}.Validate()},
		{"hedge negative ceiling", HedgePolicy{Ceiling: -time.Second}.Validate()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, ErrInvalidConfig) {
				t.Errorf("error = %v, want one wrapping ErrInvalidConfig", tt.err)
			}
		})
	}
}

func TestZeroConfigsAreValid(t *testing.T) {
	if _, err := NewBackoff(BackoffConfig{}); err != nil {
		t.Error(err)
	}
	if _, err := NewBudget(BudgetConfig{}); err != nil {
		t.Error(err)
	}
	if _, err := NewBreaker(BreakerConfig{}); err != nil {
		t.Error(err)
	}
	if err := (HedgePolicy{}).Validate(); err != nil {
		t.Error(err)
	}
}

func second[T any](_ T, err error) error { return err }
