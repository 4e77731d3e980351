package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/fleet"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/resilience"
)

// bus is an in-memory SharedState linking the engines of one test, as
// Redis links replicas: an observation reaches every other engine at once
// (on the publisher's goroutine), and leases share one map of buckets.
// down makes every lease fail, as an unreachable store does.
type bus struct {
	mu      sync.Mutex
	members []*member
	buckets map[string]int64
	down    bool
	leases  int
}

type member struct {
	b     *bus
	apply func(fleet.Observation)
	mu    sync.Mutex
	sent  []fleet.Observation
}

func (b *bus) join() *member {
	m := &member{b: b}
	b.mu.Lock()
	b.members = append(b.members, m)
	b.mu.Unlock()
	return m
}

func (m *member) Start(apply func(fleet.Observation), _ func() []fleet.Observation) {
	m.b.mu.Lock()
	m.apply = apply
	m.b.mu.Unlock()
}

func (m *member) Publish(o fleet.Observation) {
	m.mu.Lock()
	m.sent = append(m.sent, o)
	m.mu.Unlock()
	m.b.mu.Lock()
	var to []func(fleet.Observation)
	for _, o2 := range m.b.members {
		if o2 != m && o2.apply != nil {
			to = append(to, o2.apply)
		}
	}
	m.b.mu.Unlock()
	for _, apply := range to {
		apply(o)
	}
}

func (m *member) published(kind fleet.ObservationKind) []fleet.Observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []fleet.Observation
	for _, o := range m.sent {
		if o.Kind == kind {
			out = append(out, o)
		}
	}
	return out
}

func (m *member) Lease(_ context.Context, ls []fleet.Lease) error {
	b := m.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return errors.New("store unreachable")
	}
	b.leases++
	if b.buckets == nil {
		b.buckets = map[string]int64{}
	}
	for i, l := range ls {
		cur, ok := b.buckets[l.Key]
		if !ok {
			cur = l.Burst
		}
		cur = min(cur+l.Deposit, l.Burst)
		ls[i].Granted = max(min(cur, l.Want), 0)
		b.buckets[l.Key] = cur - ls[i].Granted
	}
	return nil
}

// ordered is an alias trying a before b, so which endpoint a call reaches
// first does not depend on a random tie-break between cold endpoints.
var ordered = map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}}

// endpointState returns e's view of endpoint id.
func endpointState(e *Engine, id string) string {
	for _, s := range e.Endpoints() {
		if s.ID == id {
			return s.State
		}
	}
	return "missing"
}

// A retry-after one engine sees keeps the other engine off the endpoint
// for exactly that long, without a call of its own reaching it.
func TestSharedCooldown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(n int, _ map[string]any) reply {
			if n == 0 {
				return anthropicError(429, "rate_limit_error", "1")
			}
			return anthropicJSON("a")
		}}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
			r := anthropicJSON("b")
			r.delay = 50 * time.Millisecond // slower: a is preferred when it may be used
			return r
		}}
		h := newHarness(t, a, b)
		var sb bus
		one := h.engine(Options{Shared: sb.join(), Aliases: ordered, Resilience: Resilience{DisableHedging: true}}, h.endpoints("m", "a", "b")...)
		two := h.engine(Options{Shared: sb.join(), Aliases: ordered, Resilience: Resilience{DisableHedging: true}}, h.endpoints("m", "a", "b")...)
		if r := call(t, one, ask(llm.FormatAnthropic, "al", false)); r.err != nil || r.text != "b" {
			t.Fatalf("first call: %+v", r)
		}
		seen := time.Now()
		if got := endpointState(two, "m/a/p"); got != fleet.StateCooling {
			t.Fatalf("the other engine sees a as %q, want %q", got, fleet.StateCooling)
		}
		for time.Since(seen) < time.Second-60*time.Millisecond {
			if r := call(t, two, ask(llm.FormatAnthropic, "al", false)); r.err != nil || r.text != "b" {
				t.Fatalf("call %v after the 429: %+v, want b's answer", time.Since(seen), r)
			}
		}
		if n := a.count(); n != 1 {
			t.Errorf("a received %d calls inside its retry-after, want only the one answered 429", n)
		}
		time.Sleep(time.Until(seen.Add(time.Second)))
		if r := call(t, two, ask(llm.FormatAnthropic, "al", false)); r.text != "a" {
			t.Errorf("after the second the other engine got %q, want a's answer", r.text)
		}
	})
}

// An endpoint one engine finds unreachable is down for the other at once;
// that one probes it itself and brings it back when it answers.
func TestSharedDownAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		up := true
		isUp := func() bool { mu.Lock(); defer mu.Unlock(); return up }
		a := &scripted{id: "a", format: llm.FormatAnthropic, up: isUp, script: always(anthropicJSON("a"))}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
			r := anthropicJSON("b")
			r.delay = 50 * time.Millisecond
			return r
		}}
		h := newHarness(t, a, b)
		var sb bus
		m1, m2 := sb.join(), sb.join()
		one := h.engine(Options{Shared: m1, Aliases: ordered}, h.endpoints("m", "a", "b")...)
		two := h.engine(Options{Shared: m2, Aliases: ordered}, h.endpoints("m", "a", "b")...)
		mu.Lock()
		up = false
		mu.Unlock()
		if r := call(t, one, ask(llm.FormatAnthropic, "al", false)); r.err != nil || r.text != "b" {
			t.Fatalf("call with a down: %+v", r)
		}
		if got := endpointState(two, "m/a/p"); got != fleet.StateDown {
			t.Fatalf("the other engine sees a as %q, want %q", got, fleet.StateDown)
		}
		if n := len(m2.published(fleet.ObsDown)); n != 0 {
			t.Errorf("the engine told of the outage published it back %d times", n)
		}
		before := a.count()
		for range 5 {
			call(t, two, ask(llm.FormatAnthropic, "al", false))
		}
		if a.count() != before {
			t.Errorf("the other engine sent %d calls to the endpoint it was told is down", a.count()-before)
		}
		mu.Lock()
		up = true
		mu.Unlock()
		time.Sleep(100 * time.Millisecond) // two probe intervals
		synctest.Wait()
		for _, e := range []*Engine{one, two} {
			if got := endpointState(e, "m/a/p"); got != fleet.StateHealthy {
				t.Errorf("a is %q after it answers probes again, want healthy", got)
			}
		}
		if n := len(m1.published(fleet.ObsUp)) + len(m2.published(fleet.ObsUp)); n < 1 {
			t.Error("no engine published that a is reachable again")
		}
	})
}

// A breaker one engine opens is open on the other until the same time.
func TestSharedBreakerOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(reply{status: 500, body: `{"type":"error","error":{"type":"api_error","message":"boom"}}`})}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicJSON("b"))}
		h := newHarness(t, a, b)
		var sb bus
		opts := func() Options {
			return Options{Shared: sb.join(), Resilience: Resilience{DisableHedging: true,
				Breaker: resilience.BreakerConfig{ConsecutiveFailures: 2, OpenFor: time.Second}}}
		}
		one := h.engine(opts(), h.endpoints("m", "a")...)
		two := h.engine(opts(), h.endpoints("m", "a")...)
		for range 2 {
			call(t, one, ask(llm.FormatAnthropic, "m", false))
		}
		if got := endpointState(two, "m/a/p"); got != fleet.StateBreakerOpen {
			t.Fatalf("the other engine sees a as %q, want %q", got, fleet.StateBreakerOpen)
		}
		before := a.count()
		if r := call(t, two, ask(llm.FormatAnthropic, "m", false)); r.err == nil || r.err.MeshCode != llm.MeshCircuitOpen {
			t.Errorf("a call on the other engine: %+v, want MESH_CIRCUIT_OPEN", r.err)
		}
		if a.count() != before {
			t.Error("the other engine sent to an endpoint whose breaker it was told is open")
		}
		time.Sleep(time.Second)
		if got := endpointState(two, "m/a/p"); got != fleet.StateHalfOpen {
			t.Errorf("after the open interval the other engine sees a as %q, want %q", got, fleet.StateHalfOpen)
		}
	})
}

// The retry budget is one bucket for both engines: together they retry
// no more than its burst plus one lease each; with the store down each
// falls back to a bucket of its own at once.
func TestSharedRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(reply{status: 500, body: `{"type":"error","error":{"type":"api_error","message":"boom"}}`})}
		h := newHarness(t, a)
		var sb bus
		opts := func() Options {
			return Options{Shared: sb.join(), Resilience: Resilience{DisableHedging: true, MaxAttempts: 2,
				RetryBudget: resilience.BudgetConfig{Ratio: 0.001, Burst: 10},
				Breaker:     resilience.BreakerConfig{ConsecutiveFailures: -1, FailureRate: 1, MinRequests: 1000}}}
		}
		one := h.engine(opts(), h.endpoints("m", "a")...)
		two := h.engine(opts(), h.endpoints("m", "a")...)
		calls := 0
		for range 40 {
			for _, e := range []*Engine{one, two} {
				call(t, e, ask(llm.FormatAnthropic, "m", false))
				calls++
			}
			time.Sleep(10 * time.Millisecond) // leases refresh every 50ms
		}
		retries := a.count() - calls
		if retries > 12 {
			t.Errorf("%d retries across two engines, want ≤ 12 (burst 10 + a lease of 1 each)", retries)
		}
		if retries < 10 {
			t.Errorf("%d retries across two engines: the shared bucket's burst of 10 was not used", retries)
		}
		sb.mu.Lock()
		sb.down = true
		sb.mu.Unlock()
		call(t, one, ask(llm.FormatAnthropic, "m", false))
		call(t, two, ask(llm.FormatAnthropic, "m", false))
		time.Sleep(60 * time.Millisecond) // the next lease fails
		for _, e := range []*Engine{one, two} {
			if rs := e.routes["m"]; rs.retries.Shared() {
				t.Error("a budget is still a lease with the store down")
			}
		}
		t.Logf("%d calls, %d retries across two engines sharing one bucket of burst 10", calls, retries)
	})
}
