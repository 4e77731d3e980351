// Package inproc serves HTTP requests to an http.Handler inside the process,
// with no sockets: an http.RoundTripper whose responses stream.
//
// The handler runs in its own goroutine per request. RoundTrip returns as
// soon as the handler writes its header (WriteHeader, the first Write, or a
// Flush); the body then streams through a pipe until the handler returns.
// Closing the response body, or cancelling the request context, cancels the
// context the handler sees. A handler that panics with http.ErrAbortHandler
// makes the body read fail with io.ErrUnexpectedEOF, as a cut connection does.
// The Transport is safe for concurrent use.
package inproc

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Transport is an http.RoundTripper that calls Handler directly.
type Transport struct {
	Handler http.Handler
}

// errBodyClosed is the cancellation cause when the client closed the body.
var errBodyClosed = errors.New("inproc: response body closed by client")

// RoundTrip implements http.RoundTripper. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(req.Context())
	sreq := req.Clone(ctx)
	if req.Body == nil {
		sreq.Body = http.NoBody
	}
	if sreq.RequestURI == "" {
		sreq.RequestURI = req.URL.RequestURI()
	}
	if sreq.RemoteAddr == "" {
		sreq.RemoteAddr = "127.0.0.1:0"
	}
	if sreq.ContentLength <= 0 && req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		sreq.ContentLength = -1
	}
	pr, pw := io.Pipe()
	w := &responseWriter{
		header: make(http.Header),
		pw:     pw,
		ready:  make(chan struct{}),
	}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					w.abort(io.ErrUnexpectedEOF)
				} else {
					w.abort(errors.New("inproc: handler panic"))
				}
				return
			}
			w.finish()
		}()
		t.Handler.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		cancel(context.Cause(req.Context()))
		pr.CloseWithError(context.Cause(req.Context()))
		return nil, context.Cause(req.Context())
	}
	if w.err != nil && w.status == 0 {
		cancel(w.err)
		return nil, w.err
	}
	resp := &http.Response{
		Status:        strconv.Itoa(w.status) + " " + http.StatusText(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.snapshot,
		ContentLength: -1,
		Request:       req,
	}
	if cl := w.snapshot.Get("Content-Length"); cl != "" {
		if n, err := strconv.ParseInt(cl, 10, 64); err == nil {
			resp.ContentLength = n
		}
	}
	if declared := w.snapshot.Values("Trailer"); len(declared) > 0 {
		resp.Trailer = make(http.Header)
		w.trailer = resp.Trailer
	}
	resp.Body = &body{pr: pr, cancel: cancel}
	return resp, nil
}

type body struct {
	pr     *io.PipeReader
	cancel context.CancelCauseFunc
	once   sync.Once
}

func (b *body) Read(p []byte) (int, error) { return b.pr.Read(p) }

func (b *body) Close() error {
	b.once.Do(func() {
		b.cancel(errBodyClosed)
		b.pr.CloseWithError(errBodyClosed)
	})
	return nil
}

type responseWriter struct {
	header   http.Header
	snapshot http.Header
	pw       *io.PipeWriter
	ready    chan struct{}
	status   int
	err      error
	once     sync.Once
	buf      bytes.Buffer // body written before the first flush, when no header was sent yet
	// trailer is the response's Trailer map, filled when the handler
	// returns (before the body's EOF, so the reader sees it after EOF).
	trailer http.Header
}

func (w *responseWriter) Header() http.Header { return w.header }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code >= 100 && code < 200 {
		return
	}
	w.status = code
	w.snapshot = w.header.Clone()
	if w.snapshot.Get("Content-Type") == "" && w.buf.Len() > 0 {
		w.snapshot.Set("Content-Type", http.DetectContentType(w.buf.Bytes()))
	}
	w.once.Do(func() { close(w.ready) })
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		// Hold the first bytes so a response that never flushes arrives
		// whole with a Content-Length, like net/http's small responses.
		return w.buf.Write(p)
	}
	return w.pw.Write(p)
}

// Flush sends the header and anything buffered.
func (w *responseWriter) Flush() {
	w.sendHeader()
	if w.buf.Len() > 0 {
		b := w.buf.Bytes()
		w.buf.Reset()
		w.pw.Write(b)
	}
}

// FlushError lets http.ResponseController report a closed client.
func (w *responseWriter) FlushError() error {
	w.sendHeader()
	if w.buf.Len() > 0 {
		b := append([]byte(nil), w.buf.Bytes()...)
		w.buf.Reset()
		if _, err := w.pw.Write(b); err != nil {
			return err
		}
	}
	return nil
}

func (w *responseWriter) sendHeader() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
}

func (w *responseWriter) finish() {
	if w.status == 0 {
		w.header.Set("Content-Length", strconv.Itoa(w.buf.Len()))
		w.WriteHeader(http.StatusOK)
	}
	if w.buf.Len() > 0 {
		b := w.buf.Bytes()
		w.buf.Reset()
		w.pw.Write(b)
	}
	if w.trailer != nil {
		for k, vs := range w.header {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				w.trailer[http.CanonicalHeaderKey(name)] = vs
			}
		}
		for _, decl := range w.snapshot.Values("Trailer") {
			for _, k := range strings.Split(decl, ",") {
				k = http.CanonicalHeaderKey(strings.TrimSpace(k))
				if v, ok := w.header[k]; ok && w.trailer.Get(k) == "" {
					w.trailer[k] = v
				}
			}
		}
	}
	w.pw.Close()
}

func (w *responseWriter) abort(err error) {
	if w.status == 0 {
		w.err = err
		w.once.Do(func() { close(w.ready) })
	}
	w.pw.CloseWithError(err)
}
