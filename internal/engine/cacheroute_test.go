package engine

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
)

// Cache-aware routing (issue 28, item 4), on scripted endpoints in virtual
// time: a conversation stays where its prompt cache is warm, by each key
// source; it leaves an unavailable or much slower endpoint, saying so; the
// dollar budget caps a cold hedge and a move for speed.

// sonnetPrice is Anthropic's list price for Claude Sonnet 4.5.
var sonnetPrice = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75, CacheWrite1hPerMTok: 6}

// delays answers each endpoint after its own delay, changeable mid-test.
type delays struct {
	mu sync.Mutex
	d  map[string]time.Duration
}

func (d *delays) set(id string, v time.Duration) {
	d.mu.Lock()
	d.d[id] = v
	d.mu.Unlock()
}

func (d *delays) script(id string, ok func(time.Duration) reply) func(int, map[string]any) reply {
	return func(int, map[string]any) reply {
		d.mu.Lock()
		v := d.d[id]
		d.mu.Unlock()
		r := ok(v)
		r.delay = v
		return r
	}
}

func anthropicOK(time.Duration) reply { return anthropicJSON("ok") }

func openaiOK(time.Duration) reply {
	return reply{body: `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":1,"total_tokens":8}}`}
}

// cacheFleet is three endpoints a, b, c of model m in format f, each 20ms.
func cacheFleet(t *testing.T, f llm.Format, o Options) (*harness, *Engine, *delays) {
	d := &delays{d: map[string]time.Duration{"a": 20 * time.Millisecond, "b": 20 * time.Millisecond, "c": 20 * time.Millisecond}}
	ok := anthropicOK
	if f == llm.FormatOpenAI {
		ok = openaiOK
	}
	var ss []*scripted
	for _, id := range []string{"a", "b", "c"} {
		ss = append(ss, &scripted{id: id, format: f, script: d.script(id, ok)})
	}
	h := newHarness(t, ss...)
	eps := h.endpoints("m", "a", "b", "c")
	for _, ep := range eps {
		ep.Price = sonnetPrice
	}
	o.Resilience.DisableHedging = o.Resilience.DisableHedging || o.Resilience.Hedge.Ceiling == 0
	return h, h.engine(o, eps...), d
}

// warmAll gives every endpoint latency data: an endpoint without any ties
// with the best (optimistic start), so keyless calls reach each one in a
// few tries.
func warmAll(t *testing.T, h *harness, e *Engine, f llm.Format) {
	for i := 0; i < 50 && (h.byID["a"].count() == 0 || h.byID["b"].count() == 0 || h.byID["c"].count() == 0); i++ {
		doCall(t, e, ask(f, "m", false), nil)
	}
}

func doCall(t *testing.T, e *Engine, req *llm.Request, hdr http.Header) *Record {
	t.Helper()
	out, err := e.Do(context.Background(), req, Call{RequestID: "t", ClientHeader: hdr})
	if err != nil {
		t.Fatalf("call failed: %v", err)
	}
	return out.Record
}

// agentTurn is a conversation's turn: a system prompt, the first message
// naming the conversation, and turns long file contents (2,500 tokens
// each by Keel's estimate).
func agentTurn(f llm.Format, name string, turns int) *llm.Request {
	r := &llm.Request{Format: f, Model: "m", MaxTokens: 64, HasMaxTokens: true}
	file := strings.Repeat("func main() { fmt.Println(42) } // ", 286) // 10,010 bytes
	if f == llm.FormatAnthropic {
		r.System = []llm.Block{{Type: llm.BlockText, Text: "You are a coding agent."}}
	}
	r.Messages = []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Conversation " + name}}}}
	for range turns {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "Reading."}}},
			llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: file}}})
	}
	if f == llm.FormatAnthropic {
		last := &r.Messages[len(r.Messages)-1].Content[0]
		last.Extra = llm.Extra{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}
	}
	return r
}

// Each key source holds a conversation on its warm endpoint while that
// endpoint is 1.5× slower than the others (within max_slowdown 3), where
// latency alone sends a new conversation elsewhere.
func TestCacheAffinityByKeySource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		format llm.Format
		req    func(turn int) *llm.Request
		hdr    http.Header
	}{
		{"X-Mesh-Session header", llm.FormatAnthropic, func(int) *llm.Request { return ask(llm.FormatAnthropic, "m", false) }, http.Header{"X-Mesh-Session": {"s-1"}}},
		{"OpenAI prompt_cache_key", llm.FormatOpenAI, func(int) *llm.Request {
			r := ask(llm.FormatOpenAI, "m", false)
			r.Extra = llm.Extra{"prompt_cache_key": json.RawMessage(`"repo-42"`)}
			return r
		}, nil},
		{"Anthropic metadata.user_id", llm.FormatAnthropic, func(int) *llm.Request {
			r := ask(llm.FormatAnthropic, "m", false)
			r.UserID = "user-7"
			return r
		}, nil},
		{"Anthropic cached prefix", llm.FormatAnthropic, func(turn int) *llm.Request { return agentTurn(llm.FormatAnthropic, "one", turn) }, nil},
		{"OpenAI automatic caching prefix", llm.FormatOpenAI, func(turn int) *llm.Request { return agentTurn(llm.FormatOpenAI, "one", turn) }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, e, d := cacheFleet(t, tc.format, Options{})
				first := doCall(t, e, tc.req(1), tc.hdr)
				if k := affinity.KeyOf(tc.req(1), tc.hdr); k.Hash == 0 {
					t.Fatalf("no key for the request")
				}
				warm := first.ServedRegion
				d.set(warm, 30*time.Millisecond)
				warmAll(t, h, e, tc.format)
				for turn := 2; turn <= 5; turn++ {
					r := doCall(t, e, tc.req(turn), tc.hdr)
					if r.ServedRegion != warm || r.CacheMoved() != "" || len(r.Attempts) != 1 {
						t.Fatalf("turn %d served by %s (moved %q, %d attempts), want %s where the conversation is warm", turn, r.ServedRegion, r.CacheMoved(), len(r.Attempts), warm)
					}
				}
				// A new conversation goes by latency: elsewhere.
				other := tc.req(2)
				hdr := tc.hdr
				switch {
				case hdr != nil:
					hdr = http.Header{"X-Mesh-Session": {"s-2"}}
				case other.UserID != "":
					other.UserID = "user-8"
				case other.Extra["prompt_cache_key"] != nil:
					other.Extra = llm.Extra{"prompt_cache_key": json.RawMessage(`"repo-43"`)}
				default:
					other = agentTurn(tc.format, "two", 2)
				}
				if r := doCall(t, e, other, hdr); r.ServedRegion == warm {
					t.Errorf("a new conversation went to the slower %s: %+v", warm, r.Candidates)
				}
			})
		})
	}
}

// The warm endpoint fails the call (529): the retry goes elsewhere, and
// the call says the conversation moved; the next turn stays where it
// moved to (now warm), with no move.
func TestCacheMovedOnFallback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, e, _ := cacheFleet(t, llm.FormatAnthropic, Options{})
		hdr := http.Header{"X-Mesh-Session": {"s-1"}}
		first := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr)
		warm := first.ServedRegion
		h.byID[warm].script = always(anthropicError(529, "overloaded_error", ""))
		r := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr)
		want := "m/" + warm + "/p->" + r.ServedBy
		if r.ServedRegion == warm || r.CacheMoved() != want {
			t.Fatalf("served by %s, CacheMoved %q; want another endpoint and %q", r.ServedBy, r.CacheMoved(), want)
		}
		next := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr)
		if next.ServedBy != r.ServedBy || next.CacheMoved() != "" {
			t.Errorf("next turn served by %s (moved %q), want %s where it moved to", next.ServedBy, next.CacheMoved(), r.ServedBy)
		}
	})
}

// An unhealthy warm endpoint is abandoned without trying it: cooling
// after a retry-after, or down.
func TestCacheAffinityLeavesUnhealthyEndpoint(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(s *scripted)
	}{
		{"cooling after 429 retry-after", func(s *scripted) { s.script = always(anthropicError(429, "rate_limit_error", "30")) }},
		{"down", func(s *scripted) { s.up = func() bool { return false } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, e, _ := cacheFleet(t, llm.FormatAnthropic, Options{})
				hdr := http.Header{"X-Mesh-Session": {"s-1"}}
				warm := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr).ServedRegion
				// Another conversation meets the fault on the warm endpoint
				// first, so health knows it.
				tc.break_(h.byID[warm])
				e.cacheRt.table.Put("m", affinity.KeyOf(ask(llm.FormatAnthropic, "m", false), http.Header{"X-Mesh-Session": {"s-2"}}), "m/"+warm+"/p", 10, time.Now())
				doCall(t, e, ask(llm.FormatAnthropic, "m", false), http.Header{"X-Mesh-Session": {"s-2"}})
				n := h.byID[warm].count()
				r := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr)
				if h.byID[warm].count() != n || len(r.Attempts) != 1 {
					t.Errorf("the unhealthy warm endpoint was tried (%d attempts)", len(r.Attempts))
				}
				if r.ServedRegion == warm || r.CacheMoved() != "m/"+warm+"/p->"+r.ServedBy {
					t.Errorf("served by %s, CacheMoved %q", r.ServedBy, r.CacheMoved())
				}
			})
		})
	}
}

// Affinity never overrides the call's own constraints: a preferred region
// elsewhere, or a capability floor the warm endpoint is below, routes the
// call as without it (and says it moved) — never a refusal.
func TestCacheAffinityYieldsToCallConstraints(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    func(warm string) *Behavior
	}{
		{"preferred region", func(warm string) *Behavior {
			other := map[string]string{"a": "b", "b": "c", "c": "a"}[warm]
			return &Behavior{PreferredRegion: other}
		}},
		{"capability floor", func(string) *Behavior { return &Behavior{MinModelCapability: 4} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h, e, _ := cacheFleet(t, llm.FormatAnthropic, Options{})
				hdr := http.Header{"X-Mesh-Session": {"s-1"}}
				warm := doCall(t, e, ask(llm.FormatAnthropic, "m", false), hdr).ServedRegion
				warmAll(t, h, e, llm.FormatAnthropic)
				for _, ep := range e.routes["m"].cands {
					if ep.Region != warm {
						ep.Capability = 4
					}
				}
				out, err := e.Do(context.Background(), ask(llm.FormatAnthropic, "m", false), Call{RequestID: "t", ClientHeader: hdr, Behavior: tc.b(warm)})
				if err != nil {
					t.Fatalf("call refused: %v", err)
				}
				if r := out.Record; r.ServedRegion == warm || r.CacheMoved() != "m/"+warm+"/p->"+r.ServedBy {
					t.Errorf("served by %s (moved %q), want another endpoint than the warm %s", r.ServedBy, r.CacheMoved(), warm)
				}
			})
		})
	}
}

// A warm endpoint far slower than max_slowdown allows is left, even with
// an empty dollar budget (a degraded endpoint's every call would lose
// more than the one cold prefill): the move is charged, and said.
func TestCacheAffinityLeavesMuchSlowerEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, e, d := cacheFleet(t, llm.FormatAnthropic, Options{Resilience: Resilience{ColdSpend: policy.ColdSpendConfig{BurstUSD: 0.000001}}})
		turn := func(n int) *Record { return doCall(t, e, agentTurn(llm.FormatAnthropic, "one", n), nil) }
		warm := turn(1).ServedRegion
		warmAll(t, h, e, llm.FormatAnthropic)
		d.set(warm, 200*time.Millisecond) // 10× the others
		moved, at := "", 0
		for n := 2; n <= 8 && moved == ""; n++ {
			moved, at = turn(n).CacheMoved(), n
		}
		if !strings.HasPrefix(moved, "m/"+warm+"/p->") {
			t.Fatalf("moved %q, want a move from %s", moved, warm)
		}
		// Slower calls taught health (its latency average); it moved after
		// three of them, past max_slowdown 3.
		if at != 5 {
			t.Errorf("moved at turn %d, want at turn 5", at)
		}
		// Where it moved, it stays.
		if r := turn(at + 1); r.CacheMoved() != "" {
			t.Errorf("moved again: %q", r.CacheMoved())
		}
	})
}

// A hedge of a long cold prompt costs money: above max_hedge_usd it is
// not sent, while a short prompt's hedge is; a budget in dollars caps the
// number of dear hedges.
func TestColdSpendCapsHedge(t *testing.T) {
	long := func() *llm.Request {
		r := ask(llm.FormatAnthropic, "m", false)
		// 400,000 bytes: 100,000 tokens by Keel's estimate, marked for the
		// cache: $0.375 cold at Sonnet's 5-minute write price.
		r.Messages[0].Content[0] = llm.Block{Type: llm.BlockText, Text: strings.Repeat("x", 400_000),
			Extra: llm.Extra{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}}
		return r
	}
	for _, tc := range []struct {
		name   string
		cfg    policy.ColdSpendConfig
		req    func() *llm.Request
		hedges []int // per call (a second hedge follows the first after as long again)
	}{
		{"short prompt hedged", policy.ColdSpendConfig{}, func() *llm.Request { return ask(llm.FormatAnthropic, "m", false) }, []int{2, 2}},
		{"100k-token prompt above max_hedge_usd $0.10", policy.ColdSpendConfig{MaxHedgeUSD: 0.1}, long, []int{0, 0}},
		{"dollar budget: one $0.375 hedge in $0.50", policy.ColdSpendConfig{MaxHedgeUSD: 1, BurstUSD: 0.5}, long, []int{1, 0}},
		{"cold_spend disabled", policy.ColdSpendConfig{Disabled: true}, long, []int{2, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := Options{Resilience: Resilience{ColdSpend: tc.cfg, CacheAffinity: affinity.Config{Disabled: true}}}
				o.Resilience.Hedge.Floor, o.Resilience.Hedge.Ceiling = 50*time.Millisecond, 50*time.Millisecond
				_, e, d := cacheFleet(t, llm.FormatAnthropic, o)
				for i, want := range tc.hedges {
					for _, id := range []string{"a", "b", "c"} {
						d.set(id, time.Second) // every first attempt is slow
					}
					start := time.Now()
					r := doCall(t, e, tc.req(), nil)
					if r.Hedges != want {
						t.Errorf("call %d: %d hedges, want %d", i+1, r.Hedges, want)
					}
					if want == 0 && time.Since(start) != time.Second {
						t.Errorf("call %d: took %v unhedged, want 1s", i+1, time.Since(start))
					}
				}
			})
		})
	}
}
