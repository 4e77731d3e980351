package engine

import (
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/route"
)

// Cache-aware routing (issue 28) is package cacheroute's, over this
// engine's picks: the primary pass calls cacheStart and cacheServed, the
// route policy preferWarm at each pick, the hedge policy coldHedge. A
// route's cold-spend budget is keyed by its *routeState.

// cacheStart sets the call's cache part up before its primary pass.
func (x *exec) cacheStart() {
	x.e.cacheRt.Start(&x.cache, x.side == nil && !x.shadow, x.legacy, x.rs.name, x.req, x.call.ClientHeader,
		len(x.rs.cands), func(i int) string { return x.rs.cands[i].ID }, x.e.now())
}

// preferWarm keeps the pick on the conversation's warm endpoint
// (cacheroute.Router.PreferWarm). Called with x.mu held, after the
// candidates are built.
func (x *exec) preferWarm() {
	x.e.cacheRt.PreferWarm(&x.cache, x.picks.Cands, x.rs.strategy == route.Ordered, x.policy, x.e.rnd)
}

// cacheServed notes that a served the call's primary pass; a move goes
// into the record (X-Mesh-Cache-Moved).
func (x *exec) cacheServed(a *attempt) {
	moved := x.e.cacheRt.Served(&x.cache, x.rs, x.rs.name, a.idx, a.ep.ID, x.e.priceOf(a.ep), a.kind == policy.AttemptHedge, x.e.now())
	if moved != "" {
		x.mu.Lock()
		x.rec.Affinity = &callrec.Affinity{Moved: moved}
		x.mu.Unlock()
	}
}

// cacheContinued notes that the continuation a carries the stream now.
func (x *exec) cacheContinued(a *attempt) {
	x.e.cacheRt.Continued(&x.cache, x.rs.name, a.idx, a.ep.ID, x.e.now())
}

// coldHedge reports whether the route's cold-spend budget pays a hedge of
// the call at the dearest price among the route's endpoints.
func (x *exec) coldHedge() bool {
	return x.e.cacheRt.ColdHedge(&x.cache, x.rs, func() (p pricing.Price) {
		for _, ep := range x.rs.cands {
			p = p.Max(x.e.priceOf(ep))
		}
		return p
	})
}
