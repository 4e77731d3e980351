package resilience

import (
	"fmt"
	"time"
)

// ValveConfig is the policy of Keel's mesh-aware safety valve: when the
// share of calls served by a weaker model than their route's primary (a
// fallback down the capability ladder; an equal or stronger model does not
// count) passes Threshold over Window, with at least MinRequests calls in
// the window, every call goes straight to its route's primary endpoint (one
// attempt, no retry, hedge, fallback or continuation) for Hold. The zero
// value is the documented default: enabled, Threshold 0.05, Window 60s,
// MinRequests 50, Hold 30s. It is also what Keel's config file decodes
// resilience.safety_valve into (the webhook key there belongs to the alert
// subscriber, not to this policy). The engine owns the counting; this is
// plain data, safe to copy.
type ValveConfig struct {
	// Disabled turns the valve off; default false.
	Disabled bool `yaml:"disabled"`
	// Threshold is the fallback rate that trips the valve, in [0, 1]. Zero
	// means 0.05.
	Threshold float64 `yaml:"threshold"`
	// Window is the rolling window of the fallback rate, counted in
	// one-second buckets (at least one). Zero or negative means 60s.
	Window time.Duration `yaml:"window"`
	// MinRequests is the least number of calls in the window before the
	// rate is judged. Zero means 50.
	MinRequests int `yaml:"min_requests"`
	// Hold is how long pass-through lasts before the rate is judged again.
	// Zero or negative means 30s.
	Hold time.Duration `yaml:"hold"`
}

// WithDefaults returns c with every zero field (and a non-positive Window
// or Hold) replaced by its default. It does not validate.
func (c ValveConfig) WithDefaults() ValveConfig {
	if c.Threshold == 0 {
		c.Threshold = 0.05
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MinRequests == 0 {
		c.MinRequests = 50
	}
	if c.Hold <= 0 {
		c.Hold = 30 * time.Second
	}
	return c
}

// Validate reports whether c is usable: Threshold must lie in [0, 1] (zero
// meaning the default). The error wraps ErrInvalidConfig.
func (c ValveConfig) Validate() error {
	if !(c.Threshold >= 0 && c.Threshold <= 1) {
		return fmt.Errorf("expected a number between 0 and 1, got %v: %w", c.Threshold, ErrInvalidConfig)
	}
	return nil
}
