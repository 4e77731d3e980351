package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
)

// TestViewUnavailableAndState: the picker's reason an endpoint is skipped
// and the state the endpoint list shows, from one view, in the order they
// apply.
func TestViewUnavailableAndState(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Second), now.Add(-time.Second)
	cases := []struct {
		name  string
		v     View
		why   Unavailability
		until time.Time
		state string
	}{
		{name: "healthy", v: View{}, why: Available, state: StateHealthy},
		{name: "down wins", v: View{Down: true, BreakerOpen: true, OpenUntil: later, CoolingUntil: later}, why: Unreachable, state: StateDown},
		{name: "breaker open", v: View{BreakerOpen: true, OpenUntil: later, CoolingUntil: later}, why: BreakerOpen, until: later, state: StateBreakerOpen},
		{name: "open interval over", v: View{BreakerOpen: true, OpenUntil: earlier}, why: Available, state: StateHalfOpen},
		{name: "half open", v: View{HalfOpen: true}, why: Available, state: StateHalfOpen},
		{name: "cooling", v: View{CoolingUntil: later, EjectedUntil: later.Add(time.Second)}, why: Cooling, until: later, state: StateCooling},
		{name: "ejected", v: View{EjectedUntil: later}, why: Ejected, until: later, state: StateEjected},
		{name: "cooldown over", v: View{CoolingUntil: earlier}, why: Available, state: StateHealthy},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			why, until := tc.v.Unavailable(now)
			if why != tc.why || !until.Equal(tc.until) || tc.v.State(now) != tc.state {
				t.Errorf("got %q until %v, state %q; want %q until %v, state %q", why, until, tc.v.State(now), tc.why, tc.until, tc.state)
			}
		})
	}
}

// board is a SharedState that keeps what is published and answers leases
// from one map of buckets (milli-tokens); down fails every lease.
type board struct {
	mu        sync.Mutex
	published []Observation
	buckets   map[string]int64
	down      bool
}

func (b *board) Start(func(Observation), func() []Observation) {}
func (b *board) Publish(o Observation) {
	b.mu.Lock()
	b.published = append(b.published, o)
	b.mu.Unlock()
}
func (b *board) Lease(_ context.Context, ls []Lease) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return errors.New("store unreachable")
	}
	for i := range ls {
		l := &ls[i]
		have, ok := b.buckets[l.Key]
		if !ok {
			have = l.Burst
		}
		have = min(have+l.Deposit, l.Burst)
		l.Granted = min(have, l.Want)
		b.buckets[l.Key] = have - l.Granted
	}
	return nil
}

func (b *board) kinds() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var s []string
	for _, o := range b.published {
		s = append(s, string(o.Kind))
	}
	return fmt.Sprint(s)
}

func newEndpoint(t *testing.T, s SharedState, onBreaker func(*Endpoint, resilience.State, resilience.State)) *Endpoint {
	t.Helper()
	ep, err := New(&provider.Endpoint{ID: "m/r/p", Model: "m"}, Config{Shared: s, OnBreaker: onBreaker})
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

// TestSharingPublishesOnlyNews: a local cooldown or outage is published
// once; an observation applied from another replica is not published back.
func TestSharingPublishesOnlyNews(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{}
		ep := newEndpoint(t, b, nil)
		until := time.Now().Add(time.Second)
		ep.Health.Cooldown(until)
		ep.Publish()
		ep.Publish()
		if got := b.kinds(); got != "[cooling]" {
			t.Errorf("a local cooldown published %s, want [cooling] once", got)
		}
		if why, u := ep.View().Unavailable(time.Now()); why != Cooling || !u.Equal(until) {
			t.Errorf("view %v until %v, want cooling until %v", why, u, until)
		}
		// Another replica's longer ejection and an open breaker: applied,
		// never published back.
		if ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsEjected, Until: until.Add(time.Second)}) {
			t.Error("an ejection reported the endpoint up")
		}
		ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: until.Add(2 * time.Second)})
		if got := b.kinds(); got != "[cooling]" {
			t.Errorf("applied observations were published back: %s", got)
		}
		if why, _ := ep.View().Unavailable(time.Now()); why != BreakerOpen {
			t.Errorf("after a remote breaker trip the view says %v, want %v", why, BreakerOpen)
		}
		if ep.Apply(Observation{Endpoint: ep.ID, Kind: "unknown"}) {
			t.Error("an unknown observation reported the endpoint up")
		}
	})
}

func TestDownAndUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{buckets: map[string]int64{}}
		ep := newEndpoint(t, b, nil)
		if !ep.MarkDown() || ep.MarkDown() || !ep.Down() || ep.View().State(time.Now()) != StateDown {
			t.Fatal("MarkDown did not take the endpoint down once")
		}
		if got := fmt.Sprint(Current([]*Endpoint{ep}, time.Now())); got != "[{m/r/p down 0001-01-01 00:00:00 +0000 UTC 0 0s 0s}]" {
			t.Errorf("Current = %s, want the endpoint down", got)
		}
		if !ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsUp}) || ep.Down() || ep.View().State(time.Now()) != StateHealthy {
			t.Error("an ObsUp did not bring the endpoint back")
		}
		if ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsUp}) {
			t.Error("an ObsUp of an endpoint that is up reported it up again")
		}
	})
}

// TestBreakerCloseIsSharedUnlessRemote: a breaker closing here is
// published; one closed by another replica's observation is not.
func TestBreakerCloseIsSharedUnlessRemote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{}
		var seen []string
		ep := newEndpoint(t, b, func(_ *Endpoint, from, to resilience.State) { seen = append(seen, from.String()+"→"+to.String()) })
		ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: time.Now().Add(time.Second)})
		ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsBreakerClosed})
		if got := b.kinds(); got != "[]" {
			t.Errorf("remote transitions published %s, want none", got)
		}
		ep.Breaker.Trip(time.Now().Add(2 * time.Second)) // longer than the remote one: news
		ep.Breaker.Reset()
		if got := b.kinds(); got != "[breaker_open breaker_closed]" {
			t.Errorf("local transitions published %s, want [breaker_open breaker_closed]", got)
		}
		if len(seen) != 4 {
			t.Errorf("transitions reported %v, want 4", seen)
		}
	})
}

// TestLeaseRound: a shared budget deposits its requests and is granted
// what it wants from the global bucket; a failed lease turns it back into
// a bucket of its own.
func TestLeaseRound(t *testing.T) {
	bud, err := resilience.NewBudget(resilience.BudgetConfig{Ratio: 0.5, Burst: 10})
	if err != nil {
		t.Fatal(err)
	}
	bud.Share(true, 1)
	for range 4 {
		bud.OnRequest()
	}
	b := &board{buckets: map[string]int64{}}
	var r round
	r.settle(b, []Budget{{Key: "retry/m", B: bud}})
	// 4 requests at 0.5 earn 2 tokens; over two rounds 4 are kept leased.
	if got := bud.Available(); got != 4 {
		t.Errorf("after a round the budget holds %v tokens, want 4", got)
	}
	if got := b.buckets["retry/m"]; got != 10_000-3_000 {
		t.Errorf("the global bucket holds %d milli-tokens, want 7000 (10 less the 3 granted)", got)
	}
	b.down = true
	bud.OnRequest()
	r.settle(b, []Budget{{Key: "retry/m", B: bud}})
	if bud.Shared() {
		t.Error("a failed lease left the budget shared")
	}
}

// starter is a board that keeps the funcs Start was given.
type starter struct {
	board
	apply   func(Observation)
	current func() []Observation
}

func (s *starter) Start(apply func(Observation), current func() []Observation) {
	s.apply, s.current = apply, current
}

// TestSharingAppliesOthersObservations: Kick never blocks, even before
// Start; another replica's outage takes the endpoint down without
// publishing it back and its return brings it up; an unknown endpoint is
// ignored, and so is everything once the engine closes; the store gets
// this replica's state to republish; the lease loop ends with Stop.
func TestSharingAppliesOthersObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &starter{}
		ep := newEndpoint(t, &st.board, nil)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		closed := false
		s := &Sharing{Shared: st, Now: time.Now, Stop: stop, Log: slog.New(slog.DiscardHandler),
			ByID: func(id string) *Endpoint {
				if id == ep.ID {
					return ep
				}
				return nil
			},
			All:     func() []*Endpoint { return []*Endpoint{ep} },
			Budgets: func() []Budget { return nil },
			Closed:  func() bool { return closed },
			Prober: func() *Prober {
				return &Prober{Probe: func(context.Context, *provider.Endpoint) error { return errors.New("refused") },
					Shared: st, Log: slog.New(slog.DiscardHandler), Stop: stop, WG: &wg, Closed: func() bool { return closed }}
			},
		}
		s.Kick()
		s.Kick()
		s.Start(&wg)
		st.apply(Observation{Endpoint: "other", Kind: ObsDown})
		st.apply(Observation{Endpoint: ep.ID, Kind: ObsDown})
		if !ep.Down() {
			t.Fatal("another replica's outage did not take the endpoint down")
		}
		if got := b2s(st.current()); got != "[down]" {
			t.Errorf("current() = %s, want [down]", got)
		}
		st.apply(Observation{Endpoint: ep.ID, Kind: ObsUp})
		if ep.Down() {
			t.Error("another replica's ObsUp did not bring the endpoint back")
		}
		closed = true
		st.apply(Observation{Endpoint: ep.ID, Kind: ObsDown})
		if ep.Down() {
			t.Error("an observation was applied after the engine closed")
		}
		if got := st.kinds(); got != "[]" {
			t.Errorf("remote observations were published back: %s", got)
		}
		close(stop)
		wg.Wait()
	})
}

func b2s(obs []Observation) string {
	var s []string
	for _, o := range obs {
		s = append(s, string(o.Kind))
	}
	return fmt.Sprint(s)
}

// NewBudgets: a route's own budgets are full buckets; shared ones start as
// leases holding one token each, and a shared budget that runs empty
// kicks the lease loop; a bad config names the budget.
func TestNewBudgets(t *testing.T) {
	var local Sharing
	r, h, err := local.NewBudgets(resilience.BudgetConfig{}, resilience.BudgetConfig{Burst: 3})
	if err != nil {
		t.Fatal(err)
	}
	if r.Shared() || h.Shared() || r.Available() != 10 || h.Available() != 3 || h.Ratio() != resilience.DefaultHedgeRatio {
		t.Errorf("local budgets: shared %t/%t, available %v/%v, hedge ratio %v; want own full buckets (10, 3) and the hedge default ratio",
			r.Shared(), h.Shared(), r.Available(), h.Available(), h.Ratio())
	}
	shared := Sharing{Shared: &board{}}
	r, h, err = shared.NewBudgets(resilience.BudgetConfig{}, resilience.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if !r.Shared() || !h.Shared() || r.Available() != 1 || h.Available() != 1 {
		t.Errorf("shared budgets: shared %t/%t, available %v/%v; want leases holding one token each", r.Shared(), h.Shared(), r.Available(), h.Available())
	}
	if !r.TryWithdraw() || r.TryWithdraw() {
		t.Fatal("a shared budget holding one token did not give exactly one")
	}
	select {
	case <-shared.kicks():
	default:
		t.Error("an empty shared budget did not kick the lease loop")
	}
	if _, _, err := local.NewBudgets(resilience.BudgetConfig{}, resilience.BudgetConfig{Ratio: -1}); !errors.Is(err, resilience.ErrInvalidConfig) || !strings.Contains(err.Error(), "hedge budget") {
		t.Errorf("bad hedge budget: %v", err)
	}
}
