package cache

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// Store holds complete answers for the exact response cache, by a key the
// stage computes from the canonical request (Key). *LRU implements it in
// process; internal/store/redis's Cache for a fleet. Implementations must
// be safe for concurrent use, and Get runs on the call's path before
// routing: one that does I/O bounds it (a miss is always a correct answer)
// and Put must not wait for it.
type Store interface {
	// Get returns the entry stored under key, if any and not expired.
	Get(key string) (*Entry, bool)
	// Put stores e under key; size is its approximate size in bytes.
	Put(key string, e *Entry, size int64)
}

// Entry is one stored answer. It is not modified after Put: every hit
// shares it.
type Entry struct {
	// Response is the complete answer as the first client received it.
	Response *llm.Response
	// Endpoint is the endpoint that served it (X-Mesh-Model, -Region and
	// -Provider of a hit).
	Endpoint *provider.Endpoint
}

// Part.Status values (X-Mesh-Cache).
const (
	// Hit: the answer came from the cache; no upstream call.
	Hit = "hit"
	// Miss: the request was looked up and not found; the answer is stored.
	Miss = "miss"
	// Bypass: the cache was not read, because the request is not safe to
	// cache under the policy (temperature, tools, n > 1), or the client
	// said so (mesh_behavior.cache: false, Cache-Control: no-cache or
	// no-store).
	Bypass = "bypass"
)

// Part is the stage's part of a call's record.
type Part struct {
	// Status is Hit, Miss or Bypass.
	Status string
	// Entry is the answer a hit served (nil otherwise).
	Entry *Entry
}

// Hooks is what the stage needs of the pipeline that runs it.
type Hooks struct {
	// Record is told the stage's part of a call as soon as it is decided.
	Record func(*pipeline.Call, Part)
	// Skip reports a call the cache must neither read nor write (a shadow
	// call); nil skips none.
	Skip func(*pipeline.Call) bool
	// Storable reports whether the call's complete answer may be stored
	// (one that broke its schema, or a fused answer, may not); nil allows
	// all.
	Storable func(*pipeline.Call) bool
	// Replay turns a stored answer into the events of a stream.
	Replay func(*llm.Response) pipeline.Events
}

// NewStage builds the exact response cache's pipeline stage over store: a
// call the policy deems safe to cache is answered with the stored answer
// to an identical request (a stream replayed as events), else the answer
// from below is stored once complete (a stream at its message_stop, before
// the client can ask again). A nil store gives a nil stage (no cost per
// call). The stage is safe for concurrent use.
func NewStage(store Store, pol Policy, h Hooks) pipeline.Stage {
	if store == nil {
		return nil
	}
	s := &stage{store: store, pol: pol, Hooks: h}
	return s.wrap
}

type stage struct {
	store Store
	pol   Policy
	Hooks
}

// use is what the cache does for one call.
type use struct {
	key         string
	read, write bool
}

func (s *stage) wrap(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		if s.Skip != nil && s.Skip(c) {
			return next.Serve(ctx, c)
		}
		u, part := s.decide(c)
		if u.read {
			if ent, ok := s.store.Get(u.key); ok {
				part.Status, part.Entry = Hit, ent
				s.record(c, part)
				return Replayed(c.Request, ent, s.Replay), nil
			}
		}
		s.record(c, part)
		ans, err := next.Serve(ctx, c)
		if err != nil || !u.write || ans.Replayed {
			return ans, err
		}
		if ans.Events != nil {
			ans.Events = StoreAtEnd(ans, func(resp *llm.Response) { s.put(c, u.key, resp, ans.ServedBy()) })
		} else {
			s.put(c, u.key, ans.Response, ans.Endpoint)
		}
		return ans, nil
	})
}

func (s *stage) record(c *pipeline.Call, p Part) {
	if s.Record != nil {
		s.Record(c, p)
	}
}

// put stores resp under key when it is complete and the pipeline allows.
func (s *stage) put(c *pipeline.Call, key string, resp *llm.Response, ep *provider.Endpoint) {
	if resp == nil || resp.StopReason == "" || s.Storable != nil && !s.Storable(c) {
		return
	}
	s.store.Put(key, &Entry{Response: resp, Endpoint: ep}, responseSize(resp))
}

// Replayed is the answer ent gives a call: the stored response, or for a
// stream the stored answer re-emitted as events. No upstream, no cost.
func Replayed(req *llm.Request, ent *Entry, replay func(*llm.Response) pipeline.Events) *pipeline.Answer {
	ans := &pipeline.Answer{Endpoint: ent.Endpoint, Replayed: true}
	if !req.Stream {
		ans.Response = ent.Response
		return ans
	}
	ans.Events = replay(ent.Response)
	return ans
}

// StoreAtEnd wraps ans's stream to rebuild the answer the client receives
// and hand it to store at its message_stop (before the client can ask
// again: an OpenAI SDK stops reading at [DONE], before the stream is
// closed).
func StoreAtEnd(ans *pipeline.Answer, store func(*llm.Response)) pipeline.Events {
	var acc llm.Accumulator
	done := false
	return pipeline.Tap(ans.Events, func(ev *llm.Event) {
		if done {
			return
		}
		acc.Add(ev)
		if ev.Type == llm.EventMessageStop {
			done = true
			store(acc.Response())
		}
	})
}

// decide says whether the call reads and writes the cache, with its part
// (Miss or Bypass).
//
// mesh_behavior.cache: false and Cache-Control: no-store neither read nor
// write; Cache-Control: no-cache does not read but stores the fresh answer
// (HTTP's meaning: do not serve a stored answer without asking the origin).
func (s *stage) decide(c *pipeline.Call) (use, Part) {
	part := Part{Status: Bypass}
	req := c.Request
	if b := c.Behavior; b != nil && b.Cache != nil && !*b.Cache {
		return use{}, part
	}
	if !s.pol.AnyTemperature && (req.Temperature == nil || *req.Temperature != 0) {
		return use{}, part
	}
	if len(req.Tools) > 0 && !s.pol.AllowTools || req.N > 1 {
		return use{}, part
	}
	u := use{read: true, write: true}
	for _, v := range c.Header.Values("Cache-Control") {
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
		return use{}, part
	}
	key, ok := Key(req, c, s.pol)
	if !ok {
		return use{}, part
	}
	u.key = key
	if u.read {
		part.Status = Miss
	}
	return u, part
}

// Key is the SHA-256 of the canonical request without what does not
// change the answer: the stream flag and stream options, the raw
// mesh_behavior (its parsed form counts, less cache and debug), and how
// the client spelled content and stop (a string or a list). The wire
// format, the model, the anthropic-version and anthropic-beta headers
// (passed upstream) and, unless the policy shares entries, the virtual key
// are part of it. ok is false when the request does not encode (it is then
// not cached).
func Key(req *llm.Request, c *pipeline.Call, pol Policy) (key string, ok bool) {
	r := *req
	r.Stream, r.IncludeUsage, r.StreamOptionsExtra, r.MeshBehavior = false, false, nil, nil
	r.SystemIsString, r.StopIsString, r.MaxTokensLegacy = false, false, false
	for i := range r.Messages {
		if r.Messages[i].ContentIsString {
			r.Messages = append([]llm.Message(nil), r.Messages...)
			for i := range r.Messages {
				r.Messages[i].ContentIsString = false
			}
			break
		}
	}
	k := struct {
		Key           string             `json:",omitempty"`
		Version, Beta []string           `json:",omitempty"`
		Behavior      *pipeline.Behavior `json:",omitempty"`
		Request       llm.Request        `json:"R"`
	}{Request: r}
	if !pol.SharedAcrossKeys {
		k.Key = c.KeyID
	}
	if h := c.Header; h != nil {
		k.Version, k.Beta = h.Values("Anthropic-Version"), h.Values("Anthropic-Beta")
	}
	if b := c.Behavior; b != nil {
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

// responseSize approximates the memory an answer holds: its upstream bytes,
// its content and a fixed overhead.
func responseSize(r *llm.Response) int64 {
	n := 512 + len(r.Raw) + len(r.ID) + len(r.Model) + len(r.StopSequence)
	for _, b := range r.Content {
		n += 64 + len(b.Text) + len(b.Thinking) + len(b.Signature) + len(b.Input) + len(b.ID) + len(b.Name)
	}
	return int64(n)
}
