// Package server is Keel's HTTP front: it speaks the Anthropic Messages and
// OpenAI Chat Completions APIs to clients, hands each call to the engine and
// writes the answer back in the client's wire format, streaming event by
// event.
//
// A Server is safe for concurrent use. Each request's context is the
// upstream attempt's parent: a client that goes away cancels its upstream
// request at once.
package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// DefaultMaxBodyBytes bounds a request body when Options.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 10 << 20

// Options configure a Server.
type Options struct {
	Engine       *engine.Engine
	Logger       *slog.Logger
	MaxBodyBytes int64
	// AdminToken enables the admin API; empty disables it.
	AdminToken string
	// Routes are extra GET endpoints (metrics, debug traces, dashboard).
	Routes []Route
}

// Route serves Path (and everything under it when Prefix is set) with Handler.
type Route struct {
	Path    string
	Prefix  bool
	Handler http.Handler
}

// Server is the HTTP handler.
type Server struct {
	eng     *engine.Engine
	log     *slog.Logger
	maxBody int64
	ready   atomic.Bool
	seq     atomic.Uint64
	idBase  string

	adminToken string
	routes     []Route
}

// New returns a ready Server.
func New(o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{eng: o.Engine, log: log, maxBody: o.MaxBodyBytes, idBase: strconv.FormatInt(time.Now().UnixNano()&0xffffffffff, 36), adminToken: o.AdminToken, routes: o.Routes}
	s.ready.Store(true)
	return s
}

// SetReady flips /readyz; a draining server reports not ready.
func (s *Server) SetReady(ready bool) { s.ready.Store(ready) }

// ServeHTTP routes a request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	switch {
	case strings.HasSuffix(path, "/v1/messages") && (path == "/v1/messages" || s.embedded(r)):
		s.api(w, r, llm.FormatAnthropic)
	case strings.HasSuffix(path, "/chat/completions") && (path == "/v1/chat/completions" || s.embedded(r)):
		s.api(w, r, llm.FormatOpenAI)
	case path == "/v1/models" || strings.HasSuffix(path, "/v1/models") && s.embedded(r):
		if !allow(w, r, llm.FormatOpenAI, http.MethodGet) {
			return
		}
		s.listModels(w, r)
	case path == "/admin/features":
		s.admin(w, r)
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
				rt.Handler.ServeHTTP(w, r)
				return
			}
		}
		f := llm.FormatOpenAI
		if r.Header.Get("anthropic-version") != "" {
			f = llm.FormatAnthropic
		}
		writeError(w, f, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Message: "no route for " + r.Method + " " + path})
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
	var body []byte
	if f == llm.FormatAnthropic {
		body = anthropic.EncodeError(e)
	} else {
		body = openai.EncodeError(e)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if e.MeshCode != "" {
		h.Set("X-Mesh-Error-Code", e.MeshCode)
	}
	status := e.Status
	if status < 400 || status > 599 {
		status = llm.TypeStatus(e.Type)
	}
	w.WriteHeader(status)
	w.Write(body)
}

func (s *Server) requestID() string {
	return "mesh_" + s.idBase + "_" + strconv.FormatUint(s.seq.Add(1), 36)
}

// api serves POST /v1/messages and POST /v1/chat/completions.
func (s *Server) api(w http.ResponseWriter, r *http.Request, f llm.Format) {
	if !allow(w, r, f, http.MethodPost) {
		return
	}
	start := time.Now()
	rid := s.requestID()
	hs := headerSet{h: w.Header(), vals: make([]string, 0, 14)}
	hs.Set("X-Mesh-Request-Id", rid)
	body, err := readBody(r, s.maxBody)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			writeError(w, f, &llm.APIError{Status: http.StatusRequestEntityTooLarge, Type: llm.ErrTooLarge, MeshCode: llm.MeshBadRequest,
				Message: fmt.Sprintf("request body exceeds the limit of %d bytes", s.maxBody)})
			return
		}
		writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "reading request body: " + err.Error()})
		return
	}
	var req *llm.Request
	if f == llm.FormatAnthropic {
		req, err = anthropic.ParseRequest(body)
	} else {
		req, err = openai.ParseRequest(body)
	}
	if err != nil {
		writeError(w, f, asAPIError(err))
		return
	}
	beh, err := engine.ParseBehavior(req.MeshBehavior, r.Header.Get("X-Mesh-Behavior"))
	if err != nil {
		writeError(w, f, asAPIError(err))
		return
	}
	if isTrue(r.Header.Get("X-Mesh-Debug")) || isTrue(r.Header.Get("Mesh-Debug-Mode")) {
		beh.Debug = true
	}
	if beh.Debug {
		w.Header().Set("X-Mesh-Trace-Id", rid)
	}
	call := engine.Call{RequestID: rid, ClientHeader: r.Header, Behavior: beh, TraceParent: r.Header.Get("Traceparent")}
	if v := r.Header.Get("X-Mesh-Timeout"); v != "" {
		d, err := parseTimeout(v)
		if err != nil {
			writeError(w, f, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
				Message: "X-Mesh-Timeout: " + err.Error()})
			return
		}
		call.Timeout = d
	}
	out, err := s.eng.Do(r.Context(), req, call)
	if err != nil {
		ae := cutError(r, asAPIError(err))
		if ae.MeshCode != "" && ae.MeshCode != llm.MeshBadRequest {
			// Keel already retried elsewhere: SDK retries would multiply the load.
			w.Header().Set("X-Should-Retry", "false")
		}
		writeError(w, f, ae)
		s.logRequest(r, rid, req, nil, ae, start)
		return
	}
	setMeshHeaders(&hs, out.Endpoint.Model, out.Endpoint.Region, out.Endpoint.Provider, out.Record)
	if len(out.Record.Dropped) > 0 {
		hs.Set("X-Mesh-Dropped", strings.Join(out.Record.Dropped, ","))
	}
	if len(out.Record.Repairs) > 0 {
		hs.Set("X-Mesh-Repaired", strings.Join(out.Record.Repairs, ","))
	}
	if out.Record.Calibrated {
		hs.Set("X-Mesh-Normalization-Offset", normalize.FormatOffset(out.Record.NormalizationOffset))
	}
	if out.Record.Normalized != "" {
		hs.Set("X-Mesh-Normalized", out.Record.Normalized)
	}
	if out.Record.Reasked {
		hs.Set("X-Mesh-Reasked", "true")
	}
	if src := out.Record.SchemaSource; src != "" {
		hs.Set("X-Mesh-Schema", src)
	}
	if out.Record.SchemaViolation && out.Stream == nil {
		hs.Set("X-Mesh-Schema-Violation", "true")
	}
	if id := upstreamRequestID(out.Header); id != "" {
		if f == llm.FormatAnthropic {
			hs.Set("Request-Id", id)
		} else {
			hs.Set("X-Request-Id", id)
		}
	}
	if out.Stream == nil {
		var b []byte
		if f == llm.FormatAnthropic {
			b, err = anthropic.EncodeResponse(out.Response)
		} else {
			b, err = openai.EncodeResponse(out.Response)
		}
		if err != nil {
			writeError(w, f, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshUpstreamProtocolFailed, Message: "encoding response: " + err.Error()})
			return
		}
		hs.Set("Content-Type", "application/json")
		hs.Set("Content-Length", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusOK)
		w.Write(b)
		s.logRequest(r, rid, req, out.Record, nil, start)
		return
	}
	s.stream(w, r, f, req, out)
	s.logRequest(r, rid, req, out.Record, out.Record.Err, start)
}

// headerSet sets headers, slicing every value out of one backing array: a
// response's dozen headers cost one allocation, not one each.
type headerSet struct {
	h    http.Header
	vals []string
}

func (s *headerSet) Set(k, v string) {
	if ck := http.CanonicalHeaderKey(k); ck != k {
		k = ck
	}
	if len(s.vals) == cap(s.vals) {
		s.vals = make([]string, 0, 8)
	}
	s.vals = append(s.vals, v)
	n := len(s.vals)
	s.h[k] = s.vals[n-1 : n : n]
}

// meshTrailers are the X-Mesh headers whose final value a stream can only
// know at its end (a continuation elsewhere changes them): a stream sends
// their first values in its header and declares them as trailers, which
// carry the final values, once each.
var meshTrailers = []string{"X-Mesh-Model", "X-Mesh-Region", "X-Mesh-Provider", "X-Mesh-Attempts", "X-Mesh-Fallback", "X-Mesh-Hedged", "X-Mesh-Recovered", "X-Mesh-Schema-Valid"}

func setMeshHeaders(h interface{ Set(k, v string) }, model, region, prov string, rec *engine.Record) {
	h.Set("X-Mesh-Model", model)
	h.Set("X-Mesh-Region", region)
	h.Set("X-Mesh-Provider", prov)
	h.Set("X-Mesh-Attempts", strconv.Itoa(len(rec.Attempts)))
	if rec.Fallback != "" {
		h.Set("X-Mesh-Fallback", rec.Fallback)
	}
	if rec.Hedges > 0 {
		if rec.HedgeWon {
			h.Set("X-Mesh-Hedged", "won")
		} else {
			h.Set("X-Mesh-Hedged", "lost")
		}
	}
	if rec.Recovered > 0 {
		h.Set("X-Mesh-Recovered", strconv.Itoa(rec.Recovered))
	}
	if rec.Legacy {
		h.Set("X-Mesh-Mode", "legacy")
	}
	if rec.Fragments > 0 {
		h.Set("X-Mesh-Fragments", strconv.Itoa(rec.FragmentsOK)+"/"+strconv.Itoa(rec.Fragments))
		if len(rec.LostRanges) > 0 {
			h.Set("X-Mesh-Fragments-Lost", strings.Join(rec.LostRanges, ","))
		}
		if rec.FusionConflicts > 0 {
			h.Set("X-Mesh-Fusion-Conflicts", strconv.Itoa(rec.FusionConflicts))
		}
	}
	if rec.Stage != "" && rec.Stage != "full" {
		h.Set("X-Mesh-Stage", rec.Stage)
	}
}

// parseTimeout reads X-Mesh-Timeout: a Go duration ("2.5s") or milliseconds.
func parseTimeout(v string) (time.Duration, error) {
	if d, err := time.ParseDuration(v); err == nil && d > 0 {
		return d, nil
	}
	if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
		return time.Duration(ms) * time.Millisecond, nil
	}
	return 0, fmt.Errorf("want a positive duration such as 30s or a number of milliseconds, got %q", v)
}

// stream copies the engine's events to the client, one flush per event.
// Final X-Mesh values follow as HTTP trailers.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, f llm.Format, req *llm.Request, out *engine.Outcome) {
	st := out.Stream
	defer st.Close()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Trailer", strings.Join(meshTrailers, ", "))
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	sw := sse.NewWriter(w, rc.Flush)
	var write func(*llm.Event) error
	if f == llm.FormatAnthropic {
		write = anthropic.NewStreamWriter(sw, anthropic.StreamOptions{}).Write
	} else {
		write = openai.NewStreamWriter(sw, openai.StreamOptions{IncludeUsage: req.IncludeUsage}).Write
	}
	for {
		ev, err := st.Next()
		ev, err = cutEvent(r, ev, err)
		if err != nil {
			break
		}
		if err := write(ev); err != nil {
			// The client went away; the deferred Close cancels upstream.
			return
		}
		if ev.Type == llm.EventError {
			break
		}
	}
	// After WriteHeader the declared names are the trailers. They still
	// hold the values sent in the header, which net/http would send again:
	// clear them before setting the final ones.
	for _, k := range meshTrailers {
		delete(h, k)
	}
	served := st.Served()
	setMeshHeaders(streamTrailer{h}, served.Model, served.Region, served.Provider, st.Record())
	if valid, ok := st.SchemaValid(); ok {
		streamTrailer{h}.Set("X-Mesh-Schema-Valid", strconv.FormatBool(valid))
	}
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

func (s *Server) logRequest(r *http.Request, rid string, req *llm.Request, rec *engine.Record, ae *llm.APIError, start time.Time) {
	if !s.log.Enabled(r.Context(), slog.LevelInfo) {
		return
	}
	attrs := []slog.Attr{
		slog.String("request_id", rid),
		slog.String("path", r.URL.Path),
		slog.String("model", req.Model),
		slog.Bool("stream", req.Stream),
		slog.Duration("latency", time.Since(start)),
	}
	if rec != nil {
		attrs = append(attrs, slog.String("served_by", rec.ServedBy), slog.Int("attempts", len(rec.Attempts)))
		if rec.Fallback != "" {
			attrs = append(attrs, slog.String("fallback", rec.Fallback))
		}
	}
	if ae != nil {
		attrs = append(attrs, slog.Int("status", ae.Status), slog.String("error", ae.Message))
		if ae.MeshCode != "" {
			attrs = append(attrs, slog.String("mesh_error_code", ae.MeshCode))
		}
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

func upstreamRequestID(h http.Header) string {
	if h == nil {
		return ""
	}
	if id := h.Get("Request-Id"); id != "" {
		return id
	}
	return h.Get("X-Request-Id")
}

func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &http.MaxBytesError{Limit: limit}
	}
	rd := http.MaxBytesReader(nil, r.Body, limit)
	if r.ContentLength > 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(rd, b); err != nil {
			return nil, err
		}
		// Anything beyond the declared length is an error in net/http already.
		return b, nil
	}
	return io.ReadAll(rd)
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
func (s *Server) listModels(w http.ResponseWriter, r *http.Request) {
	models := s.eng.Models()
	var v any
	if r.Header.Get("anthropic-version") != "" {
		type am struct {
			Type        string `json:"type"`
			ID          string `json:"id"`
			DisplayName string `json:"display_name"`
			CreatedAt   string `json:"created_at"`
		}
		data := make([]am, 0, len(models))
		for _, m := range models {
			data = append(data, am{Type: "model", ID: m.Name, DisplayName: m.Name, CreatedAt: "2026-01-01T00:00:00Z"})
		}
		first, last := "", ""
		if len(data) > 0 {
			first, last = data[0].ID, data[len(data)-1].ID
		}
		v = map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last}
	} else {
		type om struct {
			ID            string   `json:"id"`
			Object        string   `json:"object"`
			Created       int64    `json:"created"`
			OwnedBy       string   `json:"owned_by"`
			Alias         bool     `json:"alias,omitempty"`
			Capability    int      `json:"capability,omitempty"`
			ContextWindow int      `json:"context_window,omitempty"`
			Regions       []string `json:"regions,omitempty"`
		}
		data := make([]om, 0, len(models))
		for _, m := range models {
			data = append(data, om{ID: m.Name, Object: "model", Created: 1767225600, OwnedBy: "keel", Alias: m.Alias, Capability: m.Capability, ContextWindow: m.ContextWindow, Regions: m.Regions})
		}
		v = map[string]any{"object": "list", "data": data}
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

func isTrue(v string) bool { return v == "true" || v == "1" || v == "True" || v == "TRUE" }
