package engine

import (
	"fmt"

	complexity "github.com/keelmesh/keel/internal/classify"
	"github.com/keelmesh/keel/internal/route"
)

// Tiering routes an alias's calls by the complexity of the prompt: a simple
// prompt to the Cheap model, a medium one to Middle, a complex one to
// Strong (classify.Complexity). Each tier's route is an ordered chain: its
// model first, then the stronger tiers, then the weaker ones, so an
// unavailable tier falls back upwards before it falls back downwards.
type Tiering struct {
	Cheap, Middle, Strong string
	// Escalate sends the re-ask of an answer that failed validation (a
	// schema violation the repair could not fix) to the next tier up
	// instead of the same one.
	Escalate bool
}

// Tier names, by complexity class (Record.Tier, X-Mesh-Tier).
var tierNames = [3]string{"cheap", "middle", "strong"}

// tiers is a tiered alias's routes, by complexity class.
type tiers struct {
	routes   [3]*routeState
	escalate bool
}

// newTiers builds the tier routes of alias a from the endpoints by model.
func (e *Engine) newTiers(a string, t *Tiering, byModel map[string][]*endpoint) (*tiers, error) {
	models := [3]string{t.Cheap, t.Middle, t.Strong}
	for i, m := range models {
		if m == "" {
			return nil, fmt.Errorf("engine: alias %q: tiering names no %s model", a, tierNames[i])
		}
		if len(byModel[m]) == 0 {
			return nil, fmt.Errorf("engine: alias %q: tiering names unknown model %q", a, m)
		}
	}
	ts := &tiers{escalate: t.Escalate}
	for i := range models {
		var order []string
		for j := i; j < len(models); j++ {
			order = appendNew(order, models[j])
		}
		for j := i - 1; j >= 0; j-- {
			order = appendNew(order, models[j])
		}
		var chain []*endpoint
		for _, m := range order {
			chain = append(chain, byModel[m]...)
		}
		rs, err := e.newRoute(a+"/"+tierNames[i], chain, route.Ordered)
		if err != nil {
			return nil, err
		}
		ts.routes[i] = rs
	}
	return ts, nil
}

func appendNew(s []string, v string) []string {
	if contains(s, v) {
		return s
	}
	return append(s, v)
}

// tierRoute classifies req's prompt and returns the route of its tier,
// noting the class and tier in rec.
func (e *Engine) tierRoute(rs *routeState, prompt string, rec *Record) (*routeState, int) {
	c := e.complexity(prompt)
	k := min(max(int(c), 0), 2)
	rec.Complexity, rec.Tier = c.String(), tierNames[k]
	return rs.tiers.routes[k], k
}

// escalate moves the call to the next tier up before a re-ask, when its
// alias escalates and a stronger tier is left; it reports whether it did.
func (x *exec) escalate() bool {
	if x.tiers == nil || !x.tiers.escalate || x.tier >= len(x.tiers.routes)-1 {
		return false
	}
	x.tier++
	rs := x.tiers.routes[x.tier]
	n := len(rs.cands)
	b := make([]bool, 2*n)
	x.mu.Lock()
	x.rs = rs
	x.tried, x.avoid, x.pin = b[:n:n], b[n:], -1
	x.overloaded = nil
	x.mu.Unlock()
	x.policy.Strategy = rs.strategy
	x.rec.Tier, x.rec.Escalated = tierNames[x.tier], true
	return true
}

// complexity is the configured classifier's, or the shipped one's.
func (e *Engine) complexity(text string) complexity.Complexity {
	if e.complexityFn != nil {
		return e.complexityFn(text)
	}
	return complexity.Default().Complexity(text)
}
