package assemble

import "github.com/keelmesh/keel/internal/classify"

// tiering is a tiered alias's tiers (classify.Tiering) with the
// classifier that puts each call on one: aliases lays the alias's tiers
// out with it, and the engine's Alias.Tiering takes it.
type tiering struct {
	classify.Tiering
	// Complexity classifies a prompt (nil: the shipped
	// classify.Default().Complexity).
	Complexity func(text string) classify.Complexity
}

// Names are the tiers' names, cheapest first (classify.TierNames).
func (t *tiering) Names() []string { return classify.TierNames[:] }

// Tier is prompt's tier and its complexity class.
func (t *tiering) Tier(prompt string) (tier int, class string) {
	var c classify.Complexity
	if t.Complexity != nil {
		c = t.Complexity(prompt)
	} else {
		c = classify.Default().Complexity(prompt)
	}
	return classify.Tier(c), c.String()
}
