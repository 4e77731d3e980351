package engine

import (
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/semcache"
)

// The response caches are stages of their packages (internal/cache: the
// exact cache; internal/semcache: the semantic cache); these names keep
// the engine's API.
type (
	// Cache stores complete answers for the exact response cache.
	Cache = cache.Store
	// CacheEntry is one stored answer.
	CacheEntry = cache.Entry
	// Semantic is the semantic cache of the aliases that set
	// SemanticThreshold: an embedder and an index.
	Semantic = semcache.Semantic
	// SemanticIndex stores cache entries by embedding in spaces.
	SemanticIndex = semcache.EntryIndex
)

// Record.Cache.Status values (X-Mesh-Cache).
const (
	// CacheHit: the answer came from the cache; no upstream call.
	CacheHit = cache.Hit
	// CacheMiss: the request was looked up and not found; the answer is
	// stored.
	CacheMiss = cache.Miss
	// CacheBypass: the cache was not read (the policy, or the client).
	CacheBypass = cache.Bypass
)

// Record.Semantic.Status values: the semantic cache's part in a call of an
// alias that has it on, after the exact cache missed.
const (
	SemanticHit   = semcache.StatusHit
	SemanticMiss  = semcache.StatusMiss
	SemanticError = semcache.StatusError
)

// The in-process store is a Cache.
var _ Cache = (*cache.LRU[*CacheEntry])(nil)
