package fleet

import (
	"fmt"
	"slices"
	"sort"

	"github.com/keelmesh/keel/internal/route"
)

// ModelInfo describes a name clients may call.
type ModelInfo struct {
	Name          string
	Alias         bool
	Capability    int
	ContextWindow int
	Regions       []string
	// Embedding marks an embedding model: called through the Embeddings
	// API (Side), never as a model call.
	Embedding bool
}

// AliasSpec is an alias as configured: its models in chain order and its
// strategy ("ordered", or "latency", the default); Tiers, for an alias
// that routes each call by the prompt's complexity (classify.Tiering), are
// each tier's models in chain order, cheapest tier first.
type AliasSpec struct {
	Models   []string
	Strategy string
	Tiers    [][]string
}

// Chain is one callable name's endpoints in the order they are tried.
type Chain struct {
	Cands    []*Endpoint
	Strategy route.Strategy
	// Tiers, on a tiered alias, are its tiers' chains (ordered), in the
	// order of AliasSpec.Tiers.
	Tiers []Chain
}

// Table is a mesh's callable names: every model's chain and every alias's,
// and the listing clients see.
type Table struct {
	// Models are the models in config order, each with its endpoints
	// (its chain is latency-optimal).
	Models  []string
	ByModel map[string][]*Endpoint
	// Aliases are the aliases' names, sorted, and their chains.
	Aliases []string
	ByAlias map[string]Chain
	// List is every callable name, sorted by name.
	List []ModelInfo
}

// Plan lays out the chains of eps's models and of aliases: an alias's is
// its models' endpoints in order, and it may name neither itself after a
// model nor an embedding model. An embedding model (eps[i].Embedding) is
// listed as one; it serves side calls only.
func Plan(eps []*Endpoint, aliases map[string]AliasSpec) (Table, error) {
	t := Table{ByModel: map[string][]*Endpoint{}, ByAlias: map[string]Chain{}}
	infos := map[string]*ModelInfo{}
	for _, ep := range eps {
		t.ByModel[ep.Model] = append(t.ByModel[ep.Model], ep)
		mi := infos[ep.Model]
		if mi == nil {
			mi = &ModelInfo{Name: ep.Model, Capability: ep.Capability, ContextWindow: ep.ContextWindow, Embedding: ep.Embedding}
			infos[ep.Model] = mi
			t.Models = append(t.Models, ep.Model)
		}
		if !slices.Contains(mi.Regions, ep.Region) {
			mi.Regions = append(mi.Regions, ep.Region)
		}
	}
	for _, m := range t.Models {
		t.List = append(t.List, *infos[m])
	}
	for a := range aliases {
		t.Aliases = append(t.Aliases, a)
	}
	sort.Strings(t.Aliases)
	for _, a := range t.Aliases {
		spec := aliases[a]
		c, err := t.alias(a, &spec)
		if err != nil {
			return Table{}, err
		}
		t.ByAlias[a] = c
		first := infos[spec.Models[0]]
		t.List = append(t.List, ModelInfo{Name: a, Alias: true, Capability: first.Capability, ContextWindow: first.ContextWindow, Regions: first.Regions})
	}
	sort.SliceStable(t.List, func(i, j int) bool { return t.List[i].Name < t.List[j].Name })
	return t, nil
}

// alias is alias a's chain.
func (t *Table) alias(a string, spec *AliasSpec) (Chain, error) {
	if _, clash := t.ByModel[a]; clash {
		return Chain{}, fmt.Errorf("engine: alias %q has the name of a model", a)
	}
	cands, err := t.chain(a, spec.Models)
	if err != nil {
		return Chain{}, err
	}
	c := Chain{Cands: cands, Strategy: route.LatencyOptimal}
	switch spec.Strategy {
	case "", "latency", "latency_optimal":
	case "ordered":
		c.Strategy = route.Ordered
	default:
		return Chain{}, fmt.Errorf("engine: alias %q: unknown strategy %q (want ordered or latency)", a, spec.Strategy)
	}
	for _, models := range spec.Tiers {
		var tier []*Endpoint
		for _, m := range models {
			tier = append(tier, t.ByModel[m]...)
		}
		c.Tiers = append(c.Tiers, Chain{Cands: tier, Strategy: route.Ordered})
	}
	return c, nil
}

// chain is the endpoints of models, in order.
func (t *Table) chain(a string, models []string) ([]*Endpoint, error) {
	if len(models) == 0 {
		return nil, fmt.Errorf("engine: alias %q names no model", a)
	}
	var chain []*Endpoint
	for _, m := range models {
		eps := t.ByModel[m]
		if len(eps) == 0 {
			return nil, fmt.Errorf("engine: alias %q names unknown model %q", a, m)
		}
		if eps[0].Embedding {
			return nil, fmt.Errorf("engine: alias %q names embedding model %q (an alias is a chain of chat models)", a, m)
		}
		chain = append(chain, eps...)
	}
	return chain, nil
}
