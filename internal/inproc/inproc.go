// Package inproc serves HTTP requests to an http.Handler inside the process,
// with no sockets: an http.RoundTripper whose responses stream.
//
// The handler runs in its own goroutine per request, unless Buffered says
// the answer can wait for the handler to return: then it runs on the
// caller's goroutine and its answer is buffered whole (no goroutine, no
// pipe; a fresh goroutine's stack growth alone was a sixth of an embedded
// call's CPU). RoundTrip returns as soon as the handler sends its header
// (WriteHeader, a Flush, or its return; bytes written before that are held,
// so an answer that never flushes arrives whole with a Content-Length, as
// net/http's small answers do); the body then streams through a pipe until
// the handler returns. The handler's context is cancelled when the client
// closes the body, when the request's context is cancelled, or when the
// handler returns, and the request body is closed once the handler is done.
//
// A request whose context is done before the handler sends its header
// gets the context's error (its cause), whatever the handler does next,
// as a client that gave up before the answer's header sees it; a header
// sent before that is the answer, whatever its status.
//
// A handler that panics with http.ErrAbortHandler after sending its header
// makes the body read fail with io.ErrUnexpectedEOF, as a cut connection
// does; before its header, RoundTrip fails (see Transport.ResetError).
// Trailers arrive as net/http's client shows what its server sends: the
// Trailer header becomes Response.Trailer's keys, and the values (those
// of the declared names and of http.TrailerPrefix keys) are there once the
// body has read io.EOF.
//
// A Transport is safe for concurrent use. It uses no sockets, so it works
// inside a testing/synctest bubble.
package inproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Transport is an http.RoundTripper that calls Handler directly.
type Transport struct {
	Handler http.Handler
	// Buffered, when set, is given each request and its body (read whole
	// first) and says whether the handler may run on the caller's
	// goroutine with its answer buffered: true for answers that do not
	// stream. A handler that flushes anyway is still served correctly,
	// only not incrementally. Such a handler must not change its header
	// map after WriteHeader other than to set trailers (http.TrailerPrefix
	// keys, or the names of a Trailer header it sent): unless it declared
	// trailers, the map is the answer's header, not a copy.
	Buffered func(req *http.Request, body []byte) bool
	// Context, when set, derives the context the handler sees from the
	// request's (adding values) without another copy of the request.
	Context func(context.Context) context.Context
	// ResetError, when set, gives the error RoundTrip returns when the
	// handler aborts (panics with http.ErrAbortHandler) before sending its
	// header: what a client sees of a connection reset before any answer.
	// Nil gives io.ErrUnexpectedEOF.
	ResetError func() error
}

func (t *Transport) context(req *http.Request) context.Context {
	if t.Context != nil {
		return t.Context(req.Context())
	}
	return req.Context()
}

// errBodyClosed is the cancellation cause when the client closed the body.
var errBodyClosed = errors.New("inproc: response body closed by client")

// RoundTrip implements http.RoundTripper. It does not modify req.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	var reqBody []byte
	read := false
	if t.Buffered != nil && req.Body != nil && req.Body != http.NoBody {
		var err error
		reqBody, err = readAll(req.Body, req.ContentLength)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		read = true
	}
	if t.Buffered != nil && t.Buffered(req, reqBody) {
		return t.serveBuffered(req, reqBody, read)
	}
	ctx, cancel := context.WithCancelCause(t.context(req))
	sreq := req.Clone(ctx)
	if req.Body == nil {
		sreq.Body = http.NoBody
	}
	if read {
		sreq.Body, sreq.ContentLength = newMemBody(reqBody), int64(len(reqBody))
	}
	serverSide(sreq)
	if sreq.ContentLength <= 0 && req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		sreq.ContentLength = -1
	}
	pr, pw := io.Pipe()
	w := &responseWriter{
		header: make(http.Header),
		pw:     pw,
		ready:  make(chan struct{}),
		ctx:    req.Context(),
	}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				w.abort(t.panicError(v, w.status != 0))
			} else {
				w.finish()
			}
			// As net/http does once ServeHTTP returns; an earlier cause
			// (the client closed the body) stays.
			cancel(errHandlerDone)
			// The RoundTripper contract: the transport closes the request
			// body, here once the handler is done with it.
			if !read && req.Body != nil {
				req.Body.Close()
			}
		}()
		t.Handler.ServeHTTP(w, sreq)
	}()
	select {
	case <-w.ready:
	case <-req.Context().Done():
		// The context's error, unless the handler sent its header first
		// (both channels ready: select would pick either).
		w.decide(nil)
	}
	if w.err != nil {
		cancel(w.err)
		pr.CloseWithError(w.err)
		return nil, w.err
	}
	resp := w.response(req)
	if cl := w.snapshot["Content-Length"]; len(cl) > 0 && cl[0] != "" { // Get("Content-Length") without canonicalising the constant
		if n, err := strconv.ParseInt(cl[0], 10, 64); err == nil {
			resp.ContentLength = n
		}
	}
	resp.Body = &body{pr: pr, cancel: cancel, resp: resp, w: w}
	return resp, nil
}

// readAll reads a request body whole, sized by its declared length.
func readAll(r io.Reader, n int64) ([]byte, error) {
	if n <= 0 || n > 64<<20 {
		return io.ReadAll(r)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	// The declared length must be the whole body.
	var one [1]byte
	if k, _ := r.Read(one[:]); k > 0 {
		rest, err := io.ReadAll(r)
		return append(append(b, one[0]), rest...), err
	}
	return b, nil
}

// errHandlerDone cancels a handler's context when it returns, as net/http
// does.
var errHandlerDone = errors.New("inproc: handler returned")

// serveBuffered runs the handler on the caller's goroutine and answers
// with what it wrote.
func (t *Transport) serveBuffered(req *http.Request, body []byte, read bool) (*http.Response, error) {
	x, err := t.exchangeBuffered(req, body, read)
	if err != nil {
		return nil, err
	}
	return &x.resp, nil
}

// exchangeBuffered is serveBuffered's exchange; the answer is its resp.
func (t *Transport) exchangeBuffered(req *http.Request, body []byte, read bool) (*bufferedExchange, error) {
	ctx, cancel := context.WithCancelCause(t.context(req))
	defer cancel(errHandlerDone)
	sreq := req.WithContext(ctx) // shallow: the handler reads, never writes, the request
	x := &bufferedExchange{}
	sreq.Body, sreq.ContentLength = http.NoBody, 0
	if read {
		x.reqBody.Reset(body)
		sreq.Body, sreq.ContentLength = &x.reqBody, int64(len(body))
	}
	serverSide(sreq)
	w := &x.w
	*w = responseWriter{header: make(http.Header, 16), buffered: true, ctx: req.Context()} // an answer's dozen headers without growing
	var fail error
	func() {
		defer func() {
			if v := recover(); v != nil {
				fail = t.panicError(v, w.status != 0)
			}
		}()
		t.Handler.ServeHTTP(w, sreq)
	}()
	// The handler is done with the request's body: the answer, which
	// shares x's allocation, must not keep it (a long prompt) for as long
	// as the caller keeps the answer.
	x.reqBody.Reset(nil)
	if w.status == 0 {
		if fail != nil {
			w.decide(fail)
		} else {
			w.header.Set("Content-Length", strconv.Itoa(w.buf.Len()))
			w.WriteHeader(http.StatusOK)
		}
	}
	if w.err != nil {
		return nil, w.err
	}
	resp := &x.resp
	w.fill(resp, req)
	if fail == nil {
		resp.ContentLength = int64(w.buf.Len())
	}
	w.finalTrailer()
	mergeTrailer(resp, w.trailer)
	if fail != nil {
		resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(w.buf.Bytes()), errReader{fail}))
	} else {
		x.body.Reset(w.buf.Bytes())
		resp.Body = &x.body
	}
	return x, nil
}

// bufferedExchange is what a buffered exchange allocates, in one
// allocation: the handler's writer, the request's body as the handler
// reads it, the answer and its body.
type bufferedExchange struct {
	w       responseWriter
	reqBody memBody
	resp    http.Response
	body    memBody
}

// serverSide fills the fields a server sets on the requests it serves.
func serverSide(r *http.Request) {
	if r.RequestURI == "" {
		r.RequestURI = r.URL.RequestURI()
	}
	if r.RemoteAddr == "" {
		r.RemoteAddr = "127.0.0.1:0"
	}
	if r.Host == "" {
		r.Host = r.URL.Host
	}
}

// panicError is what a handler's panic becomes for the caller:
// http.ErrAbortHandler reads as a cut connection, or as ResetError before
// the header was sent.
func (t *Transport) panicError(v any, headerSent bool) error {
	if v != http.ErrAbortHandler {
		return fmt.Errorf("inproc: handler panic: %v", v)
	}
	if !headerSent && t.ResetError != nil {
		return t.ResetError()
	}
	return io.ErrUnexpectedEOF
}

// response is the answer's head as the handler wrote it. As in net/http's
// client, the Trailer header is not in Header: it names Trailer's keys,
// with nil values until the body's EOF.
func (w *responseWriter) response(req *http.Request) *http.Response {
	resp := new(http.Response)
	w.fill(resp, req)
	return resp
}

// fill sets resp to the answer's head (response's).
func (w *responseWriter) fill(resp *http.Response, req *http.Request) {
	*resp = http.Response{
		Status:        statusLine(w.status),
		StatusCode:    w.status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        w.snapshot,
		ContentLength: -1,
		Request:       req,
	}
	if len(w.declared) > 0 {
		resp.Trailer = make(http.Header, len(w.declared))
		for _, k := range w.declared {
			resp.Trailer[k] = nil
		}
	}
}

// mergeTrailer adds the trailers the handler sent to resp.Trailer.
func mergeTrailer(resp *http.Response, t http.Header) {
	if len(t) == 0 {
		return
	}
	if resp.Trailer == nil {
		resp.Trailer = t
		return
	}
	for k, vs := range t {
		resp.Trailer[k] = vs
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

type body struct {
	pr     *io.PipeReader
	cancel context.CancelCauseFunc
	once   sync.Once
	// resp gets w's trailers on the reader's goroutine at EOF (which the
	// pipe orders after the handler's return); w is nil once it has.
	resp *http.Response
	w    *responseWriter
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.pr.Read(p)
	if err == io.EOF && b.w != nil {
		mergeTrailer(b.resp, b.w.trailer)
		b.w = nil
	}
	return n, err
}

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
	ready    chan struct{} // closed once decided (nil when buffered)
	status   int
	// ctx is the caller's context; mu orders the decision between the
	// handler's goroutine (its header or its failure) and the caller's
	// (its context done); err is what RoundTrip returns instead of the
	// answer, fixed once decided.
	ctx     context.Context
	mu      sync.Mutex
	decided bool
	err     error
	buf     bytes.Buffer // body written before the first flush, when no header was sent yet
	// buffered: the whole body goes to buf (serveBuffered); pw is nil.
	buffered bool
	// shared: snapshot is header itself (buffered, no Trailer declared).
	shared bool
	// declared are the names of the Trailer header as sent (set by
	// WriteHeader, before RoundTrip reads them).
	declared []string
	// trailer is what the handler sent as trailers, built on its goroutine
	// when it returns; the client's goroutine reads it only after the
	// body's EOF.
	trailer http.Header
}

func (w *responseWriter) Header() http.Header { return w.header }

// errNoDeadline is SetReadDeadline's answer: http.ErrNotSupported, as
// http.ResponseController answers for a writer without the method, made
// once (net/http formats a new error on every call: 2 allocations per
// embedded call, as keel's server asks at every body it reads).
var errNoDeadline = fmt.Errorf("inproc: no read deadline, the body is in memory: %w", http.ErrNotSupported)

// SetReadDeadline reports that the in-process writer has no read deadline:
// the request's body is in memory.
func (w *responseWriter) SetReadDeadline(time.Time) error { return errNoDeadline }

func (w *responseWriter) WriteHeader(code int) {
	if w.status != 0 {
		return
	}
	if code >= 100 && code < 200 {
		return
	}
	w.status = code
	if w.buffered && w.header["Trailer"] == nil {
		// The answer leaves only when the handler has returned, and a
		// Buffered handler leaves its header alone after WriteHeader but
		// for trailers (finalTrailer moves those out): the map is the
		// answer's header as it is, without a copy (8 allocations of an
		// embedded call's two hops).
		w.snapshot, w.shared = w.header, true
	} else {
		w.snapshot = w.header.Clone()
	}
	if ct := w.snapshot["Content-Type"]; (len(ct) == 0 || ct[0] == "") && w.buf.Len() > 0 { // Get("Content-Type") without canonicalising the constant
		w.snapshot.Set("Content-Type", http.DetectContentType(w.buf.Bytes()))
	}
	for _, decl := range w.snapshot["Trailer"] {
		for k := range strings.SplitSeq(decl, ",") {
			if k = strings.TrimSpace(k); k != "" {
				w.declared = append(w.declared, http.CanonicalHeaderKey(k))
			}
		}
	}
	delete(w.snapshot, "Trailer")
	w.decide(nil)
}

// decide fixes, the first time it is called, what RoundTrip answers: the
// header sent (err nil) or err, unless the caller's context is done by
// then: its cause. The handler calls it when it sends its header or fails
// before that, RoundTrip when the context is done first.
func (w *responseWriter) decide(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.decided {
		return
	}
	w.decided = true
	if w.ctx.Err() != nil {
		err = context.Cause(w.ctx)
	}
	w.err = err
	if w.ready != nil {
		close(w.ready)
	}
}

func (w *responseWriter) Write(p []byte) (int, error) {
	if w.status == 0 || w.buffered {
		// Hold the first bytes so a response that never flushes arrives
		// whole with a Content-Length, like net/http's small responses.
		return w.buf.Write(p)
	}
	return w.pw.Write(p)
}

// Flush sends the header and anything buffered.
func (w *responseWriter) Flush() {
	w.sendHeader()
	if w.buffered {
		return
	}
	if w.buf.Len() > 0 {
		b := w.buf.Bytes()
		w.buf.Reset()
		w.pw.Write(b)
	}
}

// FlushError lets http.ResponseController report a closed client.
func (w *responseWriter) FlushError() error {
	w.sendHeader()
	if w.buffered {
		return nil
	}
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
	w.finalTrailer()
	w.pw.Close()
}

// finalTrailer builds the trailers of a handler that returned as
// net/http's server does: the http.TrailerPrefix keys, then the values of
// the declared names, so that a name set both ways arrives twice here as
// it does over a socket.
func (w *responseWriter) finalTrailer() {
	var t http.Header
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
			if t == nil {
				t = make(http.Header)
			}
			t[http.CanonicalHeaderKey(name)] = vs
			if w.shared {
				delete(w.header, k) // a trailer, not a header of the answer
			}
		}
	}
	for _, k := range w.declared {
		for _, v := range w.header[k] {
			if t == nil {
				t = make(http.Header, len(w.declared))
			}
			t.Add(k, v)
		}
	}
	w.trailer = t
}

func (w *responseWriter) abort(err error) {
	if w.status == 0 {
		w.decide(err)
	}
	w.pw.CloseWithError(err)
}

// statusLine is Response.Status for code, as net/http's client sets it
// ("200 OK"): a constant for 200, the status of almost every answer.
func statusLine(code int) string {
	if code == http.StatusOK {
		return "200 OK"
	}
	return strconv.Itoa(code) + " " + http.StatusText(code)
}

// memBody is a body in memory: io.NopCloser over a bytes.Reader in one
// allocation instead of two.
type memBody struct{ bytes.Reader }

func newMemBody(b []byte) *memBody {
	r := &memBody{}
	r.Reset(b)
	return r
}

// Close does nothing: the bytes stay with their owner.
func (*memBody) Close() error { return nil }
