package resilience

import (
	"fmt"
	"time"
)

// HedgePolicy turns an endpoint's observed latency percentile into the delay
// after which a hedged (second) attempt is sent. The zero value uses the
// default floor (20ms) and ceiling (2s). Keel's config file decodes the keys
// resilience.hedge_floor and resilience.hedge_ceiling into it.
//
// A HedgePolicy is a plain value: copy it freely; Delay is safe for
// concurrent use and never blocks.
type HedgePolicy struct {
	// Floor is the shortest hedge delay, so that a very fast endpoint is not
	// hedged on every call. Zero means 20ms.
	Floor time.Duration `yaml:"hedge_floor"`
	// Ceiling is the longest hedge delay, and the delay used while no
	// latency data exists. Zero means 2s.
	Ceiling time.Duration `yaml:"hedge_ceiling"`
}

func (p HedgePolicy) bounds() (floor, ceiling time.Duration) {
	floor, ceiling = p.Floor, p.Ceiling
	if floor == 0 {
		floor = 20 * time.Millisecond
	}
	if ceiling == 0 {
		ceiling = 2 * time.Second
	}
	return floor, ceiling
}

// Validate reports whether p is usable: both bounds non-negative and the
// floor not above the ceiling (after defaults), as an error wrapping
// ErrInvalidConfig.
func (p HedgePolicy) Validate() error {
	floor, ceiling := p.bounds()
	if floor < 0 || ceiling < 0 {
		return fmt.Errorf("hedge floor %v and ceiling %v must not be negative: %w", floor, ceiling, ErrInvalidConfig)
	}
	if floor > ceiling {
		return fmt.Errorf("hedge floor %v is above ceiling %v: %w", floor, ceiling, ErrInvalidConfig)
	}
	return nil
}

// Delay returns p95 clamped to [Floor, Ceiling]; with no data (p95 ≤ 0) it
// returns Ceiling.
func (p HedgePolicy) Delay(p95 time.Duration) time.Duration {
	floor, ceiling := p.bounds()
	if p95 <= 0 {
		return ceiling
	}
	return min(max(p95, floor), ceiling)
}
