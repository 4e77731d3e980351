package engine

import (
	"fmt"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
)

// endpoint is an upstream with its live state (package fleet).
type endpoint = fleet.Endpoint

// routeState is the candidate chain of one model or alias name, with the
// route's retry and hedge budgets (shared by every call on the route).
type routeState struct {
	name        string
	translation string
	cands       []*endpoint
	strategy    route.Strategy
	retries     *resilience.Budget
	hedges      *resilience.Budget
	// tiers, set on a tiered alias, holds the routes its calls take.
	tiers *tiers
	// semThreshold, > 0 on an alias with the semantic cache on, is the
	// lowest similarity it serves.
	semThreshold float32
}

func (e *Engine) newEndpoint(pe *provider.Endpoint) (*endpoint, error) {
	cfg := fleet.Config{Health: e.opts.Health, Breaker: e.opts.Breaker, Shared: e.shared, OnBreaker: e.breakerChanged}
	if cfg.Health.Now == nil {
		cfg.Health.Now = e.now
	}
	if cfg.Breaker.Now == nil {
		cfg.Breaker.Now = e.now
	}
	return fleet.New(pe, cfg)
}

func (e *Engine) newRoute(name string, cands []*endpoint, s route.Strategy) (*routeState, error) {
	rb, hb, err := e.sharing.NewBudgets(e.opts.RetryBudget, e.opts.HedgeBudget)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return &routeState{name: name, cands: cands, strategy: s, retries: rb, hedges: hb}, nil
}

// breakerChanged reports a breaker's transition (its view was
// republished).
func (e *Engine) breakerChanged(ep *endpoint, from, to resilience.State) {
	e.events.breaker(observe.BreakerEvent{Endpoint: ep.ID, From: from, To: to, Time: e.now()})
}

// Probe timing (package fleet).
const (
	firstProbe           = fleet.FirstProbe
	defaultProbeInterval = fleet.DefaultProbeInterval
)

// markDown takes ep out of rotation until a probe reaches it, and tells
// the other replicas when the mesh shares state.
func (e *Engine) markDown(ep *endpoint) { e.prober().SetDown(ep, true) }

// prober is the engine's prober of unreachable endpoints.
func (e *Engine) prober() *fleet.Prober {
	return &fleet.Prober{Probe: e.client.Probe, Interval: e.probeInt, Shared: e.shared, Log: e.log, Stop: e.stop, WG: &e.probes, Closed: e.closed.Load}
}
