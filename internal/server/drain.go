package server

import (
	"context"
	"errors"
	"io"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
)

// ErrShuttingDown, as the cause of a request context's cancellation
// (context.WithCancelCause under http.Server.BaseContext), tells the server
// that the process is shutting down and the call will not finish: a stream
// ends with the wire's error event (Anthropic `event: error` with
// overloaded_error, OpenAI an error chunk and no [DONE]) instead of a bare
// close, and a call whose headers are not sent yet gets a 503 in its wire
// format, which the SDKs retry. Any other cancellation (the client went
// away) ends the call as before.
//
// The cause reaches every request, whichever Server serves it, with no cost
// on the request path: `keel serve` cancels its http.Server's base context
// with it when the shutdown timeout ends.
var ErrShuttingDown = errors.New("server is shutting down")

// shutdownMessage is the message of a call cut by shutdown.
const shutdownMessage = "the server is shutting down and ended this call before it finished; retry it"

// cutByShutdown reports whether r's context ended with ErrShuttingDown.
func cutByShutdown(r *http.Request) bool {
	return errors.Is(context.Cause(r.Context()), ErrShuttingDown)
}

// cutError returns the 503 a call cut by shutdown answers in place of ae,
// or ae when r was not cut.
func cutError(r *http.Request, ae *llm.APIError) *llm.APIError {
	if !cutByShutdown(r) {
		return ae
	}
	return &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, Message: shutdownMessage}
}

// cutEvent returns what a stream's loop writes for the next event ev (or
// the error err) of the engine's stream: the shutdown error event when r
// was cut by shutdown and the stream failed for it, otherwise ev and err
// unchanged. io.EOF, the end of a stream that already wrote its last
// event, stays.
func cutEvent(r *http.Request, ev *llm.Event, err error) (*llm.Event, error) {
	failed := err != nil && err != io.EOF || err == nil && ev.Type == llm.EventError
	if !failed || !cutByShutdown(r) {
		return ev, err
	}
	return &llm.Event{Type: llm.EventError, Err: &llm.APIError{Status: http.StatusOK, Type: llm.ErrOverloaded, Message: shutdownMessage}}, nil
}
