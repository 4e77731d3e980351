package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// Cache stores complete answers for the exact response cache, by a key the
// engine computes from the canonical request (cacheKey). *cache.LRU
// implements it in process; internal/store/redis's Cache for a fleet.
// Implementations must be safe for concurrent use, and Get runs on the
// call's path before routing: one that does I/O bounds it (a miss is
// always a correct answer) and Put must not wait for it.
type Cache interface {
	// Get returns the entry stored under key, if any and not expired.
	Get(key string) (*CacheEntry, bool)
	// Put stores e under key; size is its approximate size in bytes.
	Put(key string, e *CacheEntry, size int64)
}

// CacheEntry is one stored answer. It is not modified after Put: every
// hit shares it.
type CacheEntry struct {
	// Response is the complete answer as the first client received it.
	Response *llm.Response
	// Endpoint is the endpoint that served it (X-Mesh-Model, -Region and
	// -Provider of a hit).
	Endpoint *provider.Endpoint
}

// Record.Cache values (X-Mesh-Cache).
const (
	// CacheHit: the answer came from the cache; no upstream call.
	CacheHit = "hit"
	// CacheMiss: the request was looked up and not found; the answer is
	// stored.
	CacheMiss = "miss"
	// CacheBypass: the cache was not read, because the request is not
	// safe to cache under the policy (temperature, tools, n > 1), or the
	// client said so (mesh_behavior.cache: false, Cache-Control: no-cache
	// or no-store).
	CacheBypass = "bypass"
)

// cacheStage is the exact and semantic response caches in the call
// pipeline: a stored answer for a call the policy deems safe (the exact
// key, then a similar prompt), else the answer from below stored once it
// is complete (a stream at its message_stop, before the client can ask
// again). Nil when the mesh has no cache; a shadow call neither reads nor
// writes it.
func (e *Engine) cacheStage() pipeline.Stage {
	if e.cache == nil {
		return nil
	}
	return func(next pipeline.Handler) pipeline.Handler {
		return pipeline.HandlerFunc(func(ctx context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
			c := callOf(pc)
			if c.rec.shadowRun {
				return next.Serve(ctx, pc)
			}
			req, rec := pc.Request, &c.rec
			cu := e.cacheFor(req, c.call, rec)
			if cu.read {
				if ent, ok := e.cache.Get(cu.key); ok {
					return e.cacheHit(req, rec, ent), nil
				}
				if ent, ok := e.semanticLookup(ctx, c.semThreshold, req, c.call, rec, &cu); ok {
					return e.cacheHit(req, rec, ent), nil
				}
			}
			ans, err := next.Serve(ctx, pc)
			if err != nil || !cu.write || c.fused {
				return ans, err
			}
			if ans.Events == nil {
				if cacheable(ans.Response, rec) {
					e.cachePut(cu, ans.Response, ans.Endpoint)
				}
				return ans, nil
			}
			ans.Events = e.storing(ans, cu, rec)
			return ans, nil
		})
	}
}

// cacheHit answers the call with ent: the stored answer, or for a stream
// the stored answer re-emitted as events. No upstream call, no cost.
func (e *Engine) cacheHit(req *llm.Request, rec *Record, ent *CacheEntry) *pipeline.Answer {
	rec.servedFromCache(ent)
	ans := &pipeline.Answer{Endpoint: ent.Endpoint, Replayed: true}
	if !req.Stream {
		ans.Response = ent.Response
		return ans
	}
	ans.Events = pipeline.Slice(synthesize(ent.Response, 64))
	return ans
}

// storing rebuilds the streamed answer the client receives and stores it
// at its message_stop, if complete and valid.
func (e *Engine) storing(ans *pipeline.Answer, cu cacheUse, rec *Record) pipeline.Events {
	var acc llm.Accumulator
	stored := false
	return pipeline.Tap(ans.Events, func(ev *llm.Event) {
		if stored {
			return
		}
		acc.Add(ev)
		if ev.Type != llm.EventMessageStop {
			return
		}
		stored = true
		if resp := acc.Response(); cacheable(resp, rec) {
			e.cachePut(cu, resp, ans.ServedBy())
		}
	})
}

// cacheUse is what the cache does for one call.
type cacheUse struct {
	key         string
	read, write bool
	// sem, when set, stores the answer in the semantic cache too.
	sem *semUse
}

// cacheFor decides whether the call reads and writes the cache and sets
// rec.Cache to miss or bypass; it leaves rec.Cache empty when the engine
// has no cache.
//
// mesh_behavior.cache: false and Cache-Control: no-store neither read nor
// write; Cache-Control: no-cache does not read but stores the fresh answer
// (HTTP's meaning: do not serve a stored answer without asking the origin).
func (e *Engine) cacheFor(req *llm.Request, call Call, rec *Record) cacheUse {
	if e.cache == nil {
		return cacheUse{}
	}
	rec.Cache = CacheBypass
	if b := call.Behavior; b != nil && b.Cache != nil && !*b.Cache {
		return cacheUse{}
	}
	if !e.cachePol.AnyTemperature && (req.Temperature == nil || *req.Temperature != 0) {
		return cacheUse{}
	}
	if len(req.Tools) > 0 && !e.cachePol.AllowTools || req.N > 1 {
		return cacheUse{}
	}
	u := cacheUse{read: true, write: true}
	for _, v := range call.ClientHeader.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			switch strings.ToLower(strings.TrimSpace(d)) {
			case "no-store":
				u.read, u.write = false, false
			case "no-cache":
				u.read = false
			}
		}
	}
	if !u.read && !u.write {
		return cacheUse{}
	}
	key, ok := e.cacheKey(req, call)
	if !ok {
		return cacheUse{}
	}
	u.key = key
	if u.read {
		rec.Cache = CacheMiss
	}
	return u
}

// cacheKey is the SHA-256 of the canonical request without what does not
// change the answer: the stream flag and stream options, the raw
// mesh_behavior (its parsed form counts, less cache and debug), and how
// the client spelled content and stop (a string or a list). The wire
// format, the model, the anthropic-version and anthropic-beta headers
// (passed upstream) and, unless the policy shares entries, the virtual key
// are part of it. ok is false when the request does not encode (it is then
// not cached).
func (e *Engine) cacheKey(req *llm.Request, call Call) (key string, ok bool) {
	r := *req
	r.Stream, r.IncludeUsage, r.StreamOptionsExtra, r.MeshBehavior = false, false, nil, nil
	r.SystemIsString, r.StopIsString, r.MaxTokensLegacy = false, false, false
	if slicesAny(r.Messages, func(m *llm.Message) bool { return m.ContentIsString }) {
		r.Messages = append([]llm.Message(nil), r.Messages...)
		for i := range r.Messages {
			r.Messages[i].ContentIsString = false
		}
	}
	k := struct {
		Key           string      `json:",omitempty"`
		Version, Beta []string    `json:",omitempty"`
		Behavior      *Behavior   `json:",omitempty"`
		Request       llm.Request `json:"R"`
	}{Request: r}
	if !e.cachePol.SharedAcrossKeys {
		k.Key = call.KeyID
	}
	if h := call.ClientHeader; h != nil {
		k.Version, k.Beta = h.Values("Anthropic-Version"), h.Values("Anthropic-Beta")
	}
	if b := call.Behavior; b != nil {
		bc := *b
		bc.Cache, bc.Debug = nil, false
		k.Behavior = &bc
	}
	j, err := json.Marshal(&k)
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(j)
	return string(sum[:]), true
}

func slicesAny[T any](s []T, f func(*T) bool) bool {
	for i := range s {
		if f(&s[i]) {
			return true
		}
	}
	return false
}

// cacheable reports whether an answer may be stored: a complete, valid one.
func cacheable(resp *llm.Response, rec *Record) bool {
	return resp != nil && resp.StopReason != "" && !rec.SchemaViolation
}

// cachePut stores resp as the answer to u's key.
func (e *Engine) cachePut(u cacheUse, resp *llm.Response, ep *provider.Endpoint) {
	ent := &CacheEntry{Response: resp, Endpoint: ep}
	e.cache.Put(u.key, ent, responseSize(resp))
	if u.sem != nil {
		e.semantic.Index.Add(u.sem.space, u.sem.vec, ent)
	}
}

// responseSize approximates the memory an answer holds: its upstream bytes,
// its content and a fixed overhead.
func responseSize(r *llm.Response) int64 {
	n := 512 + len(r.Raw) + len(r.ID) + len(r.Model) + len(r.StopSequence)
	for _, b := range r.Content {
		n += 64 + len(b.Text) + len(b.Thinking) + len(b.Signature) + len(b.Input) + len(b.ID) + len(b.Name)
	}
	return int64(n)
}

// servedFromCache marks rec as answered from the cache by ent: status 200, no
// attempt, no cost.
func (rec *Record) servedFromCache(ent *CacheEntry) {
	rec.Cache, rec.Status = CacheHit, http.StatusOK
	rec.Usage, rec.Response = ent.Response.Usage, ent.Response
	if ep := ent.Endpoint; ep != nil {
		rec.ServedBy, rec.ServedModel, rec.ServedRegion, rec.ServedProvider = ep.ID, ep.Model, ep.Region, ep.Provider
	}
}

// The in-process store is a Cache.
var _ Cache = (*cache.LRU[*CacheEntry])(nil)
