package engine

import (
	"net/http"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/observe"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
)

// recorder keeps every event it is given.
type recorder struct {
	mu       sync.Mutex // guards following
	attempts []AttemptEvent
	hedges   []HedgeEvent
	breakers []observe.BreakerEvent
	valves   []observe.ValveEvent
}

func (r *recorder) counts() [4]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return [4]int{len(r.attempts), len(r.hedges), len(r.breakers), len(r.valves)}
}

func (r *recorder) add(f func()) {
	r.mu.Lock()
	f()
	r.mu.Unlock()
}

// allEvents implements Observer and every optional interface.
type allEvents struct{ r *recorder }

func (allEvents) RequestDone(*Record) {}
func (o allEvents) OnAttempt(ev AttemptEvent) {
	o.r.add(func() { o.r.attempts = append(o.r.attempts, ev) })
}
func (o allEvents) OnHedge(ev HedgeEvent) { o.r.add(func() { o.r.hedges = append(o.r.hedges, ev) }) }
func (o allEvents) OnBreakerState(ev observe.BreakerEvent) {
	o.r.add(func() { o.r.breakers = append(o.r.breakers, ev) })
}
func (o allEvents) OnValve(ev observe.ValveEvent) {
	o.r.add(func() { o.r.valves = append(o.r.valves, ev) })
}
func (o valveOnly) OnValve(ev observe.ValveEvent) {
	o.r.add(func() { o.r.valves = append(o.r.valves, ev) })
}
func (o attemptBreaker) OnAttempt(ev AttemptEvent) {
	o.r.add(func() { o.r.attempts = append(o.r.attempts, ev) })
}
func (o attemptBreaker) OnBreakerState(ev observe.BreakerEvent) {
	o.r.add(func() { o.r.breakers = append(o.r.breakers, ev) })
}

// valveOnly and attemptBreaker implement some of the optional interfaces.
type valveOnly struct {
	callrec.ObserverFunc
	r *recorder
}

type attemptBreaker struct {
	callrec.ObserverFunc
	r *recorder
}

func emitAll(ev *events) {
	ev.attempt(AttemptEvent{RequestID: "r1", Endpoint: "a/us/p", Kind: "primary", Outcome: "ok", Status: 200})
	ev.hedge(HedgeEvent{RequestID: "r1", Endpoint: "a/us/p", HedgeEndpoint: "a/eu/p", Delay: time.Second})
	ev.breaker(observe.BreakerEvent{Endpoint: "a/us/p", From: resilience.Closed, To: resilience.Open})
	ev.valve(observe.ValveEvent{Event: observe.ValveEventOpen})
}

// TestEventsOptionalInterfaces checks that each optional interface is found
// when the observer has it and skipped when it does not, and that an
// observer with RequestDone alone (or none at all) is safe.
func TestEventsOptionalInterfaces(t *testing.T) {
	r := &recorder{}
	tests := []struct {
		name string
		obs  Observer
		want [4]int // attempts, hedges, breakers, valves received
	}{
		{"no observer", nil, [4]int{}},
		{"RequestDone only", callrec.ObserverFunc(func(*Record) {}), [4]int{}},
		{"valve only", valveOnly{r: r}, [4]int{0, 0, 0, 1}},
		{"attempt and breaker", attemptBreaker{r: r}, [4]int{1, 0, 1, 0}},
		{"all", allEvents{r}, [4]int{1, 1, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.add(func() { r.attempts, r.hedges, r.breakers, r.valves = nil, nil, nil, nil })
			ev := newEvents(tt.obs)
			emitAll(&ev)
			if got := r.counts(); got != tt.want {
				t.Errorf("events received (-got +want):\n-%v\n+%v", got, tt.want)
			}
		})
	}
	var zero events // an Engine built without New's help
	emitAll(&zero)
}

// TestEventsAllocateNothing: emitting costs no allocation, with or without
// a listener (events are passed by value).
func TestEventsAllocateNothing(t *testing.T) {
	r := &recorder{
		attempts: make([]AttemptEvent, 0, 1000), hedges: make([]HedgeEvent, 0, 1000),
		breakers: make([]observe.BreakerEvent, 0, 1000), valves: make([]observe.ValveEvent, 0, 1000),
	}
	for _, obs := range []Observer{nil, callrec.ObserverFunc(func(*Record) {}), allEvents{r}} {
		ev := newEvents(obs)
		if n := testing.AllocsPerRun(100, func() { emitAll(&ev) }); n != 0 {
			t.Errorf("observer %T: %v allocations per emission, want 0", obs, n)
		}
	}
}

// valveEngine builds an Engine with no endpoints, its safety valve as
// configured, obs as its observer and *now as its clock.
func valveEngine(t *testing.T, cfg resilience.ValveConfig, obs Observer, now *time.Time) *Engine {
	t.Helper()
	st, err := chain.Build(chain.Config{Valve: cfg})
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEngine(Options{Client: provider.NewClient(http.DefaultTransport), Observer: obs,
		Now: func() time.Time { return *now }, Stages: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// countCall feeds one finished call to the valve the way finish does.
func countCall(e *Engine, fallback bool) {
	e.countValve(&Record{Call: callrec.Call{Start: e.now()}, Route: callrec.Route{Downgraded: fallback}})
}

// TestValveEmitsEvents: the valve reports its opening (with the rate, the
// window's calls and the end of its hold) and its closing as ValveEvents,
// once each.
func TestValveEmitsEvents(t *testing.T) {
	t0 := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	now := t0
	r := &recorder{}
	e := valveEngine(t, resilience.ValveConfig{Threshold: 0.5, Window: 10 * time.Second, MinRequests: 4, Hold: 30 * time.Second}, allEvents{r}, &now)

	countCall(e, false)
	for range 3 {
		countCall(e, true)
	}
	// 3 fallbacks in 4 calls: 0.75 > 0.5 with MinRequests seen.
	want := []observe.ValveEvent{{Event: observe.ValveEventOpen, FallbackRate: 0.75, Requests: 4, Threshold: 0.5, OpenUntil: t0.Add(30 * time.Second), Time: t0}}
	if !reflect.DeepEqual(utc(r.valves), want) {
		t.Fatalf("valve events after tripping (-got +want):\n-%+v\n+%+v", r.valves, want)
	}
	if !e.Valve().Open {
		t.Fatal("valve not open after the event")
	}
	// Still open: nothing more to report.
	now = t0.Add(29 * time.Second)
	countCall(e, true)
	if len(r.valves) != 1 {
		t.Fatalf("%d valve events while open, want 1", len(r.valves))
	}
	// The hold ends; the next call counted closes the valve.
	now = t0.Add(30 * time.Second)
	countCall(e, false)
	want = append(want, observe.ValveEvent{Event: observe.ValveEventClosed, FallbackRate: 0.5, Requests: 2, Threshold: 0.5, Time: now})
	if !reflect.DeepEqual(utc(r.valves), want) {
		t.Errorf("valve events after the hold (-got +want):\n-%+v\n+%+v", r.valves, want)
	}
	if n := r.counts(); n != [4]int{0, 0, 0, 2} {
		t.Errorf("events received %v, want only the two valve events", n)
	}
}

// utc returns evs with their times in UTC, for comparing.
func utc(evs []observe.ValveEvent) []observe.ValveEvent {
	out := make([]observe.ValveEvent, len(evs))
	for i, ev := range evs {
		out[i] = ev
		out[i].Time = ev.Time.UTC()
		if !ev.OpenUntil.IsZero() {
			out[i].OpenUntil = ev.OpenUntil.UTC()
		}
	}
	return out
}

// TestValveWithoutValveObserver: a trip with an observer that has
// RequestDone alone, or none, opens the valve and reports nothing.
func TestValveWithoutValveObserver(t *testing.T) {
	for _, obs := range []Observer{nil, callrec.ObserverFunc(func(*Record) {})} {
		now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
		e := valveEngine(t, resilience.ValveConfig{MinRequests: 2, Hold: time.Minute}, obs, &now)
		countCall(e, true)
		countCall(e, true)
		if !e.Valve().Open {
			t.Errorf("observer %T: valve not open", obs)
		}
	}
}

// TestBreakerTransitionsAreEvents: an endpoint's breaker reports each state
// change to a observe.BreakerObserver, with the endpoint and the virtual time.
func TestBreakerTransitionsAreEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &scripted{id: "up", format: llm.FormatAnthropic, script: always(anthropicError(500, "api_error", ""))}
		h := newHarness(t, up)
		r := &recorder{}
		e := h.engine(Options{Observer: allEvents{r},
			Resilience: Resilience{MaxAttempts: 1, Breaker: resilience.BreakerConfig{ConsecutiveFailures: 2, OpenFor: time.Minute}}},
			h.endpoints("m", "up")...)
		t0 := time.Now()
		for range 3 {
			call(t, e, ask(llm.FormatAnthropic, "m", false))
		}
		time.Sleep(time.Minute) // the open interval ends
		call(t, e, ask(llm.FormatAnthropic, "m", false))
		const id = "m/up/p"
		want := []observe.BreakerEvent{
			{Endpoint: id, From: resilience.Closed, To: resilience.Open, Time: t0},
			{Endpoint: id, From: resilience.Open, To: resilience.HalfOpen, Time: t0.Add(time.Minute)},
			{Endpoint: id, From: resilience.HalfOpen, To: resilience.Open, Time: t0.Add(time.Minute)},
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if !reflect.DeepEqual(r.breakers, want) {
			t.Errorf("breaker events (-got +want):\n-%+v\n+%+v", r.breakers, want)
		}
	})
}
