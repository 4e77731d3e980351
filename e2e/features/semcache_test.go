package features_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// semRT counts the chat calls and the embeddings calls that reach the
// simulator; failEmbeddings answers every embeddings call with a 503.
type semRT struct {
	rt             http.RoundTripper
	chats, embeds  atomic.Int64
	failEmbeddings bool
}

func (c *semRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.HasSuffix(r.URL.Path, "/embeddings") {
		c.embeds.Add(1)
		if c.failEmbeddings {
			if r.Body != nil {
				r.Body.Close()
			}
			return &http.Response{StatusCode: 503, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
				Body: io.NopCloser(strings.NewReader(`{"error":{"message":"overloaded","type":"server_error"}}`))}, nil
		}
	} else if r.Method == http.MethodPost {
		c.chats.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// semanticAlias is the alias the semantic cache is on for.
const semanticAlias = "support"

// semanticMesh is an embedded mesh in front of the zero-latency simulator
// with the exact cache on, the simulator's /v1/embeddings as the
// embeddings endpoint and the semantic cache on for the alias "support"
// (sim-sonnet) at threshold (0: the default).
func semanticMesh(t testing.TB, threshold float64, failEmbeddings bool) (*keel.Mesh, *semRT) {
	t.Helper()
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	up := &semRT{rt: fleet.Transport(), failEmbeddings: failEmbeddings}
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	cfg.Cache.Enabled = true
	cfg.Cache.Embeddings = &config.Embeddings{BaseURL: "http://sim.invalid/v1", Model: "text-embedding-3-small"}
	cfg.Aliases = append(cfg.Aliases, config.Alias{Name: semanticAlias, Models: []string{"sim-sonnet"},
		SemanticCache: &config.SemanticCache{Enabled: true, Threshold: threshold}})
	m, err := keel.New(cfg, keel.WithUpstream(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, up
}

// askChat sends one OpenAI-format chat call (temperature 0, a system
// prompt and a user message) through the embedded transport and returns
// its text, X-Mesh-Cache and X-Mesh-Cache-Similarity.
func askChat(t testing.TB, rt http.RoundTripper, model, system, user string) (text, cache, sim string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "temperature": 0, "max_tokens": 64,
		"messages": []map[string]string{{"role": "system", "content": system}, {"role": "user", "content": user}}})
	req, _ := http.NewRequest("POST", "https://api.openai.com/v1/chat/completions", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != 200 || len(out.Choices) != 1 {
		t.Fatalf("status %d, %v", resp.StatusCode, err)
	}
	return out.Choices[0].Message.Content, resp.Header.Get("X-Mesh-Cache"), resp.Header.Get("X-Mesh-Cache-Similarity")
}

// TestSemanticCacheThroughSDKs: a paraphrase of an answered question is
// served from the semantic cache through both official SDKs (streamed and
// not) with one upstream call, X-Mesh-Cache: hit and the similarity; a
// near miss (another country) and a different alias are not.
func TestSemanticCacheThroughSDKs(t *testing.T) {
	m, up := semanticMesh(t, 0, false)
	ctx := context.Background()
	oc := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("client-key"))
	ask := func(model, q string, stream bool) (string, http.Header) {
		t.Helper()
		var resp *http.Response
		p := openai.ChatCompletionNewParams{Model: model, Temperature: openai.Float(0), MaxCompletionTokens: openai.Int(64),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(q)}}
		if !stream {
			cc, err := oc.Chat.Completions.New(ctx, p, ooption.WithResponseInto(&resp))
			if err != nil {
				t.Fatal(err)
			}
			return cc.Choices[0].Message.Content, resp.Header
		}
		st := oc.Chat.Completions.NewStreaming(ctx, p, ooption.WithResponseInto(&resp))
		defer st.Close()
		var acc openai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatal(err)
		}
		return acc.Choices[0].Message.Content, resp.Header
	}
	first, h := ask(semanticAlias, "How do I cancel an order I just placed?", false)
	if h.Get("X-Mesh-Cache") != "miss" || up.chats.Load() != 1 {
		t.Fatalf("first call: X-Mesh-Cache %q, %d upstream calls; want miss, 1", h.Get("X-Mesh-Cache"), up.chats.Load())
	}
	for _, stream := range []bool{false, true} {
		got, h := ask(semanticAlias, "I just placed an order, how can I cancel it?", stream)
		if got != first || h.Get("X-Mesh-Cache") != "hit" || h.Get("X-Mesh-Cache-Similarity") == "" || up.chats.Load() != 1 {
			t.Fatalf("paraphrase (stream %v): X-Mesh-Cache %q, similarity %q, %d upstream calls, same answer %v; want hit, a similarity, 1, true",
				stream, h.Get("X-Mesh-Cache"), h.Get("X-Mesh-Cache-Similarity"), up.chats.Load(), got == first)
		}
		if s, err := strconv.ParseFloat(h.Get("X-Mesh-Cache-Similarity"), 64); err != nil || s < config.DefaultSemanticThreshold || s > 1 {
			t.Fatalf("X-Mesh-Cache-Similarity %q, want a cosine in [%v, 1]", h.Get("X-Mesh-Cache-Similarity"), config.DefaultSemanticThreshold)
		}
	}
	if _, h := ask(semanticAlias, "How do I cancel an order that has already shipped?", false); h.Get("X-Mesh-Cache") != "miss" || up.chats.Load() != 2 {
		t.Fatalf("near miss: X-Mesh-Cache %q, %d upstream calls; want miss, 2", h.Get("X-Mesh-Cache"), up.chats.Load())
	}
	// The same paraphrase to the model itself (no semantic cache there).
	ask("sim-sonnet", "How do I cancel an order I just placed?", false)
	if _, h := ask("sim-sonnet", "I just placed an order, how can I cancel it?", false); h.Get("X-Mesh-Cache") != "miss" || h.Get("X-Mesh-Cache-Similarity") != "" {
		t.Fatalf("alias without the semantic cache: X-Mesh-Cache %q, similarity %q; want miss, none", h.Get("X-Mesh-Cache"), h.Get("X-Mesh-Cache-Similarity"))
	}

	// The Anthropic SDK: a paraphrase in Chinese of a question asked over
	// the Anthropic format. Entries are per wire format (the exact key's
	// rule), so this one is its own.
	ac := anthropic.NewClient(aoption.WithHTTPClient(m.HTTPClient()), aoption.WithAPIKey("client-key"),
		aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry())
	askA := func(q string) (string, http.Header) {
		var resp *http.Response
		msg, err := ac.Messages.New(ctx, anthropic.MessageNewParams{Model: semanticAlias, MaxTokens: 64,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(q))}},
			aoption.WithResponseInto(&resp), aoption.WithJSONSet("temperature", 0))
		if err != nil {
			t.Fatal(err)
		}
		return msg.Content[0].Text, resp.Header
	}
	before := up.chats.Load()
	a1, _ := askA("怎么重置密码？")
	a2, h2 := askA("我忘记密码了，怎么找回？")
	if a1 != a2 || h2.Get("X-Mesh-Cache") != "hit" || up.chats.Load() != before+1 {
		t.Fatalf("anthropic paraphrase: X-Mesh-Cache %q, %d upstream calls, same answer %v; want hit, 1, true", h2.Get("X-Mesh-Cache"), up.chats.Load()-before, a1 == a2)
	}
}

// TestSemanticCacheContextMustMatch: a paraphrase under another system
// prompt, max_tokens or earlier turn is not served from the entry.
func TestSemanticCacheContextMustMatch(t *testing.T) {
	m, up := semanticMesh(t, 0, false)
	rt := m.Transport()
	askChat(t, rt, semanticAlias, "You are a support agent.", "What time zone is Tokyo in?")
	if _, c, _ := askChat(t, rt, semanticAlias, "You are a pirate.", "Which time zone does Tokyo use?"); c != "miss" {
		t.Fatalf("other system prompt: X-Mesh-Cache %q, want miss", c)
	}
	if _, c, s := askChat(t, rt, semanticAlias, "You are a support agent.", "Which time zone does Tokyo use?"); c != "hit" || s == "" {
		t.Fatalf("same system prompt: X-Mesh-Cache %q similarity %q, want a hit", c, s)
	}
	if up.chats.Load() != 2 {
		t.Fatalf("%d upstream calls, want 2", up.chats.Load())
	}
}

// TestSemanticCacheEmbeddingsDown: when the embeddings endpoint fails,
// every call is served upstream as a miss, never failed, and counted in
// mesh_semantic_cache_requests_total{result="error"}.
func TestSemanticCacheEmbeddingsDown(t *testing.T) {
	m, up := semanticMesh(t, 0, true)
	rt := m.Transport()
	for _, q := range []string{"How do I reset my password?", "I forgot my password, how can I reset it?"} {
		if _, c, _ := askChat(t, rt, semanticAlias, "s", q); c != "miss" {
			t.Fatalf("%q: X-Mesh-Cache %q, want miss", q, c)
		}
	}
	if up.chats.Load() != 2 || up.embeds.Load() != 2 {
		t.Fatalf("%d chat and %d embeddings calls, want 2 and 2", up.chats.Load(), up.embeds.Load())
	}
	rec := httpGet(t, m.Handler(), "/metrics")
	if !strings.Contains(rec, `mesh_semantic_cache_requests_total{result="error"} 2`) {
		t.Fatalf("metrics lack the two embedding errors:\n%s", grepLines(rec, "semantic"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.SplitSeq(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// paraPair is one line of testdata/semcache: two phrasings, the file's
// kind and language, and its split (even lines tune, odd lines are held
// out).
type paraPair struct {
	a, b, kind, lang string
	heldOut          bool
}

func loadParaphrases(t testing.TB) []paraPair {
	var out []paraPair
	for _, kind := range []string{"para", "near"} {
		for _, lang := range []string{"en", "zh"} {
			f, err := os.Open("testdata/semcache/" + kind + "_" + lang + ".tsv")
			if err != nil {
				t.Fatal(err)
			}
			sc := bufio.NewScanner(f)
			for i := 0; sc.Scan(); i++ {
				a, b, ok := strings.Cut(sc.Text(), "\t")
				if !ok {
					t.Fatalf("%s_%s.tsv line %d: no tab", kind, lang, i+1)
				}
				out = append(out, paraPair{a, b, kind, lang, i%2 == 1})
			}
			f.Close()
		}
	}
	return out
}

// semOutcome is one pair through the mesh: whether the second phrasing was
// served from the first's entry, and the similarity reported.
type semOutcome struct {
	paraPair
	hit bool
	sim float64
}

// runParaphrases asks each pair's first phrasing, then its second, each
// pair under its own system prompt (so pairs do not answer each other),
// through a mesh at threshold.
func runParaphrases(t testing.TB, pairs []paraPair, threshold float64) []semOutcome {
	m, _ := semanticMesh(t, threshold, false)
	rt := m.Transport()
	out := make([]semOutcome, len(pairs))
	for i, p := range pairs {
		sys := fmt.Sprintf("You are the assistant of conversation %d.", i)
		askChat(t, rt, semanticAlias, sys, p.a)
		_, c, s := askChat(t, rt, semanticAlias, sys, p.b)
		out[i] = semOutcome{paraPair: p, hit: c == "hit"}
		if s != "" {
			out[i].sim, _ = strconv.ParseFloat(s, 64)
		}
	}
	return out
}

type rates struct{ paraHit, para, nearHit, near int }

func (r rates) String() string {
	return fmt.Sprintf("hit %d/%d = %.1f %%, false hit %d/%d = %.1f %%", r.paraHit, r.para, pct(r.paraHit, r.para), r.nearHit, r.near, pct(r.nearHit, r.near))
}

func pct(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}

func tally(os []semOutcome, keep func(semOutcome) bool, hit func(semOutcome) bool) rates {
	var r rates
	for _, o := range os {
		if !keep(o) {
			continue
		}
		if o.kind == "para" {
			r.para++
			if hit(o) {
				r.paraHit++
			}
		} else {
			r.near++
			if hit(o) {
				r.nearHit++
			}
		}
	}
	return r
}

// TestSemanticCacheParaphraseSet measures the semantic cache on
// testdata/semcache (paraphrase pairs that should hit, near-miss pairs —
// same topic, another entity, number or negation — that must not) through
// the embedded mesh and the simulator's /v1/embeddings: the hit and false
// hit rates at the default threshold, by split and language, and a sweep
// of thresholds from one pass at a threshold low enough to report every
// similarity (a hit at threshold t is a reported similarity ≥ t: the
// domain and the context key are checked by the mesh either way). False
// hits must stay at or under 1 % at the default threshold on each split.
func TestSemanticCacheParaphraseSet(t *testing.T) {
	pairs := loadParaphrases(t)
	all := func(semOutcome) bool { return true }
	def := runParaphrases(t, pairs, 0)
	served := func(o semOutcome) bool { return o.hit }
	for _, split := range []struct {
		name string
		keep func(semOutcome) bool
	}{
		{"tuning", func(o semOutcome) bool { return !o.heldOut }},
		{"held-out", func(o semOutcome) bool { return o.heldOut }},
		{"all", all},
	} {
		r := tally(def, split.keep, served)
		t.Logf("default threshold %.2f, %s: %v", config.DefaultSemanticThreshold, split.name, r)
		for _, lang := range []string{"en", "zh"} {
			t.Logf("    %s %s: %v", split.name, lang, tally(def, func(o semOutcome) bool { return split.keep(o) && o.lang == lang }, served))
		}
		if r.para < 100 || r.near < 100 {
			t.Errorf("%s: %d paraphrase and %d near-miss pairs, want ≥ 100 each", split.name, r.para, r.near)
		}
		if pct(r.nearHit, r.near) > 1 {
			t.Errorf("%s: false hits %.1f %% > 1 %% at the default threshold", split.name, pct(r.nearHit, r.near))
		}
	}
	for _, o := range def {
		if o.kind == "near" && o.hit {
			t.Logf("false hit (%.4f): %q → %q", o.sim, o.a, o.b)
		}
	}
	sweep := runParaphrases(t, pairs, 0.01)
	// The default is the lowest threshold (in steps of 0.01) with at most
	// 1 % false hits on the tuning split; the held-out split is only
	// reported.
	chosen := 0.0
	for i := 80; i <= 99; i++ {
		th := float64(i) / 100
		at := func(o semOutcome) bool { return o.hit && o.sim >= th }
		tune := tally(sweep, func(o semOutcome) bool { return !o.heldOut }, at)
		t.Logf("threshold %.2f: tuning %v | held-out %v", th, tune, tally(sweep, func(o semOutcome) bool { return o.heldOut }, at))
		if chosen == 0 && pct(tune.nearHit, tune.near) <= 1 {
			chosen = th
		}
	}
	if chosen != config.DefaultSemanticThreshold {
		t.Errorf("the tuning split picks threshold %.2f, config.DefaultSemanticThreshold is %.2f", chosen, config.DefaultSemanticThreshold)
	}
	for _, o := range def {
		if o.kind == "para" && o.hit {
			t.Logf("hit (%.4f): %q → %q", o.sim, o.a, o.b)
		}
	}
	// The sweep at the default threshold is the default run.
	if a, b := tally(sweep, all, func(o semOutcome) bool { return o.hit && o.sim >= config.DefaultSemanticThreshold }), tally(def, all, served); a != b {
		t.Errorf("sweep at the default threshold %v, default run %v", a, b)
	}
}

// httpGet serves GET path (from localhost) on h and returns the body.
func httpGet(t testing.TB, h http.Handler, path string) string {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "http://localhost"+path, nil))
	if rr.Code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, rr.Code, rr.Body)
	}
	return rr.Body.String()
}

// BenchmarkEmbeddedSemanticCacheHit: the cost of a semantic hit through the
// embedded transport: the exact cache misses, the last user message is
// embedded by the simulator's /v1/embeddings (in memory, 1536 dimensions),
// the HNSW index answers, no upstream chat call.
func BenchmarkEmbeddedSemanticCacheHit(b *testing.B) {
	m, up := semanticMesh(b, 0, false)
	rt := m.Transport()
	const sys = "You are a support agent."
	askChat(b, rt, semanticAlias, sys, "How do I cancel an order I just placed?") // the miss that fills the cache
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, c, s := askChat(b, rt, semanticAlias, sys, "I just placed an order, how can I cancel it?"); c != "hit" || s == "" {
			b.Fatalf("X-Mesh-Cache %q, similarity %q; want a semantic hit", c, s)
		}
	}
	cpu.report(b)
	if n := up.chats.Load(); n != 1 {
		b.Fatalf("%d upstream chat calls, want 1", n)
	}
}
