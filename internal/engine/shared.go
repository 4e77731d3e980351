package engine

import (
	"github.com/keelmesh/keel/internal/fleet"
)

// SharedState carries what the replicas of one mesh learn about their
// upstreams between them, and holds the global retry and hedge budgets
// they lease tokens from (package fleet; store/redis implements it).
type SharedState = fleet.SharedState

// budgets lists every route's retry and hedge budgets with their keys.
func (e *Engine) budgets() []fleet.Budget {
	var out []fleet.Budget
	add := func(rs *routeState) {
		out = append(out, fleet.Budget{Key: "retry/" + rs.name, B: rs.retries}, fleet.Budget{Key: "hedge/" + rs.name, B: rs.hedges})
	}
	for _, rs := range e.routes {
		add(rs)
	}
	e.fleet.PassRoutes(add)
	return out
}
