package engine

import (
	"time"

	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
)

// ValveConfig tunes the mesh-aware safety valve (see resilience.ValveConfig
// for its fields and defaults; the valve itself is rollout.Valve). Each
// opening and closing is logged and reported to the observer as a
// ValveEvent (the alert webhook is such an observer, in telemetry).
type ValveConfig = resilience.ValveConfig

// ValveState is the safety valve's state for the admin API and dashboards.
type ValveState struct {
	Enabled      bool      `json:"enabled"`
	Open         bool      `json:"open"`
	OpenUntil    time.Time `json:"open_until,omitzero"`
	FallbackRate float64   `json:"fallback_rate"`
	Requests     int       `json:"window_requests"`
	Threshold    float64   `json:"threshold"`
}

// Valve returns the safety valve's state.
func (e *Engine) Valve() ValveState {
	now := e.now()
	rate, n := e.valve.Window(now)
	s := ValveState{Enabled: e.valve.Enabled(), Open: e.valve.Open(now), FallbackRate: rate, Requests: n, Threshold: e.valve.Config().Threshold}
	if s.Open {
		s.OpenUntil = e.valve.OpenUntil()
	}
	return s
}

// countValve counts a finished call toward the valve, when it counts
// (rollout.Valve.Counts), and reports a transition.
func (e *Engine) countValve(rec *Record) {
	if !e.valve.Counts(rec.Legacy, rec.Err != nil, rec.Err != nil && rec.Err.MeshCode != "") {
		return
	}
	if t, rate, n := e.valve.Observe(rec.Start, rec.Downgraded); t != rollout.Unchanged {
		e.alert(t, rate, n)
	}
}

// alert logs a valve transition and reports it as a ValveEvent, on the
// request's goroutine: the engine does no I/O for it.
func (e *Engine) alert(t rollout.Transition, rate float64, n int) {
	event := ValveEventClosed
	if t == rollout.Opened {
		event = ValveEventOpen
	}
	threshold := e.valve.Config().Threshold
	e.log.Warn("keel: "+event, "fallback_rate", rate, "window_requests", n, "threshold", threshold)
	ev := ValveEvent{Event: event, FallbackRate: rate, Requests: n, Threshold: threshold, Time: e.now()}
	if t == rollout.Opened {
		ev.OpenUntil = e.valve.OpenUntil()
	}
	e.events.valve(ev)
}
