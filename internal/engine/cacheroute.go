package engine

import (
	"slices"
	"sync"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/route"
)

// Cache-aware routing (issue 28): a conversation stays on the endpoint
// whose prompt cache holds it (package affinity), unless that endpoint is
// unavailable or slower than affinity.Config.Stay allows; the re-caching
// of a move is charged to the route's cold-spend budget
// (policy.ColdSpend), from which a hedge must pay its cold prompt before
// it is sent. The route policy calls
// preferWarm at each pick, the primary pass cacheStart and cacheServed,
// the hedge policy coldHedge.

// cacheRouting is the engine's cache-aware routing: the affinity table
// (nil when resilience.cache_affinity is disabled) and each route's
// dollar budget for cold prompts (none when resilience.cold_spend is).
type cacheRouting struct {
	cfg      affinity.Config
	table    *affinity.Table
	spendCfg policy.ColdSpendConfig
	// spend holds each route's *policy.ColdSpend, built on first use.
	spend sync.Map
}

func newCacheRouting(a affinity.Config, s policy.ColdSpendConfig) (*cacheRouting, error) {
	cr := &cacheRouting{cfg: a, spendCfg: s}
	if _, err := policy.NewColdSpend(s); err != nil {
		return nil, err
	}
	if a.Disabled {
		return cr, a.Validate()
	}
	t, err := affinity.New(a)
	if err != nil {
		return nil, err
	}
	cr.table = t
	return cr, nil
}

// spendFor is rs's dollar budget; nil when cold_spend is disabled.
func (cr *cacheRouting) spendFor(rs *routeState) *policy.ColdSpend {
	if cr.spendCfg.Disabled {
		return nil
	}
	if s, ok := cr.spend.Load(rs); ok {
		return s.(*policy.ColdSpend)
	}
	s, _ := policy.NewColdSpend(cr.spendCfg) // validated in newCacheRouting
	got, _ := cr.spend.LoadOrStore(rs, s)
	return got.(*policy.ColdSpend)
}

// cacheCall is one call's part in cache-aware routing.
type cacheCall struct {
	// on is set for a model call's primary pass (not a fragment, a side
	// call or a shadow).
	on bool
	// key is the conversation; warm the index in rs.cands of the endpoint
	// its cache is warm on (-1: none known), holding cached tokens of it.
	key    affinity.Key
	warm   int
	cached int
	// tokens is the prompt's estimate; write is set when it marks cache
	// breakpoints (a cold send writes at the write price).
	tokens int
	write  bool
}

// cacheStart sets the call's cache part up before its primary pass: the
// prompt's estimate, and with affinity on its conversation and where it
// is warm. It runs on the call's goroutine before any attempt or hedge.
func (x *exec) cacheStart() {
	c := &x.cache
	c.on, c.warm = x.side == nil && !x.shadow, -1
	if !c.on {
		return
	}
	c.tokens, c.write = affinity.PromptTokens(x.req), affinity.Marks(x.req)
	cr := x.e.cacheRt
	if cr.table == nil || x.legacy {
		return
	}
	c.key = affinity.KeyOf(x.req, x.call.ClientHeader)
	en, ok := cr.table.Get(x.rs.name, c.key, x.e.now())
	if !ok {
		return
	}
	for i, ep := range x.rs.cands {
		if ep.ID == en.Endpoint {
			c.warm, c.cached = i, min(en.Tokens, c.tokens)
			break
		}
	}
}

// preferWarm keeps the pick on the conversation's warm endpoint while it
// is available and affinity.Config.Stay holds: every other available
// candidate is left out ("cache_affinity"). An unavailable warm endpoint
// (down, breaker open, cooling, ejected, tried and failed in this call)
// or one slower than Stay allows leaves the pick to latency; cacheServed
// charges the move to the route's cold-spend budget. On an ordered route
// a warm endpoint of a fallback model holds nothing: the route's order
// decides. Called with x.mu held, after the candidates are built.
func (x *exec) preferWarm() {
	c := &x.cache
	w := c.warm
	if !c.on || w < 0 || !x.picks.cands[w].Available {
		return
	}
	if x.rs.strategy == route.Ordered && x.rs.cands[w].Model != x.rs.cands[0].Model || !x.warmEligible(w) {
		return
	}
	best := -1
	for i := range x.picks.cands {
		if cd := &x.picks.cands[i]; i != w && cd.Available && (best < 0 || cd.ExpectedLatency < x.picks.cands[best].ExpectedLatency) {
			best = i
		}
	}
	if best < 0 {
		return
	}
	if !x.e.cacheRt.cfg.Stay(x.picks.cands[w].ExpectedLatency, x.picks.cands[best].ExpectedLatency) {
		return
	}
	for i := range x.picks.cands {
		if cd := &x.picks.cands[i]; i != w && cd.Available {
			cd.Available, cd.Unavailable = false, "cache_affinity"
		}
	}
}

// warmEligible reports whether the call's own constraints let the warm
// endpoint w serve it: the route's filters (capability floor, domain,
// context window) admit it, and the caller's preferred region, if any,
// is w's. Affinity never overrides them (the call is routed as without
// it, and moves when served elsewhere). Called with x.mu held.
func (x *exec) warmEligible(w int) bool {
	if r := x.policy.PreferredRegion; r != "" && x.rs.cands[w].Region != r {
		return false
	}
	only := slices.Clone(x.picks.cands)
	for i := range only {
		only[i].Available = i == w
	}
	ch, err := route.PickAppend(nil, only, x.policy, x.e.rnd)
	return err == nil && ch.Index == w
}

// cacheServed notes that a served the call's primary pass: a conversation
// served elsewhere than where it was warm is moved (X-Mesh-Cache-Moved),
// its re-caching charged to the route's cold-spend budget (a hedge that
// won paid its cold prompt already); the table learns where it is warm
// now, and the budget gets the call's deposit.
func (x *exec) cacheServed(a *attempt) {
	c := &x.cache
	if !c.on {
		return
	}
	cr := x.e.cacheRt
	spend := cr.spendFor(x.rs)
	p := x.e.priceOf(a.ep)
	if c.warm >= 0 && a.idx != c.warm {
		x.mu.Lock()
		x.rec.Affinity = &callrec.Affinity{Moved: x.rs.cands[c.warm].ID + "->" + a.ep.ID}
		x.mu.Unlock()
		if a.kind != policy.AttemptHedge {
			spend.Charge(policy.RecacheCost(p, c.cached, c.write))
		}
	}
	spend.Deposit(policy.ColdCost(p, c.tokens, false))
	if cr.table != nil && c.key.Hash != 0 {
		cr.table.Put(x.rs.name, c.key, a.ep.ID, c.tokens, x.e.now())
		c.warm, c.cached = a.idx, c.tokens
	}
}

// coldHedge reports whether the route's cold-spend budget pays a hedge of
// the call, and withdraws it: the prompt sent cold (policy.ColdCost) at the
// dearest price among the route's endpoints, refused above
// cold_spend.max_hedge_usd or beyond the budget.
func (x *exec) coldHedge() bool {
	s := x.e.cacheRt.spendFor(x.rs)
	if s == nil || !x.cache.on {
		return true
	}
	var p pricing.Price
	for _, ep := range x.rs.cands {
		p = p.Max(x.e.priceOf(ep))
	}
	return s.Hedge(policy.ColdCost(p, x.cache.tokens, x.cache.write))
}
