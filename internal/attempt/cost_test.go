package attempt

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/route"
)

// An attempt is billed at its endpoint's own price, else at Deps.Prices
// for its upstream model (a passthrough endpoint has none of its own),
// every kind of token at its own rate: 5-minute and 1-hour cache writes
// apart.
func TestCost(t *testing.T) {
	own := pricing.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75, CacheWrite1hPerMTok: 6}
	table := func(model string) (pricing.Price, bool) {
		if model == "m" {
			return pricing.Price{InputPerMTok: 1, OutputPerMTok: 2}, true
		}
		return pricing.Price{}, false
	}
	r := testRunner(t, nil, Deps{Prices: table}, nil)
	eps := endpoints(t, "priced", "table")
	eps[0].Price = own
	u := llm.Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000, CacheReadTokens: 1_000_000, CacheWriteTokens: 2_000_000, CacheWrite1hTokens: 1_000_000}
	for _, c := range []struct {
		ep   *fleet.Endpoint
		want float64
	}{
		{eps[0], 3 + 15 + 0.3 + 3.75 + 6},
		// Unset kinds cost the input price (pricing.Price).
		{eps[1], 1 + 2 + 1 + 1 + 1},
	} {
		if got := r.Cost(c.ep, u); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: cost %v, want %v", c.ep.ID, got, c.want)
		}
	}
	if p := r.Price(eps[1]); p.InputPerMTok != 1 || p.OutputPerMTok != 2 {
		t.Errorf("table price %+v", p)
	}
}

// BenchmarkRoute is the routing cost of one call's first pick over n
// candidate endpoints (three models, n/3 regions each, in one latency
// route): reading every endpoint's published view, scoring, choosing, and
// the record's candidate list the debug trace shows. Target (issue 15):
// ≤ 1 µs per candidate, flat in n; reported as ns/candidate.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			var eps []*fleet.Endpoint
			models := []string{"m0", "m1", "m2"}
			for i := range n {
				m := models[i%3]
				pe := &provider.Endpoint{ID: fmt.Sprintf("%s/r%d/p", m, i), Model: m, UpstreamModel: m, Region: fmt.Sprintf("r%d", i),
					Provider: "p", Format: llm.FormatAnthropic, BaseURL: "http://x.test", Capability: 1 + i%3, ContextWindow: 100_000,
					StreamIdleTimeout: 30 * time.Second}
				ep, err := fleet.New(pe, fleet.Config{})
				if err != nil {
					b.Fatal(err)
				}
				eps = append(eps, ep)
			}
			r := testRunner(b, nil, Deps{}, nil)
			rt := testRoute(b, route.LatencyOptimal, eps...)
			req := ask(false)
			b.ReportAllocs()
			for b.Loop() {
				x, _ := newCall(r, rt, req)
				x.mu.Lock()
				if _, err := x.pick(false); err != nil {
					b.Fatal(err)
				}
				x.mu.Unlock()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/candidate")
		})
	}
}
