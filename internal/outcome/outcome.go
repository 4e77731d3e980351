// Package outcome says what an upstream attempt's end teaches its
// endpoint's live state: the health outcome (latency, time to first
// token, status, the failure's kind, a retry-after) and whether the
// breaker counts it a success. It decides on the attempt's typed failure
// (policy.Failure) only, never on message text.
package outcome

import (
	"errors"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
)

// Attempt is what an ended attempt's outcome is read from.
type Attempt struct {
	// Latency is from the attempt's start to its end; TTFT to its first
	// content event (0: none came or it did not stream).
	Latency, TTFT time.Duration
	// Stream: the attempt is a model call's stream, so a cancelled
	// attempt's time to first token is told.
	Stream bool
	// NoLatency: the answer's latency says nothing about how fast the
	// endpoint answers (a token count on a chat endpoint).
	NoLatency bool
	// Result is the attempt's result when it got one (its status and
	// headers: rate-limit headroom).
	Result *provider.Result
}

// Of is what health (o) and the breaker (ok) learn from a ending with f
// (nil for a success).
func Of(a Attempt, f *policy.Failure) (o health.Outcome, ok bool) {
	o = health.Outcome{Latency: a.Latency, TTFT: a.TTFT, NoLatency: a.NoLatency}
	if a.Result != nil {
		o.Status, o.Header = a.Result.Status, a.Result.Header
	}
	if f == nil {
		return o, true
	}
	if f.Cancelled() {
		return Cancelled(a, a.Latency), true
	}
	var pe *provider.Error
	if errors.As(f.Err, &pe) {
		o.Kind = kind(pe.Kind, f.Reason)
	}
	if f.Status != 0 {
		o.Status = f.Status
	}
	o.RetryAfter = f.RetryAfter
	// Only faults of the endpoint count against it, not the caller's bad
	// request or its leaving.
	o.Failure = f.EndpointFault()
	// Capacity signals are not faults for the breaker: retry-after
	// cooldowns handle them (a breaker opened on a 429 burst would keep the
	// endpoint out long after it). Nor is unreachability: the prober brings
	// the endpoint back, not the breaker's interval.
	return o, !o.Failure || f.Capacity || f.Unreachable
}

// Cancelled is what health learns of a, abandoned after d: its latency as
// a lower bound and, for a stream, its time to first token, or d as a
// lower bound of it when none came. A hedge race's loser before its first
// token is the slow call the hedge cut short: without it, the
// time-to-first-token percentiles the hedge delay reads would lose the
// tail they exist to catch, and the p95 would fall into the body of the
// distribution (hedging a further 5 % of calls for nothing).
func Cancelled(a Attempt, d time.Duration) health.Outcome {
	o := health.Outcome{Cancelled: true, Latency: d}
	if a.Stream {
		o.TTFT = a.TTFT
		if o.TTFT == 0 {
			o.TTFT = d
		}
	}
	return o
}

// kind names a provider error's kind for health (reason for the kinds
// health does not tell apart).
func kind(k provider.Kind, reason string) string {
	switch k {
	case provider.KindConnect:
		return health.KindConnect
	case provider.KindReset:
		return health.KindReset
	case provider.KindTimeout:
		return health.KindTimeout
	}
	return reason
}
