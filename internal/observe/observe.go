// Package observe is the engine's optional observer interfaces and the
// events they receive: an upstream attempt ending, a hedge decided, a
// circuit breaker's transition, the safety valve opening or closing. It
// imports only the resilience package's breaker states; telemetry
// implements the interfaces, the engine calls them (engine.Options.Observer
// under each interface it implements, asserted once).
//
// An engine.Options.Observer (the finished call Record's observer) that
// also implements one of them receives those events as they happen. The
// engine checks for each once, in New, so an observer with RequestDone
// alone keeps working and costs nothing more; an event is passed by value
// (no allocation).
//
// Like RequestDone, every method runs on the goroutine that caused the
// event — a request's, or one a breaker transition or the safety valve
// happened on — and must not block, do I/O or call back into the Engine:
// an observer with slow work to do (a webhook post) hands it to a
// goroutine of its own through a bounded queue and drops when it is full.
// Methods may be called concurrently; events passed by value are the
// observer's to keep.
package observe

import (
	"time"

	"github.com/keelmesh/keel/internal/resilience"
)

// AttemptObserver is told about every upstream attempt when it ends.
type AttemptObserver interface {
	OnAttempt(AttemptEvent)
}

// HedgeObserver is told about every hedge launched, once the race it joined
// is decided.
type HedgeObserver interface {
	OnHedge(HedgeEvent)
}

// BreakerObserver is told about every state change of an endpoint's
// circuit breaker.
type BreakerObserver interface {
	OnBreakerState(BreakerEvent)
}

// ValveObserver is told when the safety valve opens or closes.
type ValveObserver interface {
	OnValve(ValveEvent)
}

// AttemptEvent is one upstream attempt that finished: answered, failed,
// or was cancelled (a lost hedge race).
type AttemptEvent struct {
	RequestID string
	Endpoint  string
	Model     string
	Region    string
	// Kind is the attempt kind's label, as in Attempt.Kind.
	Kind string
	// Outcome is "ok" or the failure reason from the classification table,
	// as in Attempt.Outcome.
	Outcome string
	// Status is the upstream's HTTP status (0 when none arrived).
	Status   int
	Duration time.Duration
	// RetryAfter is the retry-after the upstream sent (0 when none).
	RetryAfter time.Duration
	// Shadow is set on a shadow call's attempt (aliases[].shadow): not
	// part of any client call's work, to be counted apart.
	Shadow bool
}

// HedgeEvent is one hedge: a second attempt sent to HedgeEndpoint because
// the attempt on Endpoint had not answered after Delay. It is reported once
// per hedge, when the race is decided (the first answer, both attempts
// failing, or the call ending).
type HedgeEvent struct {
	RequestID string
	// Endpoint is the endpoint raced; HedgeEndpoint the one hedged to.
	Endpoint      string
	HedgeEndpoint string
	Delay         time.Duration
	// Won is set when the hedge's answer served the call.
	Won bool
}

// BreakerEvent is one circuit breaker transition.
type BreakerEvent struct {
	Endpoint string
	From, To resilience.State
	Time     time.Time
}

// The safety valve's event names, in ValveEvent.Event (and the alert
// webhook's "event" field).
const (
	ValveEventOpen   = "safety_valve_open"
	ValveEventClosed = "safety_valve_closed"
)

// ValveEvent is the safety valve opening or closing.
type ValveEvent struct {
	// Event is ValveEventOpen or ValveEventClosed.
	Event string
	// FallbackRate and Requests are the window's fallback rate and call
	// count when the valve changed; Threshold is the configured trip rate.
	FallbackRate float64
	Requests     int
	Threshold    float64
	// OpenUntil is when the valve's hold ends (zero when it closed).
	OpenUntil time.Time
	Time      time.Time
}
