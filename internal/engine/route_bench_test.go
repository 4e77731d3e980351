package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// BenchmarkRoute is the routing cost of one call's first pick over n
// candidate endpoints (three models, n/3 regions each, in one latency
// alias): reading every endpoint's published view, scoring, choosing, and
// the record's candidate list the debug trace shows. Target (issue 15):
// ≤ 1 µs per candidate, flat in n; reported as ns/candidate.
func BenchmarkRoute(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("candidates=%d", n), func(b *testing.B) {
			var eps []*provider.Endpoint
			models := []string{"m0", "m1", "m2"}
			for i := range n {
				m := models[i%3]
				eps = append(eps, &provider.Endpoint{ID: fmt.Sprintf("%s/r%d/p", m, i), Model: m, UpstreamModel: m, Region: fmt.Sprintf("r%d", i),
					Provider: "p", Format: llm.FormatAnthropic, BaseURL: "http://x.test", Capability: 1 + i%3, ContextWindow: 100_000,
					StreamIdleTimeout: 30 * time.Second})
			}
			e, err := newEngine(Options{Endpoints: eps, Client: provider.NewClient(nil), Aliases: map[string]Alias{"al": {Models: models, Strategy: "latency"}},
				Stages: stages(b, chain.Config{})})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			rs := e.routes["al"]
			if len(rs.cands) != n {
				b.Fatalf("%d candidates", len(rs.cands))
			}
			req := ask(llm.FormatAnthropic, "al", false)
			b.ReportAllocs()
			for b.Loop() {
				x := newExec(e, rs, req, Call{}, &Record{})
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
