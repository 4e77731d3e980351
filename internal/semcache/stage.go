package semcache

import (
	"context"
	"crypto/sha256"
	"log/slog"
	"sync/atomic"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Semantic is the semantic cache's stores: for a route that turns it on,
// a call the exact cache misses is answered with a stored answer whose
// prompt is similar. Embed makes a vector of a text (an embeddings
// endpoint; it does I/O and is bounded by its own timeout); Index finds the
// nearest stored vector of a space. *Index and *Client implement them.
type Semantic struct {
	Embed func(ctx context.Context, text string) ([]float32, error)
	Index EntryIndex
}

// EntryIndex stores cache entries by embedding in spaces: a lookup finds
// only entries of its own space. Implementations are safe for concurrent
// use and do no I/O. *Index[*cache.Entry] implements it.
type EntryIndex interface {
	// Nearest returns the entry of space whose vector is most similar to
	// vec, with its cosine similarity.
	Nearest(space string, vec []float32) (*cache.Entry, float32, bool)
	// Add stores e under vec in space.
	Add(space string, vec []float32, e *cache.Entry)
}

// Part.Status values: the semantic cache's part in a call of a route that
// has it on, after the exact cache missed.
const (
	// StatusHit: answered from the semantic cache (X-Mesh-Cache: hit, with
	// X-Mesh-Cache-Similarity).
	StatusHit = "hit"
	// StatusMiss: nothing similar enough; the answer is stored.
	StatusMiss = "miss"
	// StatusError: the embeddings call failed or timed out: a miss, and
	// the answer is not stored semantically.
	StatusError = "error"
)

// Part is the stage's part of a call's record (set only when it looked
// the call up).
type Part struct {
	Status string
	// Similarity is a hit's cosine similarity; 0 otherwise.
	Similarity float64
	// Entry is the answer a hit served (nil otherwise).
	Entry *cache.Entry
}

// Hooks is what the stage needs of the pipeline that runs it.
type Hooks struct {
	// Log says when the embeddings endpoint fails and answers again; nil
	// discards.
	Log *slog.Logger
	// Record is told the stage's part of a call it looked up.
	Record func(*pipeline.Call, Part)
	// Threshold is the lowest similarity the call's route serves; 0 turns
	// the stage off for the call.
	Threshold func(*pipeline.Call) float32
	// Missed reports whether the exact cache was read for the call and
	// missed (the only calls looked up).
	Missed func(*pipeline.Call) bool
	// Domain is the prompt's domain (part of the space: an answer is never
	// served across domains).
	Domain func(*pipeline.Call) string
	// Storable reports whether the call's complete answer may be stored;
	// nil allows all.
	Storable func(*pipeline.Call) bool
	// Replay turns a stored answer into the events of a stream.
	Replay func(*llm.Response) pipeline.Events
}

// NewStage builds the semantic cache's pipeline stage; a nil sem gives a
// nil stage (no cost per call). It looks a call up when the route has a
// threshold and the exact cache missed. The text embedded is the last
// message's, which must be the user's and text only (a call that ends
// otherwise is not looked up); everything else — the earlier messages, the
// system prompt, tools, schema, max_tokens and the other parameters, the
// model, the headers and key the exact key covers — must match exactly
// (the space is their hash), and so must the prompt's domain. A miss
// stores the answer from below under the call's vector once complete. The
// stage is safe for concurrent use.
func NewStage(sem *Semantic, pol cache.Policy, h Hooks) pipeline.Stage {
	if sem == nil {
		return nil
	}
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	s := &stage{sem: sem, pol: pol, Hooks: h}
	return s.wrap
}

type stage struct {
	sem *Semantic
	pol cache.Policy
	Hooks
	// down is set while the embeddings fail (said once per outage).
	down atomic.Bool
}

func (s *stage) wrap(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		space, text, ok := s.space(c)
		if !ok {
			return next.Serve(ctx, c)
		}
		var part Part
		vec, hit := s.lookup(ctx, c, space, text, &part)
		s.Record(c, part)
		if hit != nil {
			return cache.Replayed(c.Request, hit, s.Replay), nil
		}
		ans, err := next.Serve(ctx, c)
		if err != nil || vec == nil || ans.Replayed {
			return ans, err
		}
		if ans.Events != nil {
			ans.Events = cache.StoreAtEnd(ans, func(resp *llm.Response) { s.add(c, space, vec, resp, ans) })
		} else {
			s.add(c, space, vec, ans.Response, ans)
		}
		return ans, nil
	})
}

// space is the call's space and the text to embed; ok is false for a call
// that is not looked up.
func (s *stage) space(c *pipeline.Call) (space, text string, ok bool) {
	req := c.Request
	if s.Threshold(c) <= 0 || !s.Missed(c) || len(req.Messages) == 0 {
		return "", "", false
	}
	last := &req.Messages[len(req.Messages)-1]
	if last.Role != llm.RoleUser || !onlyText(last.Content) {
		return "", "", false
	}
	if text = last.Text(); text == "" {
		return "", "", false
	}
	r := *req
	r.Messages = append([]llm.Message(nil), req.Messages...)
	r.Messages[len(r.Messages)-1].Content = nil
	key, ok := cache.Key(&r, c, s.pol)
	if !ok {
		return "", "", false
	}
	sum := sha256.Sum256([]byte(key + "\x00" + s.Domain(c)))
	return string(sum[:]), text, true
}

// lookup embeds text and finds its nearest stored answer in space: a hit
// at or above the threshold, else the vector to store the answer under
// (nil when the embeddings failed).
func (s *stage) lookup(ctx context.Context, c *pipeline.Call, space, text string, part *Part) ([]float32, *cache.Entry) {
	vec, err := s.sem.Embed(ctx, text)
	if err != nil {
		// Said once per outage (every failed call at debug level), so a
		// misconfigured endpoint or model is seen without a log line per
		// call; mesh_semantic_cache_requests_total{result="error"} counts
		// them.
		part.Status = StatusError
		if s.down.CompareAndSwap(false, true) {
			s.Log.Warn("semantic cache: the embeddings endpoint failed; calls are served upstream as misses until it answers", "error", err)
		}
		s.Log.Debug("semantic cache: embedding failed; served as a miss", "request_id", c.ID, "error", err)
		return nil, nil
	}
	if s.down.CompareAndSwap(true, false) {
		s.Log.Info("semantic cache: the embeddings endpoint answers again")
	}
	if ent, sim, ok := s.sem.Index.Nearest(space, vec); ok && sim >= s.Threshold(c) {
		part.Status, part.Similarity, part.Entry = StatusHit, float64(sim), ent
		return nil, ent
	}
	part.Status = StatusMiss
	return vec, nil
}

// add stores resp under vec when it is complete and the pipeline allows.
func (s *stage) add(c *pipeline.Call, space string, vec []float32, resp *llm.Response, ans *pipeline.Answer) {
	if resp == nil || resp.StopReason == "" || s.Storable != nil && !s.Storable(c) {
		return
	}
	s.sem.Index.Add(space, vec, &cache.Entry{Response: resp, Endpoint: ans.ServedBy()})
}

func onlyText(bs []llm.Block) bool {
	for _, b := range bs {
		if b.Type != llm.BlockText {
			return false
		}
	}
	return len(bs) > 0
}
