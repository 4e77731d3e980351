package engine

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/wire"
)

// endpoint is an upstream with its live state (package fleet).
type endpoint = fleet.Endpoint

// Endpoint states, as EndpointStatus.State reports them.
const (
	StateHealthy     = fleet.StateHealthy
	StateDown        = fleet.StateDown
	StateBreakerOpen = fleet.StateBreakerOpen
	StateHalfOpen    = fleet.StateHalfOpen
	StateCooling     = fleet.StateCooling
	StateEjected     = fleet.StateEjected
)

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

// maxPassthrough bounds the passthrough routes kept: a client naming ever
// new models cannot grow the registry without limit.
const maxPassthrough = 512

// registry is the registry of every endpoint the engine sends to: the
// configured ones, fixed at New, and passthrough ones, created once per
// (model, format) on first use and kept.
type registry struct {
	eps []*endpoint

	mu   sync.Mutex // guards following
	pass map[passKey]*routeState
	// passEps lists passthrough endpoints in creation order (read by
	// Endpoints); replaced, never modified.
	passEps atomic.Pointer[[]*endpoint]
}

type passKey struct {
	model  string
	format llm.Format
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
	rc, hc := e.opts.RetryBudget, e.opts.HedgeBudget
	if e.shared != nil {
		rc.OnEmpty, hc.OnEmpty = e.kickLease, e.kickLease
	}
	rb, err := resilience.NewBudget(rc)
	if err != nil {
		return nil, fmt.Errorf("engine: retry budget: %w", err)
	}
	hb, err := resilience.NewHedgeBudget(hc)
	if err != nil {
		return nil, fmt.Errorf("engine: hedge budget: %w", err)
	}
	if e.shared != nil {
		// Leases of the fleet's buckets from the start, holding one token
		// each until the first lease (as a lease would): full buckets of
		// their own would add a burst per replica to the fleet's.
		rb.Share(true, 1)
		hb.Share(true, 1)
	}
	return &routeState{name: name, cands: cands, strategy: s, retries: rb, hedges: hb}, nil
}

// ErrNoProvider is returned for a passthrough call of a wire format no
// passthrough provider speaks.
var ErrNoProvider = errors.New("no provider for the client's format")

// keyEnv names the environment variable keel serve reads a format's
// provider key from when it runs without a config.
func keyEnv(f llm.Format) string { return wire.For(f).KeyEnv() }

// passthroughRoute returns the route serving model for a client of format
// when no model or alias claims it: one endpoint on the provider of the
// client's format, created once and kept; ErrNoProvider when none speaks it.
func (e *Engine) passthroughRoute(model string, format llm.Format) (*routeState, error) {
	k := passKey{model, format}
	f := &e.fleet
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs := f.pass[k]; rs != nil {
		return rs, nil
	}
	// Only a provider of the client's format serves it: translating an
	// OpenAI call for gpt-4o into an Anthropic one (or the reverse) would
	// send a model name the other provider does not have.
	var tmpl *provider.Endpoint
	for _, p := range e.passthrough {
		if p.Format == format {
			tmpl = p
			break
		}
	}
	sibling := false // the provider speaks another API of the client's family
	for _, p := range e.passthrough {
		if tmpl == nil && p.Format.Family() == format.Family() {
			tmpl, sibling = p, true
		}
	}
	if tmpl == nil {
		return nil, fmt.Errorf("%w: no %s provider is configured (set %s, or declare models in a config)", ErrNoProvider, format, keyEnv(format))
	}
	pe := *tmpl
	pe.Model, pe.UpstreamModel = model, model
	pe.ID = model + "/" + pe.Region + "/" + pe.Provider
	if sibling {
		// OpenAI serves both of its APIs: a Responses client of an openai
		// provider is sent to its Responses API, nothing translated.
		pe.Format = format
		pe.ID += ":" + format.String()
	}
	// Clients of both formats on the same provider share the endpoint.
	var ep *endpoint
	for _, rs := range f.pass {
		if rs.cands[0].ID == pe.ID {
			ep = rs.cands[0]
			break
		}
	}
	if ep == nil {
		if len(f.pass) >= maxPassthrough {
			return nil, fmt.Errorf("more than %d passthrough model names are in use", maxPassthrough)
		}
		var err error
		if ep, err = e.newEndpoint(&pe); err != nil {
			return nil, err
		}
		old := f.passEps.Load()
		var list []*endpoint
		if old != nil {
			list = append(list, *old...)
		}
		list = append(list, ep)
		f.passEps.Store(&list)
	}
	rs, err := e.newRoute(model, []*endpoint{ep}, route.Ordered)
	if err != nil {
		return nil, err
	}
	if f.pass == nil {
		f.pass = map[passKey]*routeState{}
	}
	f.pass[k] = rs
	return rs, nil
}

// all returns every endpoint: configured, then passthrough.
func (f *registry) all() []*endpoint {
	p := f.passEps.Load()
	if p == nil {
		return f.eps
	}
	out := make([]*endpoint, 0, len(f.eps)+len(*p))
	return append(append(out, f.eps...), *p...)
}

// breakerChanged reports a breaker's transition (its view was
// republished).
func (e *Engine) breakerChanged(ep *endpoint, from, to resilience.State) {
	e.events.breaker(BreakerEvent{Endpoint: ep.ID, From: from, To: to, Time: e.now()})
}

// Probe timing (package fleet).
const (
	firstProbe           = fleet.FirstProbe
	defaultProbeInterval = fleet.DefaultProbeInterval
)

// markDown takes ep out of rotation until a probe reaches it, and tells
// the other replicas when the mesh shares state.
func (e *Engine) markDown(ep *endpoint) { e.prober().SetDown(ep, true) }

// setDown takes ep out of rotation until a probe reaches it (local: this
// replica saw it fail).
func (e *Engine) setDown(ep *endpoint, local bool) { e.prober().SetDown(ep, local) }

// prober is the engine's prober of unreachable endpoints.
func (e *Engine) prober() *fleet.Prober {
	return &fleet.Prober{Probe: e.client.Probe, Interval: e.probeInt, Shared: e.shared, Log: e.log, Stop: e.stop, WG: &e.probes, Closed: e.closed.Load}
}
