package attempt

import (
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/route"
)

// Cache-aware routing (issue 28) is package cacheroute's, over the
// call's picks: the primary pass calls cacheStart and cacheServed, the
// route policy preferWarm at each pick, the hedge policy coldHedge. A
// route's cold-spend budget is keyed by its Route.Key.

// cacheStart sets the call's cache part up before its primary pass.
func (x *Exec) cacheStart() {
	x.r.d.CacheRoute.Start(&x.cache, x.Side == nil && !x.Shadow, x.Legacy, x.route.Name, x.req, x.call.Header,
		len(x.route.Cands), func(i int) string { return x.route.Cands[i].ID }, x.r.d.Now())
}

// preferWarm keeps the pick on the conversation's warm endpoint
// (cacheroute.Router.PreferWarm). Called with x.mu held, after the
// candidates are built.
func (x *Exec) preferWarm() {
	x.r.d.CacheRoute.PreferWarm(&x.cache, x.picks.Cands, x.route.Strategy == route.Ordered, x.Policy, x.r.d.Rand)
}

// cacheServed notes that a served the call's primary pass; a move goes
// into the record (X-Mesh-Cache-Moved).
func (x *Exec) cacheServed(a *Attempt) {
	moved := x.r.d.CacheRoute.Served(&x.cache, x.route.Key, x.route.Name, a.idx, a.ep.ID, x.r.Price(a.ep), a.kind == policy.AttemptHedge, x.r.d.Now())
	if moved != "" {
		x.mu.Lock()
		x.rec.Affinity = &callrec.Affinity{Moved: moved}
		x.mu.Unlock()
	}
}

// cacheContinued notes that the continuation a carries the stream now.
func (x *Exec) cacheContinued(a *Attempt) {
	x.r.d.CacheRoute.Continued(&x.cache, x.route.Name, a.idx, a.ep.ID, x.r.d.Now())
}

// coldHedge reports whether the route's cold-spend budget pays a hedge of
// the call at the dearest price among the route's endpoints.
func (x *Exec) coldHedge() bool {
	return x.r.d.CacheRoute.ColdHedge(&x.cache, x.route.Key, func() (p pricing.Price) {
		for _, ep := range x.route.Cands {
			p = p.Max(x.r.Price(ep))
		}
		return p
	})
}
