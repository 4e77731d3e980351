package features_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

// Issue 28, item 4, must show: a coding-agent workload through Keel with
// cache-aware routing against latency-only routing, the same seed, the
// in-process simulator with prompt caching on, virtual time.
//
// The fleet: sim-sonnet in three regions whose prompt caches are each
// region's own, as Amazon Bedrock and Google Vertex AI cache Claude
// (docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html,
// cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/prompt-caching);
// time to first token 30ms median (sigma 0.25) plus 2ms per thousand
// prompt tokens not read from the cache (prefill), 2ms per output token.
// Prices: $3 input, $0.30 cache read, $3.75 5-minute cache write, $15
// output per million tokens (Anthropic's for Sonnet).
//
// Each region serves three calls at once (more queue), as a regional
// quota would cap it: the load needs every region.
//
// The workload: 42 agent sessions, started 100ms apart, each fifteen
// turns of one conversation that grows by one tool result (10,000 tokens)
// a turn, from 10k to 150k tokens, with a second of tool work between
// turns; each turn marks the system prompt and its last message with
// cache_control, as coding agents do, and names its conversation no other
// way (the key is the prefix's hash). After 12s, us-east turns five times
// slower and stays so.
//
// Same seed, but the goroutines that wake at one virtual instant draw
// from the simulator's generator in the scheduler's order, so the figures
// vary from run to run.
type agentRun struct {
	calls                  int
	prompt, read, written  int
	hitCalls, warmableCall int
	moved, movedHeaders    int
	movedByHedge           int // moves made by a hedge that won on a cold endpoint
	sessions               int
	costPerSession         float64
	p50, p99               time.Duration
	hedges                 int
	// split is the arm's dollars by kind of token; bound the oracle's
	// (costBound) for the same turns.
	split, bound costSplit
}

// costSplit is a run's dollars by what they paid for. The first five are
// the served answers' usage at the model's price; extra is what the
// calls' other attempts reported (hedge-race losers and continuations:
// rec.Cost less the served usage's price); rewrite is the part of the
// 5-minute writes that re-cached a prefix the oracle reads (a turn served
// where its conversation was not cached: a move, a winning cold hedge, a
// latency-only pick of another region), priced at the write premium over
// a read; unreported counts the hedge losers cancelled before their
// upstream reported any usage (Keel bills them nothing; coldUnreported
// is their prompts priced as cold writes, an upper estimate).
type costSplit struct {
	sessions                                 int
	uncached, write5m, write1h, read, output float64
	extra, rewrite                           float64
	unreported                               int
	coldUnreported                           float64
}

func (c costSplit) total() float64 {
	return c.uncached + c.write5m + c.write1h + c.read + c.output + c.extra
}

func (c costSplit) String() string {
	per := func(v float64) float64 { return v / float64(c.sessions) }
	return fmt.Sprintf("$/session: uncached input %.4f, cache writes 5m %.4f (re-cached prefixes %.4f) 1h %.4f, cache reads %.4f, output %.4f, other attempts %.4f; total %.4f; %d hedge losers cancelled before any usage (≤ $%.4f/session cold)",
		per(c.uncached), per(c.write5m), per(c.rewrite), per(c.write1h), per(c.read), per(c.output), per(c.extra), per(c.total()), c.unreported, per(c.coldUnreported))
}

// agentPrice is sim-sonnet's price in the agents' fleet.
func agentPrice() sim.Price {
	for _, m := range agentFleet(1).Models {
		if m.Name == "sim-sonnet" {
			return m.Price
		}
	}
	panic("no sim-sonnet")
}

// bill prices u at p in dollars: input, 5-minute and 1-hour writes,
// reads, output.
func bill(p sim.Price, u llm.Usage) (in, w5, w1, rd, out float64) {
	w1h := u.CacheWrite1h()
	return float64(u.InputTokens) * p.InputPerMTok / 1e6, float64(u.CacheWriteTokens-w1h) * p.CacheWrite5mPerMTok() / 1e6,
		float64(w1h) * p.CacheWrite1hPerMTok() / 1e6, float64(u.CacheReadTokens) * p.CacheReadPerMTok() / 1e6,
		float64(u.OutputTokens) * p.OutputPerMTok / 1e6
}

// turnOf names a record's session (its opening message) and turn (its
// messages: user, then assistant and user a turn).
func turnOf(rec *callrec.Record) (session string, turn int) {
	return rec.Request.Messages[0].Text(), (len(rec.Request.Messages) + 1) / 2
}

// costBound is the oracle's bill for the turns of recs: every turn of a
// session served where its conversation is cached — its first writes its
// whole prompt but for the first shared tokens (the system prompt, the
// same in every session: written once in all, read by every other
// session's first turn), each later one reads the previous turn's prompt
// and writes the rest — no hedge, and each turn's output as served
// (answers depend on the conversation only, not on the endpoint). The
// prompts' sizes are the workload's, whatever the routing.
func costBound(p sim.Price, recs []*callrec.Record, shared int) costSplit {
	prompt := map[string]map[int]llm.Usage{}
	for _, rec := range recs {
		s, k := turnOf(rec)
		if prompt[s] == nil {
			prompt[s] = map[int]llm.Usage{}
		}
		prompt[s][k] = rec.Usage
	}
	var b costSplit
	_, w5, _, rd, _ := bill(p, llm.Usage{CacheWriteTokens: shared, CacheReadTokens: -shared})
	b.write5m, b.read = w5, rd // written once, not read by its writer
	for _, turns := range prompt {
		prev := shared
		for k := 1; k <= len(turns); k++ {
			u := turns[k]
			total := u.PromptTokens()
			_, w5, _, rd, out := bill(p, llm.Usage{CacheReadTokens: prev, CacheWriteTokens: total - prev, OutputTokens: u.OutputTokens})
			b.write5m += w5
			b.read += rd
			b.output += out
			prev = total
		}
	}
	return b
}

const (
	agentSessions = 42
	agentTurns    = 15
	agentSystem   = 2_000  // tokens of the system prompt, the same in every session
	agentFirst    = 8_000  // tokens of the first message
	agentStep     = 10_000 // tokens a turn adds
)

func agentFleet(seed int64) sim.Config {
	c := sim.WithPromptCache(sim.DefaultConfig())
	c.Seed, c.RequestDraws = seed, true // the same run every time (see agentSeeds)
	for i := range c.Models {
		if c.Models[i].Name == "sim-sonnet" {
			c.Models[i].PromptCache.PerRegion = true
		}
	}
	for i := range c.Regions {
		c.Regions[i].Latency = sim.LatencySpec{Concurrency: 3, TTFT: sim.Duration(30 * time.Millisecond), TTFTSigma: 0.25,
			PerToken: sim.Duration(2 * time.Millisecond), PrefillPerKTok: sim.Duration(2 * time.Millisecond)}
	}
	return c
}

// code is what the agent's tool results hold, word by word.
var code = strings.Fields("func handle ( w http.ResponseWriter , r * http.Request ) { }")

// words is n words starting with tag's (the simulator counts one token a
// word).
func words(tag string, n int) string {
	var b strings.Builder
	b.WriteString(tag)
	for i := len(strings.Fields(tag)); i < n; i++ {
		b.WriteByte(' ')
		b.WriteString(code[i%len(code)])
	}
	return b.String()
}

// agentBody is session s's request at turn (from 1): the whole
// conversation so far, breakpoints on the system prompt and the last
// message.
func agentBody(s, turn int) string {
	return conversationBody(s, turn, agentSystem, agentFirst, func(int, int) int { return agentStep })
}

// conversationBody is session s's streamed request at turn (from 1) of a
// coding agent's conversation: a system prompt of system words, a first
// message of first words, then per later turn k an assistant reply and a
// tool result of step(k, total) words, total being the conversation's words
// before it; breakpoints on the system prompt and the last message, as
// Claude Code sends them.
func conversationBody(s, turn, system, first int, step func(k, total int) int) string {
	j := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	var b strings.Builder
	b.WriteString(`{"model":"sim-sonnet","max_tokens":100,"stream":true,"system":[{"type":"text","text":`)
	b.WriteString(j(words("You are a coding agent.", system)))
	b.WriteString(`,"cache_control":{"type":"ephemeral"}}],"messages":[`)
	msg := func(role, text string, mark bool) {
		b.WriteString(`{"role":"` + role + `","content":[{"type":"text","text":` + j(text))
		if mark {
			b.WriteString(`,"cache_control":{"type":"ephemeral"}`)
		}
		b.WriteString(`}]},`)
	}
	msg("user", words(fmt.Sprintf("Session %d: fix the failing tests.", s), first), turn == 1)
	total := system + first
	for k := 2; k <= turn; k++ {
		reply := fmt.Sprintf("Turn %d: I read the next file.", k-1)
		msg("assistant", reply, false)
		total += len(strings.Fields(reply))
		n := step(k, total)
		total += n
		msg("user", words(fmt.Sprintf("Session %d tool result %d:", s, k), n), k == turn)
	}
	return strings.TrimSuffix(b.String(), ",") + `]}`
}

// agentSeeds are the seeds the workloads run with: the simulator's (its
// latency draws, per call: sim.Config.RequestDraws) and the engine's
// random choice (seededRand), both 1 unless KEEL_AGENT_SEEDS lists others
// ("1,2,3"), to see how a result depends on the draws. With both seeded
// a run is the same every time: before, the goroutines that woke at one
// virtual instant drew from the simulator's per-endpoint generators in
// the scheduler's order, and the engine's ties were broken by
// math/rand, so runs of one seed differed.
func agentSeeds(t *testing.T) []int64 {
	env := os.Getenv("KEEL_AGENT_SEEDS")
	if env == "" {
		return []int64{1}
	}
	var seeds []int64
	for _, f := range strings.Split(env, ",") {
		n, err := strconv.ParseInt(strings.TrimSpace(f), 10, 64)
		if err != nil {
			t.Fatalf("KEEL_AGENT_SEEDS=%q: %v", env, err)
		}
		seeds = append(seeds, n)
	}
	return seeds
}

// runAgents runs the workload with seed through a mesh configured by
// tweak.
func runAgents(t *testing.T, seed int64, tweak func(*config.Config)) agentRun {
	var run agentRun
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, agentFleet(seed), tweak, keel.WithRand(seededRand(uint64(seed))))
		defer s.mesh.Close()
		var wg sync.WaitGroup
		var mu sync.Mutex
		moved := 0
		for i := range agentSessions {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 100 * time.Millisecond)
				for turn := 1; turn <= agentTurns; turn++ {
					h := agentStream(t, s, agentBody(i, turn))
					if h.Get("X-Mesh-Cache-Moved") != "" {
						mu.Lock()
						moved++
						mu.Unlock()
					}
					time.Sleep(time.Second)
				}
			}()
		}
		time.Sleep(12 * time.Second)
		if err := s.fleet.AddFault(sim.Fault{Kind: sim.KindSlow, Region: "us-east", Factor: 5}); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		s.mu.Lock()
		recs := slices.Clone(s.records)
		s.mu.Unlock()
		run = summarize(recs, agentSessions, agentPrice(), agentSystem)
		run.movedHeaders = moved
	})
	return run
}

// seededRand is a random choice for the engine that gives the same
// sequence every run (safe for concurrent use).
func seededRand(seed uint64) func(int) int {
	var mu sync.Mutex
	r := rand.New(rand.NewPCG(seed, seed))
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return r.IntN(n)
	}
}

// agentStream sends one streamed turn, reads it to its end and returns
// its response header.
func agentStream(t *testing.T, s *simMesh, body string) http.Header {
	req, _ := http.NewRequest("POST", "http://keel.test/v1/messages", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := s.mesh.HTTPClient().Do(req)
	if err != nil {
		t.Errorf("transport error: %v", err)
		return nil
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	stopped := false
	for sc.Scan() {
		stopped = stopped || strings.Contains(sc.Text(), `"type":"message_stop"`)
	}
	if resp.StatusCode != 200 || !stopped {
		t.Errorf("status %d, message_stop %v", resp.StatusCode, stopped)
	}
	return resp.Header
}

// summarize measures a run of sessions whose system prompts, the same in
// every session, hold shared tokens; p is the model's price.
func summarize(recs []*callrec.Record, sessions int, p sim.Price, shared int) agentRun {
	var r agentRun
	var ttfts []time.Duration
	var cost float64
	r.sessions, r.split.sessions = sessions, sessions
	r.bound = costBound(p, recs, shared)
	r.bound.sessions = sessions
	prev := map[string]map[int]int{} // a session's prompt at each turn
	for _, rec := range recs {
		s, k := turnOf(rec)
		if prev[s] == nil {
			prev[s] = map[int]int{}
		}
		prev[s][k] = rec.Usage.PromptTokens()
	}
	for _, rec := range recs {
		u := rec.Usage
		in, w5, w1, rd, out := bill(p, u)
		sp := &r.split
		sp.uncached += in
		sp.write5m += w5
		sp.write1h += w1
		sp.read += rd
		sp.output += out
		sp.extra += rec.Cost - (in + w5 + w1 + rd + out)
		s, k := turnOf(rec)
		if over := u.CacheWriteTokens - (u.PromptTokens() - prev[s][k-1]); over > 0 {
			sp.rewrite += float64(over) * (p.CacheWrite5mPerMTok() - p.CacheReadPerMTok()) / 1e6
		}
		for _, a := range rec.Attempts {
			if a.Outcome == "cancelled_loser" && a.InputTokens == 0 {
				sp.unreported++
				sp.coldUnreported += float64(u.PromptTokens()) * p.CacheWrite5mPerMTok() / 1e6
			}
		}
		r.calls++
		r.prompt += u.InputTokens + u.CacheReadTokens + u.CacheWriteTokens
		r.read += u.CacheReadTokens
		r.written += u.CacheWriteTokens
		// Every turn after a session's first could read its prefix.
		if _, k := turnOf(rec); k > 1 {
			r.warmableCall++
			if u.CacheReadTokens > shared { // more than the system prompt
				r.hitCalls++
			}
		}
		if rec.CacheMoved() != "" {
			r.moved++
			if rec.HedgeWon {
				r.movedByHedge++
			}
		}
		r.hedges += rec.Hedges
		cost += rec.Cost
		ttfts = append(ttfts, rec.TTFT)
	}
	slices.Sort(ttfts)
	r.p50, r.p99 = ttfts[len(ttfts)/2], ttfts[(len(ttfts)*99+99)/100-1]
	r.costPerSession = cost / float64(sessions)
	return r
}

func (r agentRun) String() string {
	return fmt.Sprintf("calls %d, cache hit rate %.1f %% of prompt tokens (%d of %d turns after the first read their conversation), written %d tokens, $%.4f per session, TTFT p50 %v p99 %v, hedges %d, moved %d (by a winning hedge %d; headers %d)",
		r.calls, 100*float64(r.read)/float64(r.prompt), r.hitCalls, r.warmableCall, r.written, r.costPerSession, r.p50, r.p99, r.hedges, r.moved, r.movedByHedge, r.movedHeaders)
}

// latencyOnlyRouting is the baseline: Keel's routing and hedging with
// cache affinity and the cold-spend budget off.
func latencyOnlyRouting(c *config.Config) {
	c.Resilience.CacheAffinity.Disabled = true
	c.Resilience.ColdSpend.Disabled = true
}

func TestCacheAwareRoutingCodingAgents(t *testing.T) {
	for _, seed := range agentSeeds(t) {
		t.Run(fmt.Sprintf("seed_%d", seed), func(t *testing.T) { codingAgents(t, seed) })
	}
}

func codingAgents(t *testing.T, seed int64) {
	latencyOnly := runAgents(t, seed, latencyOnlyRouting)
	aware := runAgents(t, seed, nil)
	t.Logf("latency-only: %v", latencyOnly)
	t.Logf("cache-aware:  %v", aware)
	t.Logf("cost %.3f×, p50 TTFT %.3f×, p99 TTFT %.3f×", aware.costPerSession/latencyOnly.costPerSession,
		float64(aware.p50)/float64(latencyOnly.p50), float64(aware.p99)/float64(latencyOnly.p99))
	if n := agentSessions * agentTurns; aware.calls != n || latencyOnly.calls != n {
		t.Fatalf("%d and %d calls, want %d each", aware.calls, latencyOnly.calls, n)
	}
	checkCostSplit(t, latencyOnly, aware)
	// The targets are cost ≤ 0.6× at p99 TTFT ≤ 1.1×. Measured
	// over eight runs before runs were reproducible (BENCHMARKS.md,
	// Session 9): cost 0.65–0.78×, p99 0.12–1.18×; now, with the seeds
	// fixed (Session 10), seed 1: cost 0.587×, p99 0.168×; seeds 2–6:
	// cost 0.674–0.728×, p99 0.35–0.81×. Cache-aware routing sits near
	// this workload's floor (each turn's new 10,000 tokens written at
	// 1.25× the input price, the degraded region's conversations
	// re-cached once elsewhere), while latency-only routing keeps most
	// conversations warm by herding them onto the fastest region until it
	// fills. The p99 is decided by a transient, the calls queued on
	// us-east as it degrades before health shows it. The test holds what
	// every seed met, with a margin (KEEL_AGENT_SEEDS runs others).
	if aware.costPerSession > 0.85*latencyOnly.costPerSession {
		t.Errorf("cache-aware $%.4f per session, want ≤ 0.85 × latency-only's $%.4f", aware.costPerSession, latencyOnly.costPerSession)
	}
	if float64(aware.p99) > 1.3*float64(latencyOnly.p99) || aware.p50 >= latencyOnly.p50 {
		t.Errorf("cache-aware TTFT p50 %v p99 %v, want p50 below latency-only's %v and p99 ≤ 1.3 × its %v", aware.p50, aware.p99, latencyOnly.p50, latencyOnly.p99)
	}
	if aware.hitCalls <= latencyOnly.hitCalls || aware.hitCalls < aware.warmableCall*95/100 {
		t.Errorf("turns reading their conversation: cache-aware %d, latency-only %d of %d; want cache-aware ≥ 95 %% and more", aware.hitCalls, latencyOnly.hitCalls, aware.warmableCall)
	}
	if aware.moved != aware.movedHeaders || latencyOnly.moved != 0 || latencyOnly.movedHeaders != 0 {
		t.Errorf("moves: cache-aware %d recorded, %d X-Mesh-Cache-Moved headers; latency-only %d, %d (want equal; none)",
			aware.moved, aware.movedHeaders, latencyOnly.moved, latencyOnly.movedHeaders)
	}
	// The oracle's bound (checkCostSplit) is 0.587× latency-only's cost
	// at seed 1 and 0.604–0.627× at seeds 2–6: the target ≤ 0.6× is within
	// any routing's reach at seed 1 only. Cache-aware routing costs 1.000×
	// the bound at seed 1 (no conversation was warm on us-east when it
	// slowed) and 1.12–1.16× at seeds 2–6, the excess the re-caching of
	// the conversations moved off us-east (16–23 moves).
	if aware.split.total() > 1.2*aware.bound.total() {
		t.Errorf("cache-aware $%.4f per session, want ≤ 1.2 × the oracle's $%.4f", aware.costPerSession, aware.bound.total()/agentSessions)
	}
}

// checkCostSplit logs each arm's dollars by kind and the oracle's bound,
// and checks that they add up: each arm's split is its records' cost, the
// bound is the same for both (the prompts are the workload's), no arm
// costs less than it. The bound is what any routing must pay at least.
func checkCostSplit(t *testing.T, latencyOnly, aware agentRun) {
	t.Helper()
	t.Logf("latency-only %v", latencyOnly.split)
	t.Logf("cache-aware  %v", aware.split)
	t.Logf("oracle bound %v", aware.bound)
	b, n := aware.bound.total(), float64(aware.sessions)
	t.Logf("bound: $%.4f per session, %.3f× latency-only; cache-aware is %.3f× the bound, latency-only %.3f×",
		b/n, b/n/latencyOnly.costPerSession, aware.costPerSession*n/b, latencyOnly.costPerSession*n/b)
	near := func(a, b float64) bool { return math.Abs(a-b) <= 1e-6*max(1, math.Abs(b)) }
	for _, r := range []agentRun{latencyOnly, aware} {
		if !near(r.split.total(), r.costPerSession*n) {
			t.Errorf("cost split adds up to $%.6f, the records to $%.6f", r.split.total(), r.costPerSession*n)
		}
		if r.split.total() < b {
			t.Errorf("an arm costs $%.6f, below the oracle's $%.6f", r.split.total(), b)
		}
	}
	if !near(latencyOnly.bound.total(), b) {
		t.Errorf("oracle bound $%.6f from the latency-only run's prompts, $%.6f from the cache-aware run's", latencyOnly.bound.total(), b)
	}
}

// A conversation whose warm region goes down mid-call is served by
// another region, and the client is told: X-Mesh-Cache-Moved names both
// endpoints, on the HTTP answer; the next turn stays where it moved to.
func TestCacheMovedHeaderOnFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, agentFleet(1), nil)
		defer s.mesh.Close()
		body := msgBody("sim-sonnet", "fix the failing test", "")
		first := s.call(t, "/v1/messages", body, "X-Mesh-Session", "agent-1")
		warm := first.header.Get("X-Mesh-Region")
		if first.status != 200 || warm == "" || first.header.Get("X-Mesh-Cache-Moved") != "" {
			t.Fatalf("first call: status %d, region %q, moved %q", first.status, warm, first.header.Get("X-Mesh-Cache-Moved"))
		}
		if err := s.fleet.SetRegionDown(warm, true); err != nil {
			t.Fatal(err)
		}
		moved := s.call(t, "/v1/messages", body, "X-Mesh-Session", "agent-1")
		to := moved.header.Get("X-Mesh-Region")
		want := "sim-sonnet/" + warm + "/sim-anthropic->sim-sonnet/" + to + "/sim-anthropic"
		if moved.status != 200 || to == warm || moved.header.Get("X-Mesh-Cache-Moved") != want || moved.header.Get("X-Mesh-Attempts") != "2" {
			t.Fatalf("after %s went down: status %d, region %q, %s attempts, X-Mesh-Cache-Moved %q, want %q after 2 attempts",
				warm, moved.status, to, moved.header.Get("X-Mesh-Attempts"), moved.header.Get("X-Mesh-Cache-Moved"), want)
		}
		s.fleet.SetRegionDown(warm, false)
		next := s.call(t, "/v1/messages", body, "X-Mesh-Session", "agent-1")
		if next.header.Get("X-Mesh-Region") != to || next.header.Get("X-Mesh-Cache-Moved") != "" {
			t.Errorf("next turn: region %q, moved %q; want %s, none", next.header.Get("X-Mesh-Region"), next.header.Get("X-Mesh-Cache-Moved"), to)
		}
	})
}

// A stream cut on the conversation's warm region is finished by a
// continuation on another, which sent the conversation's prompt there
// (its breakpoints with it): the next turn goes where the answer was
// finished and reads its cache there. (The table kept the endpoint of the
// call's first attempt: the next turn went back to the region that had
// failed.)
func TestContinuationMovesAffinity(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, agentFleet(1), nil)
		defer s.mesh.Close()
		first := s.call(t, "/v1/messages", agentBody(0, 1))
		warm := first.header.Get("X-Mesh-Region")
		if first.status != 200 || warm == "" {
			t.Fatalf("first turn: status %d, region %q", first.status, warm)
		}
		if err := s.fleet.AddFault(sim.Fault{Kind: sim.KindStreamCut, Region: warm, Count: 1, AfterTokens: 3}); err != nil {
			t.Fatal(err)
		}
		cut := s.call(t, "/v1/messages", agentBody(0, 2))
		s.mu.Lock()
		rec := s.records[len(s.records)-1]
		s.mu.Unlock()
		if cut.status != 200 || !strings.Contains(string(cut.body), "message_stop") || rec.Recovered != 1 {
			t.Fatalf("cut turn: status %d, recovered %d:\n%s", cut.status, rec.Recovered, cut.body)
		}
		to := rec.Attempts[len(rec.Attempts)-1].Region
		if to == warm {
			t.Fatalf("the continuation ran on %s, the region that cut the stream", to)
		}
		next := s.call(t, "/v1/messages", agentBody(0, 3))
		s.mu.Lock()
		rec = s.records[len(s.records)-1]
		s.mu.Unlock()
		if got := next.header.Get("X-Mesh-Region"); got != to || rec.Usage.CacheReadTokens <= agentSystem {
			t.Errorf("next turn served in %s reading %d cached tokens; want %s, where the continuation cached the conversation", got, rec.Usage.CacheReadTokens, to)
		}
	})
}
