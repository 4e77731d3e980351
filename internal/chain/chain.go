// Package chain builds the feature stages of the call pipeline
// (ARCHITECTURE.md) over the engine's calls: personal data, the exact and
// semantic caches, the rollout stage, structured output and fragmentation,
// each with the hooks that write its part into the call's record
// (internal/callrec) and read what the other stages decided.
//
// Build builds them once per mesh from Config, each part its stage
// package's own config type (internal/assemble fills it from the config
// file), and the engine takes the Stages built and composes them
// (stages() in internal/engine). The package reaches the engine only
// through Call, the small per-call view the engine's call state
// implements, and never imports it.
package chain

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/structured"
)

// Call is what the stages' hooks read and write of one engine call: its
// record, and the state the engine keeps for it (pipeline.Call.Record
// holds it).
type Call interface {
	// Record is the call's record, which the hooks fill.
	Record() *callrec.Record
	// ShadowRun reports a shadow call; ShadowLegacy one on the legacy
	// path.
	ShadowRun() bool
	ShadowLegacy() bool
	// Threshold is the named route's semantic-cache threshold.
	Threshold() float32
	// Legacy reports the call on the valve's plain path; SetLegacy puts
	// it there (the record and its attempts).
	Legacy() bool
	SetLegacy()
	// Fused reports a fused (fragmented) answer; FusedBy marks the call
	// fused and credits the answer to the replica endpoint ep.
	Fused() bool
	FusedBy(ep *provider.Endpoint)
	// Contract is the structured-output stage's part (nil before it ran
	// or when no contract applied); SetContract keeps it and has the
	// attempts ask upstream for p.Upstream.
	Contract() *structured.Part
	SetContract(p *structured.Part)
	// CreditReask credits the answer to the endpoint that answered the
	// re-ask (its answer replaced the first).
	CreditReask()
	// OutputTool reports a stream whose current leg forced the output
	// tool.
	OutputTool() bool
	// Reasker sends a re-ask as one more attempt of the call.
	Reasker() structured.Reasker
	// Replicas sends the call's fragments on its route.
	Replicas() fragment.Replicas
	// Fail is err as the client's error for the call.
	Fail(ctx context.Context, err error) error
}

// Of is the engine's call of pc.
func Of(pc *pipeline.Call) Call { return pc.Record.(Call) }

// PII builds the personal-data stage (nil when off).
func PII(o pii.Options, log *slog.Logger) (pipeline.Stage, error) {
	return pii.NewStage(o, pii.Hooks{
		Log: log,
		Record: func(pc *pipeline.Call, p pii.Part) {
			rec := Of(pc).Record()
			rec.PII, rec.Request = p.Report, p.Request
		},
		Structured: func(pc *pipeline.Call) bool { return Of(pc).Record().Structured != nil },
	})
}

// Replay turns a stored answer into the stream a streaming client gets.
func Replay(r *llm.Response) pipeline.Events { return pipeline.Slice(structured.Synthesize(r, 64)) }

// storable reports whether the call's answer may be stored: not a
// schema violation, not a fused answer.
func storable(pc *pipeline.Call) bool {
	c := Of(pc)
	return !c.Record().SchemaViolation() && !c.Fused()
}

// Caches builds the exact and the semantic cache's stages (nil when off).
func Caches(store cache.Store, pol cache.Policy, sem *semcache.Semantic, log *slog.Logger) (exact, semantic pipeline.Stage) {
	exact = cache.NewStage(store, pol, cache.Hooks{
		Record: func(pc *pipeline.Call, p cache.Part) {
			rec := Of(pc).Record()
			rec.Cache = callrec.CachePart(p.Status)
			if p.Entry != nil {
				servedFromCache(rec, p.Entry)
			}
		},
		Skip:     func(pc *pipeline.Call) bool { return Of(pc).ShadowRun() },
		Storable: storable,
		Replay:   Replay,
	})
	if store == nil {
		return nil, nil
	}
	semantic = semcache.NewStage(sem, pol, semcache.Hooks{
		Log: log,
		Record: func(pc *pipeline.Call, p semcache.Part) {
			rec := Of(pc).Record()
			rec.Semantic = &callrec.Semantic{Status: p.Status}
			if p.Entry != nil {
				rec.Semantic.Similarity = p.Similarity
				servedFromCache(rec, p.Entry)
			}
		},
		Threshold: func(pc *pipeline.Call) float32 { return Of(pc).Threshold() },
		Missed:    func(pc *pipeline.Call) bool { return Of(pc).Record().CacheStatus() == cache.Miss },
		Domain:    func(pc *pipeline.Call) string { return Of(pc).Record().Domain },
		Storable:  storable,
		Replay:    Replay,
	})
	return exact, semantic
}

// servedFromCache marks rec as answered from the cache by ent: status 200,
// no attempt, no cost.
func servedFromCache(rec *callrec.Record, ent *cache.Entry) {
	rec.Cache, rec.Status = callrec.CachePart(cache.Hit), http.StatusOK
	rec.Usage, rec.Response = ent.Response.Usage, ent.Response
	if ep := ent.Endpoint; ep != nil {
		rec.ServedBy, rec.ServedModel, rec.ServedRegion, rec.ServedProvider = ep.ID, ep.Model, ep.Region, ep.Provider
	}
}

// Rollout builds the rollout stage: the stage goes into the record, the
// legacy path into the record and the call's attempts.
func Rollout(plan *rollout.Plan, valve *rollout.Valve) pipeline.Stage {
	return rollout.NewStage(plan, valve, rollout.Hooks{
		Record: func(pc *pipeline.Call, p rollout.Part) {
			c := Of(pc)
			c.Record().Stage = p.Stage
			if p.Path.Legacy {
				// Monitor-only rollout, or the safety valve is open: the
				// plain path to the primary model.
				c.SetLegacy()
			}
		},
		Start:   func(pc *pipeline.Call) time.Time { return Of(pc).Record().Start },
		Monitor: func(pc *pipeline.Call) bool { return Of(pc).ShadowLegacy() },
	})
}

// Structured builds the structured-output stage: its part goes into the
// record, the contract it sends upstream into the call's attempts, and a
// re-ask's answer that replaced the first is credited to the re-ask's
// endpoint.
func Structured(o structured.Settings, schemas *structured.Compiler, m *structured.Metrics) pipeline.Stage {
	return structured.NewStage(o, schemas, m, structured.Hooks{
		Record: func(pc *pipeline.Call, p *structured.Part) {
			c := Of(pc)
			rec := c.Record()
			if c.Contract() == nil {
				// Before the attempts: what they ask for upstream.
				c.SetContract(p)
				rec.AddStructured().Contract = p.Trace
			}
			st := rec.Structured
			st.Repairs, st.Reasked, st.Violation = p.Repairs, p.Reasked, p.Violation
			if p.Replaced {
				c.CreditReask()
			}
		},
		Answers:    func(pc *pipeline.Call) bool { return Of(pc).Record().Stage == rollout.StageFull },
		Legacy:     func(pc *pipeline.Call) bool { return Of(pc).Legacy() },
		OutputTool: func(pc *pipeline.Call) bool { return Of(pc).OutputTool() },
		Reasker:    func(pc *pipeline.Call) structured.Reasker { return Of(pc).Reasker() },
		Buffered: func(pc *pipeline.Call, resp *llm.Response, err error) {
			rec := Of(pc).Record()
			if err != nil {
				rec.Response = nil // a refused answer is not what the client got
				return
			}
			rec.Usage = resp.Usage
		},
		Fused: func(pc *pipeline.Call) bool { return Of(pc).Fused() },
	})
}

// Fragment builds the fragmentation stage: replicas are the engine's
// (execs on the call's route), the part goes into the record, and the
// fused answer is credited to the first replica that answered.
func Fragment(o fragment.Settings, so structured.Settings) pipeline.Stage {
	return fragment.NewStage(o, fragment.Hooks{
		Record: func(pc *pipeline.Call, p *fragment.Part) {
			c := Of(pc)
			rec := c.Record()
			rec.Fragments = &callrec.Fragments{Count: p.Fragments, OK: p.FragmentsOK, Fusions: p.Fusions, FusionConflicts: p.FusionConflicts,
				Conflicts: p.Conflicts, LostRanges: p.LostRanges, Details: p.Details, Merged: p.Merged}
			if p.Violation {
				rec.AddStructured().Violation = true
			}
			rec.Usage = p.Usage
			c.FusedBy(p.Served)
		},
		Eligible: func(pc *pipeline.Call) bool {
			c := Of(pc)
			return c.Record().Stage == rollout.StageFull && !c.Legacy()
		},
		Contract: func(pc *pipeline.Call) (*structured.Spec, bool) {
			p := Of(pc).Contract()
			if p == nil {
				return nil, false
			}
			return p.Spec, p.Spec.MayFail(so)
		},
		Replicas: func(pc *pipeline.Call) fragment.Replicas { return Of(pc).Replicas() },
		Fail:     func(ctx context.Context, pc *pipeline.Call, err error) error { return Of(pc).Fail(ctx, err) },
	})
}
