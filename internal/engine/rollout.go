package engine

import (
	"fmt"
	"hash/fnv"

	"github.com/keelmesh/keel/internal/llm"
)

// Rollout stages, from least to most mesh.
const (
	// StageMonitor observes only: the call goes to the route's primary
	// model without hedging, continuation or answer repair (the legacy path).
	StageMonitor = "monitor"
	// StageHedging adds routing, retries, fallback, hedging and mid-stream
	// continuation, but leaves answers untouched.
	StageHedging = "hedging"
	// StageFull is everything, structured-output repair included.
	StageFull = "full"
)

// Rollout sends Percent of the traffic (sticky by a hash of the request
// key) through Stage, and the rest through the monitor stage. The zero
// value is full for everyone.
type Rollout struct {
	Stage   string `json:"stage"`
	Percent int    `json:"percent"`
}

func (r Rollout) validate() error {
	switch r.Stage {
	case "", StageMonitor, StageHedging, StageFull:
	default:
		return fmt.Errorf("rollout stage %q: want monitor, hedging or full", r.Stage)
	}
	if r.Percent < 0 || r.Percent > 100 {
		return fmt.Errorf("rollout percent %d: want 0-100", r.Percent)
	}
	return nil
}

// SetRollout changes the rollout for calls that start after it.
func (e *Engine) SetRollout(r Rollout) error {
	if err := r.validate(); err != nil {
		return err
	}
	if r.Stage == "" {
		r.Stage = StageFull
	}
	e.rollout.Store(&r)
	return nil
}

// Rollout returns the rollout in force.
func (e *Engine) Rollout() Rollout { return *e.rollout.Load() }

// stageFor picks the call's stage from its rollout key: the client's
// X-Mesh-Rollout-Key header, else the end user (metadata.user_id / user),
// else the request id (then the choice is not sticky).
func (e *Engine) stageFor(req *llm.Request, call Call) string {
	r := e.rollout.Load()
	if r.Percent >= 100 {
		return r.Stage
	}
	key := ""
	if call.ClientHeader != nil {
		key = call.ClientHeader.Get("X-Mesh-Rollout-Key")
	}
	if key == "" {
		key = req.UserID
	}
	if key == "" {
		key = call.RequestID
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	if int(h.Sum32()%100) < r.Percent {
		return r.Stage
	}
	return StageMonitor
}
