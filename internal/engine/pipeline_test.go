package engine

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/semcache"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/shadow"
)

// countingObserver counts RequestDone per request id.
type countingObserver struct {
	mu   sync.Mutex
	done map[string]int
}

func (o *countingObserver) RequestDone(r *Record) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.done[r.RequestID]++
}

func (o *countingObserver) count(id string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.done[id]
}

// pipelineEngine is an engine with every stage of this package on: personal
// data, shadow traffic on alias "al", the exact and semantic caches.
func pipelineEngine(t *testing.T, obs Observer, script func(int, map[string]any) reply) *Engine {
	t.Helper()
	up := &scripted{id: "a", format: llm.FormatAnthropic, script: script}
	h := newHarness(t, up)
	lru, err := cache.New[*cache.Entry](cache.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sem := &semcache.Semantic{Embed: func(context.Context, string) ([]float32, error) { return []float32{1, 0}, nil }, Index: mapIndex{}}
	return h.engine(Options{Observer: obs, Stages: stages(t, chain.Config{Cache: lru, Semantic: sem,
		PII: pii.Options{Detector: pii.FinderFunc(func(context.Context, string) ([]pii.Match, error) { return nil, nil })}}),
		Aliases: map[string]Alias{"al": {Models: []string{"m"}, SemanticThreshold: 0.99}},
		Shadows: shadows(t, "al", shadow.Config{Percent: 100, Target: shadow.Target{Model: "m"}}),
	}, h.endpoints("m", "a")...)
}

// mapIndex is a semcache.EntryIndex that never finds anything.
type mapIndex struct{}

func (mapIndex) Nearest(string, []float32) (*cache.Entry, float32, bool) { return nil, 0, false }
func (mapIndex) Add(string, []float32, *cache.Entry)                     {}

// TestRequestEntersEachStageOnce: a call through Engine.Do enters each
// stage of the composed pipeline once on its way down and passes it once
// on its way up, in order, streams included (the way up of a stream is
// its Close); a shadow call runs the inner stages only. How
// ARCHITECTURE.md says the path was checked.
func TestRequestEntersEachStageOnce(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			e := pipelineEngine(t, nil, func(int, map[string]any) reply {
				if stream {
					return anthropicStream([]string{"Once", " upon"}, 0, true)
				}
				return anthropicJSON("Once upon")
			})
			var mu sync.Mutex
			var trail []string
			note := func(s string) { mu.Lock(); trail = append(trail, s); mu.Unlock() }
			trace := func(name string) pipeline.Stage {
				return func(next pipeline.Handler) pipeline.Handler {
					return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
						note("down " + name)
						ans, err := next.Serve(ctx, c)
						if err != nil || ans.Events == nil {
							note("up " + name)
							return ans, err
						}
						ans.Events = pipeline.Finally(ans.Events, func() { note("up " + name) })
						return ans, nil
					})
				}
			}
			// Re-compose the engine's own stages with a tracer before each.
			outer, inner := e.stages()
			names := []string{"pii", "shadow", "resolve", "cache", "semcache", "admit", "rollout", "structured", "fragment"}
			var traced []pipeline.Stage
			for i, st := range append(outer, inner...) {
				if st == nil {
					t.Fatalf("stage %s is off", names[i])
				}
				traced = append(traced, trace(names[i]), st)
			}
			traced = append(traced, trace("core"))
			e.inner = pipeline.Chain(pipeline.HandlerFunc(e.core), traced[2*len(outer):]...)
			e.handler = pipeline.Chain(e.inner, traced[:2*len(outer)]...)

			r := call(t, e, ask(llm.FormatAnthropic, "al", stream))
			if r.err != nil {
				t.Fatal(r.err)
			}
			if err := e.DrainShadows(context.Background()); err != nil {
				t.Fatal(err)
			}
			below := []string{"resolve", "cache", "semcache", "admit", "rollout", "structured", "fragment", "core"}
			var want []string
			for _, n := range append([]string{"pii", "shadow"}, below...) {
				want = append(want, "down "+n)
			}
			for i := len(below) - 1; i >= 0; i-- {
				want = append(want, "up "+below[i])
			}
			want = append(want, "up shadow", "up pii")
			// the shadow call, after the client's: the below stages only
			for _, n := range below {
				want = append(want, "down "+n)
			}
			for i := len(below) - 1; i >= 0; i-- {
				want = append(want, "up "+below[i])
			}
			if fmt.Sprint(trail) != fmt.Sprint(want) {
				t.Fatalf("trail\n%v\nwant\n%v", trail, want)
			}
		})
	}
}

// TestOneFinishPerCall: whatever way a call ends — an answer, an error, a
// stream read to its end or left early and closed twice, a cache hit
// replayed as a stream — Done and the observers run exactly once.
func TestOneFinishPerCall(t *testing.T) {
	obs := &countingObserver{done: map[string]int{}}
	e := pipelineEngine(t, obs, func(_ int, body map[string]any) reply {
		if body["stream"] == true {
			return anthropicStream([]string{"Once", " upon", " a", " time"}, 0, true)
		}
		return anthropicJSON("Once upon")
	})
	zero := 0.0
	for _, tc := range []struct {
		name    string
		model   string
		stream  bool
		cached  bool
		readAll bool
	}{
		{name: "answer", model: "m"},
		{name: "error", model: "nope"},
		{name: "stream read to its end", model: "m", stream: true, readAll: true},
		{name: "stream left early", model: "m", stream: true},
		{name: "cache hit replayed as a stream", model: "m", stream: true, cached: true, readAll: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := ask(llm.FormatAnthropic, tc.model, tc.stream)
			if tc.cached {
				req.Temperature = &zero
				warm := *req
				warm.Stream = false
				if _, err := e.Do(context.Background(), &warm, Call{RequestID: tc.name + "/warm"}); err != nil {
					t.Fatal(err)
				}
			}
			dones := 0
			out, err := e.Do(context.Background(), req, Call{RequestID: tc.name, Done: func(*Record) { dones++ }})
			if tc.model == "nope" {
				if err == nil {
					t.Fatal("no error for an unknown model")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if out != nil && out.Stream != nil {
				if dones != 0 {
					t.Fatal("a stream's call finished before it was closed")
				}
				for tc.readAll {
					if _, err := out.Stream.Next(); err == io.EOF {
						break
					}
				}
				if !tc.readAll {
					out.Stream.Next()
				}
				out.Stream.Close()
				out.Stream.Close()
				if tc.cached && out.Record.CacheStatus() != cache.Hit {
					t.Fatalf("X-Mesh-Cache %q, want hit", out.Record.Cache)
				}
			}
			if dones != 1 || obs.count(tc.name) != 1 {
				t.Fatalf("Done ran %d times, observers %d; want 1 and 1", dones, obs.count(tc.name))
			}
		})
	}
}

// New refuses options whose stages were not built (chain.Build): an
// engine without its rollout plan and valve would fail its first call.
func TestNewNeedsBuiltStages(t *testing.T) {
	_, err := New(Options{Client: provider.NewClient(http.DefaultTransport)})
	if err == nil || !strings.Contains(err.Error(), "chain.Build") {
		t.Fatalf("New without stages = %v, want an error naming chain.Build", err)
	}
}
