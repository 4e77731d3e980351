package engine

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/semcache"
)

// TestSemanticCache: after an exact miss on an alias with the semantic
// cache on, a prompt whose embedding is within the threshold of a stored
// one, in the same space (same everything but the last user message) and
// domain, is served from it; anything else goes upstream.
func TestSemanticCache(t *testing.T) {
	// Embeddings by text: "q" and its paraphrase "p" are 0.96 apart, "far"
	// 0.6; "boom" fails.
	vecs := map[string][]float32{"q": {1, 0}, "p": {0.96, 0.28}, "far": {0.6, 0.8}, "legal q": {1, 0}}
	zero := 0.0
	req := func(text string, edit ...func(*llm.Request)) *llm.Request {
		r := ask(llm.FormatAnthropic, "al", false)
		r.Temperature = &zero
		r.Messages[0].Content[0].Text = text
		for _, f := range edit {
			f(r)
		}
		return r
	}
	for _, tc := range []struct {
		name string
		// second is asked after req("q") was answered.
		second *llm.Request
		alias  string
		// want: the second call's Record.Cache and SemanticCache, and the
		// upstream calls and embeddings calls of both.
		wantCache, wantSem string
		wantUp, wantEmbeds int
	}{
		{name: "paraphrase", second: req("p"), wantCache: cache.Hit, wantSem: semcache.StatusHit, wantUp: 1, wantEmbeds: 2},
		{name: "below threshold", second: req("far"), wantCache: cache.Miss, wantSem: semcache.StatusMiss, wantUp: 2, wantEmbeds: 2},
		{name: "embeddings fail", second: req("boom"), wantCache: cache.Miss, wantSem: semcache.StatusError, wantUp: 2, wantEmbeds: 2},
		{name: "same text is an exact hit", second: req("q"), wantCache: cache.Hit, wantUp: 1, wantEmbeds: 1},
		{name: "other max_tokens", second: req("p", func(r *llm.Request) { r.MaxTokens = 65 }), wantCache: cache.Miss, wantSem: semcache.StatusMiss, wantUp: 2, wantEmbeds: 2},
		{name: "other system prompt", second: req("p", func(r *llm.Request) { r.System = []llm.Block{{Type: llm.BlockText, Text: "be brief"}} }),
			wantCache: cache.Miss, wantSem: semcache.StatusMiss, wantUp: 2, wantEmbeds: 2},
		{name: "other domain", second: req("legal q"), wantCache: cache.Miss, wantSem: semcache.StatusMiss, wantUp: 2, wantEmbeds: 2},
		{name: "ends with a prefill", second: req("p", func(r *llm.Request) {
			r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "Sure"}}})
		}), wantCache: cache.Miss, wantUp: 2, wantEmbeds: 1},
		{name: "not cacheable", second: req("p", func(r *llm.Request) { r.Temperature = nil }), wantCache: cache.Bypass, wantUp: 2, wantEmbeds: 1},
		{name: "model without it", alias: "m", second: req("p", func(r *llm.Request) { r.Model = "m" }), wantCache: cache.Miss, wantUp: 2, wantEmbeds: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply { return anthropicJSON("answer " + string(rune('0'+n))) }}
			h := newHarness(t, a)
			lru, _ := cache.New[*cache.Entry](cache.Config{}, nil)
			idx, _ := semcache.New[*cache.Entry](semcache.Config{}, nil)
			var embeds atomic.Int64
			embed := func(_ context.Context, text string) ([]float32, error) {
				embeds.Add(1)
				if v, ok := vecs[text]; ok {
					return v, nil
				}
				return nil, errors.New("embeddings endpoint down")
			}
			e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, SemanticThreshold: 0.9}},
				Stages: stages(t, chain.Config{Cache: lru, Semantic: &semcache.Semantic{Embed: embed, Index: idx}}),
				Classify: func(s string) string {
					if strings.HasPrefix(s, "legal") {
						return "legal"
					}
					return "general"
				}}, h.endpoints("m", "a")...)
			first := req("q")
			if tc.alias != "" {
				first.Model = tc.alias
			}
			r1 := call(t, e, first)
			r2 := call(t, e, tc.second)
			if r1.err != nil || r2.err != nil {
				t.Fatalf("errors %v, %v", r1.err, r2.err)
			}
			if r2.rec.CacheStatus() != tc.wantCache || r2.rec.SemanticStatus() != tc.wantSem || a.count() != tc.wantUp || int(embeds.Load()) != tc.wantEmbeds {
				t.Fatalf("cache %q semantic %q, %d upstream, %d embeddings; want %q %q %d %d",
					r2.rec.CacheStatus(), r2.rec.SemanticStatus(), a.count(), embeds.Load(), tc.wantCache, tc.wantSem, tc.wantUp, tc.wantEmbeds)
			}
			if tc.wantSem == semcache.StatusHit {
				if r2.text != r1.text || r2.rec.Semantic == nil || r2.rec.Semantic.Similarity < 0.9 || similarity(r2.rec) != "0.9600" || r2.rec.Cost != 0 {
					t.Fatalf("hit: text %q (first %q), similarity %v header %q cost %v", r2.text, r1.text, r2.rec.Semantic, similarity(r2.rec), r2.rec.Cost)
				}
			} else if similarity(r2.rec) != "" {
				t.Fatalf("no semantic hit, X-Mesh-Cache-Similarity %q", similarity(r2.rec))
			}
		})
	}
}

// TestSemanticCacheNeedsItsOptions: an alias with a threshold but no
// cache or no embeddings is a configuration error, not a silent no-op.
func TestSemanticCacheNeedsItsOptions(t *testing.T) {
	h := newHarness(t, &scripted{id: "a", format: llm.FormatAnthropic})
	_, err := newEngine(Options{Endpoints: h.endpoints("m", "a"), Client: provider.NewClient(h),
		Aliases: map[string]Alias{"al": {Models: []string{"m"}, SemanticThreshold: 0.9}}})
	if err == nil || !strings.Contains(err.Error(), "semantic cache needs") {
		t.Fatalf("New = %v, want the semantic cache's missing options named", err)
	}
}

// An embeddings endpoint that fails (down, or misconfigured: an unknown
// model) is said once at warning level, not only counted, and its return
// once at info; the calls meanwhile are misses served upstream.
func TestSemanticCacheEmbeddingsOutageLoggedOnce(t *testing.T) {
	a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply { return anthropicJSON("answer") }}
	h := newHarness(t, a)
	lru, _ := cache.New[*cache.Entry](cache.Config{}, nil)
	idx, _ := semcache.New[*cache.Entry](semcache.Config{}, nil)
	embed := func(_ context.Context, text string) ([]float32, error) {
		if strings.HasPrefix(text, "boom") {
			return nil, errors.New("404 model_not_found")
		}
		return []float32{1, 0}, nil
	}
	var logs strings.Builder
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))
	e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, SemanticThreshold: 0.9}},
		Stages: stages(t, chain.Config{Cache: lru, Semantic: &semcache.Semantic{Embed: embed, Index: idx}, Log: log}),
		Logger: log}, h.endpoints("m", "a")...)
	zero := 0.0
	for _, text := range []string{"boom 1", "boom 2", "fine", "boom 3"} {
		r := ask(llm.FormatAnthropic, "al", false)
		r.Temperature = &zero
		r.Messages[0].Content[0].Text = text
		if res := call(t, e, r); res.err != nil {
			t.Fatalf("%q: %v, want served upstream", text, res.err)
		}
	}
	mu.Lock()
	out := logs.String()
	mu.Unlock()
	if n := strings.Count(out, "level=WARN"); n != 2 || !strings.Contains(out, "model_not_found") {
		t.Errorf("warnings logged: %d, want 2 (one per outage: boom 1, boom 3) naming the error:\n%s", n, out)
	}
	if n := strings.Count(out, "answers again"); n != 1 {
		t.Errorf("recoveries logged: %d, want 1:\n%s", n, out)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// similarity is the X-Mesh-Cache-Similarity value the server sets
// (server.cacheHeaders): a semantic hit's similarity to 4 decimals.
func similarity(rec *Record) string {
	if rec.SemanticStatus() != semcache.StatusHit {
		return ""
	}
	return strconv.FormatFloat(rec.Semantic.Similarity, 'f', 4, 64)
}
