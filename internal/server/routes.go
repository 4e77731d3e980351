package server

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// The API routes besides the model calls (which wire.Codecs route), the
// unversioned paths, the root and the unknown routes.

// unversioned are the API paths OpenAI-compatible servers (LiteLLM's
// proxy, llama.cpp's server) also serve without /v1, for clients whose
// base URL is the bare host: served as their /v1 path. A path under one
// of the "/" entries is too ("/models/{id}"). (The Responses API's
// "/responses" joins them with its route.)
var unversioned = []string{"/chat/completions", "/embeddings", "/models", "/models/"}

// apiPath is path as Keel routes it: an unversioned API path gets its /v1.
func apiPath(path string) string {
	for _, p := range unversioned {
		if path == p || strings.HasSuffix(p, "/") && strings.HasPrefix(path, p) {
			return "/v1" + path
		}
	}
	return path
}

// sideRoute is an API route beside the model calls: its path from the
// root (path, or a path under it when prefix), the part of the path that
// matches it in embedded mode, where the SDK's base URL prefix stays
// (tail: the path ends in it, or for a prefix route holds it), the wire
// format of its answers and errors (FormatUnknown: the caller's, by
// headerFormat), its method, and its handler, given the part of the path
// after a prefix route's tail.
type sideRoute struct {
	path, tail string
	prefix     bool
	format     llm.Format
	method     string
	serve      func(s *Server, w http.ResponseWriter, r *http.Request, f llm.Format, caller Caller, rest string)
}

var sideRoutes = []sideRoute{
	{path: "/v1/messages/count_tokens", tail: "/v1/messages/count_tokens", format: llm.FormatAnthropic, method: http.MethodPost, serve: (*Server).countTokens},
	{path: "/v1/embeddings", tail: "/embeddings", format: llm.FormatOpenAI, method: http.MethodPost, serve: (*Server).embeddings},
	{path: "/v1/models", tail: "/v1/models", method: http.MethodGet, serve: (*Server).listModels},
	{path: "/v1/models/", tail: "/models/", prefix: true, method: http.MethodGet, serve: (*Server).getModel},
}

// match reports whether path is rt's, and the rest of a prefix route's
// path (never empty).
func (rt *sideRoute) match(path string, embedded bool) (rest string, ok bool) {
	if !rt.prefix {
		return "", path == rt.path || embedded && strings.HasSuffix(path, rt.tail)
	}
	if rest, ok = strings.CutPrefix(path, rt.path); !ok && embedded {
		if i := strings.Index(path, rt.tail); i >= 0 {
			rest, ok = path[i+len(rt.tail):], true
		}
	}
	if !ok || rest == "" {
		return "", false
	}
	return rest, true
}

// serveSide serves r when its path is a sideRoute's, and reports whether
// it was.
func (s *Server) serveSide(w http.ResponseWriter, r *http.Request, path string, embedded bool) bool {
	for i := range sideRoutes {
		rt := &sideRoutes[i]
		rest, ok := rt.match(path, embedded)
		if !ok {
			continue
		}
		f := rt.format
		if f == llm.FormatUnknown {
			f = headerFormat(r)
		}
		if !s.admit(w, r, f) || !allow(w, r, f, rt.method) {
			return true
		}
		if caller, ok := s.authenticate(w, r, f); ok {
			rt.serve(s, w, r, f, caller, rest)
		}
		return true
	}
	return false
}

// getModel serves GET /v1/models/{id}: the model or alias in the shape of
// the models list (Anthropic's when the client sent anthropic-version),
// with its context window; an unknown id is the provider's 404.
func (s *Server) getModel(w http.ResponseWriter, r *http.Request, f llm.Format, _ Caller, id string) {
	c := wire.For(f)
	for _, m := range s.eng.Models() {
		if m.Name == id {
			w.Header().Set("Content-Type", "application/json")
			w.Write(wire.EncodeModel(c, wireModel(m)))
			return
		}
	}
	writeError(w, f, wire.ModelNotFound(c, id))
}

// serveRoot answers GET and HEAD / with 200 and a line naming the API
// (Claude Code probes the base URL with HEAD / before it starts).
func serveRoot(w http.ResponseWriter, r *http.Request) {
	if allowPlain(w, r) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "keel: POST /v1/messages, /v1/messages/count_tokens, /v1/chat/completions, /v1/embeddings; GET /v1/models, /v1/models/{id}\n")
	}
}

// unknownLogBurst and unknownLogEvery bound the log lines of unknown
// routes: a burst of lines, then one per interval, each saying how many
// went unlogged before it.
const (
	unknownLogBurst = 10
	unknownLogEvery = time.Second
	// maxLoggedPath bounds the path a log line shows.
	maxLoggedPath = 200
)

// unknownLog rate-limits the log lines of unknown routes (a token bucket).
type unknownLog struct {
	mu         sync.Mutex // guards following
	tokens     float64
	last       time.Time
	suppressed int
}

// allow takes a token at now; it returns false when none is left, and
// otherwise how many lines were suppressed since the last one allowed.
func (u *unknownLog) allow(now time.Time) (int, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last.IsZero() {
		u.tokens = unknownLogBurst
	} else {
		u.tokens = min(unknownLogBurst, u.tokens+float64(now.Sub(u.last))/float64(unknownLogEvery))
	}
	u.last = now
	if u.tokens < 1 {
		u.suppressed++
		return 0, false
	}
	u.tokens--
	n := u.suppressed
	u.suppressed = 0
	return n, true
}

// unknownRoute answers a path Keel does not serve with the caller's 404,
// counts it (Options.OnUnknownRoute) and logs it: method, path (without
// the query, which may carry a key, and cut to maxLoggedPath) and user
// agent, rate-limited.
func (s *Server) unknownRoute(w http.ResponseWriter, r *http.Request) {
	if s.onUnknown != nil {
		s.onUnknown(r.Method)
	}
	if n, ok := s.unknown.allow(time.Now()); ok && s.log.Enabled(r.Context(), slog.LevelWarn) {
		attrs := []slog.Attr{slog.String("method", r.Method), slog.String("path", cut(r.URL.Path, maxLoggedPath)),
			slog.String("user_agent", cut(r.UserAgent(), maxLoggedPath))}
		if n > 0 {
			attrs = append(attrs, slog.Int("suppressed", n))
		}
		s.log.LogAttrs(r.Context(), slog.LevelWarn, "keel: no route for the request; the client is failing", attrs...)
	}
	writeError(w, headerFormat(r), &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Message: "no route for " + r.Method + " " + r.URL.Path})
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
