// Package pick keeps one call's endpoint picks over its route's endpoints:
// the router's candidates built from the endpoints' published views, the
// endpoints the call tried, avoids (a failed stream) and found overloaded
// per model, a pinned first endpoint, the preference for endpoints that can
// carry the whole request, and panic routing past ejection. It decides
// which endpoints may compete; the router (internal/route) chooses among
// them, and the caller (internal/attempt's route policy) books the choice.
//
// A State is not safe for concurrent use: its caller holds the lock that
// guards the call's attempts (hedges pick concurrently).
package pick

import (
	"slices"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// State is what a call keeps of its picks on one route.
type State struct {
	// eps are the route's endpoints, in order (the first is the primary
	// model's); req is the call's request.
	eps []*fleet.Endpoint
	req *llm.Request
	// Tried marks endpoints tried in the current run; Avoid those that
	// failed a stream (never continued on while another exists).
	Tried []bool
	Avoid []bool
	// Overloaded counts capacity refusals per model in this call: a model
	// that refused on two endpoints is overloaded as a whole and the call
	// falls back to the next model.
	Overloaded map[string]int
	// Pin, when ≥ 0, is the candidate the next attempt goes to.
	Pin int
	// Recorded is set once the first pick's candidates are in the record.
	Recorded bool
	// Cands are the router's candidates of the last Build, Decisions its
	// last decisions over them.
	Cands     []route.Candidate
	Decisions []route.Decision
	// whys says, per candidate in Cands, why its view made it unavailable
	// (in whyBuf for routes of up to 16 endpoints: no allocation).
	whys   []fleet.Unavailability
	whyBuf [16]fleet.Unavailability
	// triedBuf, candBuf and decBuf back Tried and Avoid, Cands and
	// Decisions for routes of up to 8 endpoints: a State lives inside its
	// call's allocation, so these cost none of their own.
	triedBuf [16]bool
	candBuf  [8]route.Candidate
	decBuf   [8]route.Decision
	// lossy caches, per wire format, whether translating the request into
	// it would lose content (translate.Report.Lost).
	lossy map[llm.Format]bool
}

// Init makes s the picks of a call sending req on the route of eps,
// nothing tried. s must not be copied afterwards: its slices may use its
// own buffers.
func (s *State) Init(eps []*fleet.Endpoint, req *llm.Request) {
	*s = State{req: req, Pin: -1}
	s.Decisions = s.decBuf[:0]
	s.Move(eps)
}

// Move has further picks go to eps (an escalated tier's route), every
// endpoint untried and none avoided or overloaded.
func (s *State) Move(eps []*fleet.Endpoint) {
	n := len(eps)
	var b []bool
	if 2*n <= len(s.triedBuf) {
		b = s.triedBuf[:2*n]
		clear(b)
	} else {
		b = make([]bool, 2*n)
	}
	s.eps, s.Tried, s.Avoid, s.Pin, s.Overloaded = eps, b[:n:n], b[n:], -1, nil
}

// Build fills Cands from the endpoints' published views at now. legacy
// (the safety valve's plain path) allows only the primary model;
// allowTried lets endpoints already tried in this run compete again. An
// endpoint with no success yet competes with the best warm one's latency.
func (s *State) Build(legacy, allowTried bool, now time.Time) {
	if s.Cands == nil {
		if len(s.eps) <= len(s.candBuf) {
			s.Cands = s.candBuf[:0]
		} else {
			s.Cands = make([]route.Candidate, 0, len(s.eps))
		}
		s.whys = s.whyBuf[:0]
	}
	s.Cands, s.whys = s.Cands[:0], s.whys[:0]
	warmBest := time.Duration(0)
	for _, ep := range s.eps {
		if v := ep.View(); !v.Cold {
			if warmBest == 0 || v.Expected < warmBest {
				warmBest = v.Expected
			}
		}
	}
	others := slices.Contains(s.Avoid, false)
	primary := s.eps[0].Model
	for i, ep := range s.eps {
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
		case legacy && ep.Model != primary:
			c.Available, c.Unavailable = false, "safety_valve"
		case s.Avoid[i] && others:
			c.Available, c.Unavailable = false, "failed_stream"
		case s.Tried[i] && !allowTried:
			c.Available, c.Unavailable = false, "tried"
		case why != fleet.Available:
			c.Available, c.Unavailable, kept = false, why.String(), why
		case s.Overloaded[ep.Model] >= 2 && s.otherModel(ep.Model, now):
			c.Available, c.Unavailable = false, "model_overloaded"
		}
		s.Cands, s.whys = append(s.Cands, c), append(s.whys, kept)
	}
}

// BreakerLeftOut reports whether the last pick left a candidate out for
// its open breaker.
func (s *State) BreakerLeftOut() bool {
	for i, d := range s.Decisions {
		if d.Reason == route.ReasonUnavailable && s.whys[i] == fleet.BreakerOpen {
			return true
		}
	}
	return false
}

// RelaxEjected makes available again every candidate that is only
// ejected, and reports whether there was one: panic routing, as Envoy
// does past its panic threshold. When every otherwise suitable endpoint is
// only ejected as an outlier, ejection says nothing about which is
// better; send anyway (the retry budget still caps the load) rather than
// fail every call.
func (s *State) RelaxEjected() bool {
	relaxed := false
	for i := range s.Cands {
		if s.whys[i] == fleet.Ejected && !s.Cands[i].Available {
			s.Cands[i].Available, s.Cands[i].Unavailable = true, ""
			s.whys[i] = fleet.Available
			relaxed = true
		}
	}
	return relaxed
}

// PreferLossless makes unavailable, while an available endpoint can carry
// the whole request, each endpoint whose wire format cannot (a document
// to an OpenAI-format endpoint, say): routing prefers the endpoints that
// can express the request, and a lossy one is used only when none is left
// (where translation then refuses or, under translation: drop, drops and
// names the content). Called after Build.
func (s *State) PreferLossless() {
	lossless := false
	for i := range s.Cands {
		if s.Cands[i].Available && !s.lossyFor(s.eps[i].Format) {
			lossless = true
			break
		}
	}
	if !lossless {
		return
	}
	for i := range s.Cands {
		if s.Cands[i].Available && s.lossyFor(s.eps[i].Format) {
			s.Cands[i].Available, s.Cands[i].Unavailable = false, "lossy_translation"
		}
	}
}

// lossyFor reports whether translating the request to format f loses
// content.
func (s *State) lossyFor(f llm.Format) bool {
	if f == s.req.Format || f == llm.FormatUnknown {
		return false
	}
	l, ok := s.lossy[f]
	if !ok {
		_, rep, err := translate.Prepare(s.req, f, translate.Policy{Unsupported: translate.Drop})
		l = err == nil && len(rep.Lost) > 0
		if s.lossy == nil {
			s.lossy = map[llm.Format]bool{}
		}
		s.lossy[f] = l
	}
	return l
}

// otherModel reports whether an endpoint of a model other than m is
// available now (so m's overload can be routed around).
func (s *State) otherModel(m string, now time.Time) bool {
	return s.available(now, func(i int, ep *fleet.Endpoint) bool { return ep.Model != m && !s.Avoid[i] })
}

// HasUntried reports whether an endpoint not yet tried in this run is
// available now.
func (s *State) HasUntried(legacy bool, now time.Time) bool {
	return s.available(now, func(i int, ep *fleet.Endpoint) bool { return !s.Tried[i] && !s.Avoid[i] && s.allowed(legacy, ep) })
}

// AnyAvailable reports whether an endpoint is available now, tried or not
// (one that failed a stream only when it is the route's only endpoint).
func (s *State) AnyAvailable(legacy bool, now time.Time) bool {
	others := slices.Contains(s.Avoid, false)
	return s.available(now, func(i int, ep *fleet.Endpoint) bool { return !(s.Avoid[i] && others) && s.allowed(legacy, ep) })
}

// Soonest is when the first endpoint cooling down after a retry-after
// comes back; zero when none is cooling.
func (s *State) Soonest(legacy bool, now time.Time) time.Time {
	var best time.Time
	for i, ep := range s.eps {
		if s.Avoid[i] || !s.allowed(legacy, ep) {
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

// allowed reports whether the safety valve's plain path (legacy) allows ep.
func (s *State) allowed(legacy bool, ep *fleet.Endpoint) bool {
	return !legacy || ep.Model == s.eps[0].Model
}

// available reports whether an endpoint that ok accepts is available now
// by its published view.
func (s *State) available(now time.Time, ok func(i int, ep *fleet.Endpoint) bool) bool {
	for i, ep := range s.eps {
		if !ok(i, ep) {
			continue
		}
		if why, _ := ep.View().Unavailable(now); why == fleet.Available {
			return true
		}
	}
	return false
}

// ReasonText is a decision's reason as the record says it.
func ReasonText(d route.Decision) string {
	if d.Detail != "" {
		return string(d.Reason) + ": " + d.Detail
	}
	return string(d.Reason)
}
