package engine

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/shadow"
)

// shadowSink collects shadow results.
type shadowSink struct {
	mu       sync.Mutex
	results  []shadow.Result
	calls    int
	attempts []AttemptEvent
}

func (s *shadowSink) OnAttempt(a AttemptEvent) {
	s.mu.Lock()
	s.attempts = append(s.attempts, a)
	s.mu.Unlock()
}

func (s *shadowSink) RequestDone(*Record) {
	s.mu.Lock()
	s.calls++
	s.mu.Unlock()
}

func (s *shadowSink) OnShadow(r shadow.Result) {
	s.mu.Lock()
	s.results = append(s.results, r)
	s.mu.Unlock()
}

func (s *shadowSink) all() []shadow.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]shadow.Result(nil), s.results...)
}

// shadowEngine: alias "a" → model m1 (endpoint p), shadowed 100 % to
// model m2 (endpoints s1, s2).
func shadowEngine(t *testing.T, p, s1, s2 *scripted, so shadow.PoolOptions, sink *shadowSink) *Engine {
	h := newHarness(t, p, s1, s2)
	eps := append(h.endpoints("m1", "p"), h.endpoints("m2", "s1", "s2")...)
	return h.engine(Options{Observer: sink, Shadow: so, Aliases: map[string]Alias{"a": {Models: []string{"m1"}}},
		Shadows: shadows(t, "a", shadow.Config{Percent: 100, Target: shadow.Target{Model: "m2"}, DecisionRule: "score >= 0.8"})}, eps...)
}

// shadows is alias a's shadow policy c, resolved (shadow.NewRoutes; the
// target is the test's to configure).
func shadows(t *testing.T, a string, c shadow.Config) map[string]*shadow.Route {
	t.Helper()
	r, err := shadow.NewRoutes(map[string]*shadow.Config{a: &c}, func(string) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestShadowComparesAfterTheClientsAnswer: the client's answer comes at
// the primary's latency, untouched, whatever the shadow path takes; the
// shadow runs after and its diff names the field that moved — for a
// stream, on the answer the client assembled.
func TestShadowComparesAfterTheClientsAnswer(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprint("stream=", stream), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const primary = `{"risk":"high","score":0.81}`
				p := &scripted{id: "p", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
					if stream {
						r := anthropicStream([]string{`{"risk":"high",`, `"score":0.81}`}, 50*time.Millisecond, true)
						return r
					}
					r := anthropicJSON(primary)
					r.delay = 100 * time.Millisecond
					return r
				}}
				slow := func(int, map[string]any) reply {
					r := anthropicJSON(`{"risk":"high","score":0.79}`)
					r.delay = 2 * time.Second
					return r
				}
				s1 := &scripted{id: "s1", format: llm.FormatAnthropic, script: slow}
				s2 := &scripted{id: "s2", format: llm.FormatAnthropic, script: slow}
				sink := &shadowSink{}
				e := shadowEngine(t, p, s1, s2, shadow.PoolOptions{}, sink)
				res := call(t, e, ask(llm.FormatAnthropic, "a", stream))
				if res.err != nil || res.text != primary {
					t.Fatalf("client got %q, %v; want the primary's answer", res.text, res.err)
				}
				if res.took != 100*time.Millisecond {
					t.Errorf("client call took %v, want exactly the primary's 100ms", res.took)
				}
				if len(sink.all()) != 0 {
					t.Error("the shadow finished before the client had its answer")
				}
				time.Sleep(3 * time.Second)
				synctest.Wait()
				assertComparedShadow(t, sink)
			})
		})
	}
}

// assertComparedShadow: sink got one shadow result, the JSON comparison
// of TestShadowComparesAfterTheClientsAnswer's answers (the risk equal,
// the score down 0.02, the rule true for the primary and false for the
// shadow), and the observers the client's record only.
func assertComparedShadow(t *testing.T, sink *shadowSink) {
	t.Helper()
	got := sink.all()
	if len(got) != 1 {
		t.Fatalf("%d shadow results, want 1", len(got))
	}
	r := got[0]
	if r.Outcome != shadow.OutcomeCompared || r.Comparison == nil || !r.Comparison.JSON {
		t.Fatalf("result %+v, want a JSON comparison", r)
	}
	want := map[string]shadow.Kind{"risk": shadow.Equal, "score": shadow.NumericDelta}
	for _, f := range r.Comparison.Fields {
		if want[f.Path] != f.Kind {
			t.Errorf("field %s: %s, want %s", f.Path, f.Kind, want[f.Path])
		}
		if f.Path == "score" && math.Abs(f.Delta+0.02) > 1e-9 {
			t.Errorf("score delta %g, want -0.02", f.Delta)
		}
	}
	if r.Comparison.RulePrimary != shadow.True || r.Comparison.RuleShadow != shadow.False {
		t.Errorf("rule verdicts %v / %v, want true / false", r.Comparison.RulePrimary, r.Comparison.RuleShadow)
	}
	if r.ShadowModel != "m2" || r.PrimaryModel != "m1" || r.Alias != "a" || r.Target != "model:m2" {
		t.Errorf("result names %+v", r)
	}
	if sink.calls != 1 {
		t.Errorf("observers got %d records, want the client's only", sink.calls)
	}
}

// TestShadowNeverRetriedNorFailedOver: a shadow path that fails gets one
// attempt, not a retry on the same endpoint nor a failover to the other,
// and the failure is reported, not the client's.
// shadowOneCall makes one client call to shadowEngine's alias (the primary
// answers) with both shadow endpoints answering by script, and waits, in
// a synctest bubble, until the shadow is done.
func shadowOneCall(t *testing.T, script func(int, map[string]any) reply) (s1, s2 *scripted, sink *shadowSink) {
	t.Helper()
	p := &scripted{id: "p", format: llm.FormatAnthropic, script: always(anthropicJSON(`{"score":1}`))}
	s1 = &scripted{id: "s1", format: llm.FormatAnthropic, script: script}
	s2 = &scripted{id: "s2", format: llm.FormatAnthropic, script: script}
	sink = &shadowSink{}
	e := shadowEngine(t, p, s1, s2, shadow.PoolOptions{}, sink)
	if res := call(t, e, ask(llm.FormatAnthropic, "a", false)); res.err != nil {
		t.Fatal(res.err)
	}
	time.Sleep(time.Second)
	synctest.Wait()
	return s1, s2, sink
}

func TestShadowNeverRetriedNorFailedOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s1, s2, sink := shadowOneCall(t, always(anthropicError(529, "overloaded_error", "")))
		if n := s1.count() + s2.count(); n != 1 {
			t.Errorf("shadow path got %d attempts, want 1", n)
		}
		got := sink.all()
		if len(got) != 1 || got[0].Outcome != shadow.OutcomeError || got[0].Error == "" {
			t.Errorf("results %+v, want one error", got)
		}
	})
}

// TestShadowAttemptEventsMarked: an observe.AttemptObserver can tell a shadow
// call's attempt from the client's (AttemptEvent.Shadow), so attempts
// counted per client call are not inflated by shadowing.
func TestShadowAttemptEventsMarked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, _, sink := shadowOneCall(t, always(anthropicJSON(`{"score":1}`)))
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if len(sink.attempts) != 2 {
			t.Fatalf("attempt events %+v, want the client's and the shadow's", sink.attempts)
		}
		for _, a := range sink.attempts {
			if a.Shadow != (a.Model == "m2") {
				t.Errorf("attempt on %s (model %s): Shadow %v, want %v", a.Endpoint, a.Model, a.Shadow, a.Model == "m2")
			}
		}
	})
}

// TestShadowDroppedWhenQueueFull: with one worker busy and the queue
// full, the next shadow is dropped and counted, and the client's calls
// are not slowed.
func TestShadowDroppedWhenQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &scripted{id: "p", format: llm.FormatAnthropic, script: always(anthropicJSON(`{"score":1}`))}
		slow := func(int, map[string]any) reply {
			r := anthropicJSON(`{"score":1}`)
			r.delay = 10 * time.Second
			return r
		}
		s1 := &scripted{id: "s1", format: llm.FormatAnthropic, script: slow}
		s2 := &scripted{id: "s2", format: llm.FormatAnthropic, script: slow}
		sink := &shadowSink{}
		e := shadowEngine(t, p, s1, s2, shadow.PoolOptions{Workers: 1, Queue: 1}, sink)
		for range 3 {
			if res := call(t, e, ask(llm.FormatAnthropic, "a", false)); res.err != nil || res.took != 0 {
				t.Fatalf("client call: %v after %v", res.err, res.took)
			}
			synctest.Wait()
		}
		got := sink.all()
		if len(got) != 1 || got[0].Outcome != shadow.OutcomeDropped {
			t.Fatalf("results %+v, want one dropped", got)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := map[string]int{}
		for _, r := range sink.all() {
			n[r.Outcome]++
		}
		if n[shadow.OutcomeCompared] != 2 || n[shadow.OutcomeDropped] != 1 {
			t.Errorf("outcomes %v, want 2 compared, 1 dropped", n)
		}
	})
}

// TestShadowShedUnderLoad: a running shadow is cancelled as soon as the
// client calls in flight exceed shed_inflight, and a queued one never
// starts while they do.
func TestShadowShedUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &scripted{id: "p", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			r := anthropicJSON(`{"score":1}`)
			if n > 0 {
				r.delay = time.Second // the load
			}
			return r
		}}
		slow := func(int, map[string]any) reply {
			r := anthropicJSON(`{"score":1}`)
			r.delay = 10 * time.Second
			return r
		}
		s1 := &scripted{id: "s1", format: llm.FormatAnthropic, script: slow}
		s2 := &scripted{id: "s2", format: llm.FormatAnthropic, script: slow}
		sink := &shadowSink{}
		e := shadowEngine(t, p, s1, s2, shadow.PoolOptions{ShedInflight: 1}, sink)
		call(t, e, ask(llm.FormatAnthropic, "a", false))
		synctest.Wait() // the shadow is running
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() { call(t, e, ask(llm.FormatAnthropic, "a", false)) })
		}
		synctest.Wait()
		got := sink.all()
		if len(got) != 1 || got[0].Outcome != shadow.OutcomeShed {
			t.Fatalf("results %+v, want the running shadow shed", got)
		}
		wg.Wait()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		n := map[string]int{}
		for _, r := range sink.all() {
			n[r.Outcome]++
		}
		if n[shadow.OutcomeShed] < 1 || n[shadow.OutcomeShed]+n[shadow.OutcomeCompared] != 3 {
			t.Errorf("outcomes %v", n)
		}
	})
}

// TestShadowLegacyStaysOnPrimaryModel: a legacy shadow runs the alias on
// the plain path — its primary model only — so when that model refuses,
// the client is served by the fallback model and the shadow reports the
// refusal instead of falling back too.
func TestShadowLegacyStaysOnPrimaryModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &scripted{id: "p", format: llm.FormatAnthropic, script: always(anthropicError(529, "overloaded_error", ""))}
		s1 := &scripted{id: "s1", format: llm.FormatAnthropic, script: always(anthropicJSON(`{"score":1}`))}
		h := newHarness(t, p, s1)
		sink := &shadowSink{}
		e := h.engine(Options{Observer: sink, Aliases: map[string]Alias{"a": {Models: []string{"m1", "m2"}}},
			Shadows: shadows(t, "a", shadow.Config{Percent: 100, Target: shadow.Target{Legacy: true}})}, append(h.endpoints("m1", "p"), h.endpoints("m2", "s1")...)...)
		res := call(t, e, ask(llm.FormatAnthropic, "a", false))
		if res.err != nil || res.text != `{"score":1}` {
			t.Fatalf("client got %q, %v", res.text, res.err)
		}
		// The client's calls to m1, from its own record (none when m2
		// won the tie between the alias's equal candidates): the shadow's
		// worker may already have called m1 by now, so p.count() here
		// could include the shadow's call.
		clientP := 0
		for _, a := range res.rec.Attempts {
			if a.Model == "m1" {
				clientP++
			}
		}
		if err := e.DrainShadows(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := sink.all()
		if len(got) != 1 || got[0].Outcome != shadow.OutcomeError || got[0].Target != "legacy" {
			t.Fatalf("results %+v, want the legacy shadow's refusal", got)
		}
		if s1.count() != 1 || p.count() != clientP+1 {
			t.Errorf("m2 got %d calls (want the client's 1), m1 %d more (want the shadow's 1)", s1.count(), p.count()-clientP)
		}
	})
}

// TestShadowBypassesTheCache: a legacy shadow asks the same model the
// same question; it must reach the upstream, not be answered from the
// response cache the client's call filled (a comparison with itself).
func TestShadowBypassesTheCache(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &scripted{id: "p", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			return anthropicJSON(fmt.Sprintf(`{"n":%d}`, n))
		}}
		h := newHarness(t, p)
		lru, err := cache.New[*cache.Entry](cache.Config{}, time.Now)
		if err != nil {
			t.Fatal(err)
		}
		sink := &shadowSink{}
		e := h.engine(Options{Observer: sink, Stages: stages(t, chain.Config{Cache: lru}), Aliases: map[string]Alias{"a": {Models: []string{"m1"}}},
			Shadows: shadows(t, "a", shadow.Config{Percent: 100, Target: shadow.Target{Legacy: true}})}, h.endpoints("m1", "p")...)
		req := ask(llm.FormatAnthropic, "a", false)
		zero := 0.0
		req.Temperature = &zero
		if res := call(t, e, req); res.err != nil || res.rec.CacheStatus() != cache.Miss {
			t.Fatalf("client call: %v, cache %q", res.err, res.rec.Cache)
		}
		if err := e.DrainShadows(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := sink.all()
		if p.count() != 2 || len(got) != 1 || got[0].Comparison == nil || !got[0].Comparison.Differ() {
			t.Errorf("upstream calls %d (want 2), results %+v: the shadow must be answered upstream", p.count(), got)
		}
	})
}
