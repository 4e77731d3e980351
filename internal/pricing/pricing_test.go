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
		{"haiku 3 cache prices", "claude-3-haiku-20240307", pricing.Price{InputPerMTok: 0.25, OutputPerMTok: 1.25, CacheReadPerMTok: 0.03, CacheWritePerMTok: 0.3, CacheWrite1hPerMTok: 0.5}, true},
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
		p := m.Price
		if !ok || got.InputPerMTok != p.InputPerMTok || got.OutputPerMTok != p.OutputPerMTok || got.CacheReadPerMTok != p.CacheReadPerMTok() ||
			got.CacheWritePerMTok != p.CacheWrite5mPerMTok() || got.CacheWrite1hPerMTok != p.CacheWrite1hPerMTok() {
			t.Errorf("%s: built-in %+v (%v), simulator %+v (cache reads %g, 5-minute writes %g, 1-hour writes %g)", m.Name, got, ok, p,
				p.CacheReadPerMTok(), p.CacheWrite5mPerMTok(), p.CacheWrite1hPerMTok())
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

// TestBill prices every kind of token of a known usage to the cent: cache
// reads, 5-minute and 1-hour writes, reasoning (inside output) and what
// the cache saved, at Anthropic's and OpenAI's list prices.
func TestBill(t *testing.T) {
	tab := pricing.New(nil)
	sonnet, _ := tab.Lookup("claude-sonnet-4-5") // $3 in, $15 out, reads $0.30, 5m writes $3.75, 1h writes $6
	gpt, _ := tab.Lookup("gpt-4.1")              // $2 in, $8 out, cached $0.50, no write surcharge
	for _, c := range []struct {
		name string
		p    pricing.Price
		t    pricing.Tokens
		want pricing.Bill
	}{
		{"anthropic: reads, writes of both TTLs, thinking", sonnet,
			pricing.Tokens{Input: 2_000, CacheRead: 100_000, CacheWrite5m: 10_000, CacheWrite1h: 20_000, Output: 4_000, Reasoning: 3_000},
			pricing.Bill{Input: 0.006, CacheRead: 0.03, CacheWrite5m: 0.0375, CacheWrite1h: 0.12, Output: 0.06, Reasoning: 0.045,
				Total: 0.2535, CacheSaved: 0.27 - 0.0075 - 0.06}},
		{"openai: cached input at its discount, reasoning as output", gpt,
			pricing.Tokens{Input: 1_152, CacheRead: 8_960, Output: 2_500, Reasoning: 2_000},
			pricing.Bill{Input: 0.002304, CacheRead: 0.00448, Output: 0.02, Reasoning: 0.016, Total: 0.026784, CacheSaved: 0.01344}},
		{"1-hour writes at the 5-minute price when unset", pricing.Price{InputPerMTok: 1, CacheWritePerMTok: 1.25},
			pricing.Tokens{CacheWrite1h: 1_000_000},
			pricing.Bill{CacheWrite1h: 1.25, Total: 1.25, CacheSaved: -0.25}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.p.Bill(c.t)
			for _, f := range []struct {
				name      string
				got, want float64
			}{{"Input", got.Input, c.want.Input}, {"CacheRead", got.CacheRead, c.want.CacheRead},
				{"CacheWrite5m", got.CacheWrite5m, c.want.CacheWrite5m}, {"CacheWrite1h", got.CacheWrite1h, c.want.CacheWrite1h},
				{"Output", got.Output, c.want.Output}, {"Reasoning", got.Reasoning, c.want.Reasoning},
				{"Total", got.Total, c.want.Total}, {"CacheSaved", got.CacheSaved, c.want.CacheSaved}} {
				if !near(f.got, f.want) {
					t.Errorf("%s (-got +want)\n-%v\n+%v", f.name, f.got, f.want)
				}
			}
			if cents := func(v float64) int64 { return int64(v*100 + 0.5) }; cents(got.Total) != cents(c.want.Total) {
				t.Errorf("total %v is not %v to the cent", got.Total, c.want.Total)
			}
		})
	}
	if m := (pricing.Price{InputPerMTok: 3, CacheWrite1hPerMTok: 6}).Max(pricing.Price{InputPerMTok: 5}); m.CacheWrite1hPerMTok != 6 {
		t.Errorf("Max keeps the dearer 1-hour write price: got %+v", m)
	}
}

func TestValidateCacheWrite1h(t *testing.T) {
	if err := (pricing.Price{InputPerMTok: 1, CacheWrite1hPerMTok: -2}).Validate(); err == nil {
		t.Error("a negative 1-hour write price was accepted")
	}
}
