package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// PromptCache makes a model's endpoints cache prompt prefixes as the
// providers do, each wire as its own provider:
//
// Over the Anthropic format (platform.claude.com/docs/en/build-with-claude/prompt-caching)
// a prefix is cached only at a cache_control breakpoint: a tool, a system
// block or a message content block with "cache_control": {"type":
// "ephemeral"} (a top-level cache_control puts one on the last block, the
// automatic caching of the same page). The prefix is the request in the
// order tools, system, messages, up to and including the marked block. At
// most 4 breakpoints (more is a 400, "A maximum of 4 blocks with
// cache_control may be provided"). A breakpoint's TTL is 5 minutes, or 1
// hour with "ttl": "1h"; a read refreshes the entry for its TTL. A prefix
// shorter than MinTokens is not cached, silently. The lookup checks each
// breakpoint and the block boundaries up to 20 blocks before it for the
// longest prefix written earlier (the page's 20-block lookback). Usage:
// cache_read_input_tokens the prefix read, cache_creation_input_tokens what
// is written beyond it up to the last breakpoint, split by the TTL of the
// breakpoint that ends each part into cache_creation.ephemeral_5m_input_tokens
// and ephemeral_1h_input_tokens; input_tokens the rest.
//
// Over the OpenAI formats (developers.openai.com/api/docs/guides/prompt-caching)
// caching is automatic: every prompt of 1,024 tokens or more is cached,
// and a hit is the longest prefix seen before, from 1,024 tokens in
// 128-token increments, reported as usage.prompt_tokens_details.cached_tokens
// (Chat Completions) or usage.input_tokens_details.cached_tokens
// (Responses), within prompt_tokens / input_tokens; writes cost nothing
// extra and are not reported. An entry lives 5 minutes after its last use
// (the guide's "5 to 10 minutes of inactivity", the strictest end) and at
// most an hour; "prompt_cache_retention": "24h" keeps it 24 hours.
//
// On a hit the cached tokens skip prefill: the time to first token is
// shorter by LatencySpec.PrefillPerKTok for each thousand tokens read
// (both guides name lower latency as the point of caching).
//
// The cache is the model's, shared by its regions (Anthropic's API and
// OpenAI cache per organisation and model), or the endpoint's with
// PerRegion (Amazon Bedrock and Google Vertex AI cache per region:
// docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html,
// cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude/prompt-caching).
// The two wires' caches are apart. Not modelled: per-organisation
// isolation (the fleet has one caller), prompt_cache_key's routing, the
// rule that a 1-hour breakpoint must come before 5-minute ones, and
// eviction before the TTL. Tokens are the simulator's: one per word, one
// per message and tool.
type PromptCache struct {
	// PerRegion keeps one cache per endpoint (model and region), as
	// Bedrock and Vertex AI do; false, the default, one per model.
	PerRegion bool `json:"per_region,omitempty"`
	// MinTokens is the shortest prefix cached; 0 means 1,024 (Anthropic's
	// minimum for its Sonnet and Opus models, OpenAI's for all). Anthropic's
	// Haiku models cache from 2,048.
	MinTokens int `json:"min_tokens,omitempty"`
}

// CacheReadPerMTok is what the fleet bills per million prompt tokens read
// from the prompt cache (EndpointStats.CostUSD): a tenth of the input
// price, as Anthropic prices it (platform.claude.com/docs/en/about-claude/pricing).
func (p Price) CacheReadPerMTok() float64 { return p.InputPerMTok / 10 }

// CacheWrite5mPerMTok is what the fleet bills per million prompt tokens
// written with the 5-minute TTL: 1.25× the input price, as Anthropic's.
func (p Price) CacheWrite5mPerMTok() float64 { return p.InputPerMTok * 1.25 }

// CacheWrite1hPerMTok is what the fleet bills per million prompt tokens
// written with the 1-hour TTL: 2× the input price, as Anthropic's.
func (p Price) CacheWrite1hPerMTok() float64 { return p.InputPerMTok * 2 }

// Anthropic's and OpenAI's documented figures (see PromptCache).
const (
	defaultMinCacheTokens = 1024
	openaiCacheIncrement  = 128
	maxBreakpoints        = 4
	lookbackBlocks        = 20
	ttl5m                 = 5 * time.Minute
	ttl1h                 = time.Hour
	openaiMaxAge          = time.Hour
	openaiRetention24h    = 24 * time.Hour
)

func (p *PromptCache) validate() error {
	if p.MinTokens < 0 {
		return fmt.Errorf("min_tokens: %d is negative", p.MinTokens)
	}
	return nil
}

func (p *PromptCache) min() int {
	if p.MinTokens > 0 {
		return p.MinTokens
	}
	return defaultMinCacheTokens
}

// WithPromptCache returns c with prompt caching on for its models, at
// each one's documented minimum: 2,048 tokens for sim-haiku (Anthropic's
// Haiku models), 1,024 for the others.
func WithPromptCache(c Config) Config {
	c.Models = cloneConfig(c).Models
	for i := range c.Models {
		m := &c.Models[i]
		m.PromptCache = &PromptCache{}
		if m.Name == "sim-haiku" {
			m.PromptCache.MinTokens = 2048
		}
	}
	return c
}

// promptStore is one cache: prefix hashes and when their entries expire.
type promptStore struct {
	mu      sync.Mutex // guards following
	entries map[uint64]cacheEntry
	sweep   int // sweep expired entries when len(entries) reaches it
}

type cacheEntry struct {
	exp, born time.Time
	ttl       time.Duration
}

// hit reports whether h is cached at now, and refreshes it for its TTL.
func (s *promptStore) hit(now time.Time, h uint64, maxAge time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[h]
	if !ok || !now.Before(e.exp) || maxAge > 0 && now.Sub(e.born) >= maxAge {
		return false
	}
	e.exp = now.Add(e.ttl)
	s.entries[h] = e
	return true
}

// put writes h with ttl; an entry already there (unexpired, younger than
// maxAge when that is set) keeps its birth and the later expiry and longer
// TTL.
func (s *promptStore) put(now time.Time, h uint64, ttl, maxAge time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries, s.sweep = map[uint64]cacheEntry{}, 1024
	}
	e, ok := s.entries[h]
	if !ok || !now.Before(e.exp) || maxAge > 0 && now.Sub(e.born) >= maxAge {
		e = cacheEntry{born: now}
	}
	e.ttl = max(e.ttl, ttl)
	if exp := now.Add(ttl); exp.After(e.exp) {
		e.exp = exp
	}
	s.entries[h] = e
	if len(s.entries) >= s.sweep {
		for k, v := range s.entries {
			if !now.Before(v.exp) {
				delete(s.entries, k)
			}
		}
		s.sweep = max(1024, 2*len(s.entries))
	}
}

// boundary is a position in a prompt's token stream: the tokens before it
// and the hash of the prefix they make.
type boundary struct {
	tokens int
	hash   uint64
}

// breakpoint is an Anthropic cache_control mark: the boundary after the
// marked block (an index into cachePlan.blocks) and its TTL.
type breakpoint struct {
	block int
	ttl   time.Duration
}

// cachePlan is what caching needs of one request, computed before it is
// served: the boundaries after each block (Anthropic) or at each 128-token
// step from the minimum (OpenAI), and the breakpoints.
type cachePlan struct {
	anthropic bool
	blocks    []boundary
	bps       []breakpoint
	steps     []boundary
	openaiTTL time.Duration
	maxAge    time.Duration
}

// tokenStream hashes a prompt word by word, as the simulator counts
// tokens (one per word, one per message and tool).
type tokenStream struct {
	x      hasher
	tokens int
	// onTok, when set, is called when the count reaches next (it moves
	// next on).
	next  int
	onTok func()
}

func (s *tokenStream) token(tag string) {
	s.x.add(tag)
	s.x.add("\x00")
	s.tokens++
	if s.onTok != nil && s.tokens == s.next {
		s.onTok()
	}
}

func (s *tokenStream) words(text string) {
	start := -1
	for i := 0; i <= len(text); i++ {
		sp := i == len(text) || text[i] == ' ' || text[i] == '\n' || text[i] == '\t' || text[i] == '\r'
		if !sp && start < 0 {
			start = i
		}
		if sp && start >= 0 {
			s.token(text[start:i])
			start = -1
		}
	}
}

func (s *tokenStream) at() boundary { return boundary{s.tokens, s.x.sum()} }

// block feeds one content block: its text's words, or for another kind a
// token of its identity and the words of the text inside it.
func (s *tokenStream) block(b *llm.Block) {
	switch b.Type {
	case llm.BlockText:
		s.words(b.Text)
	default:
		id, _ := json.Marshal(struct {
			T, ID, Name, Use string
			In, Raw          json.RawMessage
			Th, D            string
		}{string(b.Type), b.ID, b.Name, b.ToolUseID, b.Input, b.Raw, b.Thinking, b.Data})
		s.token(string(id))
		for i := range b.Content {
			s.block(&b.Content[i])
		}
	}
}

// planCache builds the cache plan of req over a wire of family fam, or a
// 400 for an Anthropic request with more than 4 breakpoints or a TTL
// other than 5m and 1h.
func planCache(seed int64, spec *PromptCache, fam llm.Format, req *llm.Request) (*cachePlan, *llm.APIError) {
	p := &cachePlan{anthropic: fam == llm.FormatAnthropic}
	s := &tokenStream{x: newHasher(hashString(uint64(seed), "prompt-cache/"+fam.String()+"/"+req.Model))}
	mark := func(extra llm.Extra) *llm.APIError {
		raw, ok := extra["cache_control"]
		if !ok || !p.anthropic {
			return nil
		}
		bp, err := parseCacheControl(raw)
		if err != nil {
			return err
		}
		if bp != nil {
			bp.block = len(p.blocks) - 1
			p.bps = append(p.bps, *bp)
		}
		return nil
	}
	if !p.anthropic {
		p.openaiTTL, p.maxAge = ttl5m, openaiMaxAge
		if string(req.Extra["prompt_cache_retention"]) == `"24h"` {
			p.openaiTTL, p.maxAge = openaiRetention24h, 0
		}
		s.next = spec.min()
		s.onTok = func() {
			p.steps = append(p.steps, s.at())
			s.next += openaiCacheIncrement
		}
	}
	for i := range req.Tools {
		t := &req.Tools[i]
		s.token("tool:" + t.Name + string(t.InputSchema) + string(t.Raw))
		s.words(t.Description)
		p.blocks = append(p.blocks, s.at())
		if err := mark(t.Extra); err != nil {
			return nil, err
		}
	}
	for i := range req.System {
		s.block(&req.System[i])
		p.blocks = append(p.blocks, s.at())
		if err := mark(req.System[i].Extra); err != nil {
			return nil, err
		}
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		s.token("role:" + string(m.Role))
		for j := range m.Content {
			s.block(&m.Content[j])
			p.blocks = append(p.blocks, s.at())
			if err := mark(m.Content[j].Extra); err != nil {
				return nil, err
			}
		}
	}
	if raw, ok := req.Extra["cache_control"]; ok && p.anthropic && len(p.blocks) > 0 {
		bp, err := parseCacheControl(raw)
		if err != nil {
			return nil, err
		}
		if bp != nil && (len(p.bps) == 0 || p.bps[len(p.bps)-1].block != len(p.blocks)-1) {
			bp.block = len(p.blocks) - 1
			p.bps = append(p.bps, *bp)
		}
	}
	if len(p.bps) > maxBreakpoints {
		return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest,
			Message: fmt.Sprintf("A maximum of %d blocks with cache_control may be provided. Found %d.", maxBreakpoints, len(p.bps))}
	}
	return p, nil
}

// parseCacheControl reads a cache_control value: nil for null, else an
// ephemeral breakpoint with its TTL.
func parseCacheControl(raw json.RawMessage) (*breakpoint, *llm.APIError) {
	if string(raw) == "null" {
		return nil, nil
	}
	var cc struct {
		Type string `json:"type"`
		TTL  string `json:"ttl"`
	}
	bad := func(msg string) *llm.APIError {
		return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Message: msg}
	}
	if err := json.Unmarshal(raw, &cc); err != nil {
		return nil, bad("cache_control: expected an object")
	}
	if cc.Type != "ephemeral" {
		return nil, bad(fmt.Sprintf("cache_control.type: Input should be 'ephemeral', got %q", cc.Type))
	}
	switch cc.TTL {
	case "", "5m":
		return &breakpoint{ttl: ttl5m}, nil
	case "1h":
		return &breakpoint{ttl: ttl1h}, nil
	}
	return nil, bad(fmt.Sprintf("cache_control.ttl: Input should be '5m' or '1h', got %q", cc.TTL))
}

// apply looks the plan's prefixes up in s and writes them at now, and sets
// u's cache counts: u.InputTokens (the whole prompt on entry) is cut by
// what was read and written. It returns the tokens read.
func (p *cachePlan) apply(s *promptStore, now time.Time, min int, u *llm.Usage) int {
	total := u.InputTokens
	if p.anthropic {
		read := 0
		for i := len(p.bps) - 1; i >= 0 && read == 0; i-- {
			end := p.bps[i].block
			for j := end; j >= 0 && j > end-lookbackBlocks; j-- {
				b := p.blocks[j]
				if b.tokens < min || b.tokens <= read {
					continue
				}
				if s.hit(now, b.hash, 0) {
					read = b.tokens
					break
				}
			}
		}
		read = clampTokens(read, total)
		var w5, w1 int
		prev := read
		for _, bp := range p.bps {
			b := p.blocks[bp.block]
			if b.tokens < min {
				continue
			}
			s.put(now, b.hash, bp.ttl, 0)
			if b.tokens <= prev {
				continue
			}
			n := clampTokens(b.tokens, total) - clampTokens(prev, total)
			if bp.ttl == ttl1h {
				w1 += n
			} else {
				w5 += n
			}
			prev = b.tokens
		}
		u.CacheReadTokens = read
		u.CacheWriteTokens, u.CacheWrite5mTokens, u.CacheWrite1hTokens = w5+w1, w5, w1
		u.InputTokens = total - read - w5 - w1
		// Anthropic's usage always carries the cache_creation split.
		if u.Extra["cache_creation"] == nil {
			u.Extra = cloneExtra(u.Extra)
			u.Extra["cache_creation"] = json.RawMessage(`{}`)
		}
		return read
	}
	read := 0
	for i := len(p.steps) - 1; i >= 0; i-- {
		if s.hit(now, p.steps[i].hash, p.maxAge) {
			read = p.steps[i].tokens
			break
		}
	}
	for _, b := range p.steps {
		s.put(now, b.hash, p.openaiTTL, p.maxAge)
	}
	read = clampTokens(read, total)
	u.CacheReadTokens = read
	u.InputTokens = total - read
	return read
}

func clampTokens(n, total int) int { return min(max(n, 0), total) }

func cloneExtra(x llm.Extra) llm.Extra {
	out := make(llm.Extra, len(x)+1)
	for k, v := range x {
		out[k] = v
	}
	return out
}
