package engine

import (
	"context"
	"crypto/sha256"
	"strconv"

	"github.com/keelmesh/keel/internal/llm"
)

// Semantic is the semantic cache: for an alias that turns it on, a call the
// exact cache misses is answered with a stored answer whose prompt is
// similar. Embed makes a vector of a text (an embeddings endpoint; it does
// I/O and is bounded by its own timeout); Index finds the nearest stored
// vector of a space. *semcache.Index and *semcache.Client implement them.
type Semantic struct {
	Embed func(ctx context.Context, text string) ([]float32, error)
	Index SemanticIndex
}

// SemanticIndex stores cache entries by embedding in spaces: a lookup finds
// only entries of its own space. Implementations are safe for concurrent
// use and do no I/O.
type SemanticIndex interface {
	// Nearest returns the entry of space whose vector is most similar to
	// vec, with its cosine similarity.
	Nearest(space string, vec []float32) (*CacheEntry, float32, bool)
	// Add stores e under vec in space.
	Add(space string, vec []float32, e *CacheEntry)
}

// Record.SemanticCache values: the semantic cache's part in a call of an
// alias that has it on, after the exact cache missed.
const (
	// SemanticHit: answered from the semantic cache (X-Mesh-Cache: hit,
	// with X-Mesh-Cache-Similarity).
	SemanticHit = "hit"
	// SemanticMiss: nothing similar enough; the answer is stored.
	SemanticMiss = "miss"
	// SemanticError: the embeddings call failed or timed out: a miss, and
	// the answer is not stored semantically.
	SemanticError = "error"
)

// semUse is what the semantic cache stores a call's answer under.
type semUse struct {
	space string
	vec   []float32
}

// semanticLookup looks req up in the semantic cache when the alias it
// names has one (threshold > 0) and the exact cache was read and missed.
// The text embedded is the last message's, which must be the user's and
// text only (a call that ends otherwise is not looked up); everything else
// — the earlier messages, the system prompt, tools, schema, max_tokens and
// the other parameters, the model, the headers and key the exact key
// covers — must match exactly (the space is their hash), and so must the
// prompt's domain. On a hit it returns the entry; otherwise it records in
// u what to store the answer under.
func (e *Engine) semanticLookup(ctx context.Context, threshold float32, req *llm.Request, call Call, rec *Record, u *cacheUse) (*CacheEntry, bool) {
	if e.semantic == nil || threshold <= 0 || !u.read || len(req.Messages) == 0 {
		return nil, false
	}
	last := &req.Messages[len(req.Messages)-1]
	if last.Role != llm.RoleUser || !onlyText(last.Content) {
		return nil, false
	}
	text := last.Text()
	if text == "" {
		return nil, false
	}
	r := *req
	r.Messages = append([]llm.Message(nil), req.Messages...)
	r.Messages[len(r.Messages)-1].Content = nil
	key, ok := e.cacheKey(&r, call)
	if !ok {
		return nil, false
	}
	sum := sha256.Sum256([]byte(key + "\x00" + rec.Domain))
	space := string(sum[:])
	vec, err := e.semantic.Embed(ctx, text)
	if err != nil {
		// Said once per outage (every failed call at debug level), so a
		// misconfigured endpoint or model is seen without a log line per
		// call; mesh_semantic_cache_requests_total{result="error"} counts
		// them.
		rec.SemanticCache = SemanticError
		if e.semDown.CompareAndSwap(false, true) {
			e.log.Warn("semantic cache: the embeddings endpoint failed; calls are served upstream as misses until it answers", "error", err)
		}
		e.log.Debug("semantic cache: embedding failed; served as a miss", "request_id", rec.RequestID, "error", err)
		return nil, false
	}
	if e.semDown.CompareAndSwap(true, false) {
		e.log.Info("semantic cache: the embeddings endpoint answers again")
	}
	if ent, sim, ok := e.semantic.Index.Nearest(space, vec); ok && sim >= threshold {
		rec.SemanticCache, rec.CacheSimilarity = SemanticHit, float64(sim)
		return ent, true
	}
	rec.SemanticCache = SemanticMiss
	u.sem = &semUse{space: space, vec: vec}
	return nil, false
}

func onlyText(bs []llm.Block) bool {
	for _, b := range bs {
		if b.Type != llm.BlockText {
			return false
		}
	}
	return len(bs) > 0
}

// SimilarityHeader is X-Mesh-Cache-Similarity's value for a semantic hit
// (the cosine similarity to 4 decimals), "" for any other call.
func SimilarityHeader(rec *Record) string {
	if rec.SemanticCache != SemanticHit {
		return ""
	}
	return strconv.FormatFloat(rec.CacheSimilarity, 'f', 4, 64)
}
