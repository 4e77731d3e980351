package assemble

import (
	"slices"
	"strings"
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/shadow"
)

// aliases lays a tiered alias out for the engine: its chain (Middle,
// Strong, Cheap when it names no models), each tier's route in the order
// classify.Tiering.Order gives, the tiering that names them; the built-in
// auto alias likewise; a tier naming a model no endpoint serves is an
// error naming the alias.
func TestAliasesLayOutTiers(t *testing.T) {
	cfg := &config.Config{
		Models: []config.Model{{Name: "small", Capability: 1}, {Name: "mid", Capability: 3}, {Name: "big", Capability: 5}},
		Aliases: []config.Alias{{Name: "t", Tiering: &config.Tiering{Tiers: config.Tiers{Cheap: "small", Middle: "mid", Strong: "big"}}},
			{Name: "plain", Models: []string{"big"}}},
	}
	eps := []*provider.Endpoint{{Model: "small"}, {Model: "mid"}, {Model: "big"}}
	got, err := aliases(cfg, nil, eps)
	if err != nil {
		t.Fatal(err)
	}
	wantTiers := [][]string{{"small", "mid", "big"}, {"mid", "big", "small"}, {"big", "mid", "small"}}
	for _, name := range []string{"t", config.AutoAlias} {
		a := got[name]
		if !slices.Equal(a.Models, []string{"mid", "big", "small"}) || !slices.EqualFunc(a.Tiers, wantTiers, slices.Equal) || a.Tiering == nil {
			t.Errorf("alias %s: models %q tiers %q tiering %v, want [mid big small], %q and a tiering", name, a.Models, a.Tiers, a.Tiering, wantTiers)
		}
	}
	if p := got["plain"]; p.Tiers != nil || p.Tiering != nil || !slices.Equal(p.Models, []string{"big"}) {
		t.Errorf("untiered alias: %+v", p)
	}
	cfg.Aliases[0].Tiering.Tiers.Strong = "huge"
	if _, err := aliases(cfg, nil, eps); err == nil || !strings.Contains(err.Error(), `alias "t": tiering names unknown model "huge"`) {
		t.Errorf("unknown tier model: %v", err)
	}
}

// TestShadowConfigErrors (moved from the engine with the shadow policies'
// resolution): a bad policy or a target that is no configured chat model
// or alias fails; a model or an alias target resolves.
func TestShadowConfigErrors(t *testing.T) {
	eps := []*provider.Endpoint{{Model: "m1"}, {Model: "emb", Embedding: true}}
	als := map[string]engine.Alias{"a": {Models: []string{"m1"}}}
	for _, tc := range []struct {
		name string
		c    shadow.Config
		ok   bool
	}{
		{"unknown model", shadow.Config{Percent: 10, Target: shadow.Target{Model: "nope"}}, false},
		{"embedding model", shadow.Config{Percent: 10, Target: shadow.Target{Model: "emb"}}, false},
		{"no target", shadow.Config{Percent: 10}, false},
		{"bad rule", shadow.Config{Percent: 10, Target: shadow.Target{Legacy: true}, DecisionRule: "score >="}, false},
		{"percent above 100", shadow.Config{Percent: 101, Target: shadow.Target{Legacy: true}}, false},
		{"model", shadow.Config{Percent: 10, Target: shadow.Target{Model: "m1"}}, true},
		{"alias", shadow.Config{Percent: 10, Target: shadow.Target{Alias: "a"}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &config.Config{Aliases: []config.Alias{{Name: "a", Models: []string{"m1"}, Shadow: &tc.c}}}
			routes, err := shadowRoutes(cfg, als, eps)
			if tc.ok != (err == nil) || tc.ok && routes["a"] == nil {
				t.Errorf("config %+v: routes %v, err %v; want ok %t", tc.c, routes, err, tc.ok)
			}
		})
	}
}
