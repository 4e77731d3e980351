package rollout

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/resilience"
)

// Valve is the mesh-aware safety valve (resilience.ValveConfig has its
// policy and defaults): it counts finished calls and fallbacks to a weaker
// model in one-second buckets, and opens when their rate passes the
// threshold. Its state is read on every call with one atomic load;
// counting takes a short lock.
type Valve struct {
	cfg       resilience.ValveConfig
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

// NewValve returns a closed valve applying c (zero fields: defaults).
func NewValve(c resilience.ValveConfig) *Valve {
	c = c.WithDefaults()
	n := max(int(c.Window/time.Second), 1)
	return &Valve{cfg: c, buckets: make([]valveBucket, n)}
}

// Config returns the valve's policy, defaults filled in.
func (v *Valve) Config() resilience.ValveConfig { return v.cfg }

// Enabled reports whether the valve is on.
func (v *Valve) Enabled() bool { return !v.cfg.Disabled }

// Open reports whether calls must take the legacy path at now: the valve
// is on and tripped, and its hold has not ended.
func (v *Valve) Open(now time.Time) bool {
	if v.cfg.Disabled {
		return false
	}
	return v.open(now)
}

func (v *Valve) open(now time.Time) bool {
	u := v.openUntil.Load()
	return u != 0 && now.UnixNano() < u
}

// OpenUntil is when the hold of the valve's last opening ends (zero if it
// never opened).
func (v *Valve) OpenUntil() time.Time {
	u := v.openUntil.Load()
	if u == 0 {
		return time.Time{}
	}
	return time.Unix(0, u)
}

// Counts reports whether a finished call counts toward the valve: it is
// on, the call did not take the legacy path, and it did not fail by the
// client's fault (a 400 says nothing about the mesh: meshErr is false for
// an error Keel did not decide).
func (v *Valve) Counts(legacy, failed, meshErr bool) bool {
	return !v.cfg.Disabled && !legacy && (!failed || meshErr)
}

// Transition is a change of the valve's state.
type Transition uint8

// The valve's transitions.
const (
	Unchanged Transition = iota
	Opened
	Closed
)

// Observe counts one finished call at now (downgraded: served by a weaker
// model than its route's primary) and trips or resets the valve. It
// returns the transition, with the window's fallback rate and call count.
//
// The valve counts fallbacks to a weaker model — the cascade it exists to
// stop — not a region failover within the model, nor a fallback to an
// equal or stronger one (dropping to the plain path then would turn a
// survivable whole-model overload into errors).
func (v *Valve) Observe(now time.Time, downgraded bool) (t Transition, rate float64, n int) {
	sec := now.Unix()
	v.mu.Lock()
	defer v.mu.Unlock()
	b := &v.buckets[sec%int64(len(v.buckets))]
	if b.sec != sec {
		*b = valveBucket{sec: sec}
	}
	b.requests++
	if downgraded {
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
		return Opened, rate, n
	case v.tripped:
		v.tripped = false
		return Closed, rate, n
	}
	return Unchanged, rate, n
}

func (v *Valve) rateLocked(sec int64) (float64, int) {
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

// Window returns the window's fallback rate and call count at now.
func (v *Valve) Window(now time.Time) (rate float64, n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.rateLocked(now.Unix())
}

// State is the valve's state for the admin API and dashboards.
type State struct {
	Enabled      bool      `json:"enabled"`
	Open         bool      `json:"open"`
	OpenUntil    time.Time `json:"open_until,omitzero"`
	FallbackRate float64   `json:"fallback_rate"`
	Requests     int       `json:"window_requests"`
	Threshold    float64   `json:"threshold"`
}

// State returns the valve's state at now.
func (v *Valve) State(now time.Time) State {
	rate, n := v.Window(now)
	s := State{Enabled: v.Enabled(), Open: v.Open(now), FallbackRate: rate, Requests: n, Threshold: v.cfg.Threshold}
	if s.Open {
		s.OpenUntil = v.OpenUntil()
	}
	return s
}

// Finished counts a call that finished (started at start; legacy, failed,
// meshErr and downgraded as for Counts and Observe) when it counts, and
// returns the event of the transition it caused at now; ok is false when
// the valve did not change.
func (v *Valve) Finished(start time.Time, legacy, failed, meshErr, downgraded bool, now func() time.Time) (ev observe.ValveEvent, ok bool) {
	if !v.Counts(legacy, failed, meshErr) {
		return ev, false
	}
	t, rate, n := v.Observe(start, downgraded)
	if t == Unchanged {
		return ev, false
	}
	ev = observe.ValveEvent{Event: observe.ValveEventClosed, FallbackRate: rate, Requests: n, Threshold: v.cfg.Threshold, Time: now()}
	if t == Opened {
		ev.Event, ev.OpenUntil = observe.ValveEventOpen, v.OpenUntil()
	}
	return ev, true
}
