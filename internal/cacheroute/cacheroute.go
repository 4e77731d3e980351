// Package cacheroute is cache-aware routing (issue 28) over the engine's
// picks: a conversation stays on the endpoint whose prompt cache holds it
// (package affinity), unless that endpoint is unavailable or slower than
// affinity.Config.Stay allows; the re-caching of a move is charged to the
// route's cold-spend budget (policy.ColdSpend), from which a hedge must
// pay its cold prompt before it is sent.
//
// The engine calls Start before a call's primary pass, PreferWarm at each
// pick (on the router's candidates, in the route's order), Served when an
// attempt served the primary pass, Continued when a continuation takes a
// stream over, and ColdHedge before it sends a hedge.
// It reaches no stage package and not the engine.
package cacheroute

import (
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/route"
)

// Router is the engine's cache-aware routing: the affinity table (nil when
// resilience.cache_affinity is disabled) and each route's dollar budget
// for cold prompts (none when resilience.cold_spend is).
type Router struct {
	cfg      affinity.Config
	table    *affinity.Table
	spendCfg policy.ColdSpendConfig
	// spend holds each route's *policy.ColdSpend, built on first use.
	spend sync.Map
}

// New checks both configs and builds the router.
func New(a affinity.Config, s policy.ColdSpendConfig) (*Router, error) {
	r := &Router{cfg: a, spendCfg: s}
	if _, err := policy.NewColdSpend(s); err != nil {
		return nil, err
	}
	if a.Disabled {
		return r, a.Validate()
	}
	t, err := affinity.New(a)
	if err != nil {
		return nil, err
	}
	r.table = t
	return r, nil
}

// Table is the affinity table (nil when affinity is off).
func (r *Router) Table() *affinity.Table { return r.table }

// spendFor is the dollar budget of the route keyed rt (the engine's
// route); nil when cold_spend is disabled.
func (r *Router) spendFor(rt any) *policy.ColdSpend {
	if r.spendCfg.Disabled {
		return nil
	}
	if s, ok := r.spend.Load(rt); ok {
		return s.(*policy.ColdSpend)
	}
	s, _ := policy.NewColdSpend(r.spendCfg) // validated in New
	got, _ := r.spend.LoadOrStore(rt, s)
	return got.(*policy.ColdSpend)
}

// Call is one call's part in cache-aware routing.
type Call struct {
	// on is set for a model call's primary pass (not a fragment, a side
	// call or a shadow).
	on bool
	// key is the conversation; warm the index in the route's candidates
	// of the endpoint its cache is warm on (-1: none known), warmID its
	// id, holding cached tokens of it.
	key    affinity.Key
	warm   int
	warmID string
	cached int
	// tokens is the prompt's estimate; write is set when it marks cache
	// breakpoints (a cold send writes at the write price).
	tokens int
	write  bool
}

// Start sets c up before the call's primary pass (on: not a fragment, a
// side call or a shadow): the prompt's estimate, and with affinity on and
// the call off the legacy path its conversation and where it is warm
// among the n candidates of routeName (id(i) the i-th one's endpoint id).
// It runs on the call's goroutine before any attempt or hedge.
func (r *Router) Start(c *Call, on, legacy bool, routeName string, req *llm.Request, h http.Header, n int, id func(int) string, now time.Time) {
	c.on, c.warm = on, -1
	if !on {
		return
	}
	c.tokens, c.write = affinity.PromptTokens(req), affinity.Marks(req)
	if r.table == nil || legacy {
		return
	}
	c.key = affinity.KeyOf(req, h)
	en, ok := r.table.Get(routeName, c.key, now)
	if !ok {
		return
	}
	for i := range n {
		if id(i) == en.Endpoint {
			c.warm, c.warmID, c.cached = i, en.Endpoint, min(en.Tokens, c.tokens)
			break
		}
	}
}

// PreferWarm keeps the pick on the conversation's warm endpoint while it
// is available and affinity.Config.Stay holds: every other available
// candidate of cands (the route's, in its order) is left out
// ("cache_affinity"). An unavailable warm endpoint (down, breaker open,
// cooling, ejected, tried and failed in this call) or one slower than Stay
// allows leaves the pick to latency; Served charges the move to the
// route's cold-spend budget. On an ordered route a warm endpoint of a
// fallback model holds nothing: the route's order decides.
func (r *Router) PreferWarm(c *Call, cands []route.Candidate, ordered bool, pol route.Policy, rnd func(int) int) {
	w := c.warm
	if !c.on || w < 0 || !cands[w].Available {
		return
	}
	if ordered && cands[w].Model != cands[0].Model || !warmEligible(cands, w, pol, rnd) {
		return
	}
	best := -1
	for i := range cands {
		if cd := &cands[i]; i != w && cd.Available && (best < 0 || cd.ExpectedLatency < cands[best].ExpectedLatency) {
			best = i
		}
	}
	if best < 0 || !r.cfg.Stay(cands[w].ExpectedLatency, cands[best].ExpectedLatency) {
		return
	}
	for i := range cands {
		if cd := &cands[i]; i != w && cd.Available {
			cd.Available, cd.Unavailable = false, "cache_affinity"
		}
	}
}

// warmEligible reports whether the call's own constraints let the warm
// endpoint w serve it: the route's filters (capability floor, domain,
// context window) admit it, and the caller's preferred region, if any,
// is w's. Affinity never overrides them (the call is routed as without
// it, and moves when served elsewhere).
func warmEligible(cands []route.Candidate, w int, pol route.Policy, rnd func(int) int) bool {
	if r := pol.PreferredRegion; r != "" && cands[w].Region != r {
		return false
	}
	only := slices.Clone(cands)
	for i := range only {
		only[i].Available = i == w
	}
	ch, err := route.PickAppend(nil, only, pol, rnd)
	return err == nil && ch.Index == w
}

// Served notes that the candidate idx (endpoint id, price p) served the
// call's primary pass on the route keyed rt (named routeName), by a hedge
// or not: a conversation served elsewhere than where it was warm is moved
// — moved is "from->to" (X-Mesh-Cache-Moved) — its re-caching charged to
// the route's cold-spend budget (a hedge that won paid its cold prompt
// already); the table learns where it is warm now, and the budget gets the
// call's deposit.
func (r *Router) Served(c *Call, rt any, routeName string, idx int, id string, p pricing.Price, hedge bool, now time.Time) (moved string) {
	if !c.on {
		return ""
	}
	spend := r.spendFor(rt)
	if c.warm >= 0 && idx != c.warm {
		moved = c.warmID + "->" + id
		if !hedge {
			spend.Charge(policy.RecacheCost(p, c.cached, c.write))
		}
	}
	spend.Deposit(policy.ColdCost(p, c.tokens, false))
	if r.table != nil && c.key.Hash != 0 {
		r.table.Put(routeName, c.key, id, c.tokens, now)
		c.warm, c.warmID, c.cached = idx, id, c.tokens
	}
	return moved
}

// Continued notes that a continuation on the candidate idx (endpoint id)
// now carries the call's stream (a mid-stream recovery, or a slow-stream
// race the continuation won), on the route named routeName: the
// continuation sent the conversation's prompt there, its cache
// breakpoints with it, and that endpoint finished the answer, so the
// conversation's next call goes there. Nothing is said (the answer's
// header has gone) nor charged (the continuation was paid for as a
// recovery or a hedge).
func (r *Router) Continued(c *Call, routeName string, idx int, id string, now time.Time) {
	if !c.on || r.table == nil || c.key.Hash == 0 {
		return
	}
	r.table.Put(routeName, c.key, id, c.tokens, now)
	c.warm, c.warmID, c.cached = idx, id, c.tokens
}

// ColdHedge reports whether the cold-spend budget of the route keyed rt
// pays a hedge of the call, and withdraws it: the prompt sent cold
// (policy.ColdCost) at dearest(), the dearest price among the route's
// endpoints, refused above cold_spend.max_hedge_usd or beyond the budget.
func (r *Router) ColdHedge(c *Call, rt any, dearest func() pricing.Price) bool {
	s := r.spendFor(rt)
	if s == nil || !c.on {
		return true
	}
	return s.Hedge(policy.ColdCost(dearest(), c.tokens, c.write))
}
