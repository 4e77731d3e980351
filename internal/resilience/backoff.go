package resilience

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// BackoffConfig configures a Backoff. The zero value is the documented
// default.
type BackoffConfig struct {
	// Base is the cap of the first retry's delay (attempt 0). Zero means
	// 100ms.
	Base time.Duration
	// Max caps every delay before jitter. Zero means 5s. It must not be
	// below Base.
	Max time.Duration
	// Rand returns a uniformly distributed float in [0, 1). Nil means
	// math/rand/v2's Float64. It must be safe for concurrent use.
	Rand func() float64
}

// Backoff computes retry delays: exponential growth with full jitter, as in
// "Exponential Backoff and Jitter" (AWS architecture blog), so that clients
// retrying after one fault spread out instead of arriving in waves.
//
// A Backoff is immutable and safe for concurrent use; Delay never blocks.
type Backoff struct {
	base, max time.Duration
	rand      func() float64
}

// NewBackoff validates cfg, fills in defaults and returns a Backoff.
func NewBackoff(cfg BackoffConfig) (*Backoff, error) {
	if cfg.Base == 0 {
		cfg.Base = 100 * time.Millisecond
	}
	if cfg.Max == 0 {
		cfg.Max = 5 * time.Second
	}
	if cfg.Base < 0 {
		return nil, fmt.Errorf("backoff base %v is negative: %w", cfg.Base, ErrInvalidConfig)
	}
	if cfg.Max < cfg.Base {
		return nil, fmt.Errorf("backoff max %v is below base %v: %w", cfg.Max, cfg.Base, ErrInvalidConfig)
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	return &Backoff{base: cfg.Base, max: cfg.Max, rand: cfg.Rand}, nil
}

// Delay returns how long to wait before retry number attempt (0 for the
// first retry): a uniformly random duration in [0, min(Max, Base·2^attempt)),
// or retryAfter when that is longer, so that a server's retry-after is always
// honoured. A negative attempt counts as 0; a non-positive retryAfter is
// ignored.
func (b *Backoff) Delay(attempt int, retryAfter time.Duration) time.Duration {
	if attempt < 0 {
		attempt = 0
	}
	// Base<<attempt overflows for large attempts, so compare Base with
	// Max>>attempt before shifting.
	ceil := b.max
	if attempt < 63 && b.base <= b.max>>attempt {
		ceil = b.base << attempt
	}
	d := time.Duration(b.rand() * float64(ceil))
	if d >= ceil && ceil > 0 {
		// A Rand that returns 1.0 (or rounding) must not exceed the cap.
		d = ceil - 1
	}
	if d < 0 {
		d = 0
	}
	return max(d, retryAfter)
}
