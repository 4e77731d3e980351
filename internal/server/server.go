// Package server is Keel's HTTP front: it speaks the Anthropic Messages and
// OpenAI Chat Completions APIs to clients, hands each call to the engine and
// writes the answer back in the client's wire format, streaming event by
// event. Beside the model calls it serves the models routes, token counts
// and embeddings (routes.go, side.go), the unversioned OpenAI paths, the
// root, and counts and logs requests for paths it does not serve.
//
// A Server is safe for concurrent use. Each request's context is the
// upstream attempt's parent: a client that goes away cancels its upstream
// request at once.
package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire"
)

// Defaults of the Options fields below when they are zero.
const (
	// DefaultMaxBodyBytes bounds a request body.
	DefaultMaxBodyBytes = 10 << 20
	// DefaultBodyReadTimeout bounds the time to receive a request body.
	DefaultBodyReadTimeout = 30 * time.Second
	// DefaultMinBodyRate is the lowest average rate, in bytes per second
	// after the first second, at which a request body may arrive.
	DefaultMinBodyRate = 1024
	// DefaultMaxInflightBodyBytes bounds the request-body bytes held at once
	// by requests being read and parsed; when GOMEMLIMIT is set, a quarter
	// of it if that is smaller.
	DefaultMaxInflightBodyBytes = 256 << 20
	// DefaultMaxMessages bounds the messages in one request.
	DefaultMaxMessages = 10000
	// DefaultMaxHeaderBytes bounds a request's line and headers.
	DefaultMaxHeaderBytes = 64 << 10
)

// Options configure a Server.
type Options struct {
	Engine       *engine.Engine
	Logger       *slog.Logger
	MaxBodyBytes int64
	// BodyReadTimeout bounds reading a request body; MinBodyRate (bytes per
	// second) is the lowest average rate a body may arrive at after its
	// first second. A body too slow is cut with 408 and its connection
	// closed. Both need a connection that supports read deadlines (net/http's
	// does); the embedded transport's bodies are in memory already.
	BodyReadTimeout time.Duration
	MinBodyRate     int64
	// MaxInflightBodyBytes bounds the body bytes buffered at once by all
	// requests being read and parsed: a request whose buffer cannot grow
	// within it is answered 429 with retry-after at once, never queued.
	// Raised to hold one body of MaxBodyBytes when smaller.
	MaxInflightBodyBytes int64
	// MaxMessages bounds the messages of one request (400 beyond).
	MaxMessages int
	// MaxHeaderBytes bounds a request's line and headers: beyond it, 431
	// in the caller's wire format. net/http's own limit
	// (http.Server.MaxHeaderBytes, 1 MiB by default, plus 4 KiB) must be
	// above it: beyond that one net/http answers a plain-text 431 itself
	// before any handler runs.
	MaxHeaderBytes int
	// ListenAddr is the address the server listens on (server.listen).
	// Loopback (127.0.0.0/8, ::1, localhost) keeps the observability
	// routes open and, unless AllowedHosts is set, admits only localhost
	// Host headers. Empty: the embedding program owns the listener, and
	// each request's local address (http.LocalAddrContextKey) decides;
	// a request without one (served in-process) counts as loopback.
	ListenAddr string
	// AllowedHosts are the Host headers the API, admin and observability
	// routes accept: "name" (any port), "name:port", "*.domain" or "*".
	// Empty: localhost names on a loopback listen address, any otherwise.
	AllowedHosts []string
	// AllowedOrigins are the browser origins ("https://app.example.com")
	// allowed to call; a request with any other Origin header, except its
	// own (same-origin), is refused with 403. "*" allows every origin.
	AllowedOrigins []string
	// AdminToken enables the admin API; empty disables it.
	AdminToken string
	// ReadToken, like AdminToken, opens the Routes (metrics, debug traces,
	// dashboard) when the listen address is not loopback.
	ReadToken string
	// Routes are extra GET endpoints (metrics, debug traces, dashboard).
	Routes []Route
	// Authenticate, when set, decides whether a client may call the API
	// routes (the calls and /v1/models, after the Host and Origin checks,
	// before the body is read): an error is answered in the caller's wire
	// format (401, 403, 429 …); a nil error admits it, as the Caller
	// returned (nil: an anonymous caller, not metered). Calls through the
	// embedded transport are the program itself and skip it. Virtual keys
	// (internal/keys) plug in here.
	Authenticate func(r *http.Request) (Caller, *llm.APIError)
	// AdminRoutes are served behind the admin token (AdminToken), like
	// /admin/features: the keys' admin API.
	AdminRoutes []Route
	// OnUnknownRoute, when set, is called with the method of every
	// request for a path Keel does not serve (a metric's counter); it
	// must not block.
	OnUnknownRoute func(method string)
	// Conversations keeps the Responses API's conversations: store and
	// previous_response_id on POST /v1/responses, GET and DELETE
	// /v1/responses/{id}. Nil: nothing is kept, previous_response_id goes
	// upstream as sent and GET /v1/responses/{id} is 404.
	Conversations Conversations
}

// Caller is a client Authenticate identified.
type Caller interface {
	// Labels name the caller in the call's record (metrics, request log).
	Labels() (keyID, team string)
	// Admit decides, once the request is parsed, whether the caller may
	// send req now; it returns the function settling the call, which the
	// server calls once with the call's final cost in USD and its tokens,
	// or the error for the client. It must not block.
	Admit(ctx context.Context, req *llm.Request) (settle func(usd float64, tokens int), ae *llm.APIError)
}

// Route serves Path (and everything under it when Prefix is set) with Handler.
type Route struct {
	Path    string
	Prefix  bool
	Handler http.Handler
}

// Server is the HTTP handler.
type Server struct {
	eng         *engine.Engine
	log         *slog.Logger
	maxBody     int64
	bodyTimeout time.Duration
	minRate     int64
	maxMessages int
	maxHeader   int
	ready       atomic.Bool

	// inflight counts the body bytes buffered now, at most maxInflight.
	inflight    atomic.Int64
	maxInflight int64

	access *access

	adminToken string
	readToken  string
	routes     []Route
	adminRts   []Route
	authn      func(r *http.Request) (Caller, *llm.APIError)
	onUnknown  func(method string)
	unknown    unknownLog
	conv       Conversations
}

// New returns a ready Server.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.BodyReadTimeout <= 0 {
		o.BodyReadTimeout = DefaultBodyReadTimeout
	}
	if o.MinBodyRate <= 0 {
		o.MinBodyRate = DefaultMinBodyRate
	}
	if o.MaxInflightBodyBytes <= 0 {
		o.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
		if lim := debug.SetMemoryLimit(-1); lim < math.MaxInt64 {
			o.MaxInflightBodyBytes = min(o.MaxInflightBodyBytes, lim/4)
		}
	}
	o.MaxInflightBodyBytes = max(o.MaxInflightBodyBytes, o.MaxBodyBytes+1) // room for one body of the limit and its end
	if o.MaxMessages <= 0 {
		o.MaxMessages = DefaultMaxMessages
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{eng: o.Engine, log: log, maxBody: o.MaxBodyBytes, bodyTimeout: o.BodyReadTimeout, minRate: o.MinBodyRate,
		maxMessages: o.MaxMessages, maxHeader: o.MaxHeaderBytes, maxInflight: o.MaxInflightBodyBytes,
		access: newAccess(o.ListenAddr, o.AllowedHosts, o.AllowedOrigins, log),
		authn:  o.Authenticate, adminRts: o.AdminRoutes, onUnknown: o.OnUnknownRoute, conv: o.Conversations,
		adminToken: o.AdminToken, readToken: o.ReadToken, routes: o.Routes}
	s.ready.Store(true)
	return s
}

// BodyBytesInFlight is how many request-body bytes are buffered now by
// requests being read and parsed.
func (s *Server) BodyBytesInFlight() int64 { return s.inflight.Load() }

// SetReady flips /readyz; a draining server reports not ready.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	embedded := s.embedded(r)
	if !embedded {
		path = apiPath(path)
	}
	for _, c := range wire.Codecs() {
		if c.Serves(path, embedded) {
			if s.admit(w, r, c.Format()) {
				if caller, ok := s.authenticate(w, r, c.Format()); ok {
					s.api(w, r, c.Format(), caller)
				}
			}
			return
		}
	}
	if id, ok := responsesItemPath(path, embedded); ok {
		if s.admit(w, r, llm.FormatResponses) {
			if caller, ok := s.authenticate(w, r, llm.FormatResponses); ok {
				s.responseItem(w, r, id, caller)
			}
		}
		return
	}
	if s.serveSide(w, r, path, embedded) {
		return
	}
	switch {
	case path == "/":
		serveRoot(w, r)
	case path == "/admin/features":
		if s.admit(w, r, headerFormat(r)) {
			s.admin(w, r)
		}
	case s.adminRoute(path) != nil:
		if s.admit(w, r, headerFormat(r)) && s.adminAuthorized(w, r) {
			s.adminRoute(path).Handler.ServeHTTP(w, r)
		}
	case path == "/healthz":
		if allowPlain(w, r) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(w, "ok\n")
		}
	case path == "/readyz":
		if allowPlain(w, r) {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if !s.ready.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, "draining\n")
				return
			}
			io.WriteString(w, "ready\n")
		}
	default:
		for _, rt := range s.routes {
			if path == rt.Path || rt.Prefix && strings.HasPrefix(path, rt.Path+"/") {
				if f := headerFormat(r); s.admit(w, r, f) && s.authorizeRead(w, r, f) {
					rt.Handler.ServeHTTP(w, r)
				}
				return
			}
		}
		s.unknownRoute(w, r)
	}
}

// embeddedKey marks requests that come through the in-process transport,
// whose paths keep the SDK's base-URL prefix.
type embeddedKey struct{}

// EmbeddedContextKey is set (to true) in the context of requests served
// through Keel's embedded transport.
var EmbeddedContextKey = embeddedKey{}

func (s *Server) embedded(r *http.Request) bool {
	v, _ := r.Context().Value(EmbeddedContextKey).(bool)
	return v
}

// headerFormat is the error format for routes that have none of their own:
// Anthropic's when the caller sends anthropic-version, OpenAI's otherwise.
func headerFormat(r *http.Request) llm.Format { return wire.FromHeader(r.Header).Format() }

func allow(w http.ResponseWriter, r *http.Request, f llm.Format, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, f, &llm.APIError{Status: http.StatusMethodNotAllowed, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
		Message: fmt.Sprintf("method %s not allowed on %s; use %s", r.Method, r.URL.Path, method)})
	return false
}

func allowPlain(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}

// writeError writes e in format f with the right status.
func writeError(w http.ResponseWriter, f llm.Format, e *llm.APIError) {
	body := wire.For(f).EncodeError(e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if e.MeshCode != "" {
		h.Set("X-Mesh-Error-Code", e.MeshCode)
	}
	for k, v := range e.MeshHeaders {
		h.Set(k, v)
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = llm.TypeStatus(e.Type)
	}
	w.WriteHeader(status)
	w.Write(body)
}

// requestID returns "mesh_" and 96 random bits in hex. Request ids name
// debug traces (GET /debug/traces/{id}), so they must not be guessable:
// a sequence would let one caller read another's trace.
func (s *Server) requestID() string {
	var b [5 + 24]byte
	var r [12]byte
	rand.Read(r[:]) // never fails (crypto/rand, Go 1.24+)
	copy(b[:], "mesh_")
	hex.Encode(b[5:], r[:])
	return string(b[:])
}

// adminRoute is the admin route serving path, or nil.
func (s *Server) adminRoute(path string) *Route {
	for i := range s.adminRts {
		if rt := &s.adminRts[i]; path == rt.Path || rt.Prefix && strings.HasPrefix(path, rt.Path+"/") {
			return rt
		}
	}
	return nil
}

// authenticate runs Authenticate on a call over the network; a refusal is
// answered in format f.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, f llm.Format) (Caller, bool) {
	if s.authn == nil || s.embedded(r) {
		return nil, true
	}
	c, ae := s.authn(r)
	if ae != nil {
		writeError(w, f, ae)
		return nil, false
	}
	return c, true
}

// callTokens is what a call used for a key's tokens per minute: every
// attempt's prompt and output, or the client's usage when that is more.
func callTokens(rec *callrec.Record) int {
	n := 0
	for _, a := range rec.Attempts {
		n += a.InputTokens + a.OutputTokens
	}
	return max(n, rec.Usage.PromptTokens()+rec.Usage.OutputTokens)
}

// FormatCost is X-Mesh-Cost's value: US dollars to the nano-dollar, with
// no trailing zeros ("0.000123").
func FormatCost(usd float64) string {
	return strconv.FormatFloat(math.Round(usd*1e9)/1e9, 'f', -1, 64)
}

// api serves POST /v1/messages and POST /v1/chat/completions.
func (s *Server) api(w http.ResponseWriter, r *http.Request, f llm.Format, caller Caller) {
	if !allow(w, r, f, http.MethodPost) || !s.jsonBody(w, r, f) {
		return
	}
	start := time.Now()
	rid := s.requestID()
	st := &apiCall{}
	// The answer's header map holds st's values array; once the call is
	// served, st holds nothing else (an embedded caller may keep the
	// header, and with it st, long after the call).
	defer st.clear()
	st.hs = headerSet{h: w.Header(), vals: st.vals[:0]}
	hs := &st.hs
	hs.Set("X-Mesh-Request-Id", rid)
	body, held, ae := s.readBody(w, r)
	if ae != nil {
		writeError(w, f, ae)
		return
	}
	var req *llm.Request
	var err error
	req, err = wire.For(f).ParseRequest(body)
	s.release(held)
	if err != nil {
		writeError(w, f, asAPIError(err))
		return
	}
	if wire.For(f).NoInput(req) {
		// Refused here, in the client's terms: translated, it would reach
		// an Anthropic or Chat endpoint as an empty messages list and come
		// back naming messages, a member this client never sent.
		writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: wire.For(f).InputParam(),
			Message: "input: required: the request has no input items, no previous_response_id and no prompt"})
		return
	}
	var keep keepFunc
	var echo llm.Extra
	if s.conv != nil && wire.For(f).Stateful() {
		owner := ""
		if caller != nil {
			owner, _ = caller.Labels()
		}
		echo = s.conv.Echo(req)
		s.resolveReferences(r.Context(), req, owner)
		if keep, ae = s.conv.Begin(r.Context(), req, owner); ae != nil {
			writeError(w, f, ae)
			// Counted and logged as a refused call: an operator sees
			// follow-ups naming responses Keel does not hold.
			refused := engine.Call{RequestID: rid, ClientHeader: r.Header, TraceParent: headerValue(r.Header, "Traceparent")}
			if caller != nil {
				refused.KeyID, refused.Team = caller.Labels()
			}
			s.eng.Refused(req, refused, ae)
			s.logRequest(r, rid, req, nil, ae, start)
			return
		}
	}
	if n := len(req.Messages); n > s.maxMessages {
		writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: wire.For(f).InputParam(),
			Message: fmt.Sprintf("the request has %d messages; server.max_messages allows at most %d", n, s.maxMessages)})
		return
	}
	beh, err := engine.ParseBehavior(req.MeshBehavior, headerValue(r.Header, "X-Mesh-Behavior"))
	if err != nil {
		writeError(w, f, asAPIError(err))
		return
	}
	if isTrue(headerValue(r.Header, "X-Mesh-Debug")) || isTrue(headerValue(r.Header, "Mesh-Debug-Mode")) {
		beh.Debug = true
	}
	if beh.Debug {
		w.Header().Set("X-Mesh-Trace-Id", rid)
	}
	call := engine.Call{RequestID: rid, ClientHeader: r.Header, Behavior: beh, TraceParent: headerValue(r.Header, "Traceparent")}
	if v := headerValue(r.Header, "X-Mesh-Timeout"); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
				Message: "X-Mesh-Timeout: " + err.Error()})
			return
		}
		call.Timeout = d
	}
	call.Done = st.done
	if caller != nil {
		call.KeyID, call.Team = caller.Labels()
		settle, ae := caller.Admit(r.Context(), req)
		if ae != nil {
			writeError(w, f, ae)
			s.eng.Refused(req, call, ae)
			s.logRequest(r, rid, req, nil, ae, start)
			return
		}
		st.settle = settle
	}
	out, err := s.eng.Do(r.Context(), req, call)
	if err != nil {
		if final := st.final; final != nil {
			w.Header().Set("X-Mesh-Cost", FormatCost(final.Cost))
			errorHeaders(w.Header(), final)
		}
		ae := cutError(r, asAPIError(err))
		if ae.MeshCode != "" && ae.MeshCode != llm.MeshBadRequest {
			// Keel already retried elsewhere: SDK retries would multiply the load.
			w.Header().Set("X-Should-Retry", "false")
		}
		writeError(w, f, ae)
		s.logRequest(r, rid, req, nil, ae, start)
		return
	}
	answerHeaders(hs, out.Endpoint, out.Record)
	codec := wire.For(f)
	if id := upstreamRequestID(out.Header); id != "" {
		hs.Set(codec.RequestIDHeader(), id)
	}
	if out.Stream == nil {
		resp := out.Response
		b, err := resp.Raw, error(nil)
		if resp.RawFormat != f || b == nil {
			resp = withEcho(resp, echo)
			b, err = codec.EncodeResponse(resp)
		}
		if err != nil {
			writeError(w, f, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshUpstreamProtocolFailed, Message: "encoding response: " + err.Error()})
			return
		}
		if keep != nil {
			// Stored before the client has it: its follow-up may come at once.
			keep(r.Context(), resp, b, out.Endpoint.ID)
		}
		hs.Set("Content-Type", "application/json")
		hs.Set("Content-Length", strconv.Itoa(len(b)))
		hs.Set("X-Mesh-Cost", FormatCost(out.Record.Cost))
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		s.logRequest(r, rid, req, out.Record, nil, start)
		return
	}
	var sk *streamKeeper
	if keep != nil || echo != nil {
		st := out.Stream
		sk = &streamKeeper{keep: keep, codec: codec, endpoint: func() string { return st.Served().ID }, echo: echo}
	}
	s.stream(w, r, f, req, out, sk)
	s.logRequest(r, rid, req, out.Record, out.Record.Err, start)
}

// apiCall is a model call's state in the server, in one allocation: its
// answer's header values and the Record the engine finishes it with.
type apiCall struct {
	hs   headerSet
	vals [14]string // hs's first backing array: a response's dozen headers
	// final is the call's Record once the engine finishes it; settle, when
	// a key admitted the call, settles it then.
	final  *callrec.Record
	settle func(usd float64, tokens int)
}

// clear drops what st refers to but the header values.
func (c *apiCall) clear() { c.final, c.settle, c.hs.h = nil, nil, nil }

// done is the call's engine.Call.Done.
func (c *apiCall) done(rec *callrec.Record) {
	c.final = rec
	if c.settle != nil {
		c.settle(rec.Cost, callTokens(rec))
	}
}

// headerSet sets headers, slicing every value out of one backing array: a
// response's dozen headers cost one allocation, not one each. Its names
// are canonical (the constants of this package, TestSetNamesCanonical;
// the codecs' RequestIDHeader, wire's TestRequestIDHeaderCanonical): Set
// does not canonicalise them again on every call.
type headerSet struct {
	h    http.Header
	vals []string
}

func (s *headerSet) Set(k, v string) {
	if len(s.vals) == cap(s.vals) {
		s.vals = make([]string, 0, 8)
	}
	s.vals = append(s.vals, v)
	n := len(s.vals)
	s.h[k] = s.vals[n-1 : n : n]
}

// MinTimeout is the smallest X-Mesh-Timeout accepted: a deadline shorter
// than this cannot fit an upstream attempt, so it is refused with 400
// before any is sent.
const MinTimeout = time.Millisecond

// parseTimeout reads X-Mesh-Timeout: a Go duration ("2.5s") or milliseconds,
// at least MinTimeout.
func parseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		ms, aerr := strconv.Atoi(v)
		if aerr != nil {
			return 0, fmt.Errorf("want a duration such as 30s or a number of milliseconds, got %q", v)
		}
		d = time.Duration(ms) * time.Millisecond
	}
	if d < MinTimeout {
		return 0, fmt.Errorf("%q is below the minimum of %s: no upstream attempt fits in it", v, MinTimeout)
	}
	return d, nil
}

// stream copies the engine's events to the client, one flush per event.
// Final X-Mesh values follow as HTTP trailers.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, f llm.Format, req *llm.Request, out *engine.Outcome, sk *streamKeeper) {
	st := out.Stream
	defer st.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Trailer", strings.Join(meshTrailers, ", "))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	// Events are flushed as they come, but those already at hand (a
	// stream's first events, read before it was committed; the rest of an
	// upstream chunk) go out in one write with the next.
	sw := sse.NewWriter(w, nil)
	write := wire.For(f).NewStreamWriter(sw, wire.StreamOptions{IncludeUsage: req.IncludeUsage}).Write
	for {
		ev, err := st.Next()
		ev, err = cutEvent(r, ev, err)
		if err != nil {
			break
		}
		ev = sk.echoed(ev)
		sk.see(r.Context(), ev)
		if err := write(ev); err != nil {
			// The client went away; the deferred Close cancels upstream.
			return
		}
		if ev.Type == llm.EventError {
			break
		}
		if !st.Ready() {
			if err := rc.Flush(); err != nil {
				return
			}
		}
	}
	rc.Flush()
	// After WriteHeader the declared names are the trailers. They still
	// hold the values sent in the header, which net/http would send again:
	// clear them before setting the final ones. Closing the stream first
	// finishes its Record: its cost is final.
	st.Close()
	for _, k := range meshTrailers {
		delete(h, k)
	}
	served := st.Served()
	servedHeaders(streamTrailer{h}, served.Model, served.Region, served.Provider, st.Record())
	if valid, ok := st.SchemaValid(); ok {
		streamTrailer{h}.Set("X-Mesh-Schema-Valid", strconv.FormatBool(valid))
	}
	streamTrailer{h}.Set("X-Mesh-Cost", FormatCost(st.Record().Cost))
}

// streamTrailer sets a stream's final X-Mesh values as trailers: a declared
// one (meshTrailers) under its own name, any other with http.TrailerPrefix.
// A declared name set with the prefix too was sent twice.
type streamTrailer struct{ h http.Header }

func (t streamTrailer) Set(k, v string) {
	if !slices.Contains(meshTrailers, k) {
		k = http.TrailerPrefix + k
	}
	t.h.Set(k, v)
}

func (s *Server) logRequest(r *http.Request, rid string, req *llm.Request, rec *callrec.Record, ae *llm.APIError, start time.Time) {
	if !s.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	// The record is built here, as slog's docs show for wrappers, with no
	// caller's PC: Logger.LogAttrs walks the stack for it on every call
	// (≈ 0.7 µs), for a source location no handler here prints.
	line := slog.NewRecord(time.Now(), slog.LevelInfo, "request", 0)
	line.AddAttrs(
		slog.String("request_id", rid),
		slog.String("path", r.URL.Path),
		slog.String("model", req.Model),
		slog.Bool("stream", req.Stream),
		slog.Duration("latency", time.Since(start)),
	)
	if rec != nil {
		line.AddAttrs(slog.String("served_by", rec.ServedBy), slog.Int("attempts", len(rec.Attempts)))
		if rec.Fallback != "" {
			line.AddAttrs(slog.String("fallback", rec.Fallback))
		}
		if c := rec.CacheStatus(); c != "" {
			line.AddAttrs(slog.String("cache", c))
		}
		if sc := rec.SemanticStatus(); sc != "" {
			line.AddAttrs(slog.String("semantic_cache", sc))
		}
		if sim := SimilarityHeader(rec); sim != "" {
			line.AddAttrs(slog.String("cache_similarity", sim))
		}
	}
	if ae != nil {
		line.AddAttrs(slog.Int("status", ae.Status), slog.String("error", ae.Message))
		if ae.MeshCode != "" {
			line.AddAttrs(slog.String("mesh_error_code", ae.MeshCode))
		}
	}
	s.log.Handler().Handle(r.Context(), line)
}

func upstreamRequestID(h http.Header) string {
	if h == nil {
		return ""
	}
	if id := headerValue(h, "Request-Id"); id != "" {
		return id
	}
	return headerValue(h, "X-Request-Id")
}

// headerValue is h.Get(key) for a key already in canonical form (every
// constant name here): the map's lookup without Get's canonicalisation,
// which scanned each name byte by byte on every call.
func headerValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func asAPIError(err error) *llm.APIError {
	var ae *llm.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return &llm.APIError{Status: http.StatusInternalServerError, Type: llm.ErrAPI, Message: err.Error()}
}

// listModels serves GET /v1/models in the OpenAI list shape, or the
// Anthropic shape when the client sent anthropic-version.
func (s *Server) listModels(w http.ResponseWriter, r *http.Request, f llm.Format, _ Caller, _ string) {
	models := s.eng.Models()
	list := make([]wire.Model, 0, len(models))
	for _, m := range models {
		list = append(list, wireModel(m))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(wire.For(f).EncodeModels(list))
}

// wireModel is m as the models routes show it.
func wireModel(m fleet.ModelInfo) wire.Model {
	wm := wire.Model{ID: m.Name, Alias: m.Alias, Capability: m.Capability, ContextWindow: m.ContextWindow, Regions: m.Regions}
	if m.Embedding {
		wm.Kind = "embedding"
	}
	return wm
}

func isTrue(v string) bool { return v == "true" || v == "1" || v == "True" || v == "TRUE" }
