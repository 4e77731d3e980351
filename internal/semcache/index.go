// Package semcache is the in-process store of Keel's semantic cache: an
// approximate nearest-neighbour index of embedding vectors (HNSW graphs from
// github.com/coder/hnsw, one per space) bounded in entries, whose entries
// expire a fixed time after they were stored, and an HTTP client for an
// OpenAI-compatible embeddings endpoint that makes the vectors. It knows
// nothing of requests or answers: the engine embeds the text, names the
// space (everything besides the text that must match exactly) and decides
// the similarity threshold.
//
// An Index is safe for concurrent use; Nearest and Add hold its mutex and do
// no I/O. A Client is safe for concurrent use; Embed blocks on one HTTP call,
// bounded by its timeout and the caller's context.
package semcache

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sync"
	"time"

	"github.com/coder/hnsw"
)

// Defaults of Config's zero fields.
const (
	DefaultTTL        = 5 * time.Minute
	DefaultMaxEntries = 10000
)

// ErrConfig is wrapped by every error New and NewClient return.
var ErrConfig = errors.New("invalid semantic cache config")

// Config bounds an Index. The zero value is the documented default.
type Config struct {
	// TTL is how long an entry is served after it was stored; default 5m
	// (the exact cache's TTL, which Keel passes here).
	TTL time.Duration
	// MaxEntries bounds the live entries over all spaces; default 10000.
	// Beyond it the oldest entry is evicted.
	MaxEntries int
}

// Index maps embedding vectors to values of type V in named spaces: a
// lookup only ever finds an entry of its own space.
//
// Removal works around coder/hnsw v0.6.1, whose Graph.Delete can leave a
// layer without an entry node so that the next Search or Add panics
// (github.com/coder/hnsw issues 10, 13 and 15): an Index never calls Delete.
// An evicted or expired entry is marked dead and skipped, and a space's
// graph is rebuilt from its live entries when the dead ones outnumber them.
type Index[V any] struct {
	ttl        time.Duration
	maxEntries int
	now        func() time.Time

	mu     sync.Mutex // guards following
	spaces map[string]*space[V]
	// order holds the live entries' ids in insertion order (oldest first)
	// with their space, for eviction; head is the first not yet consumed.
	order []ref
	head  int
	live  int
	next  uint64
}

type ref struct {
	id    uint64
	space string
}

type space[V any] struct {
	g       *hnsw.Graph[uint64]
	entries map[uint64]*entry[V] // live and dead entries still in g
	dead    int
}

type entry[V any] struct {
	vec     []float32
	val     V
	expires time.Time
	dead    bool
}

// searchK is how many neighbours a lookup asks the graph for: the nearest
// live, unexpired one among them is the answer.
const searchK = 4

// New builds an Index from cfg; now is its clock (nil = time.Now).
func New[V any](cfg Config, now func() time.Time) (*Index[V], error) {
	switch {
	case cfg.TTL < 0:
		return nil, fmt.Errorf("ttl %v is negative: %w", cfg.TTL, ErrConfig)
	case cfg.MaxEntries < 0:
		return nil, fmt.Errorf("max_entries %d is negative: %w", cfg.MaxEntries, ErrConfig)
	}
	x := &Index[V]{ttl: cfg.TTL, maxEntries: cfg.MaxEntries, now: now, spaces: map[string]*space[V]{}}
	if x.ttl == 0 {
		x.ttl = DefaultTTL
	}
	if x.maxEntries == 0 {
		x.maxEntries = DefaultMaxEntries
	}
	if x.now == nil {
		x.now = time.Now
	}
	return x, nil
}

// newGraph is an HNSW graph with the library's defaults for OpenAI
// embeddings (M 16, Ml 0.25, cosine distance) but a wider search (EfSearch
// 64 rather than 20): a cache's graphs are small, and a missed neighbour
// is a paid upstream call. Its levels are drawn from a fixed seed (the
// library seeds from the clock): the same additions build the same graph,
// so a lookup's result never depends on when the process started.
func newGraph() *hnsw.Graph[uint64] {
	g := hnsw.NewGraph[uint64]()
	g.EfSearch = 64
	g.Rng = rand.New(rand.NewSource(1))
	return g
}

// Add stores v under vec in space sp, evicting the oldest entries beyond
// MaxEntries. vec must be non-zero and have the length of the space's
// other vectors; another length starts the space afresh (the embedding
// model changed).
func (x *Index[V]) Add(sp string, vec []float32, v V) {
	if len(vec) == 0 || norm(vec) == 0 {
		return
	}
	exp := x.now().Add(x.ttl)
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.spaces[sp]
	if s != nil && s.g.Dims() != 0 && s.g.Dims() != len(vec) {
		x.dropSpace(sp, s)
		s = nil
	}
	if s == nil {
		s = &space[V]{g: newGraph(), entries: map[uint64]*entry[V]{}}
		x.spaces[sp] = s
	}
	x.next++
	id := x.next
	s.entries[id] = &entry[V]{vec: vec, val: v, expires: exp}
	s.g.Add(hnsw.MakeNode(id, vec))
	x.order = append(x.order, ref{id, sp})
	x.live++
	x.sweep(exp.Add(-x.ttl))
	for x.live > x.maxEntries {
		x.evictOldest()
	}
}

// sweep consumes the head of x.order while it is dead, gone or expired at
// now (entries expire in insertion order: the TTL is fixed), killing the
// expired ones; x.mu is held.
func (x *Index[V]) sweep(now time.Time) {
	for x.head < len(x.order) {
		r := x.order[x.head]
		if s := x.spaces[r.space]; s != nil {
			if e := s.entries[r.id]; e != nil && !e.dead {
				if now.Before(e.expires) {
					break
				}
				x.kill(r.space, s, r.id, e)
			}
		}
		x.head++
	}
	x.compact()
}

// compact drops the consumed head of x.order once it is half of it.
func (x *Index[V]) compact() {
	if x.head > len(x.order)/2 {
		x.order = append(x.order[:0], x.order[x.head:]...)
		x.head = 0
	}
}

// Nearest returns the value of the live entry of space sp most similar to
// vec and its cosine similarity, or ok false when the space has none.
// Expired entries it meets are removed. The search is approximate: now and
// then an entry no graph search reaches is missed (TestChurnNeverPanics).
func (x *Index[V]) Nearest(sp string, vec []float32) (v V, sim float32, ok bool) {
	now := x.now()
	x.mu.Lock()
	defer x.mu.Unlock()
	s := x.spaces[sp]
	if s == nil || s.g.Dims() != len(vec) || norm(vec) == 0 {
		return v, 0, false
	}
	for _, n := range s.g.Search(vec, searchK+s.dead) {
		e := s.entries[n.Key]
		if e == nil || e.dead {
			continue
		}
		if !now.Before(e.expires) {
			x.kill(sp, s, n.Key, e)
			continue
		}
		if c := 1 - hnsw.CosineDistance(vec, e.vec); !ok || c > sim {
			v, sim, ok = e.val, c, true
		}
	}
	return v, sim, ok
}

// Len returns the number of live entries, expired ones not yet met
// included.
func (x *Index[V]) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.live
}

// evictOldest kills the oldest live entry; x.mu is held.
func (x *Index[V]) evictOldest() {
	for x.head < len(x.order) {
		r := x.order[x.head]
		x.head++
		if s := x.spaces[r.space]; s != nil {
			if e := s.entries[r.id]; e != nil && !e.dead {
				x.kill(r.space, s, r.id, e)
				break
			}
		}
	}
	x.compact()
}

// kill marks e dead and rebuilds or drops its space when the dead
// outnumber the live; x.mu is held.
func (x *Index[V]) kill(sp string, s *space[V], id uint64, e *entry[V]) {
	e.dead = true
	var zero V
	e.val = zero
	s.dead++
	x.live--
	liveHere := len(s.entries) - s.dead
	switch {
	case liveHere == 0:
		delete(x.spaces, sp)
	case s.dead > liveHere:
		// Re-added in the order they came (ids grow), not the map's
		// random order: the same history builds the same graph.
		ids := make([]uint64, 0, liveHere)
		for id, e := range s.entries {
			if e.dead {
				delete(s.entries, id)
				continue
			}
			ids = append(ids, id)
		}
		slices.Sort(ids)
		g := newGraph()
		for _, id := range ids {
			g.Add(hnsw.MakeNode(id, s.entries[id].vec))
		}
		s.g, s.dead = g, 0
	}
}

// dropSpace forgets a whole space; x.mu is held.
func (x *Index[V]) dropSpace(sp string, s *space[V]) {
	x.live -= len(s.entries) - s.dead
	delete(x.spaces, sp)
}

func norm(v []float32) float64 {
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	return math.Sqrt(s)
}
