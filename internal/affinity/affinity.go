// Package affinity keeps the calls of one conversation on the endpoint
// whose prompt cache holds it: a bounded table from a conversation's key to
// the endpoint that served it last, each entry living as long as the
// provider keeps the cached prompt (its TTL, refreshed by every use).
//
// Anthropic and OpenAI cache a prompt's prefix per model and organisation,
// Amazon Bedrock and Google Vertex AI per region
// (platform.claude.com/docs/en/build-with-claude/prompt-caching,
// developers.openai.com/api/docs/guides/prompt-caching,
// docs.aws.amazon.com/bedrock/latest/userguide/prompt-caching.html). A
// cached read costs a tenth of the input price and skips prefill; a
// conversation moved to another endpoint pays its whole prompt again, plus
// the write premium. KeyOf names a request's conversation, Table remembers
// where it is warm, and Config.Stay is the rule for leaving it.
//
// A Table is safe for concurrent use (one mutex, held for a map lookup and
// a list move); nothing here blocks or does I/O. Replicas do not share a
// table: each keeps its own, so a conversation whose calls land on two
// replicas may be warm on two endpoints (sharing it through the replicas'
// Redis, as health is shared, is left for later).
package affinity

import (
	"container/list"
	"fmt"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/resilience"
)

// Config is resilience.cache_affinity. The zero value is the documented
// default: on, 100,000 conversations, a 3× slowdown.
type Config struct {
	// Disabled turns cache-aware routing off: every call is routed by
	// latency alone.
	Disabled bool `yaml:"disabled"`
	// MaxSessions bounds the conversations remembered; the least recently
	// used is forgotten first. 0 means 100,000.
	MaxSessions int `yaml:"max_sessions"`
	// MaxSlowdown is how much slower than the fastest available endpoint
	// a warm endpoint may be expected to answer and keep its
	// conversations (see Stay); 0 means 3. At least 1.
	MaxSlowdown float64 `yaml:"max_slowdown"`
}

// Defaults of Config's zero fields.
const (
	DefaultMaxSessions = 100_000
	DefaultMaxSlowdown = 3.0
)

// ErrInvalidConfig is wrapped by New's and Validate's errors: the
// resilience package's, so that config reports it as it reports the
// other policies'.
var ErrInvalidConfig = resilience.ErrInvalidConfig

// Validate reports a field outside its range.
func (c Config) Validate() error {
	switch {
	case c.MaxSessions < 0:
		return fmt.Errorf("max sessions %d below 0: %w", c.MaxSessions, ErrInvalidConfig)
	case c.MaxSlowdown != 0 && !(c.MaxSlowdown >= 1 && c.MaxSlowdown <= 1000):
		return fmt.Errorf("max slowdown %v outside [1, 1000]: %w", c.MaxSlowdown, ErrInvalidConfig)
	}
	return nil
}

func (c Config) slowdown() float64 {
	if c.MaxSlowdown == 0 {
		return DefaultMaxSlowdown
	}
	return c.MaxSlowdown
}

// Stay is the rule for keeping a conversation on its warm endpoint while
// that endpoint is available (not down, its breaker not open, not cooling
// down after a retry-after, not ejected: an unavailable one is always
// left): stay unless its expected latency is more than MaxSlowdown times
// the fastest other available endpoint's. A cold endpoint pays the whole
// prompt's prefill besides, which its expected latency (learnt on other
// calls) does not show, so a warm endpoint somewhat slower on paper is
// often faster for this call; past the factor the warm one is degraded
// (a region slowing down), its every call loses more than the one cold
// prefill a move costs, and the conversation moves (its re-caching
// charged to policy.ColdSpend). The factor is 3, not 2: at 2 the queueing
// of a busy region moved conversations back and forth (74 moves of 42
// sessions in one run of the coding-agent workload, 15–22 at 3, the
// evacuation of the degraded region). Without latency data on either
// side, stay.
func (c Config) Stay(warm, best time.Duration) bool {
	if warm <= 0 || best <= 0 {
		return true
	}
	return float64(warm) <= c.slowdown()*float64(best)
}

// Entry is where a conversation is warm.
type Entry struct {
	// Endpoint is the id of the endpoint that served its last call.
	Endpoint string
	// Tokens is that call's prompt as estimated (PromptTokens): what the
	// endpoint's cache holds of the conversation.
	Tokens int
	// Expires is when the provider drops the cached prompt unless it is
	// used again: the last use plus the request's TTL.
	Expires time.Time
}

type mapKey struct {
	route string
	hash  uint64
}

type item struct {
	k mapKey
	e Entry
}

// Table maps conversations to the endpoint their cache is warm on,
// bounded to MaxSessions, each entry expiring at the provider's TTL. Safe
// for concurrent use.
type Table struct {
	max int

	mu  sync.Mutex // guards following
	m   map[mapKey]*list.Element
	lru list.List // of *item, most recently used first
}

// New builds a Table for cfg.
func New(cfg Config) (*Table, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	n := cfg.MaxSessions
	if n == 0 {
		n = DefaultMaxSessions
	}
	return &Table{max: n, m: map[mapKey]*list.Element{}}, nil
}

// Get returns where the conversation k of route is warm at now; false
// when it is unknown or its cache has expired (the entry is dropped).
func (t *Table) Get(route string, k Key, now time.Time) (Entry, bool) {
	if k.Hash == 0 {
		return Entry{}, false
	}
	mk := mapKey{route, k.Hash}
	t.mu.Lock()
	defer t.mu.Unlock()
	el, ok := t.m[mk]
	if !ok {
		return Entry{}, false
	}
	it := el.Value.(*item)
	if !now.Before(it.e.Expires) {
		t.lru.Remove(el)
		delete(t.m, mk)
		return Entry{}, false
	}
	t.lru.MoveToFront(el)
	return it.e, true
}

// Put records that endpoint served the conversation k of route at now
// with a prompt of tokens: its cache holds it until now + k.TTL. The least
// recently used entry goes when the table is full.
func (t *Table) Put(route string, k Key, endpoint string, tokens int, now time.Time) {
	if k.Hash == 0 {
		return
	}
	mk := mapKey{route, k.Hash}
	e := Entry{Endpoint: endpoint, Tokens: tokens, Expires: now.Add(k.TTL)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.m[mk]; ok {
		el.Value.(*item).e = e
		t.lru.MoveToFront(el)
		return
	}
	for len(t.m) >= t.max {
		back := t.lru.Back()
		t.lru.Remove(back)
		delete(t.m, back.Value.(*item).k)
	}
	t.m[mk] = t.lru.PushFront(&item{k: mk, e: e})
}

// Len is the number of conversations remembered (expired ones included
// until they are looked up or pushed out).
func (t *Table) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
