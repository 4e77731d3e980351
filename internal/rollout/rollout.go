// Package rollout decides how much of the mesh a call gets: the rollout
// stage its key falls in (monitor, hedging or full), and whether the
// mesh-aware safety valve sends it down the legacy path (the route's
// primary endpoint, one attempt, answers untouched).
//
// NewStage is the call pipeline's rollout stage: it records the call's
// stage and path before the stages below run.
//
// A Plan and a Valve are safe for concurrent use. Plan reads are one atomic
// load; the Valve's state is read with one atomic load and counting a call
// takes a short lock. Nothing here blocks or does I/O; the clock is the
// caller's (every method takes now).
package rollout

import (
	"fmt"
	"hash/fnv"
	"sync/atomic"
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

// Validate reports whether r names a stage and a percentage in 0-100.
func (r Rollout) Validate() error {
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

// Plan holds the rollout in force; it may be changed while calls run.
// Build it with NewPlan.
type Plan struct {
	r atomic.Pointer[Rollout]
}

// NewPlan returns a Plan holding r; a zero r (no stage, 0 %) is full for
// everyone.
func NewPlan(r Rollout) (*Plan, error) {
	if r.Stage == "" && r.Percent == 0 {
		r = Rollout{Stage: StageFull, Percent: 100}
	}
	p := &Plan{}
	if err := p.Set(r); err != nil {
		return nil, err
	}
	return p, nil
}

// Set changes the rollout for calls that start after it; an empty Stage
// means full.
func (p *Plan) Set(r Rollout) error {
	if err := r.Validate(); err != nil {
		return err
	}
	if r.Stage == "" {
		r.Stage = StageFull
	}
	p.r.Store(&r)
	return nil
}

// Get returns the rollout in force.
func (p *Plan) Get() Rollout { return *p.r.Load() }

// Key is a call's rollout key: the client's X-Mesh-Rollout-Key header,
// else the end user (metadata.user_id / user), else the request id (then
// the choice is not sticky).
func Key(header, user, requestID string) string {
	switch {
	case header != "":
		return header
	case user != "":
		return user
	}
	return requestID
}

// Stage picks the stage of the call with key: the rollout's stage for
// Percent of the keys (by an FNV-1a hash, so a key always gets the same),
// the monitor stage for the rest.
func (p *Plan) Stage(key string) string {
	r := p.r.Load()
	if r.Percent >= 100 {
		return r.Stage
	}
	h := fnv.New32a()
	h.Write([]byte(key))
	if int(h.Sum32()%100) < r.Percent {
		return r.Stage
	}
	return StageMonitor
}

// Path is what of the mesh a call gets.
type Path struct {
	// Legacy sends the call to its route's primary model on the plain
	// path: one attempt, no retry, hedge, fallback or continuation.
	Legacy bool
	// Answers says the answer may be checked and changed (structured
	// output, fragmentation): only at the full stage.
	Answers bool
}

// PathFor decides a call's path from its stage and whether the safety
// valve is open: the monitor stage, or an open valve, is the legacy path;
// answers are checked and repaired at the full stage only (fragmentation
// needs the full stage and no legacy path).
func PathFor(stage string, valveOpen bool) Path {
	return Path{Legacy: stage == StageMonitor || valveOpen, Answers: stage == StageFull}
}
