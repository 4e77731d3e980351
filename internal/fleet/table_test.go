package fleet

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/route"
)

func testEndpoint(t *testing.T, pe provider.Endpoint) *Endpoint {
	t.Helper()
	ep, err := New(&pe, Config{})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func ids(eps []*Endpoint) []string {
	var out []string
	for _, ep := range eps {
		out = append(out, ep.ID)
	}
	return out
}

// TestPlan: a model's chain is its endpoints in config order; an alias's
// is its models' in its order, with its strategy; a tiered alias has an
// ordered chain per tier; the
// listing is sorted, an alias listed with its first model's capability.
func TestPlan(t *testing.T) {
	eps := []*Endpoint{
		testEndpoint(t, provider.Endpoint{ID: "big/us", Model: "big", Region: "us", Capability: 5, ContextWindow: 200}),
		testEndpoint(t, provider.Endpoint{ID: "small/us", Model: "small", Region: "us", Capability: 1, ContextWindow: 100}),
		testEndpoint(t, provider.Endpoint{ID: "big/eu", Model: "big", Region: "eu", Capability: 5, ContextWindow: 200}),
		testEndpoint(t, provider.Endpoint{ID: "mid/us", Model: "mid", Region: "us", Capability: 3, ContextWindow: 150}),
		testEndpoint(t, provider.Endpoint{ID: "emb/us", Model: "emb", Region: "us", Embedding: true}),
	}
	tb, err := Plan(eps, map[string]AliasSpec{
		"chain": {Models: []string{"small", "big"}, Strategy: "ordered"},
		"auto":  {Models: []string{"mid", "big", "small"}, Tiers: [][]string{{"small", "mid", "big"}, {"mid", "big"}, {"big"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(tb.ByModel["big"]); !reflect.DeepEqual(got, []string{"big/us", "big/eu"}) {
		t.Errorf("big: %v", got)
	}
	if c := tb.ByAlias["chain"]; c.Strategy != route.Ordered || !reflect.DeepEqual(ids(c.Cands), []string{"small/us", "big/us", "big/eu"}) || c.Tiers != nil {
		t.Errorf("chain: %v %v %v", c.Strategy, ids(c.Cands), c.Tiers)
	}
	auto := tb.ByAlias["auto"]
	if auto.Strategy != route.LatencyOptimal || !reflect.DeepEqual(ids(auto.Cands), []string{"mid/us", "big/us", "big/eu", "small/us"}) || len(auto.Tiers) != 3 {
		t.Fatalf("auto: %v %v %d tiers", auto.Strategy, ids(auto.Cands), len(auto.Tiers))
	}
	if cheap := auto.Tiers[0]; cheap.Strategy != route.Ordered || ids(cheap.Cands)[0] != "small/us" {
		t.Errorf("auto's cheap tier: %v %v", cheap.Strategy, ids(cheap.Cands))
	}
	var names []string
	for _, mi := range tb.List {
		names = append(names, mi.Name)
	}
	if !reflect.DeepEqual(names, []string{"auto", "big", "chain", "emb", "mid", "small"}) || !reflect.DeepEqual(tb.Aliases, []string{"auto", "chain"}) {
		t.Errorf("listing %v, aliases %v", names, tb.Aliases)
	}
	want := ModelInfo{Name: "auto", Alias: true, Capability: 3, ContextWindow: 150, Regions: []string{"us"}}
	if !reflect.DeepEqual(tb.List[0], want) {
		t.Errorf("auto listed as %+v, want %+v", tb.List[0], want)
	}
	if big := tb.List[1]; !reflect.DeepEqual(big.Regions, []string{"us", "eu"}) || big.Embedding {
		t.Errorf("big listed as %+v", big)
	}
	if !tb.List[3].Embedding {
		t.Errorf("emb listed as %+v", tb.List[3])
	}
}

// TestPlanRefuses: each misconfigured alias is refused with its name.
func TestPlanRefuses(t *testing.T) {
	eps := []*Endpoint{
		testEndpoint(t, provider.Endpoint{ID: "a/us", Model: "a"}),
		testEndpoint(t, provider.Endpoint{ID: "emb/us", Model: "emb", Embedding: true}),
	}
	cases := []struct {
		name string
		spec AliasSpec
		as   string
		want string
	}{
		{name: "clash", as: "a", spec: AliasSpec{Models: []string{"a"}}, want: `alias "a" has the name of a model`},
		{name: "no model", spec: AliasSpec{}, want: `alias "x" names no model`},
		{name: "unknown", spec: AliasSpec{Models: []string{"b"}}, want: `alias "x" names unknown model "b"`},
		{name: "embedding", spec: AliasSpec{Models: []string{"emb"}}, want: `names embedding model "emb"`},
		{name: "strategy", spec: AliasSpec{Models: []string{"a"}, Strategy: "random"}, want: `unknown strategy "random"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			as := tc.as
			if as == "" {
				as = "x"
			}
			_, err := Plan(eps, map[string]AliasSpec{as: tc.spec})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestRegistryPassthrough: a passthrough route is made once per (model,
// format) on the template of the client's format, or of its family (then
// named for the format); clients of two formats on one provider share its
// endpoint; a format no template speaks is ErrNoProvider.
func TestRegistryPassthrough(t *testing.T) {
	routes := 0
	r := Registry[[]*Endpoint]{
		Templates: []*provider.Endpoint{
			{Provider: "anthropic", Region: "us", Format: llm.FormatAnthropic},
			{Provider: "openai", Region: "us", Format: llm.FormatOpenAI},
		},
		Endpoint: func(pe *provider.Endpoint) (*Endpoint, error) { return New(pe, Config{}) },
		Route: func(model string, ep *Endpoint) ([]*Endpoint, error) {
			routes++
			return []*Endpoint{ep}, nil
		},
	}
	a, err := r.Passthrough("gpt-x", llm.FormatOpenAI)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := r.Passthrough("gpt-x", llm.FormatOpenAI); again[0] != a[0] || routes != 1 {
		t.Errorf("second call made another route (%d)", routes)
	}
	if a[0].ID != "gpt-x/us/openai" || a[0].UpstreamModel != "gpt-x" || r.ByID("gpt-x/us/openai") != a[0] {
		t.Errorf("endpoint %+v", a[0].Endpoint)
	}
	resp, err := r.Passthrough("gpt-x", llm.FormatResponses)
	if err != nil {
		t.Fatal(err)
	}
	if resp[0].ID != "gpt-x/us/openai:"+llm.FormatResponses.String() || resp[0].Format != llm.FormatResponses {
		t.Errorf("sibling format: %+v", resp[0].Endpoint)
	}
	if len(r.All()) != 2 {
		t.Errorf("All lists %d endpoints, want 2", len(r.All()))
	}
	n := 0
	r.PassRoutes(func([]*Endpoint) { n++ })
	if n != 2 {
		t.Errorf("%d passthrough routes, want 2", n)
	}
	if _, err := r.Passthrough("x", llm.FormatGemini); !errors.Is(err, ErrNoProvider) {
		t.Errorf("gemini client: %v, want ErrNoProvider", err)
	}
}
