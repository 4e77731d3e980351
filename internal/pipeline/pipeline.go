// Package pipeline is the shape of a client call through Keel: a Call
// flows down a chain of stages to the attempt path, and an Answer — one
// response, or a pull-based stream of events — flows back up through the
// same stages in reverse. Each feature (personal data, the caches, shadow
// traffic, structured output, …) is a Stage in the package that owns its
// logic; the engine composes them with Chain and finishes every call in
// one place.
//
// The package imports only llm, provider and the standard library, so a
// stage package depends on it and on small consumer-side interfaces of its
// own, never on the engine.
//
// Contract (see docs in the engine's ARCHITECTURE.md):
//   - A stage calls next at most once per Serve; it may answer without
//     calling next (a cache hit, a refusal), but then it never calls it.
//   - A stage never finishes a call: records are reported, metrics
//     counted, spend settled and observers told only by the engine's one
//     finish, when the outermost Events is closed (or the answer or error
//     of a non-streaming call returns).
//   - A stage that wraps Events keeps Close's promise: closing the
//     wrapper closes what it wraps, exactly once.
//   - A stage writes only its own part of the call's record: a type its
//     package owns, handed to the Record hook it was built with (the
//     engine writes it into the call's record at once).
package pipeline

import (
	"context"
	"net/http"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// Call is one client call as it flows down the chain. A stage may replace
// Request (a redacted copy, say) before it calls next; it never modifies
// the request it was given. A Call is used by one goroutine at a time.
type Call struct {
	// Request is the request as the stages below see it.
	Request *llm.Request
	// ID is the mesh's id for the call.
	ID string
	// Header is the client's request header (read only).
	Header http.Header
	// Behavior is the parsed mesh options (nil = defaults).
	Behavior *Behavior
	// Timeout overrides the configured overall deadline when > 0.
	Timeout time.Duration
	// TraceParent is the client's W3C traceparent header.
	TraceParent string
	// KeyID and Team name the virtual key the call was made with; empty
	// for an unmetered call.
	KeyID, Team string
	// Record is the builder's per-call state (the engine's). A stage
	// never reads it: it reports its part through the hooks it was built
	// with, which the builder implements over it.
	Record any
}

// Answer is what comes back up the chain: Response for a call that did not
// ask for a stream, else Events. Endpoint is the endpoint credited with the
// answer when it was known at the head (a stream continued elsewhere may
// end on another); Header is the serving upstream's response header (nil
// for an answer Keel made itself).
type Answer struct {
	Response *llm.Response
	Events   Events
	Endpoint *provider.Endpoint
	Header   http.Header
	// Served, when set, is the endpoint credited with a stream's answer
	// now (a continuation moves it); nil means Endpoint throughout.
	Served func() *provider.Endpoint
	// Replayed marks an answer Keel had stored (a cache hit): no upstream
	// served it, so no cache above stores it again.
	Replayed bool
}

// ServedBy is the endpoint credited with a's answer now.
func (a *Answer) ServedBy() *provider.Endpoint {
	if a.Served != nil {
		return a.Served()
	}
	return a.Endpoint
}

// Events is a pull-based answer stream. Next returns the next event, or
// io.EOF after the last (message_stop, or an error event: a stream that
// fails ends with the wire's error event, never an error from Next after
// events were sent, unless it could not even start). The event is the
// caller's until the next call to Next. Close must be called exactly once
// by whoever holds the stream, whether or not it was read to its end; it
// releases everything below (upstream connections, attempts).
type Events interface {
	Next() (*llm.Event, error)
	Close() error
}

// Readier is implemented by Events that can say whether Next would
// return without waiting on an upstream (so a writer can skip a flush).
type Readier interface {
	Ready() bool
}

// Ready reports whether ev's next event needs no wait; false when ev
// cannot tell.
func Ready(ev Events) bool {
	r, ok := ev.(Readier)
	return ok && r.Ready()
}

// Handler serves a call: an Answer, or an error (an *llm.APIError ready
// for the client). It returns when the answer is known or, for a stream,
// when its head (events up to the first content) has arrived.
type Handler interface {
	Serve(ctx context.Context, c *Call) (*Answer, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, c *Call) (*Answer, error)

// Serve calls f.
func (f HandlerFunc) Serve(ctx context.Context, c *Call) (*Answer, error) { return f(ctx, c) }

// Stage wraps the rest of the chain. A nil Stage is skipped by Chain, so a
// feature that is off costs nothing per call.
type Stage func(next Handler) Handler

// Chain composes h with stages, outermost first: Chain(h, a, b) serves a
// call through a, then b, then h, and the answer back through b, then a.
func Chain(h Handler, stages ...Stage) Handler {
	for i := len(stages) - 1; i >= 0; i-- {
		if s := stages[i]; s != nil {
			h = s(h)
		}
	}
	return h
}
