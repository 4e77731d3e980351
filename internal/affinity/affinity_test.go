package affinity

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

func text(s string) llm.Block { return llm.Block{Type: llm.BlockText, Text: s} }

func marked(s, ttl string) llm.Block {
	b := text(s)
	cc := `{"type":"ephemeral"}`
	if ttl != "" {
		cc = `{"type":"ephemeral","ttl":"` + ttl + `"}`
	}
	b.Extra = llm.Extra{"cache_control": json.RawMessage(cc)}
	return b
}

// conversation is a coding agent's request: a system prompt, the
// conversation's first message and turns more, the last one marked when
// mark is set.
func conversation(format llm.Format, first string, turns int, mark string) *llm.Request {
	r := &llm.Request{Format: format, Model: "m"}
	long := strings.Repeat("package main // a source file of the repository ", 100) // 4,800 bytes
	if format == llm.FormatAnthropic {
		r.System = []llm.Block{text("You are a coding agent.")}
	} else {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleSystem, Content: []llm.Block{text("You are a coding agent.")}})
	}
	r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser, Content: []llm.Block{text(first)}})
	for i := range turns {
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{text(fmt.Sprint("step ", i))}},
			llm.Message{Role: llm.RoleUser, Content: []llm.Block{text(long)}})
	}
	if mark != "" {
		last := &r.Messages[len(r.Messages)-1]
		last.Content[0] = marked(last.Content[0].Text, strings.TrimPrefix(mark, "mark"))
	}
	return r
}

func TestKeyOf(t *testing.T) {
	withExtra := func(r *llm.Request, k, v string) *llm.Request {
		r.Extra = llm.Extra{k: json.RawMessage(v)}
		return r
	}
	withUser := func(r *llm.Request, u string) *llm.Request { r.UserID = u; return r }
	hdr := http.Header{SessionHeader: {"sess-1"}}
	for _, tc := range []struct {
		name   string
		req    *llm.Request
		h      http.Header
		source Source
		ttl    time.Duration
	}{
		{"session header wins", withUser(conversation(llm.FormatAnthropic, "fix the bug", 0, ""), "u1"), hdr, SourceHeader, TTL5m},
		{"openai prompt_cache_key", withExtra(conversation(llm.FormatOpenAI, "fix", 0, ""), "prompt_cache_key", `"repo-42"`), nil, SourceCacheKey, TTL5m},
		{"responses prompt_cache_key, 24h retention", func() *llm.Request {
			r := conversation(llm.FormatResponses, "fix", 0, "")
			r.Extra = llm.Extra{"prompt_cache_key": json.RawMessage(`"k"`), "prompt_cache_retention": json.RawMessage(`"24h"`)}
			return r
		}(), nil, SourceCacheKey, TTL24h},
		{"prompt_cache_key not a string is ignored", withExtra(conversation(llm.FormatOpenAI, "fix", 0, ""), "prompt_cache_key", `42`), nil, "", TTL5m},
		{"anthropic metadata.user_id", withUser(conversation(llm.FormatAnthropic, "fix", 0, ""), "user-7"), nil, SourceUser, TTL5m},
		{"anthropic breakpoint: prefix", conversation(llm.FormatAnthropic, "fix", 0, "mark"), nil, SourcePrefix, TTL5m},
		{"anthropic 1h breakpoint", conversation(llm.FormatAnthropic, "fix", 1, "mark1h"), nil, SourcePrefix, TTL1h},
		{"openai long prompt: automatic caching", conversation(llm.FormatOpenAI, "fix", 1, ""), nil, SourcePrefix, TTL5m},
		{"short prompt without breakpoint: none", conversation(llm.FormatAnthropic, "fix", 0, ""), nil, "", TTL5m},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := KeyOf(tc.req, tc.h)
			if k.Source != tc.source || (k.Hash != 0) != (tc.source != "") || k.TTL != tc.ttl {
				t.Errorf("KeyOf = %+v, want source %q, ttl %v", k, tc.source, tc.ttl)
			}
		})
	}
}

// The prefix key names the conversation, not the turn: every turn of one
// conversation has the same key, another conversation another.
func TestPrefixKeyStableAcrossTurns(t *testing.T) {
	for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
		k1 := KeyOf(conversation(f, "fix the parser", 1, "mark"), nil)
		k5 := KeyOf(conversation(f, "fix the parser", 5, "mark"), nil)
		other := KeyOf(conversation(f, "write the docs", 5, "mark"), nil)
		if k1.Source != SourcePrefix || k1.Hash != k5.Hash {
			t.Errorf("%s: turn 1 %+v and turn 5 %+v differ", f, k1, k5)
		}
		if other.Hash == k1.Hash {
			t.Errorf("%s: two conversations share key %x", f, other.Hash)
		}
	}
	// Explicit keys of different sources never collide.
	a := KeyOf(&llm.Request{Format: llm.FormatOpenAI, UserID: "x"}, nil)
	b := KeyOf(&llm.Request{Format: llm.FormatOpenAI}, http.Header{SessionHeader: {"x"}})
	if a.Hash == b.Hash {
		t.Error("user id x and session x share a key")
	}
}

func TestPromptTokensAndMarks(t *testing.T) {
	r := conversation(llm.FormatAnthropic, "fix", 2, "")
	if n := PromptTokens(r); n < 2400 || n > 2500 {
		t.Errorf("PromptTokens = %d, want about 2,420 (9,700 bytes / 4)", n)
	}
	if Marks(r) {
		t.Error("Marks: no breakpoint, got true")
	}
	r.Extra = llm.Extra{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}
	if !Marks(r) {
		t.Error("Marks: a top-level cache_control, got false")
	}
	r.Extra = llm.Extra{"cache_control": json.RawMessage(`null`)}
	if Marks(r) {
		t.Error("Marks: cache_control null, got true")
	}
}

func TestTableExpiresAtTTL(t *testing.T) {
	tb, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	k := Key{Hash: 7, Source: SourceHeader, TTL: TTL5m}
	tb.Put("r", k, "ep-a", 100, t0)
	if e, ok := tb.Get("r", k, t0.Add(4*time.Minute)); !ok || e.Endpoint != "ep-a" || e.Tokens != 100 {
		t.Fatalf("Get after 4m = %+v, %v", e, ok)
	}
	if _, ok := tb.Get("other-route", k, t0); ok {
		t.Error("a key of another route matched")
	}
	// A use refreshes the entry: the provider's cache lives TTL after it.
	tb.Put("r", k, "ep-a", 200, t0.Add(4*time.Minute))
	if _, ok := tb.Get("r", k, t0.Add(8*time.Minute)); !ok {
		t.Error("entry refreshed at 4m gone at 8m")
	}
	if _, ok := tb.Get("r", k, t0.Add(9*time.Minute)); ok {
		t.Error("entry still there 5m after its last use")
	}
	if tb.Len() != 0 {
		t.Errorf("Len = %d after expiry, want 0", tb.Len())
	}
	if _, ok := tb.Get("r", Key{}, t0); ok {
		t.Error("the zero key matched")
	}
}

func TestTableBounded(t *testing.T) {
	tb, _ := New(Config{MaxSessions: 3})
	now := time.Unix(0, 0)
	key := func(i int) Key { return Key{Hash: uint64(i + 1), TTL: TTL1h} }
	for i := range 3 {
		tb.Put("r", key(i), fmt.Sprint("ep", i), 1, now)
	}
	tb.Get("r", key(0), now) // 0 is used: 1 is now the least recent
	tb.Put("r", key(3), "ep3", 1, now)
	if tb.Len() != 3 {
		t.Fatalf("Len = %d, want 3", tb.Len())
	}
	if _, ok := tb.Get("r", key(1), now); ok {
		t.Error("the least recently used entry was kept")
	}
	for _, i := range []int{0, 2, 3} {
		if _, ok := tb.Get("r", key(i), now); !ok {
			t.Errorf("entry %d was dropped", i)
		}
	}
}

func TestTableConcurrent(t *testing.T) {
	tb, _ := New(Config{MaxSessions: 64})
	now := time.Unix(0, 0)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				k := Key{Hash: uint64(g*1000 + i%100 + 1), TTL: TTL5m}
				tb.Put("r", k, "ep", i, now)
				tb.Get("r", k, now)
			}
		}()
	}
	wg.Wait()
	if n := tb.Len(); n > 64 {
		t.Errorf("Len = %d above the bound 64", n)
	}
}

func TestStay(t *testing.T) {
	c := Config{}
	ms := time.Millisecond
	for _, tc := range []struct {
		name       string
		warm, best time.Duration
		want       bool
	}{
		{"no data", 0, 100 * ms, true},
		{"warm faster", 50 * ms, 100 * ms, true},
		{"warm three times as slow", 300 * ms, 100 * ms, true},
		{"warm more than three times as slow", 301 * ms, 100 * ms, false},
	} {
		if got := c.Stay(tc.warm, tc.best); got != tc.want {
			t.Errorf("%s: Stay(%v, %v) = %v, want %v", tc.name, tc.warm, tc.best, got, tc.want)
		}
	}
	if (Config{MaxSlowdown: 2}).Stay(250*ms, 100*ms) {
		t.Error("max_slowdown 2: 2.5× slower should move")
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{MaxSessions: -1}, {MaxSlowdown: 0.5}, {MaxSlowdown: 2000}} {
		if _, err := New(c); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("New(%+v) = %v, want ErrInvalidConfig", c, err)
		}
	}
}

// FuzzKeyOf: any request, any header — a key or none, never a panic, and
// the same key twice.
func FuzzKeyOf(f *testing.F) {
	f.Add("sess", `"repo-42"`, "u1", `{"type":"ephemeral","ttl":"1h"}`, `"24h"`)
	f.Add("", `42`, "", `{"type":"ephemeral"}`, `"in_memory"`)
	f.Add("", ``, "", `null`, ``)
	f.Add("", `"k"`, "", `{"ttl":`, `{}`)
	f.Fuzz(func(t *testing.T, session, cacheKey, user, cc, retention string) {
		for _, format := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
			r := conversation(format, "fix", 1, "")
			r.UserID = user
			r.Extra = llm.Extra{}
			if cacheKey != "" {
				r.Extra["prompt_cache_key"] = json.RawMessage(cacheKey)
			}
			if retention != "" {
				r.Extra["prompt_cache_retention"] = json.RawMessage(retention)
			}
			if cc != "" {
				r.Messages[0].Content[0].Extra = llm.Extra{"cache_control": json.RawMessage(cc)}
			}
			h := http.Header{}
			if session != "" {
				h.Set(SessionHeader, session)
			}
			k1, k2 := KeyOf(r, h), KeyOf(r, h)
			if k1 != k2 || k1.TTL <= 0 || (k1.Source == "") != (k1.Hash == 0) {
				t.Fatalf("KeyOf = %+v then %+v", k1, k2)
			}
		}
	})
}
