package fleet

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire"
)

// ErrNoProvider is returned for a passthrough call of a wire format no
// passthrough provider speaks.
var ErrNoProvider = errors.New("no provider for the client's format")

// MaxPassthrough bounds the passthrough routes kept: a client naming ever
// new models cannot grow the registry without limit.
const MaxPassthrough = 512

// Registry is every endpoint the engine sends to: the configured ones,
// added at build, and passthrough ones, created once per (model, format)
// on first use and kept, each with its route (R, the engine's, made by
// Route). Build it with its fields set, then Add the configured endpoints;
// after that it is safe for concurrent use, and All never takes a lock.
type Registry[R any] struct {
	// Templates are the passthrough providers: each serves model names no
	// model or alias claims, to clients of its wire format.
	Templates []*provider.Endpoint
	// Endpoint makes a passthrough endpoint's live state; Route its route.
	Endpoint func(*provider.Endpoint) (*Endpoint, error)
	Route    func(model string, ep *Endpoint) (R, error)

	eps  []*Endpoint
	byID map[string]*Endpoint

	mu       sync.Mutex // guards following
	pass     map[passKey]R
	passByID map[string]*Endpoint
	// passEps lists passthrough endpoints in creation order (read by All);
	// replaced, never modified.
	passEps atomic.Pointer[[]*Endpoint]
}

type passKey struct {
	model  string
	format llm.Format
}

// Add adds a configured endpoint (at build, before any call).
func (r *Registry[R]) Add(ep *Endpoint) {
	if r.byID == nil {
		r.byID = map[string]*Endpoint{}
	}
	r.eps = append(r.eps, ep)
	r.byID[ep.ID] = ep
}

// All returns every endpoint: configured, then passthrough.
func (r *Registry[R]) All() []*Endpoint {
	p := r.passEps.Load()
	if p == nil {
		return r.eps
	}
	out := make([]*Endpoint, 0, len(r.eps)+len(*p))
	return append(append(out, r.eps...), *p...)
}

// ByID finds a configured or passthrough endpoint (nil when none has id).
func (r *Registry[R]) ByID(id string) *Endpoint {
	if ep := r.byID[id]; ep != nil {
		return ep
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.passByID[id]
}

// PassRoutes calls f with each passthrough route made so far.
func (r *Registry[R]) PassRoutes(f func(R)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range r.pass {
		f(rs)
	}
}

// Passthrough returns the route serving model for a client of format when
// no model or alias claims it: one endpoint on the provider of the
// client's format, created once and kept; ErrNoProvider when none speaks
// it.
func (r *Registry[R]) Passthrough(model string, format llm.Format) (R, error) {
	k := passKey{model, format}
	r.mu.Lock()
	defer r.mu.Unlock()
	if rs, ok := r.pass[k]; ok {
		return rs, nil
	}
	var none R
	pe, err := passthroughEndpoint(r.Templates, model, format)
	if err != nil {
		return none, err
	}
	// Clients of both formats on the same provider share the endpoint.
	ep := r.passByID[pe.ID]
	if ep == nil {
		if len(r.pass) >= MaxPassthrough {
			return none, fmt.Errorf("more than %d passthrough model names are in use", MaxPassthrough)
		}
		if ep, err = r.Endpoint(pe); err != nil {
			return none, err
		}
		old := r.passEps.Load()
		var list []*Endpoint
		if old != nil {
			list = append(list, *old...)
		}
		list = append(list, ep)
		r.passEps.Store(&list)
	}
	rs, err := r.Route(model, ep)
	if err != nil {
		return none, err
	}
	if r.pass == nil {
		r.pass, r.passByID = map[passKey]R{}, map[string]*Endpoint{}
	}
	r.pass[k], r.passByID[ep.ID] = rs, ep
	return rs, nil
}

// passthroughEndpoint is the endpoint serving model for a client of format
// on the first template of that format (or, failing one, of its family).
func passthroughEndpoint(templates []*provider.Endpoint, model string, format llm.Format) (*provider.Endpoint, error) {
	// Only a provider of the client's format serves it: translating an
	// OpenAI call for gpt-4o into an Anthropic one (or the reverse) would
	// send a model name the other provider does not have.
	var tmpl *provider.Endpoint
	for _, p := range templates {
		if p.Format == format {
			tmpl = p
			break
		}
	}
	sibling := false // the provider speaks another API of the client's family
	for _, p := range templates {
		if tmpl == nil && p.Format.Family() == format.Family() {
			tmpl, sibling = p, true
		}
	}
	if tmpl == nil {
		return nil, fmt.Errorf("%w: no %s provider is configured (set %s, or declare models in a config)", ErrNoProvider, format, wire.For(format).KeyEnv())
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
	return &pe, nil
}

// Status is one endpoint's live state, for gauges and dashboards.
type Status struct {
	ID, Model, Region, Provider string
	Breaker                     string
	// State is what routing sees at the call: StateDown, StateBreakerOpen,
	// StateHalfOpen, StateCooling, StateEjected or StateHealthy (the first
	// that applies, in that order), from the view the picker reads.
	State  string
	Health health.Snapshot
}

// Statuses returns the live state of eps at now.
func Statuses(eps []*Endpoint, now time.Time) []Status {
	out := make([]Status, 0, len(eps))
	for _, ep := range eps {
		br := ep.Breaker.State().String() // an ended open interval turns half-open here, republishing the view
		out = append(out, Status{ID: ep.ID, Model: ep.Model, Region: ep.Region, Provider: ep.Provider,
			Breaker: br, State: ep.View().State(now), Health: ep.Health.Snapshot()})
	}
	return out
}
