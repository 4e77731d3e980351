package fleet

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/resilience"
)

// SharedState carries what the replicas of one mesh learn about their
// upstreams between them, and holds the global retry and hedge budgets they
// lease tokens from. Package store/redis implements it.
//
// The engine never waits for it on a call's path: Publish must not block
// or do I/O on the caller's goroutine, Lease is called by the engine's
// lease goroutine only, and other replicas' observations arrive on the
// implementation's goroutines through the apply func given to Start. When
// the shared store cannot be reached, Lease fails and the engine falls back
// to budgets of its own at once; routing never depended on it.
type SharedState interface {
	// Start begins delivering other replicas' observations to apply
	// (never this replica's own), first the state the fleet holds now (a
	// replica joining late converges to it), and again after every
	// reconnection, when it also publishes current(): what this replica
	// knows now, which the others may have missed meanwhile. The engine
	// calls it once, at the end of New.
	Start(apply func(Observation), current func() []Observation)
	// Publish hands an observation of this replica to the others. It
	// never blocks: an observation that cannot be queued is dropped
	// (current() republishes the state after a reconnection).
	Publish(Observation)
	// Lease deposits each budget's requests into its global bucket and
	// takes up to Want tokens from it, filling Granted, all in one round
	// trip. An error means no lease was changed.
	Lease(ctx context.Context, leases []Lease) error
}

// Observation is an endpoint state change one replica saw, for the others.
type Observation struct {
	// Endpoint is the endpoint's ID (model/region/provider).
	Endpoint string
	Kind     ObservationKind
	// Until ends an ejection, a cooldown or an open breaker.
	Until time.Time
	// Headroom is the rate-limit headroom (ObsHeadroom).
	Headroom float64
	// P50 and P95 summarise this replica's latency histogram (ObsLatency).
	P50, P95 time.Duration
}

// ObservationKind says what an Observation reports.
type ObservationKind string

// Observation kinds.
const (
	// ObsDown: the endpoint could not be reached (connection refused or
	// reset before a response); each replica then probes it itself.
	ObsDown ObservationKind = "down"
	// ObsUp: a probe reached an endpoint that was down.
	ObsUp ObservationKind = "up"
	// ObsEjected: outlier ejection until Until.
	ObsEjected ObservationKind = "ejected"
	// ObsCooling: a retry-after from the provider, in force until Until.
	ObsCooling ObservationKind = "cooling"
	// ObsBreakerOpen: the circuit breaker opened until Until (each replica
	// then turns half-open at Until and probes).
	ObsBreakerOpen ObservationKind = "breaker_open"
	// ObsBreakerClosed: the breaker closed after successful probes.
	ObsBreakerClosed ObservationKind = "breaker_closed"
	// ObsHeadroom: the provider's rate-limit headers moved the headroom.
	ObsHeadroom ObservationKind = "headroom"
	// ObsLatency: this replica's latency summary (for visibility: other
	// replicas do not route on it, each measures its own path).
	ObsLatency ObservationKind = "latency"
)

// Lease is one budget's exchange with its global bucket (milli-tokens, as
// integers, so the store's arithmetic is exact).
type Lease struct {
	// Key names the bucket: "retry/ROUTE" or "hedge/ROUTE".
	Key string
	// Deposit is what the replica's requests since the last lease put in;
	// Want what it asks for; Burst the bucket's capacity (and its content
	// when it does not exist yet).
	Deposit, Want, Burst int64
	// Granted is what the store took from the bucket for the replica.
	Granted int64
}

// Shared-state timing.
const (
	// leaseInterval is how often budgets settle with their global bucket:
	// the requests counted are deposited and the lease topped up.
	leaseInterval = 50 * time.Millisecond
	// minLeaseGap spaces the extra rounds a dry lease asks for.
	minLeaseGap = 10 * time.Millisecond
	// leaseTimeout bounds one lease round trip.
	leaseTimeout = 500 * time.Millisecond
	// summaryInterval is how often latency summaries are published.
	summaryInterval = 5 * time.Second
	// headroomStep is the change of rate-limit headroom worth publishing.
	headroomStep = 0.05
)

// sharedEP is what an endpoint knows of the fleet's view, so that only
// news is published and an applied observation is not published back.
type sharedEP struct {
	ejected, cooling, open atomic.Int64 // unix ns of the latest until known
	headroom               atomic.Uint64
	// remoteClose is set while a remote breaker close is applied.
	remoteClose atomic.Bool
}

// storeMaxTime raises v to t (unix ns) and reports whether it rose.
func storeMaxTime(v *atomic.Int64, t time.Time) bool {
	if t.IsZero() {
		return false // UnixNano of the zero time is undefined
	}
	n := t.UnixNano()
	for {
		old := v.Load()
		if n <= old {
			return false
		}
		if v.CompareAndSwap(old, n) {
			return true
		}
	}
}

// shareView publishes what v, just published locally, shows that the fleet
// does not know yet: a longer ejection, cooldown or open interval, or a
// headroom moved by more than headroomStep. It runs after every outcome
// (a few atomic loads when nothing changed).
func (ep *Endpoint) shareView(v *View) {
	s := ep.shared
	if storeMaxTime(&ep.sh.ejected, v.EjectedUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsEjected, Until: v.EjectedUntil})
	}
	if storeMaxTime(&ep.sh.cooling, v.CoolingUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsCooling, Until: v.CoolingUntil})
	}
	if v.BreakerOpen && storeMaxTime(&ep.sh.open, v.OpenUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: v.OpenUntil})
	}
	h := ep.Health.Headroom()
	if old := math.Float64frombits(ep.sh.headroom.Load()); math.Abs(h-old) >= headroomStep {
		ep.sh.headroom.Store(math.Float64bits(h))
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsHeadroom, Headroom: h})
	}
}

// Apply applies another replica's observation o of ep (but ObsDown, which
// the engine's prober takes) and reports whether ep came back (ObsUp).
func (ep *Endpoint) Apply(o Observation) (up bool) {
	switch o.Kind {
	case ObsUp:
		if !ep.MarkUp() {
			break
		}
		ep.Health.Restore()
		up = true
	case ObsEjected:
		storeMaxTime(&ep.sh.ejected, o.Until)
		ep.Health.Eject(o.Until)
	case ObsCooling:
		storeMaxTime(&ep.sh.cooling, o.Until)
		ep.Health.Cooldown(o.Until)
	case ObsBreakerOpen:
		storeMaxTime(&ep.sh.open, o.Until)
		ep.Breaker.Trip(o.Until)
	case ObsBreakerClosed:
		ep.sh.remoteClose.Store(true)
		ep.Breaker.Reset()
		ep.sh.remoteClose.Store(false)
	case ObsHeadroom:
		ep.sh.headroom.Store(math.Float64bits(o.Headroom))
		ep.Health.SetHeadroom(o.Headroom)
	default:
		return false
	}
	ep.Publish()
	return up
}

// Current is the state of eps worth republishing after the shared store
// comes back: endpoints down, and ejections, cooldowns and open breakers
// still in force at now.
func Current(eps []*Endpoint, now time.Time) []Observation {
	var out []Observation
	for _, ep := range eps {
		v := ep.View()
		if v.Down {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsDown})
		}
		if v.EjectedUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsEjected, Until: v.EjectedUntil})
		}
		if v.CoolingUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsCooling, Until: v.CoolingUntil})
		}
		if v.BreakerOpen && v.OpenUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: v.OpenUntil})
		}
	}
	return out
}

// Budget is a route's retry or hedge budget with its bucket's key
// ("retry/ROUTE" or "hedge/ROUTE").
type Budget struct {
	Key string
	B   *resilience.Budget
}

// leaseTarget is how many tokens a replica keeps leased: what its requests
// since the last round earn over two such rounds, at least one token, at
// most the burst (what its bucket holds).
func leaseTarget(b *resilience.Budget, requests int64) float64 {
	t := math.Ceil(2 * b.Ratio() * float64(requests))
	return min(max(t, 1), b.Burst())
}

// Leases settles budgets with their global buckets and publishes latency
// summaries (RunLeases).
type Leases struct {
	Shared SharedState
	// Budgets lists every route's budgets (routes may be added while it
	// runs); Endpoints every endpoint.
	Budgets   func() []Budget
	Endpoints func() []*Endpoint
	Now       func() time.Time
	// Stop ends the loop; Kick asks for a round before the next tick (a
	// budget's lease ran dry).
	Stop <-chan struct{}
	Kick <-chan struct{}
}

// Run settles the budgets with their global buckets every leaseInterval
// (a lease failing turns every budget back into a bucket of its own until
// one succeeds again) and publishes latency summaries every
// summaryInterval, until Stop is closed.
func (l *Leases) Run() {
	t := time.NewTicker(leaseInterval)
	defer t.Stop()
	lastSummary := l.Now()
	var r round
	for {
		r.settle(l.Shared, l.Budgets())
		if now := l.Now(); now.Sub(lastSummary) >= summaryInterval {
			lastSummary = now
			l.summarise()
		}
		if !l.wait(t) {
			return
		}
	}
}

// round is one lease round's buffers, reused.
type round struct {
	reqs   []int64
	leases []Lease
	list   []Budget
}

// settle runs one lease round over list.
func (r *round) settle(shared SharedState, list []Budget) {
	r.leases, r.reqs, r.list = r.leases[:0], r.reqs[:0], r.list[:0]
	for _, sb := range list {
		n := sb.B.TakeRequests()
		want := max(leaseTarget(sb.B, n)-sb.B.Available(), 0)
		if !sb.B.Shared() {
			want = 0 // a bucket of its own: only see whether the store answers
		} else if n == 0 && milli(want) == 0 {
			continue // nothing to settle: no round trip
		}
		r.list = append(r.list, sb)
		r.reqs = append(r.reqs, n)
		r.leases = append(r.leases, Lease{Key: sb.Key, Deposit: n * milli(sb.B.Ratio()), Want: milli(want), Burst: milli(sb.B.Burst())})
	}
	if len(r.leases) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
	err := shared.Lease(ctx, r.leases)
	cancel()
	for i, sb := range r.list {
		if err != nil {
			sb.B.Return(r.reqs[i])
			sb.B.Share(false, 0)
			continue
		}
		sb.B.Share(true, leaseTarget(sb.B, r.reqs[i]))
		sb.B.Grant(float64(r.leases[i].Granted) / 1000)
	}
}

// summarise publishes every endpoint's latency summary.
func (l *Leases) summarise() {
	for _, ep := range l.Endpoints() {
		if s := ep.Health.Snapshot(); s.Requests > 0 {
			l.Shared.Publish(Observation{Endpoint: ep.ID, Kind: ObsLatency, P50: s.P50, P95: s.P95})
		}
	}
}

// wait waits for the next round: the tick, or a kick but not sooner than
// minLeaseGap after the last round (a storm would otherwise cost a round
// trip per refused retry); false when Stop closed.
func (l *Leases) wait(t *time.Ticker) bool {
	last := l.Now()
	select {
	case <-l.Stop:
		return false
	case <-t.C:
	case <-l.Kick:
		if d := minLeaseGap - l.Now().Sub(last); d > 0 {
			w := time.NewTimer(d)
			defer w.Stop()
			select {
			case <-l.Stop:
				return false
			case <-w.C:
			}
		}
	}
	return true
}

func milli(tokens float64) int64 { return int64(math.Round(tokens * 1000)) }

// Sharing joins a replica to the fleet's shared state: it applies the
// other replicas' observations, gives the store this replica's state to
// republish after a reconnection, and runs the lease loop. Its fields are
// set once, before Start.
type Sharing struct {
	Shared SharedState
	// ByID finds an endpoint by ID, All lists every one, Budgets every
	// route's budgets (routes may be added while it runs).
	ByID    func(id string) *Endpoint
	All     func() []*Endpoint
	Budgets func() []Budget
	// Prober takes an endpoint another replica saw down out of rotation.
	Prober func() *Prober
	Log    *slog.Logger
	Now    func() time.Time
	// Stop ends the lease loop; Closed reports the engine closing (an
	// observation is then ignored).
	Stop   <-chan struct{}
	Closed func() bool

	kickOnce sync.Once
	kick     chan struct{}
}

// Start starts the store's delivery and the lease loop, counted by wg.
func (s *Sharing) Start(wg *sync.WaitGroup) {
	s.Shared.Start(s.apply, func() []Observation { return Current(s.All(), s.Now()) })
	wg.Add(1)
	go func() {
		defer wg.Done()
		l := Leases{Shared: s.Shared, Budgets: s.Budgets, Endpoints: s.All, Now: s.Now, Stop: s.Stop, Kick: s.kicks()}
		l.Run()
	}()
}

// NewBudgets returns a route's retry and hedge budgets (rc, hc): its own or,
// when the replicas share state, leases of the fleet's buckets from the
// start, holding one token each until the first lease (as a lease would:
// full buckets of their own would add a burst per replica to the
// fleet's), each kicking the lease loop when it runs empty.
func (s *Sharing) NewBudgets(rc, hc resilience.BudgetConfig) (retries, hedges *resilience.Budget, err error) {
	if s.Shared != nil {
		rc.OnEmpty, hc.OnEmpty = s.Kick, s.Kick
	}
	if retries, err = resilience.NewBudget(rc); err != nil {
		return nil, nil, fmt.Errorf("retry budget: %w", err)
	}
	if hedges, err = resilience.NewHedgeBudget(hc); err != nil {
		return nil, nil, fmt.Errorf("hedge budget: %w", err)
	}
	if s.Shared != nil {
		retries.Share(true, 1)
		hedges.Share(true, 1)
	}
	return retries, hedges, nil
}

// Kick asks for a lease round now (a shared budget refused a withdrawal);
// it never blocks.
func (s *Sharing) Kick() {
	select {
	case s.kicks() <- struct{}{}:
	default:
	}
}

// kicks is the kick channel, made on first use (Kick may be called before
// Start, by a budget's OnEmpty).
func (s *Sharing) kicks() chan struct{} {
	s.kickOnce.Do(func() { s.kick = make(chan struct{}, 1) })
	return s.kick
}

// apply applies another replica's observation. It runs on the shared
// state's goroutine; observations of unknown endpoints (another config, a
// passthrough model not used here yet) are ignored.
func (s *Sharing) apply(o Observation) {
	ep := s.ByID(o.Endpoint)
	if ep == nil || s.Closed() {
		return
	}
	if o.Kind == ObsDown {
		s.Prober().SetDown(ep, false)
		ep.Publish()
		return
	}
	if ep.Apply(o) {
		s.Log.Info("endpoint reachable again (seen by another replica)", "endpoint", ep.ID)
	}
}
