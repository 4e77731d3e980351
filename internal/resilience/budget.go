package resilience

import (
	"errors"
	"fmt"
	"math"
	"sync/atomic"
)

// ErrBudgetExhausted is the error callers return (wrapped) when
// Budget.TryWithdraw refuses a retry or hedge.
var ErrBudgetExhausted = errors.New("budget exhausted")

// BudgetConfig configures a Budget. The zero value is the documented default
// for retries. It is also what Keel's config file decodes
// resilience.retry_budget and resilience.hedge_budget into.
type BudgetConfig struct {
	// Ratio is the number of tokens every request deposits; one retry (or
	// hedge) costs one token, so in the long run extra attempts stay below
	// Ratio × requests + Burst. Zero means 0.2 (NewHedgeBudget: 0.1). It
	// must lie in [0.001, 1000]; the bucket counts in thousandths of a
	// token, and a ratio is rounded down to that resolution.
	Ratio float64 `yaml:"ratio"`
	// Burst is the bucket's capacity, and its content at start. Zero means
	// 10. It must be at least 1 so that one withdrawal can ever succeed.
	Burst float64 `yaml:"burst"`
}

// Budget is a token bucket that throttles retries and hedges, like gRPC
// retry throttling and Envoy retry budgets: every original request deposits
// Ratio tokens (up to Burst), and every extra attempt must withdraw a whole
// token first. During an outage the bucket drains and extra attempts stop,
// so retries never multiply the load on a failing upstream.
//
// A Budget is lock-free (one atomic int64 of milli-tokens updated by CAS),
// safe for concurrent use, and never blocks.
type Budget struct {
	ratio int64 // milli-tokens deposited per request
	burst int64 // capacity in milli-tokens
	milli atomic.Int64
}

const milliPerToken = 1000

// NewBudget validates cfg, fills in defaults and returns a full Budget.
func NewBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.Ratio == 0 {
		cfg.Ratio = 0.2
	}
	if cfg.Burst == 0 {
		cfg.Burst = 10
	}
	if !(cfg.Ratio >= 0.001 && cfg.Ratio <= 1000) {
		return nil, fmt.Errorf("budget ratio %v outside [0.001, 1000]: %w", cfg.Ratio, ErrInvalidConfig)
	}
	if !(cfg.Burst >= 1 && cfg.Burst <= 1e12) {
		return nil, fmt.Errorf("budget burst %v outside [1, 1e12]: %w", cfg.Burst, ErrInvalidConfig)
	}
	b := &Budget{
		// The epsilon keeps 0.29×1000 = 289.99999999999994 at 290.
		ratio: int64(math.Floor(cfg.Ratio*milliPerToken + 1e-6)),
		burst: int64(math.Floor(cfg.Burst*milliPerToken + 1e-6)),
	}
	b.milli.Store(b.burst)
	return b, nil
}

// DefaultHedgeRatio is a hedge budget's ratio when its config leaves it
// zero: hedges stay below 10 % of requests (plus the burst).
const DefaultHedgeRatio = 0.1

// NewHedgeBudget is NewBudget for hedges: a zero Ratio means
// DefaultHedgeRatio instead of the retry default.
func NewHedgeBudget(cfg BudgetConfig) (*Budget, error) {
	if cfg.Ratio == 0 {
		cfg.Ratio = DefaultHedgeRatio
	}
	return NewBudget(cfg)
}

// OnRequest deposits one request's share of tokens. Call it once per
// original request (not per retry or hedge).
func (b *Budget) OnRequest() {
	for {
		cur := b.milli.Load()
		if cur >= b.burst {
			return
		}
		if b.milli.CompareAndSwap(cur, min(cur+b.ratio, b.burst)) {
			return
		}
	}
}

// TryWithdraw takes one token for a retry or hedge and reports whether it
// could; false means the attempt must not be made (see ErrBudgetExhausted).
func (b *Budget) TryWithdraw() bool {
	for {
		cur := b.milli.Load()
		if cur < milliPerToken {
			return false
		}
		if b.milli.CompareAndSwap(cur, cur-milliPerToken) {
			return true
		}
	}
}

// Available returns the tokens in the bucket now, for metrics and traces.
func (b *Budget) Available() float64 {
	return float64(b.milli.Load()) / milliPerToken
}
