package engine

import (
	"time"

	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/rollout"
)

// Rollout stages, from least to most mesh (internal/rollout).
const (
	StageMonitor = rollout.StageMonitor
	StageHedging = rollout.StageHedging
	StageFull    = rollout.StageFull
)

// Rollout sends Percent of the traffic through Stage and the rest through
// the monitor stage (internal/rollout).
type Rollout = rollout.Rollout

// SetRollout changes the rollout for calls that start after it.
func (e *Engine) SetRollout(r Rollout) error { return e.rollout.Set(r) }

// Rollout returns the rollout in force.
func (e *Engine) Rollout() Rollout { return e.rollout.Get() }

// rolloutStage is the rollout stage (rollout.NewStage) over this
// engine's calls: the stage goes into the record, the legacy path into
// the record and the call's exec.
func (e *Engine) rolloutStage() pipeline.Stage {
	return rollout.NewStage(e.rollout, e.valve, rollout.Hooks{
		Record: func(pc *pipeline.Call, p rollout.Part) {
			c := callOf(pc)
			c.rec.Stage = p.Stage
			if p.Path.Legacy {
				// Monitor-only rollout, or the safety valve is open: the
				// plain path to the primary model.
				c.x.legacy, c.rec.Legacy = true, true
			}
		},
		Start:   func(pc *pipeline.Call) time.Time { return callOf(pc).rec.Start },
		Monitor: func(pc *pipeline.Call) bool { return callOf(pc).shadowLegacy },
	})
}
