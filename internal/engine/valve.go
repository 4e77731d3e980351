package engine

import (
	"github.com/keelmesh/keel/internal/rollout"
)

// The mesh-aware safety valve is rollout.Valve, built with the rollout
// stage (chain.Build; its config is resilience.ValveConfig). Each opening
// and closing is logged and reported to the observer as a ValveEvent (the
// alert webhook is such an observer, in telemetry).

// ValveState is the safety valve's state for the admin API and dashboards.
type ValveState = rollout.State

// Valve returns the safety valve's state.
func (e *Engine) Valve() ValveState { return e.valve.State(e.now()) }

// countValve counts a finished call toward the valve, when it counts, and
// logs and reports a transition (as a ValveEvent, on the request's
// goroutine: the engine does no I/O for it).
func (e *Engine) countValve(rec *Record) {
	failed := rec.Err != nil
	if ev, ok := e.valve.Finished(rec.Start, rec.Legacy, failed, failed && rec.Err.MeshCode != "", rec.Downgraded, e.now); ok {
		e.log.Warn("keel: "+ev.Event, "fallback_rate", ev.FallbackRate, "window_requests", ev.Requests, "threshold", ev.Threshold)
		e.events.valve(ev)
	}
}
