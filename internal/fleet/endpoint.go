// Package fleet is the endpoints the engine sends to: each endpoint with
// its live state (health, breaker, reachability, and the immutable view the
// picker reads), the registry of them (configured and passthrough
// endpoints, Registry), the chains of models and aliases they form (Plan),
// and the sharing of their state and of the retry and hedge budgets
// between the replicas of one mesh (SharedState, Observation, Sharing and
// its lease loop). It reaches no stage package.
//
// An Endpoint is safe for concurrent use: its view is republished, never
// modified, after every outcome (grpc-go's picker snapshots), so picking
// reads one pointer per candidate and takes no lock. Nothing here blocks
// a call's path: observations are handed to SharedState.Publish, which
// must not block, and leases run on their own goroutine (RunLeases).
package fleet

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
)

// Endpoint is an upstream with its live state. It lives in the engine's
// registry for the engine's lifetime, so health, breaker, ejection and
// cooldown carry across calls.
type Endpoint struct {
	*provider.Endpoint
	Health  *health.Tracker
	Breaker *resilience.Breaker
	// Pace is the endpoint's normal streaming pace (slow-stream hedging).
	Pace health.Pace
	// down is set while the endpoint is unreachable; a prober clears it.
	down atomic.Bool
	// view is what the picker reads: republished after every outcome of
	// an attempt on the endpoint, and when it goes down or comes back.
	view atomic.Pointer[View]
	// shared, when the replicas share state, gets what a new view shows
	// that the fleet does not know yet (shareView); sh is what the fleet
	// knows.
	shared SharedState
	sh     sharedEP
	// probing is set while a prober runs for the endpoint.
	probing atomic.Bool
}

// Config builds an Endpoint's health tracker and breaker.
type Config struct {
	Health  health.Config
	Breaker resilience.BreakerConfig
	// Shared, when set, gets the endpoint's news (see SharedState).
	Shared SharedState
	// OnBreaker, when set, is told of each breaker transition, after the
	// endpoint's view was republished and, when shared, a close published.
	OnBreaker func(ep *Endpoint, from, to resilience.State)
}

// New builds the live endpoint of pe.
func New(pe *provider.Endpoint, cfg Config) (*Endpoint, error) {
	h, err := health.New(cfg.Health)
	if err != nil {
		return nil, fmt.Errorf("engine: health: %w", err)
	}
	ep := &Endpoint{Endpoint: pe, Health: h, shared: cfg.Shared}
	if cfg.Shared != nil {
		ep.sh.headroom.Store(math.Float64bits(1))
	}
	bc := cfg.Breaker
	user := bc.OnStateChange
	bc.OnStateChange = func(from, to resilience.State) {
		if user != nil {
			user(from, to)
		}
		ep.breakerChanged(from, to, cfg.OnBreaker)
	}
	b, err := resilience.NewBreaker(bc)
	if err != nil {
		return nil, fmt.Errorf("engine: breaker: %w", err)
	}
	ep.Breaker = b
	ep.Publish()
	return ep, nil
}

// breakerChanged republishes ep's view and reports the transition.
func (ep *Endpoint) breakerChanged(from, to resilience.State, report func(*Endpoint, resilience.State, resilience.State)) {
	// The breaker reports transitions after releasing its lock, in order,
	// so the view published here is the state just entered or a later one.
	ep.Publish()
	if ep.shared != nil && to == resilience.Closed && !ep.sh.remoteClose.Load() {
		ep.shared.Publish(Observation{Endpoint: ep.ID, Kind: ObsBreakerClosed})
	}
	if report != nil {
		report(ep, from, to)
	}
}

// View is an endpoint's routing state at its last outcome: immutable once
// published.
type View struct {
	Expected time.Duration
	Cold     bool
	Down     bool
	// EjectedUntil, CoolingUntil and OpenUntil end the ejection, the
	// retry-after cooldown and the breaker's open interval.
	EjectedUntil time.Time
	CoolingUntil time.Time
	OpenUntil    time.Time
	BreakerOpen  bool
	// HalfOpen reports a breaker admitting only its probes.
	HalfOpen bool
}

// View is the endpoint's view as last published.
func (ep *Endpoint) View() *View { return ep.view.Load() }

// Publish recomputes ep's view from its tracker and breaker. It runs on
// outcome callbacks, never on the pick path.
func (ep *Endpoint) Publish() {
	v := &View{Expected: ep.Health.ExpectedLatency(), Cold: ep.Health.Cold(), Down: ep.down.Load()}
	v.EjectedUntil, v.CoolingUntil = ep.Health.Until()
	v.OpenUntil, v.BreakerOpen = ep.Breaker.OpenUntil()
	// State is one atomic load unless the breaker is open (then OpenUntil
	// said so and State is not asked).
	v.HalfOpen = !v.BreakerOpen && ep.Breaker.State() == resilience.HalfOpen
	ep.view.Store(v)
	if ep.shared != nil {
		ep.shareView(v)
	}
}

// Down reports whether the endpoint is marked unreachable.
func (ep *Endpoint) Down() bool { return ep.down.Load() }

// MarkDown marks the endpoint unreachable and republishes its view; false
// when it already was.
func (ep *Endpoint) MarkDown() bool {
	if !ep.down.CompareAndSwap(false, true) {
		return false
	}
	ep.Publish()
	return true
}

// MarkUp marks the endpoint reachable again (the caller republishes); false
// when it was not down.
func (ep *Endpoint) MarkUp() bool { return ep.down.CompareAndSwap(true, false) }

// StartProbing claims the endpoint's prober; false when one runs.
func (ep *Endpoint) StartProbing() bool { return ep.probing.CompareAndSwap(false, true) }

// StopProbing releases the endpoint's prober.
func (ep *Endpoint) StopProbing() { ep.probing.Store(false) }

// Unavailability says why an endpoint's view keeps it from being sent to.
type Unavailability uint8

// Unavailabilities, in the order Unavailable tells them.
const (
	Available Unavailability = iota
	Unreachable
	BreakerOpen
	Cooling
	Ejected
)

// String is the reason routing and the record name (route.Candidate's
// Unavailable, the endpoint states).
func (u Unavailability) String() string {
	return [...]string{"", "unreachable", StateBreakerOpen, StateCooling, StateEjected}[u]
}

// Unavailable says why the endpoint must not be sent to at now (Available
// when it may), and when that ends (zero when only a probe can tell).
func (v *View) Unavailable(now time.Time) (Unavailability, time.Time) {
	switch {
	case v.Down:
		return Unreachable, time.Time{}
	case v.BreakerOpen && now.Before(v.OpenUntil):
		return BreakerOpen, v.OpenUntil
	case now.Before(v.CoolingUntil):
		return Cooling, v.CoolingUntil
	case now.Before(v.EjectedUntil):
		return Ejected, v.EjectedUntil
	}
	return Available, time.Time{}
}

// Endpoint states, as the engine's EndpointStatus.State reports them.
const (
	StateHealthy     = "healthy"
	StateDown        = "down"
	StateBreakerOpen = "breaker_open"
	StateHalfOpen    = "half_open"
	StateCooling     = "cooling"
	StateEjected     = "ejected"
)

// State names v at now from what Unavailable tells the picker: the reason
// the endpoint is skipped, else half_open while its breaker admits only
// probes (including an open breaker whose interval has ended), else
// healthy.
func (v *View) State(now time.Time) string {
	switch why, _ := v.Unavailable(now); why {
	case Unreachable:
		return StateDown
	case Available:
		if v.HalfOpen || v.BreakerOpen {
			return StateHalfOpen
		}
		return StateHealthy
	default:
		return why.String()
	}
}
