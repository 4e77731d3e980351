// Package cache is the in-process store of Keel's exact response cache: a
// least-recently-used map bounded in entries and bytes whose entries expire
// a fixed time after they were stored. It knows nothing of requests or
// answers: the engine computes the keys and the sizes and decides what is
// safe to cache (Policy).
//
// An LRU is safe for concurrent use; Get and Put never block on anything but
// its mutex and do no I/O. The package imports only the standard library.
package cache

import (
	"container/list"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Defaults of Config's zero fields.
const (
	DefaultTTL        = 5 * time.Minute
	DefaultMaxEntries = 10000
	DefaultMaxBytes   = 64 << 20
)

// ErrConfig is wrapped by every error New returns.
var ErrConfig = errors.New("invalid cache config")

// Config bounds an LRU. The zero value is the documented default.
type Config struct {
	// TTL is how long an entry is served after it was stored; default 5m.
	TTL time.Duration `yaml:"ttl"`
	// MaxEntries bounds the number of entries; default 10000.
	MaxEntries int `yaml:"max_entries"`
	// MaxBytes bounds the sum of the entries' sizes as the caller counts
	// them; default 64 MiB. An entry larger than MaxBytes is not stored.
	MaxBytes int64 `yaml:"max_bytes"`
}

// Validate reports a negative bound.
func (c Config) Validate() error {
	switch {
	case c.TTL < 0:
		return fmt.Errorf("%v is negative: %w", c.TTL, ErrConfig)
	case c.MaxEntries < 0:
		return fmt.Errorf("%d is negative: %w", c.MaxEntries, ErrConfig)
	case c.MaxBytes < 0:
		return fmt.Errorf("%d is negative: %w", c.MaxBytes, ErrConfig)
	}
	return nil
}

// Policy says which requests the engine may answer from the cache. The
// zero value caches only requests that set temperature 0 and declare no
// tools, each virtual key in its own space.
type Policy struct {
	// AnyTemperature caches requests whatever their temperature, unset
	// included (an unset temperature is the provider's default, 1.0 on
	// both APIs: a sampled answer, so not cached unless this is set).
	AnyTemperature bool `yaml:"any_temperature"`
	// AllowTools caches requests that declare tools. Off by default: an
	// answer that calls a tool with side effects is meant to be acted on
	// each time.
	AllowTools bool `yaml:"allow_tools"`
	// SharedAcrossKeys lets a call made with one virtual key be answered
	// with an answer another key paid for. Off by default: each key (and
	// the unmetered calls together) has its own entries, so one tenant
	// cannot learn from a hit's speed what another asked.
	SharedAcrossKeys bool `yaml:"shared_across_keys"`
}

// LRU is a bounded map from string keys to values of type V with a TTL.
type LRU[V any] struct {
	ttl        time.Duration
	maxEntries int
	maxBytes   int64
	now        func() time.Time

	mu    sync.Mutex // guards following
	items map[string]*list.Element
	ll    list.List // of *entry[V], most recently used first
	bytes int64
}

type entry[V any] struct {
	key     string
	val     V
	size    int64
	expires time.Time
}

// New builds an LRU from cfg; now is its clock (nil = time.Now), injected
// by tests that cannot run in a synctest bubble.
func New[V any](cfg Config, now func() time.Time) (*LRU[V], error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &LRU[V]{ttl: cfg.TTL, maxEntries: cfg.MaxEntries, maxBytes: cfg.MaxBytes, now: now, items: map[string]*list.Element{}}
	if c.ttl == 0 {
		c.ttl = DefaultTTL
	}
	if c.maxEntries == 0 {
		c.maxEntries = DefaultMaxEntries
	}
	if c.maxBytes == 0 {
		c.maxBytes = DefaultMaxBytes
	}
	if c.now == nil {
		c.now = time.Now
	}
	return c, nil
}

// Get returns the value stored under key, if it has not expired, and marks
// it most recently used. An expired entry is removed.
func (c *LRU[V]) Get(key string) (V, bool) {
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.items[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*entry[V])
	if !now.Before(e.expires) {
		c.remove(el)
		return zero, false
	}
	c.ll.MoveToFront(el)
	return e.val, true
}

// Put stores v under key with the given size in bytes, replacing any
// entry of that key, and evicts the least recently used entries until both
// bounds hold. A value larger than MaxBytes is not stored.
func (c *LRU[V]) Put(key string, v V, size int64) {
	c.PutUntil(key, v, size, c.now().Add(c.ttl))
}

// TTL is how long Put keeps an entry.
func (c *LRU[V]) TTL() time.Duration { return c.ttl }

// PutUntil is Put with the entry expiring at exp instead of a TTL from
// now (an entry copied from a shared store keeps its first expiry).
func (c *LRU[V]) PutUntil(key string, v V, size int64, exp time.Time) {
	if size > c.maxBytes || !c.now().Before(exp) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.remove(el)
	}
	c.items[key] = c.ll.PushFront(&entry[V]{key: key, val: v, size: size, expires: exp})
	c.bytes += size
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
	}
}

// remove drops el; c.mu is held.
func (c *LRU[V]) remove(el *list.Element) {
	e := c.ll.Remove(el).(*entry[V])
	delete(c.items, e.key)
	c.bytes -= e.size
}

// Len returns the number of entries, expired ones not yet removed included.
func (c *LRU[V]) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ll.Len()
}

// Bytes returns the sum of the entries' sizes.
func (c *LRU[V]) Bytes() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}
