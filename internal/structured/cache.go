package structured

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

// The compiled-schema cache is bounded by entries and by canonical schema
// bytes. A compiled schema retains about 40 bytes of heap per schema byte
// (measured: 25 KB of properties → 0.94 MB), so the byte cap, not the entry
// cap, is what bounds memory: 2 MiB of schema bytes is about 80 MiB of heap.
const (
	maxCacheEntries = 1024
	maxCacheBytes   = 2 << 20
)

// compileCache is an LRU of compiled schemas (and of compile errors, which
// are as deterministic) keyed by the SHA-256 of the canonical bytes and the
// limits, with
// the compiles in flight so that concurrent callers with one schema share one
// compile. A mutex guards it: every operation under it is a map lookup and a
// list splice, never a compile.
type compileCache struct {
	mu      sync.Mutex // guards following
	lru     *list.List // of *cacheEntry, most recent first
	byKey   map[[32]byte]*list.Element
	bytes   int
	flights map[[32]byte]*flight
}

type cacheEntry struct {
	key [32]byte
	res compiled
}

// compiled is the outcome of one compile under one Limits: a schema, or the
// compiler's error or the expansion's *LimitError.
type compiled struct {
	s    *Schema
	size int
	err  error
}

// flight is one compile in progress that other callers with the same key
// wait for. Its lock is full while the leader compiles; each follower passes
// through it (send, receive) once the leader has emptied it, so res, set
// before, is visible to all of them.
type flight struct {
	lock chan struct{}
	res  compiled
	refs int // guarded by compileCache.mu: the leader and the followers not yet gone
}

// flightLocks are the flights' locks, made at package initialisation, so
// that they belong to no testing/synctest bubble (a channel made inside one
// bubble cannot be used from another, and a flight may be shared by
// compiles in different bubbles). A flight takes one and the last of its leader
// and followers puts it back; when all maxFlights are in use, further
// distinct schemas compile without sharing (a duplicate among them may then
// compile twice, under the same semaphore).
const maxFlights = 64

var flightLocks = func() chan chan struct{} {
	pool := make(chan chan struct{}, maxFlights)
	for range maxFlights {
		pool <- make(chan struct{}, 1)
	}
	return pool
}()

var cache = &compileCache{lru: list.New(), byKey: map[[32]byte]*list.Element{}, flights: map[[32]byte]*flight{}}

// get returns the cached outcome for key; or the flight to wait on (the
// caller must call leave after); or lead=true: the caller compiles, under
// the returned flight if one could be registered (nil otherwise), and calls
// finish.
func (c *compileCache) get(key [32]byte) (res compiled, ok bool, f *flight, lead bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, hit := c.byKey[key]; hit {
		c.lru.MoveToFront(e)
		return e.Value.(*cacheEntry).res, true, nil, false
	}
	if f, ok := c.flights[key]; ok {
		f.refs++
		return compiled{}, false, f, false
	}
	select {
	case lock := <-flightLocks:
		lock <- struct{}{}
		f = &flight{lock: lock, refs: 1}
		c.flights[key] = f
	default:
	}
	return compiled{}, false, f, true
}

// peek returns the cached outcome for key, if any.
func (c *compileCache) peek(key [32]byte) (compiled, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, hit := c.byKey[key]; hit {
		c.lru.MoveToFront(e)
		return e.Value.(*cacheEntry).res, true
	}
	return compiled{}, false
}

// finish records the leader's outcome: cached unless abandoned, and handed
// to the flight's followers.
func (c *compileCache) finish(key [32]byte, f *flight, res compiled, abandoned bool) {
	if f != nil {
		f.res = res
	}
	c.mu.Lock()
	if f != nil {
		delete(c.flights, key)
	}
	if _, dup := c.byKey[key]; !dup && !abandoned && res.size <= maxCacheBytes {
		c.bytes += res.size
		c.byKey[key] = c.lru.PushFront(&cacheEntry{key: key, res: res})
		for c.lru.Len() > maxCacheEntries || c.bytes > maxCacheBytes {
			old := c.lru.Back()
			e := old.Value.(*cacheEntry)
			c.lru.Remove(old)
			delete(c.byKey, e.key)
			c.bytes -= e.res.size
		}
	}
	c.mu.Unlock()
	if f != nil {
		<-f.lock // the followers pass
		c.leave(f)
	}
}

// leave drops one reference to f; the last puts its lock back in the pool.
func (c *compileCache) leave(f *flight) {
	c.mu.Lock()
	f.refs--
	last := f.refs == 0
	c.mu.Unlock()
	if last {
		flightLocks <- f.lock
	}
}

// compiles counts the compiles run (the tests' view of the shared flights).
var compiles atomic.Int64

// errAbandoned ends a flight whose leader gave up (its context ended while
// it waited for a compile slot); the followers retry.
var errAbandoned = errors.New("compile abandoned")

// A Compiler compiles client schemas under its own Limits, with its own
// compile slots: at most MaxConcurrentCompiles of its schemas compile at
// once. Two Compilers (two meshes, or a mesh and the one a reload builds)
// never change each other's limits or slots; they share only the cache of
// outcomes, whose key holds the limits. A Compiler is immutable and safe for
// concurrent use. Its slots are a channel made by NewCompiler: a Compiler
// made inside a testing/synctest bubble is used only inside it, one made
// outside serves every bubble.
type Compiler struct {
	lim   Limits
	slots chan struct{} // free compile slots: a compile takes a token and puts it back
}

// maxCompileSlots caps MaxConcurrentCompiles.
const maxCompileSlots = 256

// NewCompiler returns a Compiler applying l (zero fields: DefaultLimits).
func NewCompiler(l Limits) *Compiler {
	l = l.withDefaults()
	n := min(max(l.MaxConcurrentCompiles, 1), maxCompileSlots)
	c := &Compiler{lim: l, slots: make(chan struct{}, n)}
	for range n {
		c.slots <- struct{}{}
	}
	return c
}

// Limits returns the limits c applies, defaults filled in.
func (c *Compiler) Limits() Limits { return c.lim }

// acquireSlot waits for one of c's compile slots under ctx.
func (c *Compiler) acquireSlot(ctx context.Context) error {
	select {
	case <-c.slots:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Compiler) releaseSlot() { c.slots <- struct{}{} }

// Compile checks raw against c's limits and compiles it. A schema over a limit is rejected with a *LimitError before
// the compiler sees it; a schema that is not valid JSON or not a valid JSON
// Schema, or that references anything outside itself, with an error wrapping
// ErrSchema. The outcome is cached by the SHA-256 of the schema without
// insignificant whitespace (and of the limits); concurrent callers with the
// same schema share one compile (whichever Compiler they call), and at most
// MaxConcurrentCompiles schemas compile at once through c.
// ctx is checked before and after the compile and bounds the wait for a slot
// or for another caller's compile; the compile itself, bounded by the limits,
// is not interruptible. Compile is safe for concurrent use.
func (c *Compiler) Compile(ctx context.Context, raw json.RawMessage) (*Schema, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("compiling schema: %w", err)
	}
	lim := c.lim
	canon, err := prescan(raw, lim)
	if err != nil {
		return nil, err
	}
	key := cacheKey(canon, lim)
	for {
		res, ok, f, lead := cache.get(key)
		if !ok && !lead {
			select {
			case f.lock <- struct{}{}:
				<-f.lock
				res = f.res
				cache.leave(f)
			case <-ctx.Done():
				cache.leave(f)
				return nil, fmt.Errorf("compiling schema: %w", ctx.Err())
			}
			if errors.Is(res.err, errAbandoned) {
				continue
			}
		}
		if lead {
			if err := c.acquireSlot(ctx); err != nil {
				cache.finish(key, f, compiled{err: errAbandoned}, true)
				return nil, fmt.Errorf("compiling schema: %w", err)
			}
			if hit, ok := cache.peek(key); ok && f == nil {
				c.releaseSlot()
				res = hit // compiled by another caller while this one, unshared, waited
			} else {
				res = compileCounted(canon, raw, lim)
				c.releaseSlot()
				cache.finish(key, f, res, false)
			}
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("compiling schema: %w", err)
			}
		}
		if res.err != nil {
			return nil, res.err
		}
		return res.s.withRaw(raw), nil
	}
}

// compileCounted compiles canon and checks its expansion under lim; the
// Schema keeps raw, the first caller's text.
func compileCounted(canon, raw []byte, lim Limits) (res compiled) {
	compiles.Add(1)
	res.size = len(canon)
	defer func() {
		// A compiler panic must not leave the flight open and the slot
		// taken: it is this schema's error.
		if p := recover(); p != nil {
			res = compiled{err: fmt.Errorf("%w: the schema compiler failed: %v", ErrSchema, p), size: len(canon)}
		}
	}()
	s, err := compile(canon)
	if err != nil {
		res.err = err
		return res
	}
	if err := checkExpansion(s.sch, lim); err != nil {
		res.err = err
		return res
	}
	s.raw = append(json.RawMessage(nil), raw...)
	res.s = s
	return res
}

// cacheKey is the SHA-256 of the canonical schema and the limits it is
// checked under: a Compiler never meets an outcome decided under other limits.
func cacheKey(canon []byte, lim Limits) [32]byte {
	h := sha256.New()
	h.Write(canon)
	var b [8]byte
	for _, v := range []int{lim.MaxDepth, lim.MaxBytes, lim.MaxProperties, lim.MaxSubschemas, lim.MaxRefs, lim.MaxEnumValues, lim.MaxPatternSize, lim.MaxExpansion} {
		binary.LittleEndian.PutUint64(b[:], uint64(v))
		h.Write(b[:])
	}
	var key [32]byte
	h.Sum(key[:0])
	return key
}

// withRaw returns s with Raw reporting raw: a cache hit from a schema
// formatted differently shares the compiled form, not the caller's text.
func (s *Schema) withRaw(raw json.RawMessage) *Schema {
	if string(s.raw) == string(raw) {
		return s
	}
	return &Schema{raw: append(json.RawMessage(nil), raw...), sch: s.sch, root: s.root}
}
