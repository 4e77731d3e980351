package engine

import (
	"net/http"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
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

// cacheStages builds the exact and the semantic cache's stages over the
// engine's record (nil when off).
func (e *Engine) cacheStages(o Options) (exact, semantic pipeline.Stage) {
	replay := func(r *llm.Response) pipeline.Events { return pipeline.Slice(synthesize(r, 64)) }
	storable := func(pc *pipeline.Call) bool {
		c := callOf(pc)
		return !c.rec.SchemaViolation() && !c.fused
	}
	exact = cache.NewStage(o.Cache, o.CachePolicy, cache.Hooks{
		Record: func(pc *pipeline.Call, p cache.Part) {
			rec := &callOf(pc).rec
			rec.Cache = callrec.CachePart(p.Status)
			if p.Entry != nil {
				servedFromCache(rec, p.Entry)
			}
		},
		Skip:     func(pc *pipeline.Call) bool { return callOf(pc).shadowRun },
		Storable: storable,
		Replay:   replay,
	})
	if o.Cache == nil {
		return nil, nil
	}
	semantic = semcache.NewStage(o.Semantic, o.CachePolicy, semcache.Hooks{
		Log: e.log,
		Record: func(pc *pipeline.Call, p semcache.Part) {
			rec := &callOf(pc).rec
			rec.Semantic = &callrec.Semantic{Status: p.Status}
			if p.Entry != nil {
				rec.Semantic.Similarity = p.Similarity
				servedFromCache(rec, p.Entry)
			}
		},
		Threshold: func(pc *pipeline.Call) float32 { return callOf(pc).semThreshold },
		Missed:    func(pc *pipeline.Call) bool { return callOf(pc).rec.CacheStatus() == CacheMiss },
		Domain:    func(pc *pipeline.Call) string { return callOf(pc).rec.Domain },
		Storable:  storable,
		Replay:    replay,
	})
	return exact, semantic
}

// servedFromCache marks rec as answered from the cache by ent: status 200, no
// attempt, no cost.
func servedFromCache(rec *Record, ent *CacheEntry) {
	rec.Cache, rec.Status = callrec.CachePart(CacheHit), http.StatusOK
	rec.Usage, rec.Response = ent.Response.Usage, ent.Response
	if ep := ent.Endpoint; ep != nil {
		rec.ServedBy, rec.ServedModel, rec.ServedRegion, rec.ServedProvider = ep.ID, ep.Model, ep.Region, ep.Provider
	}
}

// The in-process store is a Cache.
var _ Cache = (*cache.LRU[*CacheEntry])(nil)
