package assemble

import (
	"slices"
	"strings"
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/provider"
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
