package sim

import (
	"net"
	"net/http"
	"os"
	"syscall"

	"github.com/keelmesh/keel/internal/inproc"
)

// Transport returns an http.RoundTripper that serves requests from the
// fleet's handler in memory, with no sockets, so tests can run inside a
// testing/synctest bubble on virtual time. Any host works (see BaseURL).
//
// RoundTrip returns once the handler sends its header; the body then
// streams through a pipe until the handler returns. Closing the body or
// cancelling the request context cancels the handler's context. A call the
// fleet resets (reset faults, a region that is down) fails with a
// *net.OpError wrapping ECONNRESET; a cut stream's body read fails with
// io.ErrUnexpectedEOF. Safe for concurrent use.
func (f *Fleet) Transport() http.RoundTripper {
	// The fleet's handlers reset a connection by aborting before they
	// send anything (resetConn), and cut a stream by aborting after.
	return &inproc.Transport{Handler: f.handler, ResetError: errConnReset}
}

// errConnReset is what a reset connection looks like to a client.
func errConnReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}
