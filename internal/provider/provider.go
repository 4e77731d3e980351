// Package provider sends one attempt of a canonical request to one upstream
// endpoint and returns its answer as canonical values: a complete response,
// an event stream, or an error that says what went wrong.
//
// A Client is safe for concurrent use; it holds one shared, tuned
// http.Transport (or any RoundTripper a test injects). A Stream is used by one
// goroutine at a time and must be closed.
package provider

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Default Anthropic API version sent upstream when the client named none.
const DefaultAnthropicVersion = wire.DefaultAnthropicVersion

// AnthropicVersionNoSampling is the API version that rejects temperature,
// top_p and top_k outright (PROTOCOLS §0.1).
const AnthropicVersionNoSampling = wire.AnthropicVersionNoSampling

// Endpoint is one upstream: a model served by one provider in one region.
// Endpoints are immutable once built.
type Endpoint struct {
	// ID is "model/region/provider", stable across reloads.
	ID            string
	Model         string // the name clients use
	UpstreamModel string // the name sent upstream
	Region        string
	Provider      string
	Format        llm.Format
	// BaseURL is the provider base: https://api.anthropic.com for Anthropic
	// (the path /v1/messages is appended) or https://api.openai.com/v1 for
	// OpenAI (/chat/completions is appended).
	BaseURL string
	APIKey  string
	// AnthropicVersion is the anthropic-version the endpoint speaks, sent
	// with every call and the one whose rules apply (see APIVersion):
	// a date, AnthropicVersionClient, or "" for the default.
	AnthropicVersion string
	Header           http.Header

	// ResponseHeaderTimeout bounds the wait for response headers,
	// StreamIdleTimeout the gap between stream events and RequestTimeout
	// the whole attempt. Zero means no bound.
	ResponseHeaderTimeout time.Duration
	StreamIdleTimeout     time.Duration
	RequestTimeout        time.Duration

	// Translation is the endpoint's model's policy for features its wire
	// format cannot express ("drop" or "reject"); Call.Translation wins.
	Translation string

	// Continuation is how this endpoint continues a partial answer; empty
	// means the default of its format (see ContinuationKind).
	Continuation Continuation

	// StructuredOutputs is how this endpoint's model is asked for JSON
	// matching a schema Keel validates against (see SchemaMode); empty
	// means SchemaNative.
	StructuredOutputs SchemaMode

	Capability    int
	ContextWindow int
	// Domains scores the model per request domain (missing = 1).
	Domains map[string]float64
	// Price is the model's price (keel.New resolves it from the config's
	// model price, pricing section and built-in table); zero: unpriced.
	Price pricing.Price
	// Embedding marks an endpoint of an embedding model (models[].kind
	// embedding): it serves the Embeddings API (POST {base}/embeddings),
	// not model calls.
	Embedding bool
	// Host, when set, addresses and authenticates the endpoint's model
	// calls (Azure OpenAI, the Gemini API); nil: BaseURL and APIKey in
	// the format's way.
	Host Host
	// ContentFilter is the endpoint's model's policy when a content
	// filter refuses a prompt; empty means ContentFilterFail.
	ContentFilter ContentFilter
	// Platform, for an Anthropic-format endpoint, is the cloud serving the
	// model behind its own envelope, URL and authentication (Amazon
	// Bedrock, Google Vertex AI); nil for an API called at BaseURL with
	// APIKey.
	Platform Platform
}

// Continuation is how an upstream continues a partial answer it is sent
// back (PROTOCOLS.md §0.11). Only some servers continue one.
type Continuation string

// The continuation kinds.
const (
	// ContinuePrefill: a trailing assistant message is continued
	// (Anthropic Messages; llama.cpp's server without thinking).
	ContinuePrefill Continuation = "prefill"
	// ContinueFinalMessage: continued only with "continue_final_message":
	// true and "add_generation_prompt": false (vLLM, SGLang).
	ContinueFinalMessage Continuation = "continue_final_message"
	// ContinuePrefix: continued only when the final assistant message has
	// "prefix": true (DeepSeek, Mistral).
	ContinuePrefix Continuation = "prefix"
	// ContinueNone: a trailing assistant message is history and the model
	// starts a new answer (OpenAI Chat Completions).
	ContinueNone Continuation = "none"
)

// SchemaMode is how an upstream model takes a JSON Schema for its answer.
type SchemaMode string

// The schema modes.
const (
	// SchemaNative: the format's own structured outputs, OpenAI
	// response_format json_schema (gpt-4o-2024-08-06 and later, vLLM,
	// SGLang) or Anthropic output_config.format (Claude Sonnet 4.5,
	// Opus 4.1 and later).
	SchemaNative SchemaMode = "native"
	// SchemaTool: a forced tool call whose input schema is the schema,
	// folded back into text (models with tool use but no structured
	// outputs: earlier Claude models, many OpenAI-compatible servers).
	SchemaTool SchemaMode = "tool"
	// SchemaNone: the schema is not sent; the prompt asks for JSON and
	// Keel validates, repairs and re-asks.
	SchemaNone SchemaMode = "none"
)

// ParseSchemaMode maps a config value to a SchemaMode; "" is SchemaNative.
func ParseSchemaMode(s string) (SchemaMode, error) {
	switch m := SchemaMode(s); m {
	case "":
		return SchemaNative, nil
	case SchemaNative, SchemaTool, SchemaNone:
		return m, nil
	}
	return "", fmt.Errorf("unknown structured_outputs %q (want native, tool or none)", s)
}

// ParseContinuation maps a config value to a Continuation; "" is valid
// (the format's default).
func ParseContinuation(s string) (Continuation, error) {
	switch c := Continuation(s); c {
	case "", ContinuePrefill, ContinueFinalMessage, ContinuePrefix, ContinueNone:
		return c, nil
	}
	return "", fmt.Errorf("unknown continuation %q (want prefill, continue_final_message, prefix or none)", s)
}

// ContinuationKind is e's continuation kind: Continuation when set, else
// prefill for Anthropic endpoints and none for OpenAI ones (OpenAI does
// not continue a trailing assistant message; assuming it would duplicate
// text).
func (e *Endpoint) ContinuationKind() Continuation {
	if e.Continuation != "" {
		return e.Continuation
	}
	if wire.For(e.Format).Continues() {
		return ContinuePrefill
	}
	return ContinueNone
}

// URL returns the endpoint's request URL.
func (e *Endpoint) URL() string { return wire.For(e.Format).RequestURL(e.BaseURL) }

// AnthropicVersionClient as an endpoint's AnthropicVersion says it speaks
// every version, as Anthropic's API does: the client's header is sent.
const AnthropicVersionClient = "client"

// APIVersion is the API version a call to e sends, and whose rules apply
// to it ("" for formats without versions): the version e declares; the
// client's header (else the default) where e speaks every version —
// Anthropic's API, or an endpoint declaring AnthropicVersionClient; else
// the format's default. So a client's newer version never strips from a
// call what an endpoint that does not speak it accepts (the 2026-10-21
// version's ban on sampling parameters is Anthropic's API's, PROTOCOLS.md
// §0.14).
func (e *Endpoint) APIVersion(client http.Header) string {
	c := wire.For(e.Format)
	if e.Platform != nil && e.AnthropicVersion == "" {
		// A platform's documented version (bedrock-2023-05-31,
		// vertex-2023-10-16), which it accepts in the body.
		return e.Platform.DefaultVersion()
	}
	switch {
	case e.AnthropicVersion == AnthropicVersionClient, e.AnthropicVersion == "" && isAnthropicAPI(e.BaseURL):
		return c.APIVersion("", client)
	case e.AnthropicVersion != "":
		return c.APIVersion(e.AnthropicVersion, nil)
	}
	return c.APIVersion("", nil)
}

// isAnthropicAPI reports whether base is Anthropic's own API.
func isAnthropicAPI(base string) bool {
	// A host of Anthropic's API is in the URL's text (url.Parse refuses
	// escaped ASCII in a host): the parse (≈ 1 µs per call) only when so.
	if !containsFold(base, anthropicHost) {
		return false
	}
	u, err := url.Parse(base)
	return err == nil && strings.EqualFold(u.Hostname(), anthropicHost)
}

const anthropicHost = "api.anthropic.com"

// containsFold reports whether s contains the lower-case ASCII sub in any
// case (strings.EqualFold's folding for ASCII; sub's letters have no
// non-ASCII fold).
func containsFold(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return true
		}
	}
	return false
}

// TransportOptions tune the shared upstream transport.
type TransportOptions struct {
	ConnectTimeout      time.Duration // default 5s
	MaxIdleConnsPerHost int           // default 1024
	MaxConnsPerHost     int           // default 0, unlimited
	// Standard lists upstream hosts ("host:port") that must use net/http's
	// Transport even over plain http (the provider's http_client: standard).
	Standard map[string]bool
}

// NewUpstreamTransport returns the transport for upstream attempts: the
// lean HTTP/1.1 client (H1Transport) for plain-http upstreams, over
// NewTransport for everything else. With MaxConnsPerHost set, NewTransport
// alone (it enforces the cap).
func NewUpstreamTransport(o TransportOptions) interface {
	http.RoundTripper
	CloseIdleConnections()
} {
	std := NewTransport(o)
	if o.MaxConnsPerHost > 0 {
		return std
	}
	o = o.withDefaults()
	d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &H1Transport{
		Fallback:       std,
		Dial:           d.DialContext,
		Proxy:          http.ProxyFromEnvironment,
		MaxIdlePerHost: o.MaxIdleConnsPerHost,
		IdleTimeout:    90 * time.Second,
		TrustIdle:      time.Second,
		Standard:       o.Standard,
	}
}

func (o TransportOptions) withDefaults() TransportOptions {
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = 5 * time.Second
	}
	if o.MaxIdleConnsPerHost == 0 {
		o.MaxIdleConnsPerHost = 1024
	}
	return o
}

// NewTransport returns the shared upstream transport: keep-alive pool sized
// for thousands of concurrent streams, HTTP/2 negotiated over TLS when the
// upstream offers it, no compression negotiation (SSE must not be buffered
// by a gzip reader).
func NewTransport(o TransportOptions) *http.Transport {
	o = o.withDefaults()
	d := &net.Dialer{Timeout: o.ConnectTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           d.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4096,
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		MaxConnsPerHost:       o.MaxConnsPerHost,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   o.ConnectTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true,
		TLSClientConfig:       &tls.Config{MinVersion: tls.VersionTLS12},
		// Small per-connection buffers: with thousands of concurrent
		// streams, 2×32 KiB per connection was most of the RSS.
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 4 << 10,
	}
}

// Client sends attempts upstream.
type Client struct {
	rt http.RoundTripper

	// urls caches each endpoint base's parsed request URL; requests share
	// them (a RoundTripper never modifies a request's URL).
	mu   sync.RWMutex
	urls map[urlKey]*url.URL
}

type urlKey struct {
	base   string
	format llm.Format
	// A platform's or host's URL may name the model and the kind of call.
	platform Platform
	host     Host
	model    string
	stream   bool
}

// url returns ep's parsed request URL (of a streamed call when stream).
func (c *Client) url(ep *Endpoint, stream bool) (*url.URL, error) {
	k := urlKey{base: ep.BaseURL, format: ep.Format}
	raw := ep.URL
	switch {
	case ep.Platform != nil:
		k = urlKey{platform: ep.Platform, model: ep.UpstreamModel, stream: stream}
		raw = func() string { return ep.Platform.CallURL(ep.UpstreamModel, stream) }
	case ep.Host != nil:
		k = urlKey{host: ep.Host, model: ep.UpstreamModel, stream: stream}
		raw = func() string { return ep.Host.CallURL(ep.UpstreamModel, stream) }
	}
	c.mu.RLock()
	u := c.urls[k]
	c.mu.RUnlock()
	if u != nil {
		return u, nil
	}
	u, err := url.Parse(raw())
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("endpoint URL %q: want http(s)://host/...", raw())
	}
	c.mu.Lock()
	if c.urls == nil {
		c.urls = make(map[urlKey]*url.URL)
	}
	if len(c.urls) < 4096 { // a bounded cache: base URLs come from the config
		c.urls[k] = u
	}
	c.mu.Unlock()
	return u, nil
}

// NewClient returns a Client over rt (NewTransport's result in production,
// the simulator's in-memory transport in tests).
func NewClient(rt http.RoundTripper) *Client {
	return &Client{rt: rt}
}

// Result is a successful attempt: exactly one of Response and Stream is
// set for a model call (Do); Body for any other call (Post).
type Result struct {
	Status   int
	Header   http.Header
	Response *llm.Response
	Stream   Stream
	// Body is the answer of a Post, as received.
	Body []byte
	// Dropped lists request parameters removed because the endpoint's API
	// version rejects them.
	Dropped []string
}

// Stream yields canonical events. Next returns io.EOF after the wire's
// clean terminator and an error wrapping io.ErrUnexpectedEOF when the stream
// was cut. Close cancels the attempt and releases its connection.
type Stream interface {
	Next() (*llm.Event, error)
	Close() error
}

// Kind classifies a failed attempt.
type Kind uint8

const (
	// KindStatus: the upstream answered with an error status; see APIError.
	KindStatus Kind = iota + 1
	// KindConnect: no connection could be made (refused, DNS, TLS).
	KindConnect
	// KindReset: the connection broke before a complete answer.
	KindReset
	// KindTimeout: a header, idle or request timeout fired.
	KindTimeout
	// KindProtocol: the upstream's answer did not parse.
	KindProtocol
	// KindCanceled: the caller cancelled.
	KindCanceled
)

var kindNames = [...]string{"", "status", "connect", "reset", "timeout", "protocol", "canceled"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Error is a failed attempt.
type Error struct {
	Kind     Kind
	Endpoint string
	// BeforeResponse is set when the attempt failed before any response
	// header arrived (the server could not be reached or dropped the
	// connection at once), as opposed to a stream broken mid-way.
	BeforeResponse bool
	// API is set for KindStatus (and for error events inside a stream).
	API *llm.APIError
	// Filtered, set when a content filter refused the prompt, is the
	// endpoint's model's policy for it.
	Filtered ContentFilter
	Err      error
}

func (e *Error) Error() string {
	if e.API != nil {
		return fmt.Sprintf("endpoint %s: %v", e.Endpoint, e.API)
	}
	return fmt.Sprintf("endpoint %s: %s: %v", e.Endpoint, e.Kind, e.Err)
}

func (e *Error) Unwrap() error {
	if e.API != nil {
		return e.API
	}
	return e.Err
}

// ErrIdleTimeout is the cause when a stream sent nothing for StreamIdleTimeout.
var ErrIdleTimeout = errors.New("stream idle timeout")

// errHeaderTimeout is the cause when response headers did not come in time.
var errHeaderTimeout = errors.New("response header timeout")

// Call holds what an attempt needs besides the request.
type Call struct {
	// ClientHeader is the client's request header: anthropic-version and
	// anthropic-beta are passed on to Anthropic endpoints.
	ClientHeader http.Header
	// Translation is the policy for features the endpoint's wire format
	// cannot express: "" (content refused with a 400, other features
	// dropped and reported), "drop" or "reject" (see translate.Policy).
	Translation string
	// Sent, when set, is called with the request body as sent upstream
	// (after translation and preparation); it must not keep body.
	Sent func(body []byte)
	// Received, when set, is incremented by the bytes of response body
	// read from the upstream (an error body, an answer, a stream as it is
	// read).
	Received *atomic.Int64
	// Cancel, when set, cancels ctx, which is then this attempt's own
	// context (shared with nothing else): Do cancels it for its timeouts
	// and as it ends, with causes of its own (OwnCause), instead of
	// deriving a cancellable context of its own under ctx. Any other
	// cause (the caller's cancel, an ancestor's) fails the attempt as
	// cancelled, as a cancelled ctx does without Cancel.
	Cancel context.CancelCauseFunc
}

// errRequestTimeout is the cause a caller's attempt context (Call.Cancel)
// is cancelled with when the request timeout ends; the attempt fails with
// context.DeadlineExceeded, as without Call.Cancel. errEnded is the cause
// once Do or the stream is done with it.
var (
	errRequestTimeout = errors.New("request timeout")
	errEnded          = errors.New("upstream attempt ended")
)

// OwnCause reports whether cause is one Do cancels a caller's attempt
// context (Call.Cancel) with: its timeouts and its end. Any other cause
// was the caller's.
func OwnCause(cause error) bool {
	return cause == errHeaderTimeout || cause == errRequestTimeout || cause == ErrIdleTimeout || cause == errEnded
}

// Do sends req to ep. The request is not modified. On success with a stream
// the caller owns Result.Stream; ctx must stay live while it is read.
func (c *Client) Do(ctx context.Context, ep *Endpoint, req *llm.Request, call Call) (*Result, error) {
	policy := call.Translation
	if policy == "" {
		policy = ep.Translation
	}
	prepared, tr, err := translate.Prepare(req, ep.Format, translate.Policy{Unsupported: policy, Endpoint: ep.ID})
	if err != nil {
		var ae *llm.APIError
		if errors.As(err, &ae) {
			return nil, &Error{Kind: KindStatus, Endpoint: ep.ID, API: ae}
		}
		return nil, &Error{Kind: KindProtocol, Endpoint: ep.ID, Err: err}
	}
	a := &attempt{out: *prepared}
	out := &a.out
	out.Model = ep.UpstreamModel
	codec := wire.For(ep.Format)
	version := ep.APIVersion(call.ClientHeader)
	dropped := append(slices.Clone(tr.Dropped), codec.PrepareUpstream(out, version)...)
	pf := ep.Platform
	if pf != nil {
		// The platform's URL names the model (and, on Bedrock, the stream).
		out.Model = ""
		out.Stream = out.Stream && pf.KeepsStream()
	}
	body, err := codec.EncodeRequest(out)
	// The request is in body now: a stream, which keeps the attempt for
	// its whole life, must not keep the request's parts too.
	a.out = llm.Request{}
	if err != nil {
		return nil, &Error{Kind: KindProtocol, Endpoint: ep.ID, Err: fmt.Errorf("encoding request: %w", err)}
	}
	if pf != nil {
		if !bytes.HasPrefix(body, []byte(modelPrefix)) {
			return nil, &Error{Kind: KindProtocol, Endpoint: ep.ID, Err: errors.New("encoding request: the body does not start with its model")}
		}
		var betas []string
		if pf.BetasInBody() && call.ClientHeader != nil {
			betas = call.ClientHeader["Anthropic-Beta"] // Values, the name canonical
		}
		body = envelope(body, version, betas)
	}
	if call.Sent != nil {
		call.Sent(body)
	}

	actx, cancel := ctx, call.Cancel
	if cancel == nil {
		actx, cancel = context.WithCancelCause(ctx)
	} else {
		a.shared = true
	}
	a.cancel = cancel
	a.begin(ep.RequestTimeout)
	release := a.release
	u, err := c.url(ep, req.Stream)
	if err != nil {
		release()
		return nil, &Error{Kind: KindConnect, Endpoint: ep.ID, Err: err}
	}
	rb := &a.body
	if req.Stream {
		// A stream keeps its attempt: the body, which the transport may
		// still be sending, gets its own reader so it is not kept with it.
		rb = newBytesBody(body)
	} else {
		rb.reset(body)
	}
	hreq := (&http.Request{
		Method: http.MethodPost, URL: u, Host: u.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, 6+len(ep.Header)),
		Body:          rb,
		GetBody:       func() (io.ReadCloser, error) { return newBytesBody(body), nil },
		ContentLength: int64(len(body)),
	}).WithContext(actx)
	// Header values share the attempt's backing array; the names are
	// canonical.
	a.h = hreq.Header
	set := a.set
	h := a.h
	set("Content-Type", "application/json")
	set("Accept", "application/json")
	if pf != nil {
		// The version and betas are in the body; the signature covers the
		// headers set so far, the endpoint's extra headers are not signed.
		if err := pf.Authorize(actx, hreq, body); err != nil {
			release()
			return nil, authError(ep, err)
		}
		if pf.BetasInBody() {
			addHeaders(h, nil, nil, ep)
		} else {
			addHeaders(h, codec, call.ClientHeader, ep)
		}
	} else {
		if e := authorize(actx, ep, codec, set, version); e != nil {
			release()
			return nil, e
		}
		addHeaders(h, codec, call.ClientHeader, ep)
	}

	a.awaitHeader(ep.ResponseHeaderTimeout)
	resp, err := c.rt.RoundTrip(hreq)
	a.headed()
	if err != nil {
		cause := context.Cause(actx)
		release()
		e := a.classify(ep.ID, err, cause, ctx)
		e.BeforeResponse = true
		return nil, e
	}
	res := &Result{Status: resp.StatusCode, Header: resp.Header, Dropped: dropped}
	if resp.StatusCode != http.StatusOK {
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		release()
		if call.Received != nil {
			call.Received.Add(int64(len(b)))
		}
		if rerr != nil && len(b) == 0 {
			return nil, a.classify(ep.ID, rerr, context.Cause(actx), ctx)
		}
		return nil, statusError(ep, codec, resp, b)
	}
	if !req.Stream {
		b, rerr := readAnswer(resp)
		resp.Body.Close()
		if call.Received != nil {
			call.Received.Add(int64(len(b)))
		}
		if rerr != nil {
			cause := context.Cause(actx)
			release()
			return nil, a.classify(ep.ID, rerr, cause, ctx)
		}
		release()
		r, err := codec.ParseResponse(b)
		if err != nil {
			var ae *llm.APIError
			if errors.As(err, &ae) {
				// an answer that is a refusal (Gemini's blocked prompt)
				return nil, apiError(ep, ae)
			}
			return nil, &Error{Kind: KindProtocol, Endpoint: ep.ID, Err: fmt.Errorf("parsing response: %w", err)}
		}
		if ep.Format == req.Format {
			// Same format, nothing translated: the bytes can go to the
			// client as they came.
			r.Raw, r.RawFormat = b, ep.Format
		}
		res.Response = tr.RestoreResponse(r)
		if res.Response.Created == 0 && ep.Format != req.Format {
			res.Response.Created = time.Now().Unix()
		}
		return res, nil
	}
	s := &stream{
		restore: tr.NewStreamRestorer(),
		ep:      ep,
		body:    resp.Body,
		ctx:     actx,
		parent:  ctx,
		end:     a,
		idle:    ep.StreamIdleTimeout,
	}
	var sb io.Reader = resp.Body
	if call.Received != nil {
		sb = &countingReader{r: resp.Body, n: call.Received}
	}
	var rd wire.StreamReader
	if pf != nil {
		rd = pf.NewStreamReader(sb)
	} else {
		rd = codec.NewStreamReader(sb)
	}
	s.next = rd.Next
	if r, ok := rd.(wire.Recycler); ok {
		s.recycle = r.Recycle
	}
	if p, ok := rd.(wire.Pending); ok {
		s.pending = p.Pending
	}
	if s.idle > 0 {
		s.idleTimer = time.AfterFunc(s.idle, func() { cancel(ErrIdleTimeout) })
	}
	res.Stream = s
	return res, nil
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n.Add(int64(k))
	return k, err
}

// readAnswer reads a whole answer body, sized once by its Content-Length
// when the upstream sent one (io.ReadAll grows its buffer step by step).
func readAnswer(resp *http.Response) ([]byte, error) {
	n := resp.ContentLength
	if n < 0 || n > 64<<20 {
		return io.ReadAll(resp.Body)
	}
	b := make([]byte, n, n+1) // +1: room to notice a longer body
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		return nil, err
	}
	if k, _ := resp.Body.Read(b[n : n+1]); k > 0 { // longer than declared: keep it all
		rest, err := io.ReadAll(resp.Body)
		return append(b[:n+1], rest...), err
	}
	return b, nil
}

type stream struct {
	restore   *translate.StreamRestorer
	ep        *Endpoint
	body      io.ReadCloser
	ctx       context.Context
	parent    context.Context
	end       *attempt
	next      func() (*llm.Event, error)
	recycle   func(*llm.Event) // the reader's Recycle, when it has one
	pending   func() bool      // the reader's Pending, when it has one
	idle      time.Duration    // the configured cap
	idleTimer *time.Timer
	done      bool
	lastEvent time.Time
	maxGap    time.Duration
	events    int
}

// Adaptive idle timeout: once a stream has shown its rhythm, a silence of
// IdleGapMultiple × its longest gap so far (at least IdleFloor, at most the
// configured StreamIdleTimeout) means the upstream stalled.
const (
	IdleGapMultiple = 10
	IdleFloor       = 2 * time.Second
	idleWarmup      = 3 // events before the rhythm is trusted
)

func (s *stream) nextIdle() time.Duration {
	if s.events < idleWarmup {
		return s.idle
	}
	d := min(max(IdleGapMultiple*s.maxGap, IdleFloor), s.idle)
	return d
}

func (s *stream) Next() (*llm.Event, error) {
	for {
		ev, err := s.nextRaw()
		if err != nil {
			return nil, err
		}
		if ev = s.restore.Restore(ev); ev != nil {
			return ev, nil
		}
	}
}

// nextRaw is the upstream's next event, before restoring.
func (s *stream) nextRaw() (*llm.Event, error) {
	if s.done {
		return nil, io.EOF
	}
	ev, err := s.next()
	if err != nil {
		if err == io.EOF {
			s.done = true
			return nil, io.EOF
		}
		cause := context.Cause(s.ctx)
		if errors.Is(err, io.ErrUnexpectedEOF) && cause == nil {
			return nil, &Error{Kind: KindReset, Endpoint: s.ep.ID, Err: err}
		}
		return nil, s.end.classify(s.ep.ID, err, cause, s.parent)
	}
	if s.idleTimer != nil {
		now := time.Now()
		if s.events > 0 {
			s.maxGap = max(s.maxGap, now.Sub(s.lastEvent))
		}
		s.lastEvent = now
		s.events++
		s.idleTimer.Reset(s.nextIdle())
	}
	return ev, nil
}

// Pending reports whether Next returns an event without reading
// (wire.Pending).
func (s *stream) Pending() bool { return s.pending != nil && s.pending() }

// Recycle gives the codec's reader back an event the caller is done with
// (wire.Recycler).
func (s *stream) Recycle(ev *llm.Event) {
	if s.recycle != nil {
		s.recycle(ev)
	}
}

func (s *stream) Close() error {
	if s.idleTimer != nil {
		s.idleTimer.Stop()
	}
	// A finished stream is drained a bounded amount first so its
	// connection returns to the pool; cancelling before would close it.
	if s.done {
		io.CopyN(io.Discard, s.body, 4<<10)
	}
	err := s.body.Close()
	s.end.release()
	return err
}

// classify is classifyTransportErr for this attempt: cause is its
// context's cause, parent the context Do was given. When that context is
// the caller's own (Call.Cancel), a cause not of Do's own says the caller
// (or an ancestor) cancelled it, as a cancelled parent does otherwise.
func (a *attempt) classify(id string, err, cause error, parent context.Context) *Error {
	if !a.shared {
		return classifyTransportErr(id, err, cause, parent)
	}
	switch {
	case cause == errRequestTimeout:
		cause = context.DeadlineExceeded
	case cause != nil && !OwnCause(cause):
		return &Error{Kind: KindCanceled, Endpoint: id, Err: cause}
	}
	return classifyTransportErr(id, err, cause, context.Background())
}

func classifyTransportErr(id string, err, cause error, parent context.Context) *Error {
	switch {
	case parent.Err() != nil:
		return &Error{Kind: KindCanceled, Endpoint: id, Err: context.Cause(parent)}
	case errors.Is(cause, ErrIdleTimeout):
		return &Error{Kind: KindTimeout, Endpoint: id, Err: ErrIdleTimeout}
	case errors.Is(cause, errHeaderTimeout), errors.Is(cause, context.DeadlineExceeded):
		return &Error{Kind: KindTimeout, Endpoint: id, Err: cause}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Kind: KindTimeout, Endpoint: id, Err: err}
	}
	var oe *net.OpError
	if errors.As(err, &oe) && oe.Op == "dial" {
		return &Error{Kind: KindConnect, Endpoint: id, Err: err}
	}
	if isRefused(err) {
		return &Error{Kind: KindConnect, Endpoint: id, Err: err}
	}
	return &Error{Kind: KindReset, Endpoint: id, Err: err}
}

// Probe checks that ep's server answers HTTP at all: a GET of its models
// list. Any HTTP response, whatever its status, proves the endpoint is
// reachable; only a transport failure is an error. It sends no model
// request, so it costs the provider nothing.
func (c *Client) Probe(ctx context.Context, ep *Endpoint) error {
	codec := wire.For(ep.Format)
	target := codec.ProbeURL(ep.BaseURL)
	if ep.Platform != nil {
		// The platform's host: its API has no free GET of its own.
		u, err := url.Parse(ep.Platform.CallURL(ep.UpstreamModel, false))
		if err != nil {
			return err
		}
		target = u.Scheme + "://" + u.Host + "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	if ep.Platform == nil && ep.Host == nil {
		// A platform's or host's credentials are for its model calls only.
		codec.SetAuth(req.Header.Set, ep.APIKey, codec.APIVersion("", nil))
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return err
	}
	io.CopyN(io.Discard, resp.Body, 64<<10)
	resp.Body.Close()
	return nil
}

// addHeaders sets on h the client's headers that codec passes on and
// then the endpoint's own (which win).
func addHeaders(h http.Header, codec wire.Codec, client http.Header, ep *Endpoint) {
	if client != nil && codec != nil {
		for _, k := range codec.PassHeaders() {
			if v := client[k]; len(v) > 0 { // Values(k): PassHeaders are canonical
				h[k] = v
			}
		}
	}
	for k, v := range ep.Header {
		h[k] = v
	}
}

// parseError reads an error answer in ep's shape: its platform's, else
// its format's.
func parseError(ep *Endpoint, codec wire.Codec, resp *http.Response, b []byte) *llm.APIError {
	switch {
	case ep.Platform != nil:
		return ep.Platform.ParseError(resp.StatusCode, resp.Header, b)
	case ep.Host != nil:
		return ep.Host.ParseError(resp.StatusCode, resp.Header, b)
	}
	return codec.ParseError(resp.StatusCode, resp.Header, b)
}

// authError is the failure of an attempt whose platform credentials could
// not be had: a 401 authentication_error naming the provider, so the
// caller knows which account to fix and the call can go elsewhere.
func authError(ep *Endpoint, err error) *Error {
	return &Error{Kind: KindStatus, Endpoint: ep.ID, BeforeResponse: true, Err: err,
		API: &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication,
			Message: fmt.Sprintf("provider %s (%s) cannot authenticate: %v", ep.Provider, ep.Platform.Name(), err)}}
}

// attempt is one upstream attempt's own state, in one allocation: the
// request as sent, its context's cancel, its one timer and the request's
// header values and body. The timer bounds the wait for the answer's head by the response
// header timeout (cause errHeaderTimeout) and the whole attempt by the
// request timeout (context.DeadlineExceeded): armed for whichever comes
// first, moved to the request's deadline once the head is in.
type attempt struct {
	out      llm.Request // the request as this endpoint gets it
	cancel   context.CancelCauseFunc
	timer    *time.Timer // nil without either timeout
	deadline time.Time   // the request timeout's moment; zero: none
	// heading is set while the timer stands for the header timeout.
	heading atomic.Bool
	// shared: the context is the caller's (Call.Cancel), cancelled with
	// Do's own causes.
	shared bool

	body bytesBody
	h    http.Header
	vals [6]string // the request header's values, sliced by set
	n    int
}

// begin arms the request timeout (0: none) at the attempt's start.
func (a *attempt) begin(request time.Duration) {
	if request > 0 {
		a.deadline = time.Now().Add(request)
		a.timer = time.AfterFunc(request, a.fire)
	}
}

// awaitHeader bounds the wait for the answer's head (0: no bound) from
// now, when that ends before the request's deadline.
func (a *attempt) awaitHeader(d time.Duration) {
	switch {
	case d <= 0:
	case a.timer == nil:
		a.heading.Store(true)
		a.timer = time.AfterFunc(d, a.fire)
	case time.Until(a.deadline) > d && a.timer.Stop():
		a.heading.Store(true)
		a.timer.Reset(d)
	}
}

// headed ends the header's bound (the head arrived, or the round trip
// failed): the request's deadline, if any, stands again.
func (a *attempt) headed() {
	if !a.heading.Load() || !a.timer.Stop() {
		return // no header bound, or it fired: the attempt is cancelled
	}
	a.heading.Store(false)
	if !a.deadline.IsZero() {
		a.timer.Reset(time.Until(a.deadline))
	}
}

// fire cancels the attempt with the cause of the bound that ran out.
func (a *attempt) fire() {
	if a.heading.Load() {
		a.cancel(errHeaderTimeout)
		return
	}
	if a.shared {
		a.cancel(errRequestTimeout)
		return
	}
	a.cancel(context.DeadlineExceeded)
}

// release ends the attempt: stops its timer and cancels its context.
func (a *attempt) release() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if a.shared {
		a.cancel(errEnded)
		return
	}
	a.cancel(context.Canceled)
}

// set sets a request header, its value sliced out of the attempt's array
// while it has room.
func (a *attempt) set(k, v string) {
	if a.n == len(a.vals) {
		a.h[k] = []string{v}
		return
	}
	a.vals[a.n] = v
	a.n++
	a.h[k] = a.vals[a.n-1 : a.n : a.n]
}

// bytesBody is a request body read from memory: io.NopCloser over a
// bytes.Reader in one allocation instead of two. It keeps its bytes, so
// that H1Transport takes them as they are instead of reading a copy.
type bytesBody struct {
	bytes.Reader
	b []byte
}

func newBytesBody(b []byte) *bytesBody {
	r := &bytesBody{}
	r.reset(b)
	return r
}

func (r *bytesBody) reset(b []byte) {
	r.Reset(b)
	r.b = b
}

// unread is the whole body when none of it has been read yet.
func (r *bytesBody) unread() ([]byte, bool) {
	return r.b, r.Len() == len(r.b)
}

// Close does nothing: the bytes stay with the caller.
func (*bytesBody) Close() error { return nil }
