package engine

import (
	"context"
	"math"
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
func (e *Engine) shareView(ep *endpoint, v *epView) {
	s := e.shared
	if storeMaxTime(&ep.sh.ejected, v.ejectedUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsEjected, Until: v.ejectedUntil})
	}
	if storeMaxTime(&ep.sh.cooling, v.coolingUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsCooling, Until: v.coolingUntil})
	}
	if v.breakerOpen && storeMaxTime(&ep.sh.open, v.openUntil) {
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: v.openUntil})
	}
	h := ep.health.Headroom()
	if old := math.Float64frombits(ep.sh.headroom.Load()); math.Abs(h-old) >= headroomStep {
		ep.sh.headroom.Store(math.Float64bits(h))
		s.Publish(Observation{Endpoint: ep.ID, Kind: ObsHeadroom, Headroom: h})
	}
}

// endpointByID finds a configured or passthrough endpoint.
func (e *Engine) endpointByID(id string) *endpoint {
	if ep := e.byID[id]; ep != nil {
		return ep
	}
	if p := e.fleet.passEps.Load(); p != nil {
		for _, ep := range *p {
			if ep.ID == id {
				return ep
			}
		}
	}
	return nil
}

// applyShared applies another replica's observation. It runs on the
// shared state's goroutine; observations of unknown endpoints (another
// config, a passthrough model not used here yet) are ignored.
func (e *Engine) applyShared(o Observation) {
	ep := e.endpointByID(o.Endpoint)
	if ep == nil || e.closed.Load() {
		return
	}
	switch o.Kind {
	case ObsDown:
		e.setDown(ep, false)
	case ObsUp:
		if ep.down.CompareAndSwap(true, false) {
			ep.health.Restore()
			e.log.Info("endpoint reachable again (seen by another replica)", "endpoint", ep.ID)
		}
	case ObsEjected:
		storeMaxTime(&ep.sh.ejected, o.Until)
		ep.health.Eject(o.Until)
	case ObsCooling:
		storeMaxTime(&ep.sh.cooling, o.Until)
		ep.health.Cooldown(o.Until)
	case ObsBreakerOpen:
		storeMaxTime(&ep.sh.open, o.Until)
		ep.breaker.Trip(o.Until)
	case ObsBreakerClosed:
		ep.sh.remoteClose.Store(true)
		ep.breaker.Reset()
		ep.sh.remoteClose.Store(false)
	case ObsHeadroom:
		ep.sh.headroom.Store(math.Float64bits(o.Headroom))
		ep.health.SetHeadroom(o.Headroom)
	default:
		return
	}
	ep.publish()
}

// sharedNow is this replica's state worth republishing after the shared
// store comes back: endpoints down, and ejections, cooldowns and open
// breakers still in force.
func (e *Engine) sharedNow() []Observation {
	now := e.now()
	var out []Observation
	for _, ep := range e.fleet.all() {
		v := ep.view.Load()
		if v.down {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsDown})
		}
		if v.ejectedUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsEjected, Until: v.ejectedUntil})
		}
		if v.coolingUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsCooling, Until: v.coolingUntil})
		}
		if v.breakerOpen && v.openUntil.After(now) {
			out = append(out, Observation{Endpoint: ep.ID, Kind: ObsBreakerOpen, Until: v.openUntil})
		}
	}
	return out
}

// budgets lists every route's retry and hedge budgets with their keys.
func (e *Engine) budgets() []sharedBudget {
	var out []sharedBudget
	add := func(rs *routeState) {
		out = append(out, sharedBudget{"retry/" + rs.name, rs.retries}, sharedBudget{"hedge/" + rs.name, rs.hedges})
	}
	for _, rs := range e.routes {
		add(rs)
	}
	e.fleet.mu.Lock()
	for _, rs := range e.fleet.pass {
		add(rs)
	}
	e.fleet.mu.Unlock()
	return out
}

type sharedBudget struct {
	key string
	b   *resilience.Budget
}

// leaseTarget is how many tokens a replica keeps leased: what its requests
// since the last round earn over two such rounds, at least one token, at
// most the burst (what its bucket holds).
func leaseTarget(b *resilience.Budget, requests int64) float64 {
	t := math.Ceil(2 * b.Ratio() * float64(requests))
	return min(max(t, 1), b.Burst())
}

// kickLease asks for a lease round now (a shared budget refused a
// withdrawal); it never blocks.
func (e *Engine) kickLease() {
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// runShared settles the budgets with their global buckets every
// leaseInterval (a lease failing turns every budget back into a bucket of
// its own until one succeeds again) and publishes latency summaries every
// summaryInterval, until the engine closes.
func (e *Engine) runShared() {
	defer e.probes.Done()
	t := time.NewTicker(leaseInterval)
	defer t.Stop()
	lastSummary := e.now()
	var reqs []int64
	var leases []Lease
	var list, settle []sharedBudget
	for {
		list = e.budgets()
		leases, reqs, settle = leases[:0], reqs[:0], settle[:0]
		for _, sb := range list {
			n := sb.b.TakeRequests()
			want := max(leaseTarget(sb.b, n)-sb.b.Available(), 0)
			if !sb.b.Shared() {
				want = 0 // a bucket of its own: only see whether the store answers
			} else if n == 0 && milli(want) == 0 {
				continue // nothing to settle: no round trip
			}
			settle, reqs = append(settle, sb), append(reqs, n)
			leases = append(leases, Lease{Key: sb.key, Deposit: n * milli(sb.b.Ratio()), Want: milli(want), Burst: milli(sb.b.Burst())})
		}
		if len(leases) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), leaseTimeout)
			err := e.shared.Lease(ctx, leases)
			cancel()
			for i, sb := range settle {
				if err != nil {
					sb.b.Return(reqs[i])
					sb.b.Share(false, 0)
					continue
				}
				sb.b.Share(true, leaseTarget(sb.b, reqs[i]))
				sb.b.Grant(float64(leases[i].Granted) / 1000)
			}
		}
		if now := e.now(); now.Sub(lastSummary) >= summaryInterval {
			lastSummary = now
			for _, ep := range e.fleet.all() {
				if s := ep.health.Snapshot(); s.Requests > 0 {
					e.shared.Publish(Observation{Endpoint: ep.ID, Kind: ObsLatency, P50: s.P50, P95: s.P95})
				}
			}
		}
		last := e.now()
		select {
		case <-e.stop:
			return
		case <-t.C:
		case <-e.kick:
			// A dry lease: a round now, but not more often than
			// minLeaseGap (a storm would otherwise cost a round trip per
			// refused retry).
			if d := minLeaseGap - e.now().Sub(last); d > 0 {
				w := time.NewTimer(d)
				select {
				case <-e.stop:
					w.Stop()
					return
				case <-w.C:
				}
			}
		}
	}
}

func milli(tokens float64) int64 { return int64(math.Round(tokens * 1000)) }
