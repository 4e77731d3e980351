package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// H1Transport is a lean HTTP/1.1 client for plain-http upstreams (the
// simulator, sidecars, local model servers): the caller's goroutine writes
// the request and reads the response on a pooled keep-alive connection, so
// an attempt costs no goroutine hand-offs and a connection holds no reader
// or writer goroutine of its own. net/http's Transport keeps two goroutines
// per connection; with thousands of concurrent streams their stacks were
// most of Keel's memory, and the hand-offs a third of its CPU per call.
//
// Everything it does not handle goes to Fallback unchanged: https (where
// HTTP/2 is negotiated), proxied hosts, requests without a known body
// length, hosts listed in Standard and, when MaxConnsPerHost is set, every
// host (the cap is Fallback's job).
type H1Transport struct {
	Fallback http.RoundTripper
	// Dial opens a connection; net.Dialer.DialContext in production.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Proxy, when set, is asked about each URL; a proxied URL goes to Fallback.
	Proxy func(*http.Request) (*url.URL, error)
	// MaxIdlePerHost caps kept-alive idle connections per host.
	MaxIdlePerHost int
	// IdleTimeout closes connections idle longer than this at their next use.
	IdleTimeout time.Duration
	// TrustIdle skips the liveness peek for a connection idle less than
	// this: a server closing a kept-alive connection within a second is
	// rare, and the peek is a system call on every call. Zero: always peek.
	TrustIdle time.Duration
	// Standard lists hosts ("host:port") that always use Fallback.
	Standard map[string]bool

	mu   sync.Mutex
	idle map[string][]*h1Conn
}

type h1Conn struct {
	conn   net.Conn
	br     *bufio.Reader
	host   string
	reused bool
	idleAt time.Time
}

var errBadHeader = errors.New("invalid header field for upstream request")

// RoundTrip implements http.RoundTripper.
func (t *H1Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	host, ok := t.handles(req)
	if !ok {
		return t.Fallback.RoundTrip(req)
	}
	ctx := req.Context()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkHeader(req); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	for try := 0; ; try++ {
		c, err := t.get(ctx, host)
		if err != nil {
			return nil, err
		}
		resp, err := t.exchange(ctx, c, req, body)
		if err == nil {
			return resp, nil
		}
		var we writeError
		var se staleError
		if (errors.As(err, &we) || errors.As(err, &se)) && c.reused && try == 0 && ctx.Err() == nil {
			// A kept-alive connection the server had already closed: the
			// write failed (the request never left), or the connection
			// ended before a single byte of answer (the server's idle close
			// raced the request; it read nothing of it). Sent once more on
			// a fresh connection, so a restart or an idle timeout upstream
			// costs no call and does not mark the endpoint down.
			continue
		}
		return nil, err
	}
}

// handles reports whether the lean path serves req, and its pool key.
func (t *H1Transport) handles(req *http.Request) (string, bool) {
	if req.URL.Scheme != "http" || req.URL.User != nil || (req.Body != nil && req.Body != http.NoBody && req.ContentLength < 0) {
		return "", false
	}
	if h := req.Header["Upgrade"]; len(h) > 0 && h[0] != "" { // Get("Upgrade") without canonicalising the constant
		return "", false
	}
	host := req.URL.Host
	if req.URL.Port() == "" {
		host = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	if t.Standard[host] {
		return "", false
	}
	if t.Proxy != nil {
		if p, err := t.Proxy(req); err != nil || p != nil {
			return "", false
		}
	}
	return host, true
}

func readBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	if bb, ok := req.Body.(*bytesBody); ok {
		// The provider's own body, in memory and never changed: its bytes
		// as they are, not a copy.
		if b, whole := bb.unread(); whole && int64(len(b)) == req.ContentLength {
			bb.Close()
			return b, nil
		}
	}
	b := make([]byte, 0, req.ContentLength)
	b, err := readFull(req.Body, b)
	req.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("reading request body: %w", err)
	}
	if int64(len(b)) != req.ContentLength {
		return nil, fmt.Errorf("request body is %d bytes, ContentLength says %d", len(b), req.ContentLength)
	}
	return b, nil
}

func readFull(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// writeError marks a failure to send the request (nothing was answered).
type writeError struct{ err error }

// staleError: a reused connection ended (EOF or reset) before any byte
// of the response.
type staleError struct{ err error }

func (e staleError) Error() string { return e.err.Error() }
func (e staleError) Unwrap() error { return e.err }

func (e writeError) Error() string { return e.err.Error() }
func (e writeError) Unwrap() error { return e.err }

// exchange sends req on c and reads the response head.
func (t *H1Transport) exchange(ctx context.Context, c *h1Conn, req *http.Request, body []byte) (*http.Response, error) {
	// A cancelled context unblocks the connection's reads and writes at
	// once; stop disarms it when the exchange ends.
	stop := context.AfterFunc(ctx, func() { c.conn.SetDeadline(time.Unix(1, 0)) })
	fail := func(err error) (*http.Response, error) {
		stop()
		c.conn.Close()
		if cerr := ctx.Err(); cerr != nil {
			return nil, &net.OpError{Op: "read", Net: "tcp", Err: context.Cause(ctx)}
		}
		if c.reused {
			// A kept-alive connection the server dropped: it most likely
			// dropped its siblings too (a restart, a deploy). Close them all
			// now rather than fail one call on each.
			t.closeIdle(c.host)
		}
		return nil, err
	}
	// The request is framed in a pooled buffer and written at once: no
	// per-connection write buffer held for the connection's life.
	// A large body goes out with its head in one writev, uncopied.
	bp := reqBufs.Get().(*[]byte)
	var err error
	if len(body) > 16<<10 {
		head := appendRequest((*bp)[:0], req, nil, len(body))
		bufs := net.Buffers{head, body}
		_, err = bufs.WriteTo(c.conn)
		*bp = head
	} else {
		wire := appendRequest((*bp)[:0], req, body, len(body))
		_, err = c.conn.Write(wire)
		*bp = wire
	}
	if cap(*bp) <= 64<<10 {
		reqBufs.Put(bp)
	}
	if err != nil {
		return fail(writeError{err})
	}
	var resp *http.Response
	for n := 0; ; n++ {
		fresh := n == 0 && c.br.Buffered() == 0
		r, err := readResponse(c.br, req)
		if err != nil {
			stale := fresh && c.reused && (err == io.EOF || errors.Is(err, syscall.ECONNRESET))
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			if stale {
				err = staleError{err}
			}
			return fail(err)
		}
		if r.StatusCode >= 100 && r.StatusCode < 200 && r.StatusCode != http.StatusSwitchingProtocols {
			continue // 1xx informational: the answer follows
		}
		resp = r
		break
	}
	b := &h1Body{t: t, c: c, stop: stop, ctx: ctx, reuse: !resp.Close && !req.Close}
	switch {
	case req.Method == http.MethodHead || resp.StatusCode == http.StatusNoContent || resp.StatusCode == http.StatusNotModified || resp.ContentLength == 0:
		// Nothing to read: the connection is free now.
		b.finish(true)
		resp.Body = http.NoBody
		return resp, nil
	case resp.ContentLength > 0:
		b.lr = io.LimitedReader{R: c.br, N: resp.ContentLength}
		b.r = &b.lr
	case chunked(resp):
		b.r = httputil.NewChunkedReader(c.br)
		b.chunked = true
	default:
		// No length, not chunked: the body runs to the connection's close.
		b.r, b.reuse = c.br, false
	}
	resp.Body = b
	return resp, nil
}

func chunked(r *http.Response) bool {
	for _, te := range r.TransferEncoding {
		if te == "chunked" {
			return true
		}
	}
	return false
}

// checkHeader rejects a request whose host or headers could not be
// written verbatim (CR, LF or other controls: header injection).
func checkHeader(req *http.Request) error {
	if !validValue(reqHost(req)) {
		return errBadHeader
	}
	for k, vs := range req.Header {
		if !validKey(k) {
			return fmt.Errorf("%w: key %q", errBadHeader, k)
		}
		for _, v := range vs {
			if !validValue(v) {
				return fmt.Errorf("%w: value of %s", errBadHeader, k)
			}
		}
	}
	return nil
}

func reqHost(req *http.Request) string {
	if req.Host != "" {
		return req.Host
	}
	return req.URL.Host
}

var reqBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// appendRequest appends the request line, headers and body to b (n is
// the body's length; body may be nil to append the head alone);
// checkHeader has vetted them.
func appendRequest(b []byte, req *http.Request, body []byte, n int) []byte {
	host := reqHost(req)
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		switch http.CanonicalHeaderKey(k) {
		case "Host", "Content-Length", "Transfer-Encoding", "Connection":
			continue // framing is this writer's
		}
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	if n > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(n), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	return append(b, body...)
}

// validKey reports whether k is a header field name: one or more token
// characters (RFC 9110 §5.1, §5.6.2).
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !tokenChar[k[i]] {
			return false
		}
	}
	return true
}

// tokenChar marks the bytes of an HTTP token: visible ASCII but the
// delimiters. A table, as a byte's search in the delimiters cost ≈ 2 µs of
// CPU per call over the request's and the answer's header names.
var tokenChar = func() (t [256]bool) {
	for c := '!'; c < 0x7f; c++ {
		t[c] = !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c)
	}
	return t
}()

func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// h1Body is a response body; reading it to the end returns its connection
// to the pool, closing it early closes the connection.
type h1Body struct {
	t       *H1Transport
	c       *h1Conn
	r       io.Reader
	lr      io.LimitedReader // r's storage for a body of known length
	chunked bool
	stop    func() bool
	ctx     context.Context
	reuse   bool
	done    bool
}

func (b *h1Body) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if lr, ok := b.r.(*io.LimitedReader); ok && lr.N == 0 && err == nil {
		err = io.EOF // the whole body is in: say so now, not on the next Read
	}
	if err == io.EOF {
		if lr, ok := b.r.(*io.LimitedReader); ok && lr.N > 0 {
			err = io.ErrUnexpectedEOF // the connection closed mid-body
		} else if b.chunked && skipTrailer(b.c.br) != nil {
			err = io.ErrUnexpectedEOF
		} else {
			b.finish(b.reuse)
			return n, io.EOF
		}
	}
	if err != nil {
		b.finish(false)
		if b.ctx.Err() != nil {
			err = &net.OpError{Op: "read", Net: "tcp", Err: context.Cause(b.ctx)}
		}
	}
	return n, err
}

// skipTrailer reads the trailer section after a chunked body's last chunk,
// up to its empty line, so the connection is positioned at the next answer.
func skipTrailer(br *bufio.Reader) error {
	for range 100 {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return err
		}
		if len(line) <= 2 && strings.TrimRight(string(line), "\r\n") == "" {
			return nil
		}
	}
	return errors.New("too many trailer lines")
}

func (b *h1Body) Close() error {
	if !b.done {
		b.finish(false)
	}
	return nil
}

// finish ends the exchange: the connection goes back to the pool when it
// is clean (fully read, keep-alive, the cancel hook not fired), else closed.
func (b *h1Body) finish(reuse bool) {
	if b.done {
		return
	}
	b.done = true
	if b.stop() && reuse {
		b.t.put(b.c)
		return
	}
	b.c.conn.Close()
}

// get returns a live idle connection to host or dials a new one.
func (t *H1Transport) get(ctx context.Context, host string) (*h1Conn, error) {
	now := time.Now()
	for {
		t.mu.Lock()
		list := t.idle[host]
		if len(list) == 0 {
			t.mu.Unlock()
			break
		}
		c := list[len(list)-1]
		list[len(list)-1] = nil
		t.idle[host] = list[:len(list)-1]
		t.mu.Unlock()
		idle := now.Sub(c.idleAt)
		if t.IdleTimeout > 0 && idle > t.IdleTimeout || idle >= t.TrustIdle && !alive(c.conn) {
			c.conn.Close()
			continue
		}
		c.reused = true
		return c, nil
	}
	conn, err := t.Dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	return &h1Conn{conn: conn, br: bufio.NewReaderSize(conn, 2<<10), host: host}, nil
}

// put returns a clean connection to the pool, or closes it when the pool
// is full.
func (t *H1Transport) put(c *h1Conn) {
	c.idleAt = time.Now()
	t.mu.Lock()
	if t.idle == nil {
		t.idle = make(map[string][]*h1Conn)
	}
	list := t.idle[c.host]
	max := t.MaxIdlePerHost
	if max <= 0 {
		max = 1024
	}
	if len(list) >= max {
		t.mu.Unlock()
		c.conn.Close()
		return
	}
	t.idle[c.host] = append(list, c)
	t.mu.Unlock()
}

// closeIdle closes host's pooled connections.
func (t *H1Transport) closeIdle(host string) {
	t.mu.Lock()
	list := t.idle[host]
	delete(t.idle, host)
	t.mu.Unlock()
	for _, c := range list {
		c.conn.Close()
	}
}

// CloseIdleConnections closes every pooled connection (and Fallback's).
func (t *H1Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, list := range idle {
		for _, c := range list {
			c.conn.Close()
		}
	}
	if ci, ok := t.Fallback.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// maxHeaderBytes bounds a response head.
const maxHeaderBytes = 1 << 20

// commonKeys interns the canonical names of headers upstreams send on every
// answer, so parsing them allocates nothing.
var commonKeys = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{
		"Content-Type", "Content-Length", "Transfer-Encoding", "Connection", "Date", "Server",
		"Keep-Alive", "Cache-Control", "Vary", "Via", "Request-Id", "X-Request-Id", "Retry-After",
		"Anthropic-Ratelimit-Requests-Limit", "Anthropic-Ratelimit-Requests-Remaining",
		"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Limit",
		"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Reset",
		"Anthropic-Ratelimit-Input-Tokens-Limit", "Anthropic-Ratelimit-Input-Tokens-Remaining",
		"Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Limit",
		"Anthropic-Ratelimit-Output-Tokens-Remaining", "Anthropic-Ratelimit-Output-Tokens-Reset",
		"Anthropic-Organization-Id", "X-Ratelimit-Limit-Requests", "X-Ratelimit-Limit-Tokens",
		"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Requests",
		"X-Ratelimit-Reset-Tokens", "Openai-Processing-Ms", "Openai-Version", "Openai-Organization",
		"X-Should-Retry", "X-Sim-Endpoint", "X-Sim-Queue-Ms", "X-Sim-Region", "X-Sim-Fault",
		"Strict-Transport-Security", "Cf-Ray", "Cf-Cache-Status", "Alt-Svc", "Set-Cookie",
	} {
		m[k] = k
	}
	return m
}()

// readResponse reads a response head from br: a lean http.ReadResponse
// that copies the head once and slices every value out of that copy, with
// canonical names interned. The body is left in br for the caller.
func readResponse(br *bufio.Reader, req *http.Request) (*http.Response, error) {
	// One buffer for a usual head (an API answer's is 0.3–1 KiB), not a
	// growth from nothing line by line.
	head := make([]byte, 0, 1024)
	lines := 0
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			head = append(head, line...)
			if len(head) > maxHeaderBytes {
				return nil, errors.New("response head too large")
			}
			continue
		}
		if err != nil {
			if len(head) == 0 && len(line) == 0 {
				return nil, err
			}
			return nil, io.ErrUnexpectedEOF
		}
		head = append(head, line...)
		if len(head) > maxHeaderBytes {
			return nil, errors.New("response head too large")
		}
		if len(line) <= 2 && (len(line) == 1 || line[0] == '\r') {
			break
		}
		lines++
	}
	s := string(head)
	nl := strings.IndexByte(s, '\n')
	status := strings.TrimSuffix(s[:nl], "\r")
	s = s[nl+1:]
	proto, rest, ok := strings.Cut(status, " ")
	major, minor, pok := http.ParseHTTPVersion(proto)
	if !ok || !pok || major != 1 {
		return nil, fmt.Errorf("malformed HTTP status line %q", status)
	}
	codeStr, _, _ := strings.Cut(strings.TrimLeft(rest, " "), " ")
	code, err := strconv.Atoi(codeStr)
	if err != nil || len(codeStr) != 3 || code < 100 {
		return nil, fmt.Errorf("malformed HTTP status code %q", codeStr)
	}
	resp := &http.Response{
		// As net/http: the status line after the version, left-trimmed
		// (a substring of the head: no allocation).
		Status:        strings.TrimLeft(rest, " "),
		StatusCode:    code,
		Proto:         proto,
		ProtoMajor:    major,
		ProtoMinor:    minor,
		Header:        make(http.Header, lines),
		ContentLength: -1,
		Request:       req,
	}
	vals := make([]string, 0, lines)
	last := ""
	for {
		nl := strings.IndexByte(s, '\n')
		line := strings.TrimSuffix(s[:nl], "\r")
		s = s[nl+1:]
		if line == "" {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			// Obsolete line folding: a user agent replaces it with a space
			// (RFC 9112 §5.2), as net/textproto does.
			if last == "" {
				return nil, errors.New("malformed response header: a continuation line before any header")
			}
			cont := strings.Trim(line, " \t")
			if !validValue(cont) {
				return nil, fmt.Errorf("malformed response header line %q", line)
			}
			vs := resp.Header[last]
			joined := strings.TrimLeft(vs[len(vs)-1]+" "+cont, " \t")
			resp.Header[last] = append(vs[:len(vs)-1:len(vs)-1], joined)
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || !validKey(strings.ReplaceAll(k, " ", "x")) {
			return nil, fmt.Errorf("malformed response header line %q", line)
		}
		ck, ok := commonKeys[k]
		if !ok && !strings.Contains(k, " ") {
			// A key with a space (seen in the wild) is kept as sent, as
			// net/textproto keeps it (go.dev/issue/34540).
			ck = http.CanonicalHeaderKey(k)
		} else if !ok {
			ck = k
		}
		v = strings.Trim(v, " \t")
		if !validValue(v) {
			return nil, fmt.Errorf("malformed response header line %q", line)
		}
		last = ck
		if old := resp.Header[ck]; old != nil {
			resp.Header[ck] = append(old, v)
			continue
		}
		vals = append(vals, v)
		resp.Header[ck] = vals[len(vals)-1 : len(vals) : len(vals)]
	}
	h := resp.Header
	if minor == 0 {
		// HTTP/1.0 has no transfer codings: the header is ignored, as
		// net/http ignores it.
		delete(h, "Transfer-Encoding")
	}
	if te := h["Transfer-Encoding"]; len(te) > 0 {
		if len(te) != 1 || !strings.EqualFold(te[0], "chunked") {
			return nil, fmt.Errorf("unsupported transfer encoding %q", te)
		}
		resp.TransferEncoding = []string{"chunked"}
		h.Del("Transfer-Encoding")
		h.Del("Content-Length")
	} else if cl := h["Content-Length"]; len(cl) > 0 {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return nil, fmt.Errorf("conflicting Content-Length values %q", cl)
			}
		}
		n, err := strconv.ParseInt(cl[0], 10, 64)
		if err != nil || n < 0 || strings.TrimLeft(cl[0], "0123456789") != "" {
			return nil, fmt.Errorf("malformed Content-Length %q", cl[0])
		}
		resp.ContentLength = n
	}
	bodyless := code < 200 || code == http.StatusNoContent || code == http.StatusNotModified || req.Method == http.MethodHead
	if bodyless {
		resp.ContentLength = 0
	} else if resp.ContentLength < 0 && resp.TransferEncoding == nil {
		resp.Close = true // the body runs to the connection's close
	}
	conn := strings.ToLower(strings.Join(h["Connection"], ","))
	switch {
	case strings.Contains(conn, "close"):
		resp.Close = true
	case minor == 0 && !strings.Contains(conn, "keep-alive"):
		resp.Close = true
	}
	return resp, nil
}
