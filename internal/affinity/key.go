package affinity

import (
	"bytes"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// SessionHeader is the request header a client names its conversation
// with when its wire has no field for it (docs/config.md,
// resilience.cache_affinity). It is Keel's own: never sent upstream.
const SessionHeader = "X-Mesh-Session"

// Source says where a conversation's key came from.
type Source string

// Key sources, in the order KeyOf tries them.
const (
	// SourceHeader: the X-Mesh-Session header.
	SourceHeader Source = "header"
	// SourceCacheKey: OpenAI's prompt_cache_key (Chat Completions and
	// Responses), the key OpenAI itself routes its cache by.
	SourceCacheKey Source = "prompt_cache_key"
	// SourceUser: Anthropic's metadata.user_id (or OpenAI's user): one
	// user's conversations share an endpoint.
	SourceUser Source = "user_id"
	// SourcePrefix: the hash of the conversation's opening (tools, system
	// prompt and first message), for a request that caches: one with a
	// cache_control breakpoint, or of at least MinAutoTokens (OpenAI's
	// automatic caching).
	SourcePrefix Source = "prefix"
)

// Documented cache figures (see the package doc's sources).
const (
	// MinAutoTokens is the shortest prompt OpenAI caches automatically
	// (and Anthropic's minimum for Sonnet and Opus).
	MinAutoTokens = 1024
	// TTL5m is the default TTL of an Anthropic breakpoint, and the
	// shortest life OpenAI gives an unused entry ("5 to 10 minutes").
	TTL5m = 5 * time.Minute
	// TTL1h is an Anthropic breakpoint's "ttl": "1h".
	TTL1h = time.Hour
	// TTL24h is OpenAI's "prompt_cache_retention": "24h".
	TTL24h = 24 * time.Hour
)

// Key is a request's conversation: a hash (0: none), where it came from,
// and how long the provider keeps its cached prompt after a use.
type Key struct {
	Hash   uint64
	Source Source
	TTL    time.Duration
}

// KeyOf names req's conversation from, in order: the X-Mesh-Session
// header of h, OpenAI's prompt_cache_key, the user id (Anthropic
// metadata.user_id, OpenAI user), or for a request that caches the hash of
// its opening. A request with none of them has no key (Hash 0): it is
// routed by latency alone.
//
// The prefix is the opening, not the whole cached prefix: an agent moves
// its last breakpoint forward every turn (the prefix up to it never
// repeats), while tools, system prompt and first message open every turn
// of the conversation and are inside what each turn's cache holds.
func KeyOf(req *llm.Request, h http.Header) Key {
	k := Key{TTL: ttlOf(req)}
	switch {
	case llm.HeaderValue(h, SessionHeader) != "":
		k.Source, k.Hash = SourceHeader, hashString("h\x00"+llm.HeaderValue(h, SessionHeader))
	case cacheKey(req) != "":
		k.Source, k.Hash = SourceCacheKey, hashString("k\x00"+cacheKey(req))
	case req.UserID != "":
		k.Source, k.Hash = SourceUser, hashString("u\x00"+req.UserID)
	case Marks(req) || PromptTokens(req) >= MinAutoTokens:
		k.Source, k.Hash = SourcePrefix, openingHash(req)
	}
	if k.Hash == 0 && k.Source != "" {
		k.Hash = 1 // 0 means none
	}
	return k
}

// cacheKey is req's prompt_cache_key, "" when absent or not a string.
func cacheKey(req *llm.Request) string {
	raw, ok := req.Extra["prompt_cache_key"]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ttlOf is how long the provider keeps req's cached prompt after a use:
// 24 hours for OpenAI's "prompt_cache_retention": "24h", an hour when an
// Anthropic breakpoint asks "ttl": "1h", else 5 minutes. (Each field
// belongs to one wire; a request carries only its own.)
func ttlOf(req *llm.Request) time.Duration {
	if bytes.Equal(bytes.TrimSpace(req.Extra["prompt_cache_retention"]), []byte(`"24h"`)) {
		return TTL24h
	}
	ttl := TTL5m
	eachMark(req, func(raw json.RawMessage) bool {
		var cc struct {
			TTL string `json:"ttl"`
		}
		if json.Unmarshal(raw, &cc) == nil && cc.TTL == "1h" {
			ttl = TTL1h
			return false
		}
		return true
	})
	return ttl
}

// Marks reports whether req carries an Anthropic cache_control breakpoint
// (on a tool, a system block, a message block, or top level): its prefix
// is written at the cache-write price.
func Marks(req *llm.Request) bool {
	found := false
	eachMark(req, func(json.RawMessage) bool { found = true; return false })
	return found
}

// eachMark calls f with each cache_control value of req until f returns
// false.
func eachMark(req *llm.Request, f func(json.RawMessage) bool) {
	visit := func(x llm.Extra) bool {
		if raw, ok := x["cache_control"]; ok && string(raw) != "null" {
			return f(raw)
		}
		return true
	}
	if !visit(req.Extra) {
		return
	}
	for i := range req.Tools {
		if !visit(req.Tools[i].Extra) {
			return
		}
	}
	for i := range req.System {
		if !visit(req.System[i].Extra) {
			return
		}
	}
	for i := range req.Messages {
		for j := range req.Messages[i].Content {
			if !visit(req.Messages[i].Content[j].Extra) {
				return
			}
		}
	}
}

// PromptTokens estimates req's prompt in tokens: a quarter of the bytes of
// its text, tool definitions and tool inputs (the usual four bytes per
// token of English text and code). Cheap: no tokenizer.
func PromptTokens(req *llm.Request) int {
	n := 0
	for i := range req.Tools {
		t := &req.Tools[i]
		n += len(t.Name) + len(t.Description) + len(t.InputSchema) + len(t.Raw)
	}
	for i := range req.System {
		n += blockBytes(&req.System[i])
	}
	for i := range req.Messages {
		for j := range req.Messages[i].Content {
			n += blockBytes(&req.Messages[i].Content[j])
		}
	}
	return (n + 3) / 4
}

func blockBytes(b *llm.Block) int {
	n := len(b.Text) + len(b.Input) + len(b.Thinking) + len(b.Raw)
	for i := range b.Content {
		n += blockBytes(&b.Content[i])
	}
	return n
}

// openingHash hashes req's tools, system prompt and first message.
func openingHash(req *llm.Request) uint64 {
	x := fnv.New64a()
	w := func(s string) {
		x.Write([]byte(s))
		x.Write([]byte{0})
	}
	w("p")
	for i := range req.Tools {
		t := &req.Tools[i]
		w(t.Name)
		w(t.Description)
		x.Write(t.InputSchema)
		x.Write(t.Raw)
	}
	w("s")
	for i := range req.System {
		hashBlock(w, &req.System[i])
	}
	// An OpenAI request's system prompt is its leading system/developer
	// messages: the opening runs to the first other message.
	for i := range req.Messages {
		m := &req.Messages[i]
		w(string(m.Role))
		for j := range m.Content {
			hashBlock(w, &m.Content[j])
		}
		if m.Role != llm.RoleSystem && m.Role != llm.RoleDeveloper {
			break
		}
	}
	return x.Sum64()
}

func hashBlock(w func(string), b *llm.Block) {
	w(string(b.Type))
	w(b.Text)
	w(b.ID)
	w(string(b.Input))
	w(string(b.Raw))
	for i := range b.Content {
		hashBlock(w, &b.Content[i])
	}
}

func hashString(s string) uint64 {
	x := fnv.New64a()
	x.Write([]byte(strings.TrimSpace(s)))
	return x.Sum64()
}
