// Package route chooses the endpoint for one request from plain values: a
// slice of Candidates (built by the engine from health snapshots, breaker
// states and the alias's chain) and a Policy (from config and the request's
// mesh behaviour).
//
// PickAppend is a pure function: it never blocks, does no I/O, starts no
// goroutines and keeps no state, so it is safe for concurrent use as long as
// callers do not mutate the slices they pass while it runs. The package
// imports only the standard library; it never imports internal/health.
package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Candidate describes one endpoint (model variant × region × provider) as
// the router sees it for one request.
type Candidate struct {
	// ID names the endpoint in decisions and errors.
	ID, Model, Region string
	// Order is the candidate's priority for the Ordered strategy (lower
	// first).
	Order int
	// Capability is the model's tier (higher is stronger).
	Capability int
	// ContextWindow is the model's context window in tokens.
	ContextWindow int
	// Domains maps a domain to the model's compatibility score in [0, 1];
	// a missing domain scores 1.
	Domains map[string]float64
	// PricePerMTok is the price per million tokens (informational here).
	PricePerMTok float64
	// ExpectedLatency is the health estimate of a request's latency.
	ExpectedLatency time.Duration
	// InFlight counts this gateway's requests in flight to the endpoint.
	InFlight int
	// Available reports whether the endpoint may be used now; when false,
	// Unavailable says why ("ejected", "breaker_open", "cooling", "tried" …).
	Available   bool
	Unavailable string
}

// Strategy selects how PickAppend ranks eligible candidates.
type Strategy int

// The strategies.
const (
	// LatencyOptimal picks the lowest ExpectedLatency; candidates within
	// TieTolerance of the best are tied and the tie is broken by
	// power-of-two-choices on InFlight. It is the zero value.
	LatencyOptimal Strategy = iota
	// Ordered picks the lowest Order (strict priority; ties by position).
	Ordered
)

// String returns "latency_optimal" or "ordered", the config spellings.
func (s Strategy) String() string {
	switch s {
	case LatencyOptimal:
		return "latency_optimal"
	case Ordered:
		return "ordered"
	}
	return fmt.Sprintf("Strategy(%d)", int(s))
}

// Policy holds the routing rules for one request. The zero value is the
// documented default: latency-optimal, no floors, the default domain
// threshold and tie tolerance.
type Policy struct {
	Strategy Strategy
	// MinCapability is a hard floor on Candidate.Capability.
	MinCapability int
	// Domain is the request's domain; empty skips the domain filter.
	Domain string
	// MinDomainScore is a hard floor on the candidate's score for Domain.
	// Zero means 0.8; a negative value accepts any score.
	MinDomainScore float64
	// PreferredRegion is a soft preference: when any eligible candidate is
	// in it, only those are considered.
	PreferredRegion string
	// MinContextWindow is a hard floor on Candidate.ContextWindow (the
	// prompt's estimated tokens).
	MinContextWindow int
	// TieTolerance makes candidates within that fraction of the best
	// expected latency count as tied. Zero means 0.1; negative means exact
	// ties only.
	TieTolerance float64
}

// Reason says why a candidate was or was not chosen.
type Reason string

// The reasons a Decision can carry.
const (
	ReasonChosen        Reason = "chosen"
	ReasonCapability    Reason = "below_min_capability"
	ReasonDomain        Reason = "below_min_domain_score"
	ReasonContext       Reason = "context_window_too_small"
	ReasonUnavailable   Reason = "unavailable" // Detail holds Candidate.Unavailable
	ReasonOtherRegion   Reason = "not_preferred_region"
	ReasonSlower        Reason = "slower"         // outside the tie tolerance of the best
	ReasonLowerPriority Reason = "lower_priority" // Ordered: a lower Order was eligible
	ReasonTieLost       Reason = "tie_lost"       // tied, and power-of-two-choices chose another
)

// Decision explains PickAppend's verdict on one candidate, for the debug trace.
type Decision struct {
	// ID is the candidate's ID.
	ID string
	// Score is the key the strategy ranked by, lower is better: expected
	// latency in milliseconds (LatencyOptimal) or Order (Ordered). It is
	// set for every candidate.
	Score float64
	// Reason is ReasonChosen for the chosen candidate, else why not.
	Reason Reason
	// Detail adds context: the Unavailable text for ReasonUnavailable.
	Detail string
}

// Choice is PickAppend's result.
type Choice struct {
	// Index of the chosen candidate in the slice given to PickAppend; -1 when
	// none was.
	Index int
	// Decisions holds one entry per candidate, in the same order.
	Decisions []Decision
}

// Errors of PickAppend. The returned error always wraps ErrNoCandidate and, when
// there were candidates, exactly one of ErrAllFiltered and ErrAllUnavailable.
var (
	// ErrNoCandidate: nothing was eligible.
	ErrNoCandidate = errors.New("no eligible candidate")
	// ErrAllFiltered: no candidate passes the policy's hard filters
	// (capability, domain, context window), so no endpoint could ever
	// serve the request: the caller's request is at fault (a 400).
	ErrAllFiltered = errors.New("no candidate meets the policy")
	// ErrAllUnavailable: some candidates pass the filters, but every one
	// of them is unavailable (breaker open, ejected, cooling, tried).
	ErrAllUnavailable = errors.New("every suitable candidate is unavailable")
)

// PickAppend chooses a candidate for p. Hard filters come first
// (capability, domain score, context window, then availability); then the
// preferred region narrows the field if it has an eligible candidate; then
// the strategy ranks. rnd(n) must return a uniform int in [0, n) (nil means
// math/rand/v2's IntN); it is called only to break latency ties. It writes
// its decisions into dst[:0] (growing it if needed), so that a caller
// reusing a buffer routes without allocating.
func PickAppend(dst []Decision, cands []Candidate, p Policy, rnd func(n int) int) (Choice, error) {
	if rnd == nil {
		rnd = rand.IntN
	}
	minDomain := p.MinDomainScore
	if minDomain == 0 {
		minDomain = 0.8
	}
	tol := p.TieTolerance
	if tol == 0 {
		tol = 0.1
	}
	tol = max(tol, 0)

	ds := dst[:0]
	if cap(ds) < len(cands) {
		ds = make([]Decision, 0, len(cands))
	}
	ds = ds[:len(cands)]
	suitable, eligible, inRegion := 0, 0, 0
	for i := range cands {
		c := &cands[i]
		d := Decision{ID: c.ID, Score: score(c, p.Strategy)}
		switch {
		case c.Capability < p.MinCapability:
			d.Reason = ReasonCapability
		case p.Domain != "" && domainScore(c, p.Domain) < minDomain:
			d.Reason = ReasonDomain
		case c.ContextWindow < p.MinContextWindow:
			d.Reason = ReasonContext
		case !c.Available:
			suitable++
			d.Reason, d.Detail = ReasonUnavailable, c.Unavailable
		default:
			suitable++
			eligible++
			if p.PreferredRegion != "" && c.Region == p.PreferredRegion {
				inRegion++
			}
		}
		ds[i] = d
	}
	if eligible == 0 {
		return Choice{Index: -1, Decisions: ds}, noCandidate(cands, ds, suitable, p)
	}
	// From here on, a candidate is in the pool if its Reason is still
	// empty; the region preference removes the others when it can.
	if inRegion > 0 {
		for i := range ds {
			if ds[i].Reason == "" && cands[i].Region != p.PreferredRegion {
				ds[i].Reason = ReasonOtherRegion
			}
		}
	}
	best := -1
	for i := range ds {
		if ds[i].Reason == "" && (best < 0 || ds[i].Score < ds[best].Score) {
			best = i
		}
	}
	chosen := best
	lose := ReasonLowerPriority
	if p.Strategy == LatencyOptimal {
		chosen = pickTie(cands, ds, best, tol, rnd)
		lose = ReasonSlower
	}
	for i := range ds {
		if ds[i].Reason == "" {
			ds[i].Reason = lose
		}
	}
	ds[chosen].Reason = ReasonChosen
	return Choice{Index: chosen, Decisions: ds}, nil
}

// pickTie marks the pool's candidates within tol of the best latency as
// tied (ReasonTieLost), and chooses among them by power-of-two-choices:
// two distinct tied candidates at random, the one with fewer requests in
// flight wins (then the faster, then the first drawn).
func pickTie(cands []Candidate, ds []Decision, best int, tol float64, rnd func(int) int) int {
	limit := float64(cands[best].ExpectedLatency) * (1 + tol)
	tied := 0
	for i := range ds {
		if ds[i].Reason == "" && float64(cands[i].ExpectedLatency) <= limit {
			ds[i].Reason = ReasonTieLost
			tied++
		}
	}
	if tied == 1 {
		return best
	}
	a := rnd(tied)
	b := rnd(tied - 1)
	if b >= a {
		b++
	}
	ia, ib := nthTied(ds, a), nthTied(ds, b)
	ca, cb := &cands[ia], &cands[ib]
	if cb.InFlight < ca.InFlight || (cb.InFlight == ca.InFlight && cb.ExpectedLatency < ca.ExpectedLatency) {
		return ib
	}
	return ia
}

func nthTied(ds []Decision, n int) int {
	for i := range ds {
		if ds[i].Reason == ReasonTieLost {
			if n == 0 {
				return i
			}
			n--
		}
	}
	panic("route: tie index out of range") // unreachable: n < tied
}

func score(c *Candidate, s Strategy) float64 {
	if s == Ordered {
		return float64(c.Order)
	}
	return float64(c.ExpectedLatency) / float64(time.Millisecond)
}

func domainScore(c *Candidate, domain string) float64 {
	if v, ok := c.Domains[domain]; ok {
		return v
	}
	return 1
}

// noCandidate builds PickAppend's error, listing every candidate's reason; a
// capability filter names the candidate's capability and the floor. It runs
// only when the pick fails, so its allocations stay off the picking path.
func noCandidate(cands []Candidate, ds []Decision, suitable int, p Policy) error {
	if len(cands) == 0 {
		return fmt.Errorf("%w: no candidates", ErrNoCandidate)
	}
	kind := ErrAllFiltered
	if suitable > 0 {
		kind = ErrAllUnavailable
	}
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(d.ID)
		b.WriteString(": ")
		b.WriteString(string(d.Reason))
		switch {
		case d.Detail != "":
			b.WriteString(" (")
			b.WriteString(d.Detail)
			b.WriteString(")")
		case d.Reason == ReasonCapability && i < len(cands):
			fmt.Fprintf(&b, " (capability %d, floor %d)", cands[i].Capability, p.MinCapability)
		}
	}
	return fmt.Errorf("%w: %w: %s", ErrNoCandidate, kind, b.String())
}
