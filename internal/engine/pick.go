package engine

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// The route policy: it picks the endpoint of each attempt from the
// candidates' published views and books it (tried, counted, recorded, in
// flight), keeping its state of the call in picks.

// picks is what the route policy keeps of one call's picks (guarded by
// its exec's mu: hedges pick and book concurrently).
type picks struct {
	// tried marks endpoints tried in the current run; avoid those that
	// failed a stream (never continued on while another exists).
	tried []bool
	avoid []bool
	// overloaded counts capacity refusals per model in this call: a model
	// that refused on two endpoints is overloaded as a whole and the call
	// falls back to the next model.
	overloaded map[string]int
	// pin, when ≥ 0, is the candidate the next attempt goes to.
	pin int
	// recorded is set once the first pick's candidates are in the record.
	recorded bool
	cands    []route.Candidate
	// whys says, per candidate in cands, why its view made it unavailable
	// (in whyBuf for routes of up to 16 endpoints: no allocation).
	whys      []fleet.Unavailability
	whyBuf    [16]fleet.Unavailability
	decisions []route.Decision
	// lossy caches, per wire format, whether translating the request into
	// it would lose content (translate.Report.Lost).
	lossy map[llm.Format]bool
}

// routePolicy picks the endpoint for one attempt and books it: tried,
// counted, recorded, in flight. Pick and booking hold x.mu, so a hedge
// never books the endpoint the call's goroutine just booked.
func routePolicy(next step) step {
	return func(ctx context.Context, x *exec, t *try) (*attempt, error) {
		e := x.e
		x.mu.Lock()
		if x.sealed || t.pass.Kind == policy.AttemptHedge && t.hg != nil && t.hg.Closed() {
			// A hedge launched as the call ended, or as its pass was
			// decided: the record is the observers' (or a stream's reader's)
			// now, and the call needs no more attempts.
			x.mu.Unlock()
			return nil, errSealed
		}
		if x.attempts >= e.maxAttempts {
			x.mu.Unlock()
			return nil, &policy.NoCandidate{Exhausted: true}
		}
		i := -1
		if p := x.picks.pin; p >= 0 {
			// The caller chose the first endpoint (a fragment's replicas
			// start on distinct ones); it is used while it is available.
			x.picks.pin = -1
			if why, _ := x.rs.cands[p].View().Unavailable(e.now()); why == fleet.Available && !x.picks.tried[p] {
				i = p
			}
		}
		if i < 0 {
			var err error
			if i, err = x.pick(t.pass.AllowTried); err != nil {
				nc := &policy.NoCandidate{Err: err, Filtered: errors.Is(err, route.ErrAllFiltered), BreakerOpen: x.breakerLeftOut()}
				x.mu.Unlock()
				return nil, nc
			}
		}
		ep := x.rs.cands[i]
		x.picks.tried[i] = true
		a := &attempt{x: x, ep: ep, idx: i, kind: t.pass.Kind, start: e.now(), recIdx: len(x.rec.Attempts)}
		a.ctx, a.cancel = context.WithCancel(ctx)
		x.rec.Attempts = append(x.rec.Attempts, Attempt{Endpoint: ep.ID, Model: ep.Model, Region: ep.Region, Provider: ep.Provider, Start: a.start, Kind: t.pass.Kind.String(), Wait: t.pass.Wait})
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
func (x *exec) NoCandidate(nc *policy.NoCandidate) error {
	switch {
	case nc.Exhausted:
		return x.Exhausted(llm.MeshFallbackExhausted, "every attempt failed")
	case nc.Filtered && x.attempts == 0:
		return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
			Message: "no endpoint of " + x.rs.name + " meets the request's constraints: " + nc.Err.Error()}
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
func (x *exec) pick(allowTried bool) (int, error) {
	x.candidates(allowTried, x.e.now())
	x.preferLossless()
	x.preferWarm() // cache-aware routing (cacheroute.go)
	ch, err := route.PickAppend(x.picks.decisions, x.picks.cands, x.policy, x.e.rnd)
	if err != nil && errors.Is(err, route.ErrAllUnavailable) && x.relaxEjected() {
		ch, err = route.PickAppend(x.picks.decisions, x.picks.cands, x.policy, x.e.rnd)
	}
	x.picks.decisions = ch.Decisions
	if !x.picks.recorded {
		x.picks.recorded = true
		x.rec.Candidates = make([]Candidate, 0, len(ch.Decisions))
		for i, d := range ch.Decisions {
			x.rec.Candidates = append(x.rec.Candidates, Candidate{Endpoint: d.ID, ExpectedMS: d.Score,
				InFlight: x.picks.cands[i].InFlight, Chosen: d.Reason == route.ReasonChosen, Reason: reasonText(d)})
		}
	}
	if err != nil {
		return -1, err
	}
	return ch.Index, nil
}

// breakerLeftOut reports whether the last pick left a candidate out for
// its open breaker. Called with x.mu held.
func (x *exec) breakerLeftOut() bool {
	for i, d := range x.picks.decisions {
		if d.Reason == route.ReasonUnavailable && x.picks.whys[i] == fleet.BreakerOpen {
			return true
		}
	}
	return false
}

// candidates fills x.picks.cands (and x.picks.whys) from the candidates' published
// views at now. Called with x.mu held.
func (x *exec) candidates(allowTried bool, now time.Time) {
	if x.picks.cands == nil {
		x.picks.cands = make([]route.Candidate, 0, len(x.rs.cands))
		x.picks.whys = x.picks.whyBuf[:0]
	}
	x.picks.cands, x.picks.whys = x.picks.cands[:0], x.picks.whys[:0]
	warmBest := time.Duration(0)
	for _, ep := range x.rs.cands {
		if v := ep.View(); !v.Cold {
			if warmBest == 0 || v.Expected < warmBest {
				warmBest = v.Expected
			}
		}
	}
	others := slices.Contains(x.picks.avoid, false)
	primary := x.rs.cands[0].Model
	for i, ep := range x.rs.cands {
		v := ep.View()
		c := route.Candidate{
			ID: ep.ID, Model: ep.Model, Region: ep.Region, Order: i,
			Capability: ep.Capability, ContextWindow: ep.ContextWindow, Domains: ep.Domains,
			ExpectedLatency: v.Expected, InFlight: ep.Health.InFlight(),
			Available: true,
		}
		if warmBest > 0 && v.Cold {
			// Optimistic start: an endpoint with no success yet ties with
			// the best warm one, so it gets tried and learns its latency.
			c.ExpectedLatency = warmBest
		}
		why, _ := v.Unavailable(now)
		kept := fleet.Available
		switch {
		case x.legacy && ep.Model != primary:
			c.Available, c.Unavailable = false, "safety_valve"
		case x.picks.avoid[i] && others:
			c.Available, c.Unavailable = false, "failed_stream"
		case x.picks.tried[i] && !allowTried:
			c.Available, c.Unavailable = false, "tried"
		case why != fleet.Available:
			c.Available, c.Unavailable, kept = false, why.String(), why
		case x.picks.overloaded[ep.Model] >= 2 && x.otherModel(ep.Model, now):
			c.Available, c.Unavailable = false, "model_overloaded"
		}
		x.picks.cands, x.picks.whys = append(x.picks.cands, c), append(x.picks.whys, kept)
	}
}

// relaxEjected makes available again every candidate that is only
// ejected, and reports whether there was one: panic routing, as Envoy
// does past its panic threshold. When every otherwise suitable endpoint is
// only ejected as an outlier, ejection says nothing about which is
// better; send anyway (the retry budget still caps the load) rather than
// fail every call. Called with x.mu held.
func (x *exec) relaxEjected() bool {
	relaxed := false
	for i := range x.picks.cands {
		if x.picks.whys[i] == fleet.Ejected && !x.picks.cands[i].Available {
			x.picks.cands[i].Available, x.picks.cands[i].Unavailable = true, ""
			x.picks.whys[i] = fleet.Available
			relaxed = true
		}
	}
	return relaxed
}

// preferLossless makes unavailable, while an available endpoint can carry
// the whole request, each endpoint whose wire format cannot (a document
// to an OpenAI-format endpoint, say): routing prefers the endpoints that
// can express the request, and a lossy one is used only when none is left
// (where translation then refuses or, under translation: drop, drops and
// names the content). Called with x.mu held, after x.picks.cands is built.
func (x *exec) preferLossless() {
	lossless := false
	for i := range x.picks.cands {
		if x.picks.cands[i].Available && !x.lossyFor(x.rs.cands[i].Format) {
			lossless = true
			break
		}
	}
	if !lossless {
		return
	}
	for i := range x.picks.cands {
		if x.picks.cands[i].Available && x.lossyFor(x.rs.cands[i].Format) {
			x.picks.cands[i].Available, x.picks.cands[i].Unavailable = false, "lossy_translation"
		}
	}
}

// lossyFor reports whether translating the request to format f loses
// content. Called with x.mu held.
func (x *exec) lossyFor(f llm.Format) bool {
	if f == x.req.Format || f == llm.FormatUnknown {
		return false
	}
	l, ok := x.picks.lossy[f]
	if !ok {
		_, rep, err := translate.Prepare(x.req, f, translate.Policy{Unsupported: translate.Drop})
		l = err == nil && len(rep.Lost) > 0
		if x.picks.lossy == nil {
			x.picks.lossy = map[llm.Format]bool{}
		}
		x.picks.lossy[f] = l
	}
	return l
}

// otherModel reports whether an endpoint of a model other than m is
// available now (so m's overload can be routed around). Called with x.mu
// held.
func (x *exec) otherModel(m string, now time.Time) bool {
	return x.availableLocked(now, func(i int, ep *endpoint) bool { return ep.Model != m && !x.picks.avoid[i] })
}

// HasUntried reports whether an endpoint not yet tried in this run is
// available now.
func (x *exec) HasUntried(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.availableLocked(now, func(i int, ep *endpoint) bool { return !x.picks.tried[i] && !x.picks.avoid[i] && x.allowed(ep) })
}

// AnyAvailable reports whether an endpoint is available now, tried or not
// (one that failed a stream only when it is the route's only endpoint).
func (x *exec) AnyAvailable(now time.Time) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	others := slices.Contains(x.picks.avoid, false)
	return x.availableLocked(now, func(i int, ep *endpoint) bool { return !(x.picks.avoid[i] && others) && x.allowed(ep) })
}

// allowed reports whether the safety valve's plain path allows ep.
func (x *exec) allowed(ep *endpoint) bool { return !x.legacy || ep.Model == x.rs.cands[0].Model }

// availableLocked reports whether a candidate that ok accepts is
// available now by its published view. Called with x.mu held.
func (x *exec) availableLocked(now time.Time, ok func(i int, ep *endpoint) bool) bool {
	for i, ep := range x.rs.cands {
		if !ok(i, ep) {
			continue
		}
		if why, _ := ep.View().Unavailable(now); why == fleet.Available {
			return true
		}
	}
	return false
}

// Soonest is when the first endpoint cooling down after a retry-after
// comes back; zero when none is cooling.
func (x *exec) Soonest(now time.Time) time.Time {
	x.mu.Lock()
	defer x.mu.Unlock()
	var best time.Time
	for i, ep := range x.rs.cands {
		if x.picks.avoid[i] || !x.allowed(ep) {
			continue
		}
		// Only a retry-after is waited for: an open breaker or an ejection
		// is a fault, and failing fast is its point.
		if why, until := ep.View().Unavailable(now); why == fleet.Cooling && until.After(now) && (best.IsZero() || until.Before(best)) {
			best = until
		}
	}
	return best
}

func reasonText(d route.Decision) string {
	if d.Detail != "" {
		return string(d.Reason) + ": " + d.Detail
	}
	return string(d.Reason)
}
