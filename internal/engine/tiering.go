package engine

import "github.com/keelmesh/keel/internal/callrec"

// Tiering routes a tiered alias's calls by the complexity of the prompt
// (classify.Tiering with a classifier, built by internal/assemble): the
// engine lays its tiers out as routes, puts each call on one, and
// escalates a re-ask.
type Tiering interface {
	// Check reports a tier naming no model known reports true for.
	Check(alias string, known func(model string) bool) error
	// AliasModels is the alias's chain when it names no models.
	AliasModels() []string
	// Names are the tiers' names, cheapest first; Order(i) the models of
	// tier i in the order its route tries them.
	Names() []string
	Order(i int) []string
	// Tier classifies prompt: its tier and its complexity class.
	Tier(prompt string) (tier int, class string)
	// Escalation is the tier a re-ask of a call on tier i moves to.
	Escalation(i int) (int, bool)
}

// tiers is a tiered alias's routes, by tier.
type tiers struct {
	routes []*routeState
	cfg    Tiering
}

// tierRoute classifies req's prompt and returns the route of its tier,
// noting the class and tier in rec.
func (e *Engine) tierRoute(rs *routeState, prompt string, rec *Record) (*routeState, int) {
	k, class := rs.tiers.cfg.Tier(prompt)
	rec.Tier = &callrec.Tier{Complexity: class, Name: rs.tiers.cfg.Names()[k]}
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
	c.x.MoveTo(c.tiers.routes[next].route())
	c.rec.Tier.Name, c.rec.Tier.Escalated = c.tiers.cfg.Names()[next], true
}
