package features_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// Issue 28, must show, workload 2 (fixed by the lead before any
// measurement; measured once per arm with the seeds fixed): Claude served
// by three providers, each with its own prompt cache — Anthropic's API,
// Amazon Bedrock in one region and Google Vertex AI in one region, as
// each caches Claude for itself
// (platform.claude.com/docs/en/build-with-claude/prompt-caching,
// docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html,
// cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/prompt-caching)
// — at one price (the model's: Sonnet's $3 input, $0.30 cache read, $3.75
// 5-minute write, $15 output per million) and similar speed: time to
// first token 30ms (Anthropic), 32ms (Bedrock), 28ms (Vertex) median
// (sigma 0.25), plus 2.0, 2.1 and 1.9ms per thousand prompt tokens not
// read from the cache, 2.0, 2.1 and 1.9ms per output token (within ±15 %
// of each other), each endpoint serving three calls at once as in
// workload 1.
//
// 24 coding-agent sessions, started 100ms apart, each 20 streamed turns
// with a second of tool work between them; a turn's prompt is the
// conversation so far plus 6,000–9,000 new tokens (a tool result; the
// count drawn per session and turn from a fixed seed), from 10,000 tokens
// (a 2,000-token system prompt and an 8,000-token first message) up to
// 150,000 (a turn that would pass it adds what fits, at least one token);
// the system prompt and the last message carry cache_control, as Claude
// Code sends them, and no session key. When 40 % of the run's turns have
// been answered, Bedrock's time to first token becomes four times longer
// (sim fault slow_start) and stays so.
//
// Latency-only routing is Keel's defaults with resilience.cache_affinity
// disabled; cache-aware routing is the defaults (affinity on).
const (
	w2Sessions = 24
	w2Turns    = 20
	w2System   = 2_000
	w2First    = 8_000
	w2Cap      = 150_000
)

// w2Fleet is workload 2's simulator: sim-sonnet on Anthropic's API (the
// region us-east), Bedrock and Vertex, each its own prompt cache.
func w2Fleet(t *testing.T, seed int64) (sim.Config, *simfleet.Clouds) {
	c := sim.WithPromptCache(sim.DefaultConfig())
	c.Seed, c.RequestDraws = seed, true
	i := slices.IndexFunc(c.Models, func(m sim.ModelSpec) bool { return m.Name == "sim-sonnet" })
	c.Models[i].Regions = []string{"us-east"}
	c.Models[i].PromptCache.PerRegion = true
	cl, err := simfleet.AddClouds(&c, "sim-sonnet", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	lat := func(ttft, per time.Duration) sim.LatencySpec {
		return sim.LatencySpec{Concurrency: 3, TTFT: sim.Duration(ttft), TTFTSigma: 0.25, PerToken: sim.Duration(per), PrefillPerKTok: sim.Duration(per)}
	}
	for j := range c.Regions {
		switch c.Regions[j].Name {
		case "us-east":
			c.Regions[j].Latency = lat(30*time.Millisecond, 2000*time.Microsecond)
		case simfleet.BedrockRegion:
			c.Regions[j].Latency = lat(32*time.Millisecond, 2100*time.Microsecond)
		case simfleet.VertexRegion:
			c.Regions[j].Latency = lat(28*time.Millisecond, 1900*time.Microsecond)
		}
	}
	return c, cl
}

// w2Body is session s's request at turn (from 1): each later turn adds
// 6,000-9,000 words (drawn per session and turn), up to w2Cap in all.
func w2Body(s, turn int) string {
	return conversationBody(s, turn, w2System, w2First, func(k, total int) int {
		n := 6_000 + rand.New(rand.NewPCG(uint64(s), uint64(k))).IntN(3_001)
		return max(min(n, w2Cap-total), 1)
	})
}

// runThreeProviders runs workload 2 through a mesh configured by tweak.
func runThreeProviders(t *testing.T, seed int64, tweak func(*config.Config)) agentRun {
	var run agentRun
	synctest.Test(t, func(t *testing.T) {
		sc, cl := w2Fleet(t, seed)
		fleet, err := sim.New(sc)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := simfleet.CloudConfig(fleet, "http://sim.test", cl)
		if err != nil {
			t.Fatal(err)
		}
		s := startSimMesh(t, fleet, cfg, tweak, keel.WithRand(seededRand(uint64(seed))))
		defer s.mesh.Close()
		var wg sync.WaitGroup
		var mu sync.Mutex
		moved, answered := 0, 0
		for i := range w2Sessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				for turn := 1; turn <= w2Turns; turn++ {
					h := agentStream(t, s, w2Body(i, turn))
					mu.Lock()
					if h.Get("X-Mesh-Cache-Moved") != "" {
						moved++
					}
					answered++
					if answered == w2Sessions*w2Turns*4/10 {
						if err := s.fleet.AddFault(sim.Fault{Kind: sim.KindSlowStart, Region: simfleet.BedrockRegion, Factor: 4}); err != nil {
							t.Error(err)
						}
					}
					mu.Unlock()
					time.Sleep(time.Second)
				}
			}()
		}
		wg.Wait()
		s.mu.Lock()
		recs := slices.Clone(s.records)
		s.mu.Unlock()
		run = summarize(recs, w2Sessions, agentPrice(), w2System)
		run.movedHeaders = moved
	})
	return run
}

func TestCacheAwareRoutingThreeProviders(t *testing.T) {
	for _, seed := range agentSeeds(t) {
		t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) { threeProviders(t, seed) })
	}
}

func threeProviders(t *testing.T, seed int64) {
	latencyOnly := runThreeProviders(t, seed, func(c *config.Config) { c.Resilience.CacheAffinity.Disabled = true })
	aware := runThreeProviders(t, seed, nil)
	t.Logf("latency-only: %v", latencyOnly)
	t.Logf("cache-aware:  %v", aware)
	t.Logf("cost %.3f×, p50 TTFT %.3f×, p99 TTFT %.3f×", aware.costPerSession/latencyOnly.costPerSession,
		float64(aware.p50)/float64(latencyOnly.p50), float64(aware.p99)/float64(latencyOnly.p99))
	if n := w2Sessions * w2Turns; aware.calls != n || latencyOnly.calls != n {
		t.Fatalf("%d and %d calls, want %d each", aware.calls, latencyOnly.calls, n)
	}
	checkCostSplit(t, latencyOnly, aware)
	// Measured once per arm, seed 1 (BENCHMARKS.md, Session 10): cost
	// 0.914×, TTFT p50 0.978× p99 0.757×, every turn after a session's
	// first warm (456) against 448, the cache-aware arm at the oracle's
	// bound (1.000×), which is itself 0.913× latency-only: latency-only
	// routing keeps 98 % of turns warm here, so the issue's ≤ 0.6× is out
	// of any routing's reach on this workload. The test holds what the run
	// showed, with a margin.
	if aware.costPerSession > 0.95*latencyOnly.costPerSession || aware.split.total() > 1.01*aware.bound.total() {
		t.Errorf("cache-aware $%.4f per session, want ≤ 0.95 × latency-only's $%.4f and ≤ 1.01 × the bound's $%.4f",
			aware.costPerSession, latencyOnly.costPerSession, aware.bound.total()/w2Sessions)
	}
	if float64(aware.p99) > 1.1*float64(latencyOnly.p99) || float64(aware.p50) > 1.05*float64(latencyOnly.p50) {
		t.Errorf("cache-aware TTFT p50 %v p99 %v, want ≤ 1.05 × and ≤ 1.1 × latency-only's %v and %v", aware.p50, aware.p99, latencyOnly.p50, latencyOnly.p99)
	}
	if aware.hitCalls < latencyOnly.hitCalls || aware.hitCalls < aware.warmableCall*99/100 {
		t.Errorf("turns reading their conversation: cache-aware %d, latency-only %d of %d; want cache-aware ≥ 99 %% and no fewer", aware.hitCalls, latencyOnly.hitCalls, aware.warmableCall)
	}
	if aware.moved != aware.movedHeaders || latencyOnly.moved != 0 || latencyOnly.movedHeaders != 0 {
		t.Errorf("moves: cache-aware %d recorded, %d X-Mesh-Cache-Moved headers; latency-only %d, %d (want equal; none)",
			aware.moved, aware.movedHeaders, latencyOnly.moved, latencyOnly.movedHeaders)
	}
}
