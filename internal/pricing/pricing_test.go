package pricing_test

import (
	"testing"

	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/sim"
)

func TestLookup(t *testing.T) {
	tab := pricing.New([]pricing.Entry{
		{Model: "claude-sonnet-4-5", Price: pricing.Price{InputPerMTok: 2, OutputPerMTok: 9}}, // an override
		{Model: "my-local-model", Price: pricing.Price{InputPerMTok: 0.01, OutputPerMTok: 0.02}},
	})
	for _, c := range []struct {
		name, model string
		want        pricing.Price
		ok          bool
	}{
		{"builtin exact", "gpt-4o", pricing.Price{InputPerMTok: 2.5, OutputPerMTok: 10, CacheReadPerMTok: 1.25, CacheWritePerMTok: 2.5}, true},
		{"dated snapshot of the longest name", "gpt-4o-mini-2024-07-18", pricing.Price{InputPerMTok: 0.15, OutputPerMTok: 0.6, CacheReadPerMTok: 0.075, CacheWritePerMTok: 0.15}, true},
		{"dated snapshot", "gpt-4o-2024-08-06", pricing.Price{InputPerMTok: 2.5, OutputPerMTok: 10, CacheReadPerMTok: 1.25, CacheWritePerMTok: 2.5}, true},
		{"override wins", "claude-sonnet-4-5-20250929", pricing.Price{InputPerMTok: 2, OutputPerMTok: 9}, true},
		{"config-only model", "my-local-model", pricing.Price{InputPerMTok: 0.01, OutputPerMTok: 0.02}, true},
		{"haiku 3 cache prices", "claude-3-haiku-20240307", pricing.Price{InputPerMTok: 0.25, OutputPerMTok: 1.25, CacheReadPerMTok: 0.03, CacheWritePerMTok: 0.3}, true},
		{"no dash boundary", "gpt-4oX", pricing.Price{}, false},
		{"unknown", "llama3", pricing.Price{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := tab.Lookup(c.model)
			if ok != c.ok || got != c.want {
				t.Errorf("Lookup(%q) (-got +want)\n-%+v %v\n+%+v %v", c.model, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestCost(t *testing.T) {
	p := pricing.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75}
	for _, c := range []struct {
		name                 string
		p                    pricing.Price
		in, out, read, write int
		want                 float64
	}{
		{"input and output", p, 1000, 200, 0, 0, (1000*3 + 200*15) / 1e6},
		{"cache kinds", p, 100, 10, 10000, 2000, (100*3 + 10*15 + 10000*0.3 + 2000*3.75) / 1e6},
		{"cache at the input price when unset", pricing.Price{InputPerMTok: 2, OutputPerMTok: 8}, 100, 0, 50, 25, (175 * 2) / 1e6},
		{"unpriced", pricing.Price{}, 1000, 1000, 1000, 1000, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := c.p.Cost(c.in, c.out, c.read, c.write); !near(got, c.want) {
				t.Errorf("Cost (-got +want)\n-%v\n+%v", got, c.want)
			}
		})
	}
	m := pricing.Price{InputPerMTok: 1, OutputPerMTok: 20}.Max(p)
	if want := (pricing.Price{InputPerMTok: 3, OutputPerMTok: 20, CacheReadPerMTok: 1, CacheWritePerMTok: 3.75}); m != want {
		t.Errorf("Max (-got +want)\n-%+v\n+%+v", m, want)
	}
}

// The built-in entries for the simulator's models are the simulator's own
// prices, so that a mesh over it prices what the fleet bills.
func TestBuiltinMatchesSimulator(t *testing.T) {
	tab := pricing.New(nil)
	for _, m := range sim.DefaultConfig().Models {
		got, ok := tab.Lookup(m.Name)
		if !ok || got.InputPerMTok != m.Price.InputPerMTok || got.OutputPerMTok != m.Price.OutputPerMTok {
			t.Errorf("%s: built-in %+v (%v), simulator %+v", m.Name, got, ok, m.Price)
		}
	}
	for _, e := range pricing.Builtin() {
		if e.Source == "" {
			t.Errorf("%s has no source", e.Model)
		}
		if err := e.Price.Validate(); err != nil || e.Price.IsZero() {
			t.Errorf("%s: %+v %v", e.Model, e.Price, err)
		}
	}
}

func near(a, b float64) bool {
	d := a - b
	return d < 1e-12 && d > -1e-12
}
