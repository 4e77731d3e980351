package engine

import (
	"github.com/keelmesh/keel/internal/fleet"
)

// SharedState carries what the replicas of one mesh learn about their
// upstreams between them, and holds the global retry and hedge budgets
// they lease tokens from (package fleet; store/redis implements it).
type SharedState = fleet.SharedState

// Observation is an endpoint state change one replica saw, for the others.
type Observation = fleet.Observation

// ObservationKind says what an Observation reports.
type ObservationKind = fleet.ObservationKind

// Observation kinds (see package fleet).
const (
	ObsDown          = fleet.ObsDown
	ObsUp            = fleet.ObsUp
	ObsEjected       = fleet.ObsEjected
	ObsCooling       = fleet.ObsCooling
	ObsBreakerOpen   = fleet.ObsBreakerOpen
	ObsBreakerClosed = fleet.ObsBreakerClosed
	ObsHeadroom      = fleet.ObsHeadroom
	ObsLatency       = fleet.ObsLatency
)

// Lease is one budget's exchange with its global bucket.
type Lease = fleet.Lease

// endpointByID finds a configured or passthrough endpoint.
func (e *Engine) endpointByID(id string) *endpoint {
	if ep := e.byID[id]; ep != nil {
		return ep
	}
	if p := e.fleet.passEps.Load(); p != nil {
		for _, ep := range *p {
			if ep.ID == id {
				return ep
			}
		}
	}
	return nil
}

// applyShared applies another replica's observation. It runs on the
// shared state's goroutine; observations of unknown endpoints (another
// config, a passthrough model not used here yet) are ignored.
func (e *Engine) applyShared(o Observation) {
	ep := e.endpointByID(o.Endpoint)
	if ep == nil || e.closed.Load() {
		return
	}
	if o.Kind == ObsDown {
		e.setDown(ep, false)
		ep.Publish()
		return
	}
	if ep.Apply(o) {
		e.log.Info("endpoint reachable again (seen by another replica)", "endpoint", ep.ID)
	}
}

// sharedNow is this replica's state worth republishing after the shared
// store comes back.
func (e *Engine) sharedNow() []Observation { return fleet.Current(e.fleet.all(), e.now()) }

// budgets lists every route's retry and hedge budgets with their keys.
func (e *Engine) budgets() []fleet.Budget {
	var out []fleet.Budget
	add := func(rs *routeState) {
		out = append(out, fleet.Budget{Key: "retry/" + rs.name, B: rs.retries}, fleet.Budget{Key: "hedge/" + rs.name, B: rs.hedges})
	}
	for _, rs := range e.routes {
		add(rs)
	}
	e.fleet.mu.Lock()
	for _, rs := range e.fleet.pass {
		add(rs)
	}
	e.fleet.mu.Unlock()
	return out
}

// kickLease asks for a lease round now (a shared budget refused a
// withdrawal); it never blocks.
func (e *Engine) kickLease() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// runShared runs the lease loop (fleet.Leases) until the engine closes.
func (e *Engine) runShared() {
	defer e.probes.Done()
	l := fleet.Leases{Shared: e.shared, Budgets: e.budgets, Endpoints: e.fleet.all, Now: e.now, Stop: e.stop, Kick: e.kick}
	l.Run()
}
