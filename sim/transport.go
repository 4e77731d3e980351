package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Transport returns an http.RoundTripper that serves requests from the
// fleet's handler in memory, with no sockets, so tests can run inside a
// testing/synctest bubble on virtual time. Any host works (see BaseURL).
//
// RoundTrip returns once the handler sends its header (its first Write or
// Flush, or its return); the body then streams through a pipe until the
// handler returns. Closing the body or cancelling the request context
// cancels the handler's context. A call the fleet resets (reset faults, a
// region that is down) fails with a *net.OpError wrapping ECONNRESET; a cut
// stream's body read fails with io.ErrUnexpectedEOF. Safe for concurrent use.
func (f *Fleet) Transport() http.RoundTripper { return &transport{h: f.handler} }

type transport struct{ h http.Handler }

// errConnReset is what a reset connection looks like to a client.
func errConnReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

var errBodyClosed = errors.New("sim: response body closed")

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	sreq := req.WithContext(ctx)
	body := req.Body
	if body == nil {
		body = http.NoBody
	}
	sreq.Body = body
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "192.0.2.1:1"
	if sreq.Host == "" {
		sreq.Host = req.URL.Host
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: make(http.Header), pw: pw, ready: make(chan struct{})}
	go func() {
		defer func() {
			p := recover()
			switch {
			case p == nil:
				w.finish()
			case p == http.ErrAbortHandler:
				w.abort()
			default:
				w.fail(fmt.Errorf("sim: handler panic: %v", p))
			}
			cancel(nil)
			// The RoundTripper contract: the transport closes the request
			// body, here once the handler is done with it.
			body.Close()
		}()
		t.h.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		err := context.Cause(req.Context())
		cancel(err)
		pr.CloseWithError(err)
		return nil, err
	}
	if w.err != nil {
		pr.CloseWithError(w.err)
		return nil, w.err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.code) + " " + http.StatusText(w.code),
		StatusCode:    w.code,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.sent,
		ContentLength: -1,
		Body:          &pipeBody{pr: pr, cancel: cancel},
		Request:       req,
	}
	if cl := w.sent["Content-Length"]; len(cl) == 1 {
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil {
			resp.ContentLength = n
		}
	}
	return resp, nil
}

// pipeBody is a response body; Close cancels the handler.
type pipeBody struct {
	pr     *io.PipeReader
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (b *pipeBody) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *pipeBody) Close() error {
	b.once.Do(func() {
		b.pr.CloseWithError(errBodyClosed)
		b.cancel(errBodyClosed)
	})
	return nil
}

// pipeWriter is the handler's http.ResponseWriter. Only the handler's
// goroutine touches it until ready is closed; after that RoundTrip reads
// code, sent and err.
type pipeWriter struct {
	header   http.Header
	sent     http.Header // the header as of WriteHeader
	code     int
	released bool // the header went to the client
	ready    chan struct{}
	err      error // set before ready closes when the call fails with no response
	pw       *io.PipeWriter
}

func (w *pipeWriter) Header() http.Header { return w.header }

func (w *pipeWriter) WriteHeader(code int) {
	if w.code != 0 || code < 200 {
		return
	}
	w.code = code
	// No copy: the fleet's handlers never touch the header after
	// WriteHeader, and the client reads it only after ready is closed.
	w.sent = w.header
}

func (w *pipeWriter) release() {
	if w.code == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if !w.released {
		w.released = true
		close(w.ready)
	}
}

func (w *pipeWriter) Write(p []byte) (int, error) {
	w.release()
	return w.pw.Write(p)
}

// FlushError sends the header; the pipe itself holds nothing back.
func (w *pipeWriter) FlushError() error {
	w.release()
	return nil
}

// Flush implements http.Flusher.
func (w *pipeWriter) Flush() { w.release() }

// finish ends a handler that returned.
func (w *pipeWriter) finish() {
	w.release()
	w.pw.Close()
}

// abort ends a handler that aborted: a reset connection if nothing was
// sent yet, a truncated body otherwise.
func (w *pipeWriter) abort() {
	if !w.released {
		w.err = errConnReset()
		w.released = true
		close(w.ready)
	}
	w.pw.CloseWithError(io.ErrUnexpectedEOF)
}

func (w *pipeWriter) fail(err error) {
	if !w.released {
		w.err = err
		w.released = true
		close(w.ready)
	}
	w.pw.CloseWithError(err)
}
