package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Error kinds counted in TargetResult.ErrorsByKind besides "status_NNN"
// (an HTTP error without a mesh code) and the MESH_* codes (an error Keel
// decided, read from the body's mesh_error_code).
const (
	KindTransport       = "transport"        // connection refused or reset, before a status
	KindTimeout         = "timeout"          // no complete answer within Options.Timeout
	KindStreamError     = "stream_error"     // the wire's error event inside a 200 stream
	KindStreamCut       = "stream_cut"       // a stream that ended without the wire's terminator
	KindInvalidJSON     = "invalid_json"     // asked for JSON, got an answer that does not parse
	KindInvalidResponse = "invalid_response" // a 200 whose body is not the wire's answer
)

// jsonSchema is the schema a JSON-mode request asks for.
const jsonSchema = `{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},` +
	`"mitigation_steps":{"type":"array","items":{"type":"string"}},"confidence_score":{"type":"number","minimum":0,"maximum":1}},` +
	`"required":["risk_level","mitigation_steps","confidence_score"]}`

// endpointPath returns the API URL of a target base for format f: a base
// that already names the API path is used as is, one ending in /v1 gets the
// path's tail, anything else gets the whole path.
func endpointPath(base string, f llm.Format) string {
	base = strings.TrimRight(base, "/")
	tail := wire.For(f).Path()
	switch {
	case strings.HasSuffix(base, "/v1/messages"), strings.HasSuffix(base, "/v1/chat/completions"):
		return base
	case strings.HasSuffix(base, "/v1"):
		return base + strings.TrimPrefix(tail, "/v1")
	}
	return base + tail
}

// bodyTemplate is a request body cut around the call's sequence number, so
// that a call only copies it and writes its number.
type bodyTemplate struct{ pre, post []byte }

func newBodyTemplate(r *Request, f llm.Format) bodyTemplate {
	// The request is encoded by the format's codec with a marker where the
	// sequence number goes (JSON writes the NUL as \u0000, which no other
	// part of the body contains), and cut there.
	const marker = "\x00"
	req := &llm.Request{Format: f, Model: r.Model, MaxTokens: r.MaxTokens, HasMaxTokens: true, Stream: r.Stream, IncludeUsage: r.Stream,
		Messages: []llm.Message{{Role: llm.RoleUser, ContentIsString: true,
			Content: []llm.Block{{Type: llm.BlockText, Text: r.Prompt + " (request " + marker + ")"}}}}}
	if r.JSON {
		// Structured outputs in the format's own form (Anthropic's schema
		// subset for Anthropic).
		if jr, err := translate.WithOutputSchema(req, f, json.RawMessage(jsonSchema)); err == nil {
			req = jr
		}
	}
	body, err := wire.For(f).EncodeRequest(req)
	if err != nil {
		panic("bench: encoding the request template: " + err.Error())
	}
	pre, post, _ := bytes.Cut(body, []byte(`\u0000`))
	return bodyTemplate{pre: pre, post: post}
}

// appendBody appends the body of call number seq to dst.
func (t *bodyTemplate) appendBody(dst []byte, seq uint64) []byte {
	dst = append(dst, t.pre...)
	dst = strconv.AppendUint(dst, seq, 10)
	return append(dst, t.post...)
}

// maxBodyDigits bounds the length of a call's sequence number.
const maxBodyDigits = 20

// outcome is what one call produced.
type outcome struct {
	kind  string // "" on success
	ttft  time.Duration
	usage llm.Usage
	// answered is true when the upstream produced a complete answer (which
	// it bills), even if the answer was invalid JSON.
	answered bool
}

// caller sends calls of one format to one URL. It is safe for concurrent
// use: what its calls share (the parsed URL, the header, the body template)
// is never written after newCaller.
type caller struct {
	client *http.Client
	format llm.Format
	req    *Request
	// tmpl is the request each call copies with its context and body; nil
	// when the URL does not parse, and then every call is a transport
	// error.
	tmpl *http.Request
	body bodyTemplate
}

func newCaller(client *http.Client, url string, format llm.Format, req *Request) *caller {
	c := &caller{client: client, format: format, req: req, body: newBodyTemplate(req, format)}
	tmpl, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return c
	}
	h := tmpl.Header
	h["Content-Type"] = []string{"application/json"}
	codec := wire.For(format)
	codec.SetAuth(func(k, v string) { h[k] = []string{v} }, "keel-bench", codec.APIVersion("", nil))
	c.tmpl = tmpl
	return c
}

// respBufs holds buffers for non-streaming answers, which the parsers copy.
var respBufs sync.Pool // of *[]byte

// maxPooledResp bounds the buffers kept in respBufs.
const maxPooledResp = 256 << 10

// call sends call number seq and classifies the answer. TTFT is measured
// from intended (the time the call was due) to the first content delta.
func (c *caller) call(ctx context.Context, seq uint64, intended time.Time) outcome {
	if c.tmpl == nil {
		return outcome{kind: KindTransport}
	}
	body := c.body.appendBody(make([]byte, 0, len(c.body.pre)+maxBodyDigits+len(c.body.post)), seq)
	// A shallow copy of the template: the URL and the header are shared and
	// only read (neither Client nor Transport writes a request's), and the
	// body is set up as NewRequest does for a *bytes.Reader.
	hr := c.tmpl.WithContext(ctx)
	hr.ContentLength = int64(len(body))
	hr.Body = io.NopCloser(bytes.NewReader(body))
	hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	resp, err := c.client.Do(hr)
	if err != nil {
		return outcome{kind: transportKind(ctx, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		ae := wire.For(c.format).ParseError(resp.StatusCode, resp.Header, b)
		if ae.MeshCode != "" {
			return outcome{kind: ae.MeshCode}
		}
		return outcome{kind: "status_" + strconv.Itoa(resp.StatusCode)}
	}
	if c.req.Stream {
		return c.readStream(ctx, resp.Body, intended)
	}
	bp, _ := respBufs.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	defer func() {
		if cap(*bp) <= maxPooledResp {
			respBufs.Put(bp)
		}
	}()
	b, err := readAll(resp.Body, (*bp)[:0], resp.ContentLength)
	*bp = b
	if err != nil {
		return outcome{kind: transportKind(ctx, err)}
	}
	r, err := wire.For(c.format).ParseResponse(b)
	if err != nil {
		return outcome{kind: KindInvalidResponse}
	}
	o := outcome{usage: r.Usage, answered: true}
	if c.req.JSON && !validJSON(r.Text()) {
		o.kind = KindInvalidJSON
	}
	return o
}

// streamBufSize is the buffer size of the SSE reader (internal/sse): it
// uses a *bufio.Reader at least this large as is instead of wrapping it in
// a new one.
const streamBufSize = 4 << 10

// streamBufs holds the buffered readers of streams, so that a stream does
// not allocate its buffer.
var streamBufs = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, streamBufSize) }}

// readStream reads a 200 stream to its end.
func (c *caller) readStream(ctx context.Context, body io.Reader, intended time.Time) outcome {
	br := streamBufs.Get().(*bufio.Reader)
	br.Reset(body)
	defer func() {
		br.Reset(nil)
		streamBufs.Put(br)
	}()
	next := wire.For(c.format).NewStreamReader(br).Next
	var o outcome
	var text strings.Builder // the answer's text, kept only to check JSON
	for {
		ev, err := next()
		if err == io.EOF {
			break
		}
		if err != nil {
			switch {
			case ctx.Err() != nil:
				o.kind = KindTimeout
			case errors.Is(err, io.ErrUnexpectedEOF):
				o.kind = KindStreamCut
			default:
				var ae *llm.APIError
				if errors.As(err, &ae) {
					o.kind = KindInvalidResponse
				} else {
					o.kind = KindTransport
				}
			}
			return o
		}
		switch ev.Type {
		case llm.EventMessageStart:
			if ev.Message != nil {
				o.usage = ev.Message.Usage
			}
		case llm.EventBlockDelta:
			if o.ttft == 0 {
				o.ttft = time.Since(intended)
			}
			if c.req.JSON && ev.DeltaType == llm.DeltaText {
				text.WriteString(ev.Delta)
			}
		case llm.EventMessageDelta:
			if u := ev.Usage; u != nil {
				if u.InputTokens != 0 {
					o.usage.InputTokens = u.InputTokens
				}
				o.usage.OutputTokens = u.OutputTokens
			}
		case llm.EventError:
			o.kind = KindStreamError
			return o
		}
	}
	o.answered = true
	if c.req.JSON && !validJSON(text.String()) {
		o.kind = KindInvalidJSON
	}
	return o
}

// readAll is io.ReadAll appending to buf, sized from a known length n.
func readAll(r io.Reader, buf []byte, n int64) ([]byte, error) {
	if n > 0 && n < maxPooledResp {
		buf = slices.Grow(buf, int(n)+1) // +1: reading EOF does not grow it
	}
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 512)
		}
		m, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// validJSON reports whether an answer is one JSON value (surrounding
// whitespace allowed, nothing else).
func validJSON(s string) bool {
	s = strings.TrimSpace(s)
	return s != "" && json.Valid([]byte(s))
}

// transportKind classifies an error that came before or instead of a
// complete answer.
func transportKind(ctx context.Context, err error) string {
	var ne net.Error
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
		return KindTimeout
	}
	return KindTransport
}

// checkReachable dials the host of a target URL, so an unreachable target
// fails before the run rather than as a run full of transport errors.
func checkReachable(ctx context.Context, rawURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return fmt.Errorf("invalid URL %q", rawURL)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("invalid URL %q (want http:// or https://)", rawURL)
	}
	host := req.URL.Host
	if req.URL.Port() == "" {
		port := "80"
		if req.URL.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(req.URL.Hostname(), port)
	}
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("unreachable: %w", unwrapOp(err))
	}
	conn.Close()
	return nil
}

// unwrapOp shortens "dial tcp 127.0.0.1:1: connect: connection refused" to
// its cause.
func unwrapOp(err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Err != nil {
		return fmt.Errorf("%s %s: %w", oe.Op, oe.Addr, oe.Err)
	}
	return err
}
