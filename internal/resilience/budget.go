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
	// OnEmpty, if set, is called when TryWithdraw refuses while the
	// budget is shared (see Budget.Share), so that its holder can top the
	// lease up before its next round. It runs on the withdrawing goroutine
	// and must not block.
	OnEmpty func() `yaml:"-" json:"-"`
}

// Budget is a token bucket that throttles retries and hedges, like gRPC
// retry throttling and Envoy retry budgets: every original request deposits
// Ratio tokens (up to Burst), and every extra attempt must withdraw a whole
// token first. During an outage the bucket drains and extra attempts stop,
// so retries never multiply the load on a failing upstream.
//
// A Budget can also hold a lease of a bucket kept elsewhere and shared by
// several processes (Share): then requests are only counted, for the holder
// of the shared bucket to deposit (TakeRequests), and tokens arrive by
// Grant. Switching back (Share(false)) makes it a bucket of its own again
// at once, so a process that loses the shared bucket keeps throttling.
//
// A Budget is lock-free (atomic int64s updated by CAS), safe for concurrent
// use, and never blocks.
type Budget struct {
	ratio int64 // milli-tokens deposited per request
	burst int64 // capacity in milli-tokens
	milli atomic.Int64
	// shared is set while the bucket is a lease (see Share); requests
	// counts the requests seen meanwhile and not yet taken.
	shared   atomic.Bool
	requests atomic.Int64
	onEmpty  func()
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
		ratio:   int64(math.Floor(cfg.Ratio*milliPerToken + 1e-6)),
		burst:   int64(math.Floor(cfg.Burst*milliPerToken + 1e-6)),
		onEmpty: cfg.OnEmpty,
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
	if b.shared.Load() {
		b.requests.Add(1)
		return
	}
	b.deposit(b.ratio)
}

// deposit adds milli-tokens, up to the burst.
func (b *Budget) deposit(milli int64) {
	for {
		cur := b.milli.Load()
		if cur >= b.burst {
			return
		}
		if b.milli.CompareAndSwap(cur, min(cur+milli, b.burst)) {
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
			if b.onEmpty != nil && b.shared.Load() {
				b.onEmpty()
			}
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

// Ratio returns the tokens each request deposits.
func (b *Budget) Ratio() float64 { return float64(b.ratio) / milliPerToken }

// Burst returns the bucket's capacity in tokens.
func (b *Budget) Burst() float64 { return float64(b.burst) / milliPerToken }

// Share makes the bucket a lease of a shared one (on) or a bucket of its
// own again (off). Switching on keeps at most keep tokens of what the
// bucket holds (the rest would be tokens the shared bucket never granted);
// switching off deposits, as OnRequest would have, the requests counted and
// not yet taken. Switching to the mode in force does nothing.
func (b *Budget) Share(on bool, keep float64) {
	if b.shared.Swap(on) == on {
		return
	}
	if !on {
		b.deposit(b.requests.Swap(0) * b.ratio)
		return
	}
	k := max(int64(keep*milliPerToken), 0)
	for {
		cur := b.milli.Load()
		if cur <= k || b.milli.CompareAndSwap(cur, k) {
			return
		}
	}
}

// Shared reports whether the bucket is a lease of a shared one.
func (b *Budget) Shared() bool { return b.shared.Load() }

// TakeRequests returns the requests counted while shared since the last
// call, for the shared bucket to deposit Ratio tokens for each.
func (b *Budget) TakeRequests() int64 { return b.requests.Swap(0) }

// Return deposits locally the tokens of requests that TakeRequests handed
// out and the shared bucket never received (it could not be reached).
func (b *Budget) Return(requests int64) { b.deposit(requests * b.ratio) }

// Grant adds tokens leased from the shared bucket, up to the burst.
func (b *Budget) Grant(tokens float64) {
	if m := int64(tokens * milliPerToken); m > 0 {
		b.deposit(m)
	}
}
