package semcache

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// stageHarness runs the stage over a real Index with a fake embedder
// (a fixed vector per text) and a fake next.
type stageHarness struct {
	vecs    map[string][]float32
	failing bool
	missed  bool
	parts   []Part
	calls   int
	h       pipeline.Handler
}

func newStageHarness(t *testing.T) *stageHarness {
	t.Helper()
	idx, err := New[*cache.Entry](Config{}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	sh := &stageHarness{missed: true, vecs: map[string][]float32{
		"capital of France?":        {1, 0, 0},
		"what is France's capital?": {0.98, 0.2, 0},
		"how do I bake bread?":      {0, 0, 1},
	}}
	embed := func(_ context.Context, text string) ([]float32, error) {
		if sh.failing {
			return nil, errors.New("embeddings down")
		}
		return sh.vecs[text], nil
	}
	stage := NewStage(&Semantic{Embed: embed, Index: idx}, cache.Policy{}, Hooks{
		Record:    func(_ *pipeline.Call, p Part) { sh.parts = append(sh.parts, p) },
		Threshold: func(*pipeline.Call) float32 { return 0.9 },
		Missed:    func(*pipeline.Call) bool { return sh.missed },
		Domain:    func(*pipeline.Call) string { return "general" },
		Replay:    func(*llm.Response) pipeline.Events { return nil },
	})
	sh.h = stage(pipeline.HandlerFunc(func(_ context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		sh.calls++
		return &pipeline.Answer{Endpoint: &provider.Endpoint{ID: "a"},
			Response: &llm.Response{StopReason: "end_turn", Content: []llm.Block{{Type: llm.BlockText, Text: "answer to " + c.Request.Messages[0].Text()}}}}, nil
	}))
	return sh
}

func (sh *stageHarness) ask(t *testing.T, text string) *pipeline.Answer {
	t.Helper()
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
	ans, err := sh.h.Serve(context.Background(), &pipeline.Call{Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

// TestStageServesSimilarPrompts: a miss stores the answer under its
// vector; a similar prompt is answered from it (next not called, the
// similarity recorded); a different one is a miss.
func TestStageServesSimilarPrompts(t *testing.T) {
	sh := newStageHarness(t)
	sh.ask(t, "capital of France?")
	if sh.calls != 1 || sh.parts[0].Status != StatusMiss {
		t.Fatalf("first: calls %d parts %+v", sh.calls, sh.parts)
	}
	ans := sh.ask(t, "what is France's capital?")
	if p := sh.parts[1]; sh.calls != 1 || !ans.Replayed || ans.Response.Text() != "answer to capital of France?" || p.Status != StatusHit || p.Similarity < 0.9 || p.Entry == nil {
		t.Fatalf("similar: calls %d, answer %+v, part %+v", sh.calls, ans, sh.parts[1])
	}
	sh.ask(t, "how do I bake bread?")
	if sh.calls != 2 || sh.parts[2].Status != StatusMiss {
		t.Fatalf("different: calls %d part %+v", sh.calls, sh.parts[2])
	}
}

// TestStageEmbeddingFailureIsAMiss: a failed embedding is recorded as an
// error, served from below and not stored; a call the exact cache did not
// miss is not looked up at all.
func TestStageEmbeddingFailureIsAMiss(t *testing.T) {
	sh := newStageHarness(t)
	sh.failing = true
	sh.ask(t, "capital of France?")
	sh.failing = false
	sh.ask(t, "capital of France?")
	if sh.calls != 2 || sh.parts[0].Status != StatusError || sh.parts[1].Status != StatusMiss {
		t.Fatalf("calls %d parts %+v", sh.calls, sh.parts)
	}
	sh.missed = false
	sh.ask(t, "capital of France?")
	if sh.calls != 3 || len(sh.parts) != 2 {
		t.Fatalf("looked up a call the exact cache did not miss: parts %+v", sh.parts)
	}
}
