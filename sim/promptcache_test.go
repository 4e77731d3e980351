package sim

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/internal/wire/responses"
)

const (
	cacheTTFT    = 100 * time.Millisecond
	cachePrefill = 10 * time.Millisecond // per thousand uncached prompt tokens
)

// cacheFleet has a model caching per model ("m", shared by regions r1 and
// r2), one caching per region ("bedrock", as Bedrock and Vertex do), one
// with Haiku's 2,048-token minimum and one without a cache; fixed TTFT
// plus prefill, no per-token time, so a call's virtual duration is its
// time to first token.
func cacheFleet(t *testing.T) harness {
	t.Helper()
	regions := []string{"r1", "r2"}
	lat := LatencySpec{TTFT: Duration(cacheTTFT), PrefillPerKTok: Duration(cachePrefill)}
	f, err := New(Config{Seed: 3,
		Models: []ModelSpec{
			{Name: "m", Capability: 3, Regions: regions, PromptCache: &PromptCache{}},
			{Name: "bedrock", Capability: 3, Regions: regions, PromptCache: &PromptCache{PerRegion: true}},
			{Name: "haiku", Capability: 1, Regions: regions, PromptCache: &PromptCache{MinTokens: 2048}},
			{Name: "plain", Capability: 3, Regions: regions},
		},
		Regions: []RegionSpec{{Name: "r1", Latency: lat}, {Name: "r2", Latency: lat}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return memHarness(f)
}

// nwords is n words.
func nwords(prefix string, n int) string {
	var sb strings.Builder
	for i := range n {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(prefix)
		sb.WriteString(strings.Repeat("x", i%5+1))
	}
	return sb.String()
}

// block is an Anthropic text block, with cache_control when ttl is set
// ("5m" is written without a ttl, as the default).
func block(text, ttl string) map[string]any {
	b := map[string]any{"type": "text", "text": text}
	switch ttl {
	case "5m":
		b["cache_control"] = map[string]any{"type": "ephemeral"}
	case "1h":
		b["cache_control"] = map[string]any{"type": "ephemeral", "ttl": "1h"}
	}
	return b
}

type cacheCall struct {
	status int
	body   string
	usage  llm.Usage
	took   time.Duration
}

func postJSON(t *testing.T, h harness, format Format, region string, body any) cacheCall {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	path := apiPath(format)
	if format == llm.FormatResponses {
		path = "/v1/responses"
	}
	req, _ := http.NewRequest(http.MethodPost, baseURL(h.root, region, FormatAnthropic)+path, strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	if format == FormatAnthropic {
		req.Header.Set("Anthropic-Version", "2023-06-01")
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	c := cacheCall{status: resp.StatusCode, body: string(out), took: time.Since(start)}
	if c.status != http.StatusOK {
		return c
	}
	var r *llm.Response
	switch format {
	case FormatAnthropic:
		r, err = anthropic.ParseResponse(out)
	case FormatOpenAI:
		r, err = openai.ParseResponse(out)
	default:
		r, err = responses.ParseResponse(out)
	}
	if err != nil {
		t.Fatalf("parsing %s: %v", out, err)
	}
	c.usage = r.Usage
	return c
}

func anthropicBody(model string, system []map[string]any, msgs ...map[string]any) map[string]any {
	b := map[string]any{"model": model, "max_tokens": 16, "messages": msgs}
	if system != nil {
		b["system"] = system
	}
	return b
}

func msg(role string, blocks ...map[string]any) map[string]any {
	return map[string]any{"role": role, "content": blocks}
}

// prefill is the time to first token of a call with uncached prompt tokens.
func prefill(uncached int) time.Duration {
	return cacheTTFT + time.Duration(int64(cachePrefill)*int64(uncached)/1000)
}

// wantUsage checks the cache counts of a call and that the prompt is
// input + read + write; zero fields of want are checked as zero.
func wantUsage(t *testing.T, name string, c cacheCall, prompt int, want llm.Usage) {
	t.Helper()
	if c.status != http.StatusOK {
		t.Fatalf("%s: status %d: %s", name, c.status, c.body)
	}
	u := c.usage
	if u.CacheReadTokens != want.CacheReadTokens || u.CacheWriteTokens != want.CacheWriteTokens ||
		u.CacheWrite5mTokens != want.CacheWrite5mTokens || u.CacheWrite1hTokens != want.CacheWrite1hTokens {
		t.Errorf("%s: read %d, write %d (5m %d, 1h %d); want read %d, write %d (5m %d, 1h %d)", name,
			u.CacheReadTokens, u.CacheWriteTokens, u.CacheWrite5mTokens, u.CacheWrite1hTokens,
			want.CacheReadTokens, want.CacheWriteTokens, want.CacheWrite5mTokens, want.CacheWrite1hTokens)
	}
	if got := u.PromptTokens(); got != prompt {
		t.Errorf("%s: prompt %d tokens (input %d), want %d", name, got, u.InputTokens, prompt)
	}
	if wantTTFT := prefill(prompt - want.CacheReadTokens); c.took != wantTTFT {
		t.Errorf("%s: took %v, want %v (%d tokens read skip prefill)", name, c.took, wantTTFT, want.CacheReadTokens)
	}
}

// Anthropic: a breakpoint on a long system prompt writes it (5-minute TTL)
// and the next call reads it, sooner; a read refreshes the TTL, an idle
// entry expires after 5 minutes; the cache is the model's, shared by its
// regions.
func TestPromptCacheAnthropicBreakpointTTLAndRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		sys := []map[string]any{block(nwords("s", 3000), "5m")}
		body := anthropicBody("m", sys, msg("user", block("hi", "")))
		const prompt = 3002 // 3,000 system words, one message token, one word
		wantUsage(t, "first call", postJSON(t, h, FormatAnthropic, "r1", body), prompt, llm.Usage{CacheWriteTokens: 3000, CacheWrite5mTokens: 3000})
		time.Sleep(4 * time.Minute)
		wantUsage(t, "4 min later, other region", postJSON(t, h, FormatAnthropic, "r2", body), prompt, llm.Usage{CacheReadTokens: 3000})
		time.Sleep(4 * time.Minute) // 8 min after the write, 4 after the read that refreshed it
		wantUsage(t, "refreshed by the read", postJSON(t, h, FormatAnthropic, "r1", body), prompt, llm.Usage{CacheReadTokens: 3000})
		time.Sleep(5 * time.Minute)
		wantUsage(t, "5 min idle: expired", postJSON(t, h, FormatAnthropic, "r1", body), prompt, llm.Usage{CacheWriteTokens: 3000, CacheWrite5mTokens: 3000})

		st, _ := h.f.Endpoint("m", "r1")
		if st.CacheReadTokens != 3000 || st.CacheWriteTokens != 6000 || st.InputTokens != 3*2 {
			t.Errorf("endpoint stats: read %d, write %d, input %d; want 3000, 6000, 6", st.CacheReadTokens, st.CacheWriteTokens, st.InputTokens)
		}
	})
}

// Anthropic: a 1-hour breakpoint before a 5-minute one splits the write by
// TTL; a coding agent's next turn reads the previous turn's prefix (the
// 20-block lookback from its new breakpoint) and writes only the new part;
// after 30 minutes the 1-hour prefix is still there, the 5-minute part is
// not.
func TestPromptCacheAnthropicGrowingConversation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		sys := []map[string]any{block(nwords("s", 2000), "1h")}
		turn1 := []map[string]any{msg("user", block(nwords("a", 500), "5m"))}
		// 2,000 system words; a message token and 500 words
		wantUsage(t, "turn 1", postJSON(t, h, FormatAnthropic, "r1", anthropicBody("m", sys, turn1...)), 2501,
			llm.Usage{CacheWriteTokens: 2501, CacheWrite1hTokens: 2000, CacheWrite5mTokens: 501})

		time.Sleep(time.Minute)
		turn2 := []map[string]any{msg("user", block(nwords("a", 500), "")), msg("assistant", block(nwords("b", 300), "")),
			msg("user", block(nwords("c", 200), "5m"))}
		wantUsage(t, "turn 2", postJSON(t, h, FormatAnthropic, "r1", anthropicBody("m", sys, turn2...)), 2000+501+301+201,
			llm.Usage{CacheReadTokens: 2501, CacheWriteTokens: 502, CacheWrite5mTokens: 502})

		time.Sleep(30 * time.Minute)
		wantUsage(t, "30 min later", postJSON(t, h, FormatAnthropic, "r1", anthropicBody("m", sys, turn2...)), 3003,
			llm.Usage{CacheReadTokens: 2000, CacheWriteTokens: 1003, CacheWrite5mTokens: 1003})
	})
}

// Anthropic: prefixes under the model's minimum are not cached, silently
// (1,024 tokens; 2,048 for a Haiku model); a model without a cache never
// reports one; a top-level cache_control marks the last block; more than
// four breakpoints, or a TTL other than 5m and 1h, is a 400.
func TestPromptCacheAnthropicLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		short := anthropicBody("m", []map[string]any{block(nwords("s", 1000), "5m")}, msg("user", block("hi", "")))
		wantUsage(t, "1,000 tokens", postJSON(t, h, FormatAnthropic, "r1", short), 1002, llm.Usage{})
		wantUsage(t, "1,000 tokens again", postJSON(t, h, FormatAnthropic, "r1", short), 1002, llm.Usage{})

		haiku := anthropicBody("haiku", []map[string]any{block(nwords("s", 1500), "5m")}, msg("user", block("hi", "")))
		wantUsage(t, "haiku 1,500 tokens", postJSON(t, h, FormatAnthropic, "r1", haiku), 1502, llm.Usage{})
		haiku = anthropicBody("haiku", []map[string]any{block(nwords("s", 2100), "5m")}, msg("user", block("hi", "")))
		wantUsage(t, "haiku 2,100 tokens", postJSON(t, h, FormatAnthropic, "r1", haiku), 2102, llm.Usage{CacheWriteTokens: 2100, CacheWrite5mTokens: 2100})

		plain := anthropicBody("plain", []map[string]any{block(nwords("s", 3000), "5m")}, msg("user", block("hi", "")))
		wantUsage(t, "no cache", postJSON(t, h, FormatAnthropic, "r1", plain), 3002, llm.Usage{})
		if c := postJSON(t, h, FormatAnthropic, "r1", plain); strings.Contains(c.body, "cache_creation\"") {
			t.Errorf("a model without a cache reports a cache_creation split: %s", c.body)
		}

		auto := anthropicBody("m", nil, msg("user", block(nwords("u", 1500), "")))
		auto["cache_control"] = map[string]any{"type": "ephemeral"}
		wantUsage(t, "top-level cache_control", postJSON(t, h, FormatAnthropic, "r1", auto), 1501, llm.Usage{CacheWriteTokens: 1501, CacheWrite5mTokens: 1501})
		wantUsage(t, "top-level cache_control again", postJSON(t, h, FormatAnthropic, "r1", auto), 1501, llm.Usage{CacheReadTokens: 1501})

		five := anthropicBody("m", []map[string]any{block("a", "5m"), block("b", "5m"), block("c", "5m")},
			msg("user", block("d", "5m"), block("e", "5m")))
		if c := postJSON(t, h, FormatAnthropic, "r1", five); c.status != http.StatusBadRequest ||
			!strings.Contains(c.body, "A maximum of 4 blocks with cache_control may be provided. Found 5.") ||
			!strings.Contains(c.body, `"invalid_request_error"`) {
			t.Errorf("5 breakpoints: %d %s", c.status, c.body)
		}
		bad := anthropicBody("m", []map[string]any{{"type": "text", "text": "x", "cache_control": map[string]any{"type": "ephemeral", "ttl": "2h"}}},
			msg("user", block("hi", "")))
		if c := postJSON(t, h, FormatAnthropic, "r1", bad); c.status != http.StatusBadRequest || !strings.Contains(c.body, "cache_control.ttl") {
			t.Errorf("ttl 2h: %d %s", c.status, c.body)
		}
	})
}

// Per region (Bedrock, Vertex AI): a prefix written in one region is not
// read in another.
func TestPromptCachePerRegion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		body := anthropicBody("bedrock", []map[string]any{block(nwords("s", 3000), "5m")}, msg("user", block("hi", "")))
		write := llm.Usage{CacheWriteTokens: 3000, CacheWrite5mTokens: 3000}
		wantUsage(t, "r1", postJSON(t, h, FormatAnthropic, "r1", body), 3002, write)
		wantUsage(t, "r2: its own cache", postJSON(t, h, FormatAnthropic, "r2", body), 3002, write)
		wantUsage(t, "r1 again", postJSON(t, h, FormatAnthropic, "r1", body), 3002, llm.Usage{CacheReadTokens: 3000})
	})
}

// OpenAI: automatic prefix caching from 1,024 tokens in 128-token steps,
// reported as prompt_tokens_details.cached_tokens (Chat Completions) and
// input_tokens_details.cached_tokens (Responses) inside the prompt count;
// no write is reported; 5 minutes of inactivity end an entry, and
// prompt_cache_retention "24h" keeps it a day.
func TestPromptCacheOpenAIAutomatic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		chat := map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": nwords("u", 2000)}}}
		const prompt = 2001 // a message token and 2,000 words: steps 1,024 … 1,920
		wantUsage(t, "first", postJSON(t, h, FormatOpenAI, "r1", chat), prompt, llm.Usage{})
		c := postJSON(t, h, FormatOpenAI, "r2", chat)
		wantUsage(t, "second", c, prompt, llm.Usage{CacheReadTokens: 1920})
		if !strings.Contains(c.body, `"prompt_tokens":2001,`) || !strings.Contains(c.body, `"prompt_tokens_details":{"cached_tokens":1920}`) {
			t.Errorf("usage on the wire: %s", c.body)
		}

		longer := map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": nwords("u", 2000)},
			{"role": "assistant", "content": "ok"}, {"role": "user", "content": nwords("v", 300)}}}
		wantUsage(t, "a longer prompt with the same start", postJSON(t, h, FormatOpenAI, "r1", longer), 2001+2+301, llm.Usage{CacheReadTokens: 1920})

		short := map[string]any{"model": "m", "messages": []map[string]any{{"role": "user", "content": nwords("w", 1000)}}}
		postJSON(t, h, FormatOpenAI, "r1", short)
		wantUsage(t, "under 1,024 tokens", postJSON(t, h, FormatOpenAI, "r1", short), 1001, llm.Usage{})

		time.Sleep(5 * time.Minute)
		wantUsage(t, "5 min idle", postJSON(t, h, FormatOpenAI, "r1", chat), prompt, llm.Usage{})

		kept := map[string]any{"model": "m", "prompt_cache_retention": "24h", "messages": []map[string]any{{"role": "user", "content": nwords("k", 1200)}}}
		postJSON(t, h, FormatOpenAI, "r1", kept)
		time.Sleep(2 * time.Hour)
		wantUsage(t, "24h retention, 2 h later", postJSON(t, h, FormatOpenAI, "r1", kept), 1201, llm.Usage{CacheReadTokens: 1152})

		resp := map[string]any{"model": "m", "input": nwords("r", 1100)}
		postJSON(t, h, llm.FormatResponses, "r1", resp)
		c = postJSON(t, h, llm.FormatResponses, "r1", resp)
		wantUsage(t, "responses", c, 1101, llm.Usage{CacheReadTokens: 1024})
		if !strings.Contains(c.body, `"input_tokens":1101,"input_tokens_details":{"cached_tokens":1024}`) {
			t.Errorf("responses usage on the wire: %s", c.body)
		}
	})
}

// A stream's message_start carries the cache counts, as Anthropic's does.
func TestPromptCacheStreamMessageStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := cacheFleet(t)
		body := anthropicBody("m", []map[string]any{block(nwords("s", 3000), "1h")}, msg("user", block("hi", "")))
		postJSON(t, h, FormatAnthropic, "r1", body)
		body["stream"] = true
		b, _ := json.Marshal(body)
		resp, err := h.post(t.Context(), FormatAnthropic, "r1", string(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if line := sc.Text(); strings.HasPrefix(line, "data: ") && strings.Contains(line, `"message_start"`) {
				if !strings.Contains(line, `"input_tokens":2,`) || !strings.Contains(line, `"cache_read_input_tokens":3000`) ||
					!strings.Contains(line, `"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0}`) {
					t.Errorf("message_start usage: %s", line)
				}
				return
			}
		}
		t.Fatal("no message_start")
	})
}

// WithPromptCache turns caching on for every model at its documented
// minimum (Haiku 2,048 tokens, the others 1,024) and leaves the given
// config as it was.
func TestWithPromptCache(t *testing.T) {
	base := DefaultConfig()
	c := WithPromptCache(base)
	for _, m := range c.Models {
		want := 0
		if m.Name == "sim-haiku" {
			want = 2048
		}
		if m.PromptCache == nil || m.PromptCache.MinTokens != want || m.PromptCache.PerRegion {
			t.Errorf("%s: prompt cache %+v, want min_tokens %d shared by regions", m.Name, m.PromptCache, want)
		}
	}
	for _, m := range base.Models {
		if m.PromptCache != nil {
			t.Errorf("%s: WithPromptCache changed the config it was given", m.Name)
		}
	}
	if _, err := New(c); err != nil {
		t.Fatal(err)
	}
}
