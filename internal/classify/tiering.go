package classify

import "fmt"

// Tiering routes an alias's calls by the complexity of the prompt: a simple
// prompt to the Cheap model, a medium one to Middle, a complex one to
// Strong. Each tier's route is an ordered chain (Order): its model first,
// then the stronger tiers, then the weaker ones, so an unavailable tier
// falls back upwards before it falls back downwards. A Tiering is plain
// data, safe to copy.
type Tiering struct {
	Cheap, Middle, Strong string
	// Escalate sends the re-ask of an answer that failed validation (a
	// schema violation the repair could not fix) to the next tier up
	// instead of the same one.
	Escalate bool
}

// Tiers is the number of tiers, one per complexity class.
const Tiers = 3

// TierNames name the tiers by complexity class (Record.Tier, X-Mesh-Tier).
var TierNames = [Tiers]string{"cheap", "middle", "strong"}

// Models returns the tiers' models, cheapest first.
func (t Tiering) Models() [Tiers]string { return [Tiers]string{t.Cheap, t.Middle, t.Strong} }

// Check reports a tier that names no model, or a model known does not know,
// for alias a.
func (t Tiering) Check(a string, known func(model string) bool) error {
	for i, m := range t.Models() {
		if m == "" {
			return fmt.Errorf("alias %q: tiering names no %s model", a, TierNames[i])
		}
		if !known(m) {
			return fmt.Errorf("alias %q: tiering names unknown model %q", a, m)
		}
	}
	return nil
}

// Order is the models of tier i's route, in order: tier i's model, the
// stronger tiers' upwards, then the weaker tiers' downwards, each model
// once.
func (t Tiering) Order(i int) []string {
	models := t.Models()
	var order []string
	for j := i; j < Tiers; j++ {
		order = appendNew(order, models[j])
	}
	for j := i - 1; j >= 0; j-- {
		order = appendNew(order, models[j])
	}
	return order
}

// AliasModels is the chain of a tiered alias that lists no models of its
// own: Middle, Strong, Cheap, each once.
func (t Tiering) AliasModels() []string {
	var out []string
	for _, m := range []string{t.Middle, t.Strong, t.Cheap} {
		out = appendNew(out, m)
	}
	return out
}

func appendNew(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// Tier is the tier of complexity class c (clamped to the tiers).
func Tier(c Complexity) int { return min(max(int(c), 0), Tiers-1) }

// Escalation returns the tier a re-ask moves to from tier i, and whether
// it moves: only when t escalates and a stronger tier is left.
func (t Tiering) Escalation(i int) (int, bool) {
	if !t.Escalate || i >= Tiers-1 {
		return i, false
	}
	return i + 1, true
}
