package redis

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// cacheQueue bounds the answers waiting to be written to Redis.
const cacheQueue = 1024

// Cache is the exact response cache of a fleet: cache.Store with this
// replica's in-process LRU in front of PREFIX+"cache:"+KEY (the answer as
// JSON, expiring with the cache's TTL). Get reads the LRU, then Redis
// (one round trip bounded by the store's timeout; an error or a timeout
// is a miss), and copies what it finds into the LRU until the entry's
// first expiry; Put stores in the LRU and hands the write to a goroutine
// (dropped, counted, when its queue is full). Safe for concurrent use;
// Close (the Store's) ends the writer.
type Cache struct {
	s        *Store
	local    *cache.LRU[*cache.Entry]
	endpoint func(id string) *provider.Endpoint
	out      chan cacheWrite
	dropped  atomic.Int64
}

type cacheWrite struct {
	key string
	val []byte
	ttl time.Duration
}

// storedAnswer is a cached answer as Redis holds it: the answer, its
// upstream bytes (which llm.Response leaves out of JSON) and the id of
// the endpoint that served it.
type storedAnswer struct {
	Response  *llm.Response `json:"response"`
	Raw       string        `json:"raw,omitempty"` // base64
	RawFormat llm.Format    `json:"raw_format,omitempty"`
	Endpoint  string        `json:"endpoint"`
	Expires   time.Time     `json:"expires"`
}

// Cache returns the fleet's response cache in front of local; endpoint
// resolves a stored endpoint id (an answer whose endpoint this replica
// does not serve is a miss).
func (s *Store) Cache(local *cache.LRU[*cache.Entry], endpoint func(id string) *provider.Endpoint) *Cache {
	c := &Cache{s: s, local: local, endpoint: endpoint, out: make(chan cacheWrite, cacheQueue)}
	s.wg.Add(1)
	go c.write()
	return c
}

func (c *Cache) key(k string) string {
	return c.s.prefix + "cache:" + base64.RawURLEncoding.EncodeToString([]byte(k))
}

// Get returns the answer stored under key here or in the fleet.
func (c *Cache) Get(key string) (*cache.Entry, bool) {
	if e, ok := c.local.Get(key); ok {
		return e, true
	}
	ctx, cancel := context.WithTimeout(c.s.base, c.s.timeout)
	defer cancel()
	b, err := c.s.client.Get(ctx, c.key(key)).Bytes()
	if err != nil {
		return nil, false // absent, or Redis unreachable: a miss either way
	}
	var sa storedAnswer
	if json.Unmarshal(b, &sa) != nil || sa.Response == nil {
		return nil, false
	}
	unnull(sa.Response.Content)
	ep := c.endpoint(sa.Endpoint)
	if ep == nil {
		return nil, false
	}
	if sa.Raw != "" {
		raw, err := base64.StdEncoding.DecodeString(sa.Raw)
		if err != nil {
			return nil, false
		}
		sa.Response.Raw, sa.Response.RawFormat = raw, sa.RawFormat
	}
	e := &cache.Entry{Response: sa.Response, Endpoint: ep}
	c.local.PutUntil(key, e, int64(len(b)), sa.Expires)
	return e, true
}

// Put stores e under key here and, in the background, in the fleet.
func (c *Cache) Put(key string, e *cache.Entry, size int64) {
	c.local.Put(key, e, size)
	ttl := c.local.TTL()
	sa := storedAnswer{Response: e.Response, RawFormat: e.Response.RawFormat, Expires: time.Now().Add(ttl)}
	if e.Endpoint != nil {
		sa.Endpoint = e.Endpoint.ID
	}
	if len(e.Response.Raw) > 0 {
		sa.Raw = base64.StdEncoding.EncodeToString(e.Response.Raw)
	}
	b, err := json.Marshal(sa)
	if err != nil {
		return
	}
	select {
	case c.out <- cacheWrite{key: c.key(key), val: b, ttl: ttl}:
	default:
		c.dropped.Add(1)
	}
}

// Dropped is the answers not written to Redis because the queue was full.
func (c *Cache) Dropped() int64 { return c.dropped.Load() }

// write stores queued answers until the Store closes.
func (c *Cache) write() {
	defer c.s.wg.Done()
	for {
		select {
		case w := <-c.out:
			ctx, cancel := context.WithTimeout(c.s.base, c.s.timeout)
			c.s.client.Set(ctx, w.key, w.val, w.ttl) // a failure loses one fleet entry, not the local one
			cancel()
		case <-c.s.stop:
			return
		}
	}
}

// unnull undoes what a JSON round trip does to a block's absent raw
// members (nil encodes as null, which decodes as the bytes "null": a Raw
// block, or a tool input, that was never there).
func unnull(bs []llm.Block) {
	for i := range bs {
		b := &bs[i]
		if string(b.Raw) == "null" {
			b.Raw = nil
		}
		if string(b.Input) == "null" {
			b.Input = nil
		}
		unnull(b.Content)
	}
}

var _ cache.Store = (*Cache)(nil)
