package engine

import (
	"github.com/keelmesh/keel/internal/rollout"
)

// Rollout sends Percent of the traffic through Stage and the rest through
// the monitor stage (internal/rollout).
type Rollout = rollout.Rollout

// SetRollout changes the rollout for calls that start after it.
func (e *Engine) SetRollout(r Rollout) error { return e.rollout.Set(r) }

// Rollout returns the rollout in force.
func (e *Engine) Rollout() Rollout { return e.rollout.Get() }
