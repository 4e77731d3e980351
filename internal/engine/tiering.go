package engine

import (
	"github.com/keelmesh/keel/internal/callrec"
	complexity "github.com/keelmesh/keel/internal/classify"
)

// Tiering routes an alias's calls by the complexity of the prompt
// (classify.Tiering).
type Tiering = complexity.Tiering

// tiers is a tiered alias's routes, by complexity class.
type tiers struct {
	routes [complexity.Tiers]*routeState
	cfg    Tiering
}

// tierRoute classifies req's prompt and returns the route of its tier,
// noting the class and tier in rec.
func (e *Engine) tierRoute(rs *routeState, prompt string, rec *Record) (*routeState, int) {
	c := e.complexity(prompt)
	k := complexity.Tier(c)
	rec.Tier = &callrec.Tier{Complexity: c.String(), Name: complexity.TierNames[k]}
	return rs.tiers.routes[k], k
}

// escalate moves the call's attempts to the next tier up before a
// re-ask, when its alias escalates and a stronger tier is left.
func (c *callState) escalate() {
	if c.tiers == nil {
		return
	}
	next, ok := c.tiers.cfg.Escalation(c.tier)
	if !ok {
		return
	}
	c.tier = next
	c.x.moveTo(c.tiers.routes[next])
	c.rec.Tier.Name, c.rec.Tier.Escalated = complexity.TierNames[next], true
}

// moveTo has the call's further attempts run on rs (an escalated tier),
// its endpoints all untried.
func (x *exec) moveTo(rs *routeState) {
	n := len(rs.cands)
	b := make([]bool, 2*n)
	x.mu.Lock()
	x.rs = rs
	x.picks.tried, x.picks.avoid, x.picks.pin = b[:n:n], b[n:], -1
	x.picks.overloaded = nil
	x.mu.Unlock()
	x.policy.Strategy = rs.strategy
}

// complexity is the configured classifier's, or the shipped one's.
func (e *Engine) complexity(text string) complexity.Complexity {
	if e.complexityFn != nil {
		return e.complexityFn(text)
	}
	return complexity.Default().Complexity(text)
}
