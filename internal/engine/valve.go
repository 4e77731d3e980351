package engine

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/resilience"
)

// ValveConfig tunes the mesh-aware safety valve (see resilience.ValveConfig
// for its fields and defaults). Each opening and closing is logged and
// reported to the observer as a ValveEvent (the alert webhook is such an
// observer, in telemetry).
type ValveConfig = resilience.ValveConfig

// valve counts calls and fallbacks in one-second buckets. Its state is read
// on every call with one atomic load; counting takes a short lock.
type valve struct {
	cfg       ValveConfig
	openUntil atomic.Int64 // unix ns; 0 = closed

	mu      sync.Mutex // guards following
	buckets []valveBucket
	tripped bool
}

type valveBucket struct {
	sec       int64
	requests  int
	fallbacks int
}

func newValve(c ValveConfig) *valve {
	c = c.WithDefaults()
	n := max(int(c.Window/time.Second), 1)
	return &valve{cfg: c, buckets: make([]valveBucket, n)}
}

// open reports whether calls must take the pass-through path now.
func (v *valve) open(now time.Time) bool {
	u := v.openUntil.Load()
	return u != 0 && now.UnixNano() < u
}

// ValveState is the safety valve's state for the admin API and dashboards.
type ValveState struct {
	Enabled      bool      `json:"enabled"`
	Open         bool      `json:"open"`
	OpenUntil    time.Time `json:"open_until,omitzero"`
	FallbackRate float64   `json:"fallback_rate"`
	Requests     int       `json:"window_requests"`
	Threshold    float64   `json:"threshold"`
}

// observe counts one finished call and trips or resets the valve. It
// returns an alert event name when the state changed.
func (v *valve) observe(now time.Time, fallback bool) (event string, rate float64, n int) {
	sec := now.Unix()
	v.mu.Lock()
	defer v.mu.Unlock()
	b := &v.buckets[sec%int64(len(v.buckets))]
	if b.sec != sec {
		*b = valveBucket{sec: sec}
	}
	b.requests++
	if fallback {
		b.fallbacks++
	}
	rate, n = v.rateLocked(sec)
	switch {
	case v.open(now):
	case n >= v.cfg.MinRequests && rate > v.cfg.Threshold:
		v.openUntil.Store(now.Add(v.cfg.Hold).UnixNano())
		v.tripped = true
		// Start the next judgement from a clean window.
		for i := range v.buckets {
			v.buckets[i] = valveBucket{}
		}
		return ValveEventOpen, rate, n
	case v.tripped:
		v.tripped = false
		return ValveEventClosed, rate, n
	}
	return "", rate, n
}

func (v *valve) rateLocked(sec int64) (float64, int) {
	req, fb := 0, 0
	for _, b := range v.buckets {
		if b.sec > sec-int64(len(v.buckets)) && b.sec <= sec {
			req += b.requests
			fb += b.fallbacks
		}
	}
	if req == 0 {
		return 0, 0
	}
	return float64(fb) / float64(req), req
}

func (v *valve) state(now time.Time) ValveState {
	v.mu.Lock()
	rate, n := v.rateLocked(now.Unix())
	v.mu.Unlock()
	s := ValveState{Enabled: !v.cfg.Disabled, Open: v.open(now), FallbackRate: rate, Requests: n, Threshold: v.cfg.Threshold}
	if s.Open {
		s.OpenUntil = time.Unix(0, v.openUntil.Load())
	}
	return s
}

// Valve returns the safety valve's state.
func (e *Engine) Valve() ValveState { return e.valve.state(e.now()) }

// alert logs a valve transition and reports it as a ValveEvent, on the
// request's goroutine: the engine does no I/O for it.
func (e *Engine) alert(event string, rate float64, n int) {
	e.log.Warn("keel: "+event, "fallback_rate", rate, "window_requests", n, "threshold", e.valve.cfg.Threshold)
	ev := ValveEvent{Event: event, FallbackRate: rate, Requests: n, Threshold: e.valve.cfg.Threshold, Time: e.now()}
	if event == ValveEventOpen {
		ev.OpenUntil = time.Unix(0, e.valve.openUntil.Load())
	}
	e.events.valve(ev)
}
