package attempt

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pick"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/route"
)

// The route policy: it picks the endpoint of each attempt from the
// candidates' published views (internal/pick keeps the call's picks) and
// books it (tried, counted, recorded, in flight).

// routePolicy picks the endpoint for one attempt and books it: tried,
// counted, recorded, in flight. Pick and booking hold x.mu, so a hedge
// never books the endpoint the call's goroutine just booked.
func routePolicy(next step) step {
	return func(ctx context.Context, x *Exec, t *try) (*Attempt, error) {
		d := &x.r.d
		x.mu.Lock()
		if x.sealed || t.pass.Kind == policy.AttemptHedge && t.hg != nil && t.hg.Closed() {
			// A hedge launched as the call ended, or as its pass was
			// decided: the record is the observers' (or a stream's reader's)
			// now, and the call needs no more attempts.
			x.mu.Unlock()
			return nil, errSealed
		}
		if x.attempts >= d.MaxAttempts {
			x.mu.Unlock()
			return nil, &policy.NoCandidate{Exhausted: true}
		}
		i := -1
		if p := x.picks.Pin; p >= 0 {
			// The caller chose the first endpoint (a fragment's replicas
			// start on distinct ones); it is used while it is available.
			x.picks.Pin = -1
			if why, _ := x.route.Cands[p].View().Unavailable(d.Now()); why == fleet.Available && !x.picks.Tried[p] {
				i = p
			}
		}
		if i < 0 {
			var err error
			if i, err = x.pick(t.pass.AllowTried); err != nil {
				nc := &policy.NoCandidate{Err: err, Filtered: errors.Is(err, route.ErrAllFiltered), BreakerOpen: x.picks.BreakerLeftOut()}
				x.mu.Unlock()
				return nil, nc
			}
		}
		ep := x.route.Cands[i]
		x.picks.Tried[i] = true
		a := x.newAttempt()
		*a = Attempt{x: x, ep: ep, idx: i, kind: t.pass.Kind, start: d.Now(), recIdx: len(x.rec.Attempts)}
		a.ctx, a.cancelCause = context.WithCancelCause(ctx)
		x.rec.Attempts = append(x.rec.Attempts, callrec.Attempt{Endpoint: ep.ID, Model: ep.Model, Region: ep.Region, Provider: ep.Provider, Start: a.start, Kind: t.pass.Kind.String(), Wait: t.pass.Wait})
		x.mu.Unlock()
		t.pass.Wait = 0
		if t.hg != nil {
			t.hg.Booked(a, t.pass.Kind == policy.AttemptHedge)
		}
		t.booked = a
		a2, err := next(ctx, x, t)
		if a2 == nil && err != nil {
			// Not sent (the breaker refused): the booking ends here.
			a.cancel()
		}
		return a2, err
	}
}

// NoCandidate is the call's error when no endpoint could be booked.
func (x *Exec) NoCandidate(nc *policy.NoCandidate) error {
	switch {
	case nc.Exhausted:
		return x.Exhausted(llm.MeshFallbackExhausted, "every attempt failed")
	case nc.Filtered && x.attempts == 0:
		return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
			Message: "no endpoint of " + x.route.Name + " meets the request's constraints: " + nc.Err.Error()}
	case nc.Filtered:
		return x.Exhausted(llm.MeshFallbackExhausted, "no other model can serve the request: "+nc.Err.Error())
	case x.attempts == 0 && nc.BreakerOpen:
		return &policy.MeshError{Code: llm.MeshCircuitOpen, Why: nc.Err.Error(), Last: x.lastErr}
	}
	return x.Exhausted(llm.MeshFallbackExhausted, nc.Err.Error())
}

// pick chooses the next endpoint from the candidates' published views;
// allowTried lets endpoints already tried in this run compete again.
// Called with x.mu held.
func (x *Exec) pick(allowTried bool) (int, error) {
	x.picks.Build(x.Legacy, allowTried, x.r.d.Now())
	x.picks.PreferLossless()
	x.preferWarm() // cache-aware routing (cacheroute.go)
	ch, err := route.PickAppend(x.picks.Decisions, x.picks.Cands, x.Policy, x.r.d.Rand)
	if err != nil && errors.Is(err, route.ErrAllUnavailable) && x.picks.RelaxEjected() {
		ch, err = route.PickAppend(x.picks.Decisions, x.picks.Cands, x.Policy, x.r.d.Rand)
	}
	x.picks.Decisions = ch.Decisions
	if !x.picks.Recorded {
		x.picks.Recorded = true
		x.rec.Candidates = make([]callrec.Candidate, 0, len(ch.Decisions))
		for i, d := range ch.Decisions {
			x.rec.Candidates = append(x.rec.Candidates, callrec.Candidate{Endpoint: d.ID, ExpectedMS: d.Score,
				InFlight: x.picks.Cands[i].InFlight, Chosen: d.Reason == route.ReasonChosen, Reason: pick.ReasonText(d)})
		}
	}
	if err != nil {
		return -1, err
	}
	return ch.Index, nil
}

// HasUntried reports whether an endpoint not yet tried in this run is
// available now.
func (x *Exec) HasUntried(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.picks.HasUntried(x.Legacy, now)
}

// AnyAvailable reports whether an endpoint is available now, tried or not
// (one that failed a stream only when it is the route's only endpoint).
func (x *Exec) AnyAvailable(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.picks.AnyAvailable(x.Legacy, now)
}

// Soonest is when the first endpoint cooling down after a retry-after
// comes back; zero when none is cooling.
func (x *Exec) Soonest(now time.Time) time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.picks.Soonest(x.Legacy, now)
}

// PinFirst has the call start on the first endpoint no earlier call of a
// fan-out started on: used marks the endpoints taken (it is copied into
// the call's tried set and the pick marked in it); the pin holds while
// the endpoint is available (a fragment's replicas start on distinct
// endpoints).
func (x *Exec) PinFirst(used []bool) {
	copy(x.picks.Tried, used)
	x.mu.Lock()
	first, err := x.pick(false)
	x.mu.Unlock()
	if err == nil {
		used[first] = true
		x.picks.Pin = first
	}
}

// MoveTo has the call's further attempts run on rt (an escalated tier),
// its endpoints all untried.
func (x *Exec) MoveTo(rt Route) {
	x.mu.Lock()
	x.route = rt
	x.picks.Move(rt.Cands)
	x.mu.Unlock()
	x.Policy.Strategy = rt.Strategy
}
