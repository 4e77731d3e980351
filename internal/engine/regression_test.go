package engine

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
)

var story = []string{"Umber", " fable", " juniper", " meadow", " under", " rain."}

// Defect 1: an OpenAI-format stream cut mid-way and continued elsewhere
// reached the client as "first part + the whole answer again" under a
// clean finish, because OpenAI starts a new answer after a trailing
// assistant message. Per continuation kind: the exact text once, or the
// wire's error event; never a duplicate. Also defect 10b: the recovered
// stream's prompt tokens are the original prompt's, not 0.
func TestOpenAIRecoveryNeverDuplicatesText(t *testing.T) {
	full := strings.Join(story, "")
	cases := []struct {
		name string
		kind provider.Continuation
		// second is endpoint b's answer to the continuation.
		second    func(body map[string]any) reply
		wantText  string
		wantError bool
	}{
		{"none: same answer is spliced", provider.ContinueNone,
			func(map[string]any) reply { return openaiStream(story, time.Millisecond, true, 11) }, full, false},
		{"none: a different answer is an error event", provider.ContinueNone,
			func(map[string]any) reply {
				return openaiStream([]string{"Quite", " another", " tale."}, time.Millisecond, true, 11)
			}, "", true},
		{"prefix: the rest after the prefix", provider.ContinuePrefix,
			func(map[string]any) reply { return openaiStream(story[3:], time.Millisecond, true, 15) }, full, false},
		{"continue_final_message: the rest", provider.ContinueFinalMessage,
			func(map[string]any) reply { return openaiStream(story[3:], time.Millisecond, true, 15) }, full, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &scripted{id: "a", format: llm.FormatOpenAI}
				a.script = func(int, map[string]any) reply {
					r := openaiStream(story[:3], time.Millisecond, false, 0)
					r.cut = true
					return r
				}
				b := &scripted{id: "b", format: llm.FormatOpenAI, script: func(_ int, body map[string]any) reply { return c.second(body) }}
				h := newHarness(t, a, b)
				eps := h.endpoints("m", "a", "b")
				for _, ep := range eps {
					ep.Continuation = c.kind
				}
				e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}}}, eps...)
				r := call(t, e, ask(llm.FormatOpenAI, "al", true))
				if c.wantError {
					if r.errEvent == nil || r.stopped {
						t.Fatalf("text %q stopped %v error %v: want the wire's error event and no clean finish", r.text, r.stopped, r.errEvent)
					}
					if r.text != strings.Join(story[:3], "") {
						t.Errorf("text %q: want only what the first endpoint sent", r.text)
					}
					return
				}
				if r.text != c.wantText || !r.stopped || r.errEvent != nil {
					t.Fatalf("text %q (stopped %v, error %v), want %q once and a clean stop", r.text, r.stopped, r.errEvent, c.wantText)
				}
				assertContinuationAsked(t, c.kind, b.lastBody(), r)
				if r.rec.Recovered != 1 {
					t.Errorf("recovered %d, want 1", r.rec.Recovered)
				}
			})
		})
	}
}

// assertContinuationAsked: the continuation's body is the one its kind
// takes (none: the client's own request again, whose prompt tokens the
// client gets; prefix: an assistant message marked prefix; final
// message: vLLM's flags).
func assertContinuationAsked(t *testing.T, kind provider.Continuation, body map[string]any, r result) {
	t.Helper()
	msgs := body["messages"].([]any)
	last := msgs[len(msgs)-1].(map[string]any)
	switch kind {
	case provider.ContinueNone:
		if last["role"] != "user" {
			t.Errorf("kind none: the re-ask ends with a %v message, want the client's own request", last["role"])
		}
		if r.usage.InputTokens != 11 {
			t.Errorf("prompt tokens %d after recovery, want the original prompt's 11", r.usage.InputTokens)
		}
	case provider.ContinuePrefix:
		if last["role"] != "assistant" || last["prefix"] != true {
			t.Errorf("kind prefix: last message %v, want an assistant message with prefix: true", last)
		}
	case provider.ContinueFinalMessage:
		if body["continue_final_message"] != true || body["add_generation_prompt"] != false {
			t.Errorf("kind continue_final_message: body flags %v %v", body["continue_final_message"], body["add_generation_prompt"])
		}
	}
}

// Defect 2: a 429 answered to a hedge was recorded as cancelled with
// status 0 and its retry-after ignored; new calls went to the endpoint
// within milliseconds.
func TestHedgeRateLimitPutsEndpointInCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			r := anthropicJSON("slow but fine")
			if n == 0 {
				r.delay = 200 * time.Millisecond
			}
			return r
		}}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
			r := anthropicError(429, "rate_limit_error", "1")
			r.delay = 10 * time.Millisecond
			return r
		}}
		h := newHarness(t, a, b)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{Hedge: resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: 50 * time.Millisecond}}},
			h.endpoints("m", "a", "b")...)
		start := time.Now()
		r := call(t, e, ask(llm.FormatAnthropic, "al", false))
		// Two hedges: the first to b (429), the second, 50 ms later, to a
		// again (a fresh draw; b cools down), which answers at once.
		if r.err != nil || r.rec.Hedges != 2 {
			t.Fatalf("err %v hedges %d, want a served call with two hedges", r.err, r.rec.Hedges)
		}
		var hedge *Attempt
		for i := range r.rec.Attempts {
			if at := &r.rec.Attempts[i]; at.Kind == "hedge" && hedge == nil {
				hedge = at
			} else if at.Kind == "hedge" && at.Endpoint != r.rec.Attempts[0].Endpoint {
				t.Errorf("second hedge went to %s inside b's retry-after, want a", at.Endpoint)
			}
		}
		if hedge == nil || hedge.Status != 429 || hedge.Outcome != "rate_limited" {
			t.Fatalf("hedge attempt %+v, want status 429 rate_limited", hedge)
		}
		// Inside the retry-after, b gets nothing, even when a is slow again.
		for time.Since(start) < 900*time.Millisecond {
			if r := call(t, e, ask(llm.FormatAnthropic, "al", false)); r.err != nil {
				t.Fatalf("call failed: %v", r.err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if n := b.count(); n != 1 {
			t.Errorf("b received %d calls inside its retry-after, want only the hedge", n)
		}
	})
}

// Defect 3: failover drew on the retry budget, so clients got
// MESH_BUDGET_EXHAUSTED while a healthy endpoint existed; and with every
// endpoint cooling, calls failed with 0 upstream attempts.
func TestFailoverAfterRefusalSpendsNoRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicError(429, "rate_limit_error", "1"))}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicJSON("ok"))}
		h := newHarness(t, a, b)
		// A budget with room for a single retry.
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{RetryBudget: resilience.BudgetConfig{Ratio: 0.01, Burst: 1}}},
			h.endpoints("m", "a", "b")...)
		for i := range 40 {
			if r := call(t, e, ask(llm.FormatAnthropic, "al", false)); r.err != nil {
				t.Fatalf("call %d: %v (a healthy endpoint exists)", i, r.err)
			}
			time.Sleep(50 * time.Millisecond) // 2 s in all: a's retry-after ends once
		}
		if n := a.count(); n != 2 {
			t.Errorf("a received %d calls in 2 s with retry-after 1 s, want 2", n)
		}
	})
}

func TestEveryEndpointCoolingWaitsForTheFirstBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			if n == 0 {
				return anthropicError(429, "rate_limit_error", "2")
			}
			return anthropicJSON("a")
		}}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			if n == 0 {
				return anthropicError(529, "overloaded_error", "1")
			}
			return anthropicJSON("b")
		}}
		h := newHarness(t, a, b)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{Timeout: 5 * time.Second, RetryBudget: resilience.BudgetConfig{Ratio: 0.001, Burst: 1}}},
			h.endpoints("m", "a", "b")...)
		first := make(chan result)
		go func() { first <- call(t, e, ask(llm.FormatAnthropic, "al", false)) }()
		time.Sleep(100 * time.Millisecond)
		// Both endpoints cool now (a until 2 s, b until 1 s), and the
		// budget is empty: this call must wait for b, not fail with no
		// attempt made.
		r := call(t, e, ask(llm.FormatAnthropic, "al", false))
		if r.err != nil {
			t.Fatalf("call failed: %v; want a wait for b's retry-after within the 5 s deadline", r.err)
		}
		if r.text != "b" || r.took != 900*time.Millisecond {
			t.Errorf("served %q after %v, want b after exactly 900ms", r.text, r.took)
		}
		if r1 := <-first; r1.err != nil || r1.text != "b" || r1.took != time.Second {
			t.Errorf("first call: %q after %v (%v), want b after 1s", r1.text, r1.took, r1.err)
		}
		if n := a.count(); n != 1 {
			t.Errorf("a received %d calls inside its retry-after, want 1", n)
		}
	})
}

// Defect 4: a stalled stream was continued on the same stalled endpoint.
func TestStalledStreamIsContinuedOnAnotherEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// a wins a hedge race on time to first token, then stalls: both
		// endpoints were tried, and the continuation must still go to b.
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
			r := anthropicStream(story[:3], 10*time.Millisecond, false)
			r.delay = 60 * time.Millisecond
			r.stall = true
			return r
		}}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			if n == 0 {
				r := anthropicStream(story, 10*time.Millisecond, true)
				r.delay = 100 * time.Millisecond
				return r
			}
			return anthropicStream(story[3:], 10*time.Millisecond, true)
		}}
		h := newHarness(t, a, b)
		eps := h.endpoints("m", "a", "b")
		for _, ep := range eps {
			ep.StreamIdleTimeout = 2 * time.Second
		}
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{Hedge: resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: 50 * time.Millisecond}}}, eps...)
		r := call(t, e, ask(llm.FormatAnthropic, "al", true))
		if r.text != strings.Join(story, "") || !r.stopped {
			t.Fatalf("text %q stopped %v, want the exact story", r.text, r.stopped)
		}
		if n := a.count(); n != 1 {
			t.Errorf("a received %d calls, want 1: a stalled stream is not continued on its own endpoint", n)
		}
		if got := r.rec.Attempts[len(r.rec.Attempts)-1]; got.Region != "b" || got.Kind != "continuation" {
			t.Errorf("last attempt %+v, want the continuation on b", got)
		}
	})
}

// Defect 5: traffic came back to a recovered region only after 100–500 ms.
func TestRecoveredRegionServesWithin100ms(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var backAt time.Time
		var isDown atomic.Bool
		isDown.Store(true)
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("a")), up: func() bool { return !isDown.Load() }}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicJSON("b"))}
		h := newHarness(t, a, b)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}}}, h.endpoints("m", "a", "b")...)
		start := time.Now()
		var firstBack time.Duration
		for time.Since(start) < 3*time.Second {
			if time.Since(start) >= 2230*time.Millisecond && isDown.Load() {
				isDown.Store(false)
				backAt = time.Now()
			}
			down := isDown.Load()
			r := call(t, e, ask(llm.FormatAnthropic, "al", false))
			if r.err != nil {
				t.Fatalf("call failed: %v", r.err)
			}
			if r.text == "a" && !backAt.IsZero() && firstBack == 0 {
				firstBack = time.Since(backAt)
			}
			if r.text == "a" && down {
				t.Fatal("a served while down")
			}
			time.Sleep(5 * time.Millisecond)
		}
		if firstBack == 0 || firstBack > 100*time.Millisecond {
			t.Errorf("first call served by a %v after it came back, want ≤ 100ms", firstBack)
		}
		t.Logf("first call served by a %v after it came back", firstBack)
		// While down, a got no client traffic: its calls are the first failure only.
		if n := a.count(); n < 1 {
			t.Errorf("a received %d calls", n)
		}
	})
}

// Defect 6: each call got at most one hedge, so a slow hedge set the
// p99.9.
func TestSlowHedgeIsHedgedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := anthropicJSON("slow")
		slow.delay = time.Second
		fast := anthropicJSON("fast")
		fast.delay = 10 * time.Millisecond
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(slow)}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(slow)}
		c := &scripted{id: "c", format: llm.FormatAnthropic, script: always(fast)}
		h := newHarness(t, a, b, c)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{Hedge: resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: 50 * time.Millisecond}}},
			h.endpoints("m", "a", "b", "c")...)
		r := call(t, e, ask(llm.FormatAnthropic, "al", false))
		if r.err != nil || r.text != "fast" {
			t.Fatalf("got %q %v, want c's answer", r.text, r.err)
		}
		if r.took != 110*time.Millisecond || r.rec.Hedges != 2 || !r.rec.HedgeWon {
			t.Errorf("took %v with %d hedges (won %v), want 110ms: two hedges 50ms apart, the second answering in 10ms", r.took, r.rec.Hedges, r.rec.HedgeWon)
		}
	})
}

// Defect 7: an overload of every endpoint of a model reached the client;
// nothing fell back to the alias's next model.
func TestWholeModelOverloadFallsBackToNextModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var scripts []*scripted
		for _, id := range []string{"s1", "s2", "s3"} {
			scripts = append(scripts, &scripted{id: id, format: llm.FormatAnthropic, script: always(anthropicError(529, "overloaded_error", ""))})
		}
		o := &scripted{id: "o1", format: llm.FormatAnthropic, script: always(anthropicJSON("opus"))}
		h := newHarness(t, append(scripts, o)...)
		eps := append(h.endpoints("sonnet", "s1", "s2", "s3"), h.endpoints("opus", "o1")...)
		e := h.engine(Options{Aliases: map[string]Alias{"default": {Models: []string{"sonnet", "opus"}, Strategy: "ordered"}},
			Resilience: Resilience{RetryBudget: resilience.BudgetConfig{Ratio: 0.001, Burst: 1}}}, eps...)
		for i := range 20 {
			r := call(t, e, ask(llm.FormatAnthropic, "default", false))
			if r.err != nil || r.text != "opus" {
				t.Fatalf("call %d: %q %v, want opus's answer", i, r.text, r.err)
			}
			if !r.rec.ModelFallback && r.rec.ServedModel != "opus" {
				t.Errorf("call %d: served model %q", i, r.rec.ServedModel)
			}
		}
	})
}

// Defect 8: passthrough routes were built per request, so no breaker,
// budget or health carried across calls, and Endpoints() listed nothing.
func TestPassthroughBreakerOpensAcrossCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &scripted{id: "up", format: llm.FormatAnthropic, script: always(anthropicError(500, "api_error", ""))}
		h := newHarness(t, up)
		pass := h.endpoints("", "up")[0]
		pass.ID, pass.Model, pass.UpstreamModel = "", "", ""
		e := h.engine(Options{Passthrough: []*provider.Endpoint{pass},
			Resilience: Resilience{MaxAttempts: 1, Breaker: resilience.BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute}}})
		for range 10 {
			if r := call(t, e, ask(llm.FormatAnthropic, "claude-x", false)); r.err == nil {
				t.Fatal("a call to an upstream answering 500 succeeded")
			}
		}
		if n := up.count(); n != 3 {
			t.Errorf("upstream received %d attempts for 10 calls, want 3 (the breaker opens after 3 failures)", n)
		}
		st := e.Endpoints()
		if len(st) != 1 || st[0].ID != "claude-x/up/p" || st[0].Breaker != resilience.Open.String() {
			t.Errorf("Endpoints() = %+v, want the passthrough endpoint with its breaker open", st)
		}
	})
}

// Must show: a 50 % 429 storm (retry-after: 1s) on one of two regions:
// no client error, nothing sent to the storming endpoint inside its
// retry-after once any attempt saw the 429, amplification ≤ 1.10.
func TestRateLimitStormOnOneRegion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var seen []time.Time // when each 429 reached Keel
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			if n%2 == 0 {
				r := anthropicError(429, "rate_limit_error", "1")
				r.delay = 5 * time.Millisecond
				mu.Lock()
				seen = append(seen, time.Now().Add(r.delay))
				mu.Unlock()
				return r
			}
			r := anthropicJSON("a")
			r.delay = 20 * time.Millisecond
			return r
		}}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
			r := anthropicJSON("b")
			r.delay = 80 * time.Millisecond // slower: a is preferred whenever it may be used
			return r
		}}
		h := newHarness(t, a, b)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, h.endpoints("m", "a", "b")...)
		const clients, perClient = 20, 30
		var wg sync.WaitGroup
		var errs atomic.Int64
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(c) * 3 * time.Millisecond)
				for range perClient {
					if r := call(t, e, ask(llm.FormatAnthropic, "al", false)); r.err != nil {
						errs.Add(1)
					}
					time.Sleep(100 * time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if n := errs.Load(); n != 0 {
			t.Errorf("%d client errors while b was healthy", n)
		}
		for _, at := range a.callTimes() {
			for _, s := range seen {
				if at.After(s) && at.Before(s.Add(time.Second)) {
					t.Errorf("a call reached a %v after a 429 with retry-after 1s was seen", at.Sub(s))
				}
			}
		}
		calls := clients * perClient
		sent := a.count() + b.count()
		if ampl := float64(sent) / float64(calls); ampl > 1.10 {
			t.Errorf("amplification %.3f (%d attempts for %d calls), want ≤ 1.10", ampl, sent, calls)
		}
		if len(seen) < 3 {
			t.Errorf("a answered %d 429s: the storm did not reach it after its cooldowns", len(seen))
		}
		t.Logf("%d calls, %d attempts (a %d, of which %d were 429s; b %d)", calls, sent, a.count(), len(seen), b.count())
	})
}

// keel demo's overload scenario: with every sonnet endpoint overloaded the
// alias served from opus, the safety valve counted that as a fallback and
// dropped the mesh to the plain path, which answered the overload to the
// client. Only a fallback to a weaker model trips the valve.
func TestValveIgnoresFallbackToStrongerModel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s1 := &scripted{id: "s1", format: llm.FormatAnthropic, script: always(anthropicError(529, "overloaded_error", ""))}
		o1 := &scripted{id: "o1", format: llm.FormatAnthropic, script: always(anthropicJSON("opus"))}
		h1 := &scripted{id: "h1", format: llm.FormatAnthropic, script: always(anthropicJSON("haiku"))}
		h := newHarness(t, s1, o1, h1)
		eps := h.endpoints("sonnet", "s1")
		opus, haiku := h.endpoints("opus", "o1"), h.endpoints("haiku", "h1")
		opus[0].Capability, haiku[0].Capability = 5, 1
		eps = append(append(eps, opus...), haiku...)
		o := Options{Endpoints: eps, Client: provider.NewClient(h), Aliases: map[string]Alias{
			"up":   {Models: []string{"sonnet", "opus"}, Strategy: "ordered"},
			"down": {Models: []string{"sonnet", "haiku"}, Strategy: "ordered"}}}
		e, err := newEngine(o)
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		for i := range 100 {
			if r := call(t, e, ask(llm.FormatAnthropic, "up", false)); r.err != nil || r.rec.Legacy || !r.rec.ModelFallback || r.rec.Downgraded {
				t.Fatalf("call %d to up: err %v legacy %v fallback %v downgraded %v", i, r.err, r.rec != nil && r.rec.Legacy, r.rec != nil && r.rec.ModelFallback, r.rec != nil && r.rec.Downgraded)
			}
		}
		if e.Valve().Open {
			t.Fatal("the valve opened on fallbacks to a stronger model")
		}
		for range 100 {
			call(t, e, ask(llm.FormatAnthropic, "down", false))
		}
		if !e.Valve().Open {
			t.Error("100 fallbacks to a weaker model did not open the valve")
		}
	})
}

// Issue 28: on a two-endpoint route, a call whose first attempt and first
// hedge were both slow got no second hedge (none untried was left), so
// the calls slow on both set the p99.9. The second hedge goes to an
// endpoint already in use: a fresh request is a fresh draw.
func TestSecondHedgeReusesAnEndpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		firstSlow := func(n int, _ map[string]any) reply {
			r := anthropicJSON("fine")
			if n == 0 {
				r.delay = time.Second
			}
			return r
		}
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: firstSlow}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: firstSlow}
		h := newHarness(t, a, b)
		e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
			Resilience: Resilience{Hedge: resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: 50 * time.Millisecond}}},
			h.endpoints("m", "a", "b")...)
		r := call(t, e, ask(llm.FormatAnthropic, "al", false))
		if r.err != nil || r.text != "fine" {
			t.Fatalf("got %q %v", r.text, r.err)
		}
		if r.took != 100*time.Millisecond || r.rec.Hedges != 2 || !r.rec.HedgeWon {
			t.Errorf("took %v with %d hedges (won %v), want 100ms: a second hedge 50ms after the first, answering at once", r.took, r.rec.Hedges, r.rec.HedgeWon)
		}
		if n := a.count() + b.count(); n != 3 {
			t.Errorf("%d upstream calls, want 3", n)
		}
	})
}
