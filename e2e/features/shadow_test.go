package features_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

const shadowSchema = `{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},"confidence_score":{"type":"number"},"mitigation_steps":{"type":"string"}},"required":["risk_level","confidence_score","mitigation_steps"],"additionalProperties":false}`

// shadowBody is call i's extraction request to the alias risk: the
// simulator answers each field with the value in the input.
func shadowBody(i int) (body string, score float64) {
	score = 0.5 + float64(i*37%500)/1000 // 0.500 … 0.999
	in := fmt.Sprintf("case: %d\nrisk_level: %s\nconfidence_score: %g\nmitigation_steps: isolate host %d and rotate its keys", i, []string{"low", "medium", "high"}[i%3], score, i)
	p, _ := json.Marshal(in)
	return `{"model":"risk","max_tokens":200,"system":"Extract the fields as JSON.","output_config":{"format":{"type":"json_schema","schema":` + shadowSchema +
		`}},"messages":[{"role":"user","content":` + string(p) + `}]}`, score
}

// shadowMesh is an embedded mesh over the simulator sc whose alias risk
// (sim-sonnet) is shadowed percent % to sim-opus; store, when set, is the
// shadow store's file.
func shadowMesh(t testing.TB, sc sim.Config, percent float64, store string) *keel.Mesh {
	t.Helper()
	fleet, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	a := config.Alias{Name: "risk", Models: []string{"sim-sonnet"}}
	if percent > 0 {
		a.Shadow = &shadow.Config{Percent: percent, Target: shadow.Target{Model: "sim-opus"}, DecisionRule: "confidence_score >= 0.8"}
	}
	cfg.Aliases = append(cfg.Aliases, a)
	cfg.Shadow = config.Shadow{Store: store, Queue: 1024, ShedInflight: 1024}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// postShadowed sends body with the client credential key and returns the
// status, the request id and the answer's text.
func postShadowed(t testing.TB, m *keel.Mesh, body, key string) (int, string, string) {
	req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/messages", strings.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", key)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := m.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		Content []struct{ Text string } `json:"content"`
	}
	json.NewDecoder(resp.Body).Decode(&msg)
	text := ""
	if len(msg.Content) > 0 {
		text = msg.Content[0].Text
	}
	return resp.StatusCode, resp.Header.Get("X-Mesh-Request-Id"), text
}

// TestShadowReportShowsPerturbedField is issue 18 item 5's must-show:
// 1,000 calls to an alias, 10 % of keys shadowed to a model whose
// confidence_score drifts by at most 0.02 in 20 % of answers. The client
// always gets its own model's exact answer; the shadow store's report
// names confidence_score with a share within binomial bounds and deltas
// within the drift's bound, every other field equal, the same keys
// shadowed every time, and the decision rule's agreement.
func TestShadowReportShowsPerturbedField(t *testing.T) {
	const (
		calls    = 1000
		keys     = 500 // two calls per key
		share    = 0.2
		maxDelta = 0.02
	)
	sc := sim.ZeroLatency()
	for i := range sc.Models {
		if sc.Models[i].Name == "sim-opus" {
			sc.Models[i].Drift = &sim.Drift{Field: "confidence_score", Share: share, MaxDelta: maxDelta}
		}
	}
	store := filepath.Join(t.TempDir(), "shadow.db")
	m := shadowMesh(t, sc, 10, store)
	keyOf := map[string]string{}
	for i := range calls {
		body, score := shadowBody(i)
		key := fmt.Sprintf("client-%d", i%keys)
		status, id, text := postShadowed(t, m, body, key)
		if status != 200 {
			t.Fatalf("call %d: status %d: %s", i, status, text)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(text), &got); err != nil || got["confidence_score"] != score {
			t.Fatalf("call %d: the client got %s, want confidence_score %g untouched", i, text, score)
		}
		keyOf[id] = key
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := m.Engine().DrainShadows(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil { // writes what the store has queued
		t.Fatal(err)
	}
	res, err := sqlite.ReadShadow(context.Background(), store, sqlite.ShadowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	rep := shadow.Build(res)

	// Sticky by key: a key's two calls are both shadowed or neither.
	perKey := map[string]int{}
	for _, r := range res {
		perKey[keyOf[r.RequestID]]++
	}
	for k, n := range perKey {
		if n != 2 {
			t.Errorf("key %s: %d of its 2 calls shadowed", k, n)
		}
	}
	// 2 × Binomial(500, 0.1): mean 100, sd 13.4; ±4 sd.
	if rep.Calls < 46 || rep.Calls > 154 || rep.Compared != rep.Calls {
		t.Fatalf("shadowed %d calls, compared %d (outcomes %v); want about 100, all compared", rep.Calls, rep.Compared, rep.Outcomes)
	}
	byPath := map[string]shadow.FieldStats{}
	for _, f := range rep.Fields {
		byPath[f.Path] = f
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for p := range byPath {
			if !yield(p) {
				return
			}
		}
	}); !slices.Equal(got, []string{"confidence_score", "mitigation_steps", "risk_level"}) {
		t.Fatalf("fields %v", got)
	}
	cs := byPath["confidence_score"]
	bound := 4 * math.Sqrt(share*(1-share)/float64(cs.Compared))
	if cs.Compared != rep.Compared || math.Abs(cs.DifferShare-share) > bound || cs.Kinds[shadow.NumericDelta] != cs.Differ {
		t.Errorf("confidence_score: %d of %d differ (%.3f, want %.2f ± %.3f), kinds %v", cs.Differ, cs.Compared, cs.DifferShare, share, bound, cs.Kinds)
	}
	if d := cs.AbsDelta; d == nil || d.Max > maxDelta+1e-9 || d.Min < maxDelta/10-1e-4 {
		t.Errorf("confidence_score |delta| %+v, want within [%g, %g]", d, maxDelta/10, maxDelta)
	}
	for _, p := range []string{"risk_level", "mitigation_steps"} {
		if f := byPath[p]; f.Differ != 0 || f.Compared != rep.Compared {
			t.Errorf("%s: %d of %d differ, want none", p, f.Differ, f.Compared)
		}
	}
	if len(rep.Decisions) != 1 {
		t.Fatalf("decisions %+v", rep.Decisions)
	}
	d := rep.Decisions[0]
	flips := 0
	for _, r := range res {
		if r.Comparison.RulePrimary != r.Comparison.RuleShadow {
			flips++
		}
	}
	if d.Evaluated != rep.Compared || d.Agree != d.Evaluated-flips || d.Undefined != 0 || d.AgreeShare < 0.9 {
		t.Errorf("decision %+v, %d flips", d, flips)
	}
	var txt strings.Builder
	rep.WriteText(&txt)
	t.Logf("keel shadow report:\n%s", txt.String())
}

// BenchmarkShadowClientP99 measures the client's p99 with 10 % shadowing
// on and off: two meshes over one simulator, 1,000 calls each (8
// concurrent clients) in 20 alternating rounds of 50 — off, on, off, on …,
// the on mesh's shadows drained before each off round, so a neighbour's
// burst of load falls on both alike — three times; the median of the
// three p99s on over the median off is the figure (BENCHMARKS.md, target
// ≤ 1.05): over the default simulator's latency (TTFT median 30ms), and
// over the zero-latency simulator, where the shadows' CPU is all there is.
// One iteration takes about 50 s: run it with -benchtime 1x. A benchmark,
// not a test: on a shared machine one neighbour's compile moved a p99 from
// 90ms to 570ms.
func BenchmarkShadowClientP99(b *testing.B) {
	for _, c := range []struct {
		name string
		sc   sim.Config
	}{
		{"default_latency", sim.DefaultConfig()},
		{"zero_latency", sim.ZeroLatency()},
	} {
		b.Run(c.name, func(b *testing.B) {
			med := func(d []time.Duration) time.Duration { s := slices.Clone(d); slices.Sort(s); return s[1] }
			for range b.N {
				var off, on, cOff, cOn []time.Duration
				for range 3 {
					f, n, cf, cn := shadowP99s(b, c.sc)
					off, on, cOff, cOn = append(off, f), append(on, n), append(cOff, cf), append(cOn, cn)
				}
				b.Logf("CPU per client call off %v (median of %v), on %v (median of %v)", med(cOff), cOff, med(cOn), cOn)
				b.ReportMetric(float64(med(cOff))/1e3, "cpu-off-µs/call")
				b.ReportMetric(float64(med(cOn))/1e3, "cpu-on-µs/call")
				ratio := float64(med(on)) / float64(med(off))
				b.Logf("client p99 off %v (median of %v), on %v (median of %v): ratio %.3f", med(off), off, med(on), on, ratio)
				b.ReportMetric(float64(med(off))/1e6, "p99-off-ms")
				b.ReportMetric(float64(med(on))/1e6, "p99-on-ms")
				b.ReportMetric(ratio, "p99-ratio")
			}
		})
	}
}

// shadowP99s runs 1,000 calls on a mesh with shadowing off and 1,000 on
// one with it on, in alternating rounds of 50, and returns each one's
// client p99 and process CPU per call (the in-process simulator's
// included: the on mesh's shadows are drained inside its rounds).
func shadowP99s(t testing.TB, sc sim.Config) (off, on, cpuOff, cpuOn time.Duration) {
	for i := range sc.Models {
		if sc.Models[i].Name == "sim-opus" {
			sc.Models[i].Drift = &sim.Drift{Field: "confidence_score", Share: 0.2, MaxDelta: 0.02}
		}
	}
	const calls, clients, round = 1000, 8, 50
	meshes := [2]*keel.Mesh{shadowMesh(t, sc, 0, ""), shadowMesh(t, sc, 10, "")}
	var lat [2][]time.Duration
	var cpu [2]time.Duration
	var mu sync.Mutex
	for r := range calls / round {
		for k, m := range meshes {
			cpu0 := processCPU()
			var wg sync.WaitGroup
			for c := range clients {
				wg.Go(func() {
					for i := r*round + c; i < (r+1)*round; i += clients {
						body, _ := shadowBody(i)
						start := time.Now()
						if status, _, text := postShadowed(t, m, body, fmt.Sprintf("client-%d", i%500)); status != 200 {
							t.Errorf("status %d: %s", status, text)
						}
						d := time.Since(start)
						mu.Lock()
						lat[k] = append(lat[k], d)
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if k == 1 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				m.Engine().DrainShadows(ctx)
				cancel()
			}
			cpu[k] += processCPU() - cpu0
		}
	}
	for _, m := range meshes {
		m.Close()
	}
	p99 := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)*99/100-1] }
	return p99(lat[0]), p99(lat[1]), cpu[0] / calls, cpu[1] / calls
}
