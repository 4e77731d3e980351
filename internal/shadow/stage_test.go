package shadow

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// TestShadowSampledStickyByKey: the same key is always or never shadowed,
// about Percent of keys are, and the virtual key wins over the credential
// and the end user (moved from the engine).
func TestShadowSampledStickyByKey(t *testing.T) {
	sr := &Route{alias: "a", cut: 1000} // 10 %
	hit := 0
	for i := range 10000 {
		k := fmt.Sprintf("key-%d", i)
		s := sr.Sampled(k)
		if s != sr.Sampled(k) {
			t.Fatal("not sticky")
		}
		if s {
			hit++
		}
	}
	if hit < 900 || hit > 1100 { // sd 30
		t.Errorf("%d of 10000 keys sampled at 10 %%", hit)
	}
	req := &llm.Request{UserID: "u"}
	hdr := http.Header{"X-Api-Key": {"sk-x"}}
	for _, c := range []struct {
		call pipeline.Call
		want string
	}{
		{pipeline.Call{Request: req, KeyID: "k1", Header: hdr, ID: "r"}, "key:k1"},
		{pipeline.Call{Request: req, Header: hdr, ID: "r"}, "cred:sk-x"},
		{pipeline.Call{Request: req, ID: "r"}, "user:u"},
		{pipeline.Call{Request: &llm.Request{}, ID: "r"}, "req:r"},
	} {
		if got := Key(&c.call); got != c.want {
			t.Errorf("Key = %q, want %q", got, c.want)
		}
	}
}

// TestStageQueuesAtFinishAndCompares: the stage samples a call on its way
// down and never delays it; the shadow runs only once Finish hands over
// the client's answer, on the target, without a stream, and its answer is
// compared; a failed client call or an unsampled one is not shadowed.
func TestStageQueuesAtFinishAndCompares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var results []Result
		var sent []*llm.Request
		run := func(_ context.Context, c *pipeline.Call, legacy bool) Ran {
			mu.Lock()
			sent = append(sent, c.Request)
			mu.Unlock()
			return Ran{Response: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "shadow says hi"}}}, Model: "b", Cost: 0.5, Took: time.Second}
		}
		p := NewPool(PoolOptions{}, run, func(r Result) { mu.Lock(); results = append(results, r); mu.Unlock() }, time.Now)
		defer p.Close()
		r, err := NewRoute("alias", Config{Percent: 100, Target: Target{Model: "b"}})
		if err != nil {
			t.Fatal(err)
		}
		var part *Part
		h := p.Stage(func(m string) *Route {
			if m == "alias" {
				return r
			}
			return nil
		}, func(_ *pipeline.Call, pt *Part) { part = pt })(pipeline.HandlerFunc(func(context.Context, *pipeline.Call) (*pipeline.Answer, error) {
			return &pipeline.Answer{}, nil
		}))
		req := &llm.Request{Model: "alias", Stream: true}
		for _, tc := range []struct {
			model  string
			failed bool
		}{{"alias", false}, {"alias", true}, {"other", false}} {
			req := *req
			req.Model = tc.model
			before := len(sent)
			if _, err := h.Serve(context.Background(), &pipeline.Call{Request: &req, ID: "r1"}); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			if len(sent) != before {
				t.Fatal("a shadow ran before the client's call finished")
			}
			p.Finish(part, Primary{RequestID: "r1", Request: &req, Response: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "primary says hi"}}}, Failed: tc.failed, Model: "a", Cost: 1})
			synctest.Wait()
		}
		if err := p.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(sent) != 1 || sent[0].Model != "b" || sent[0].Stream {
			t.Fatalf("sent %d shadows (%+v); want one to b without a stream", len(sent), sent)
		}
		if len(results) != 1 || results[0].Outcome != OutcomeCompared || results[0].Comparison == nil || results[0].ShadowCost != 0.5 || results[0].PrimaryCost != 1 || results[0].RequestID != "r1" {
			t.Fatalf("results %+v", results)
		}
		if p.inflight.Load() != 0 {
			t.Fatalf("%d calls still counted in flight", p.inflight.Load())
		}
	})
}

// TestNewRoutes: an alias without a shadow gets no route; a legacy target
// is the alias itself; a target the mesh does not serve and an invalid
// policy are refused with the alias's name.
func TestNewRoutes(t *testing.T) {
	known := func(name string) bool { return name == "a" || name == "m" }
	rs, err := NewRoutes(map[string]*Config{
		"a": {Percent: 10, Target: Target{Model: "m"}},
		"b": nil,
		"l": {Percent: 5, Target: Target{Legacy: true}},
	}, func(name string) bool { return known(name) || name == "l" })
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs["a"].Target != "m" || rs["a"].Legacy || rs["l"].Target != "l" || !rs["l"].Legacy {
		t.Errorf("routes %+v", rs)
	}
	if rs, err := NewRoutes(map[string]*Config{"b": nil}, known); rs != nil || err != nil {
		t.Errorf("no shadow: %v %v, want nil nil", rs, err)
	}
	if _, err := NewRoutes(map[string]*Config{"a": {Percent: 10, Target: Target{Model: "x"}}}, known); err == nil ||
		err.Error() != `alias "a": shadow target model:x is not a configured model or alias` {
		t.Errorf("unknown target: %v", err)
	}
	if _, err := NewRoutes(map[string]*Config{"a": {Percent: 200, Target: Target{Model: "m"}}}, known); err == nil || !strings.HasPrefix(err.Error(), `alias "a": `) {
		t.Errorf("invalid policy: %v", err)
	}
}
