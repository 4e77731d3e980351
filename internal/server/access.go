package server

import (
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"

	"github.com/keelmesh/keel/internal/llm"
)

// access decides who may call: which Host headers and browser origins are
// admitted, and whether the listen address is loopback. Built once by New;
// read-only afterwards except for the once-only warning.
type access struct {
	// listenKnown is set when Options.ListenAddr was given; loopback then
	// says whether it is a loopback address.
	listenKnown bool
	loopback    bool
	hosts       []string // lower case; empty: see hostAllowed
	origins     []string
	anyOrigin   bool
	log         *slog.Logger
	warnOnce    sync.Once
}

func newAccess(listen string, hosts, origins []string, log *slog.Logger) *access {
	a := &access{log: log}
	for _, h := range hosts {
		a.hosts = append(a.hosts, strings.ToLower(strings.TrimSpace(h)))
	}
	for _, o := range origins {
		o = strings.TrimSuffix(strings.TrimSpace(o), "/")
		a.anyOrigin = a.anyOrigin || o == "*"
		a.origins = append(a.origins, o)
	}
	if listen != "" {
		a.listenKnown = true
		a.loopback = loopbackListen(listen)
		if !a.loopback && len(a.hosts) == 0 {
			a.warn(listen)
		}
	}
	return a
}

func (a *access) warn(addr string) {
	a.warnOnce.Do(func() {
		a.log.Warn("keel: listening on a non-loopback address without server.allowed_hosts: every Host header is accepted; list the names clients use", "addr", addr)
	})
}

// loopbackListen reports whether a listen address (host:port) binds only
// loopback interfaces. An empty host (":7878") binds every interface.
func loopbackListen(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// onLoopback reports whether r reached the server on a loopback address:
// the listen address when known, else the connection's local address; a
// request without one was served in-process.
func (a *access) onLoopback(r *http.Request) bool {
	if a.listenKnown {
		return a.loopback
	}
	la, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || la == nil {
		return true
	}
	host, _, err := net.SplitHostPort(la.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// hostAllowed reports whether r's Host header may call.
func (a *access) hostAllowed(r *http.Request) bool {
	host, port := splitHost(strings.ToLower(r.Host))
	if len(a.hosts) > 0 {
		for _, h := range a.hosts {
			if hostMatch(h, host, port) {
				return true
			}
		}
		return false
	}
	if a.listenKnown && !a.loopback {
		return true
	}
	if _, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); !ok {
		// In-process (a direct ServeHTTP call): no browser can reach it.
		return true
	}
	if !a.onLoopback(r) {
		a.warn(r.Context().Value(http.LocalAddrContextKey).(net.Addr).String())
		return true
	}
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// splitHost splits a Host header into name and port ("" when absent),
// without brackets around an IPv6 address.
func splitHost(h string) (string, string) {
	if strings.HasPrefix(h, "[") {
		if i := strings.Index(h, "]"); i > 0 {
			return h[1:i], strings.TrimPrefix(h[i+1:], ":")
		}
		return h, ""
	}
	if i := strings.LastIndexByte(h, ':'); i >= 0 && strings.IndexByte(h, ':') == i {
		return h[:i], h[i+1:]
	}
	return h, ""
}

// hostMatch matches one allowed_hosts entry: "*", "name", "name:port",
// "*.domain" (any subdomain, not the domain itself), "[::1]:port".
func hostMatch(entry, host, port string) bool {
	if entry == "*" {
		return true
	}
	ename, eport := splitHost(entry)
	if eport != "" && eport != port {
		return false
	}
	if rest, ok := strings.CutPrefix(ename, "*."); ok {
		return strings.HasSuffix(host, "."+rest)
	}
	return ename == host
}

// originAllowed reports whether a browser Origin may call: listed, "*"
// listed, or the request's own origin (same-origin is not cross-site).
func (a *access) originAllowed(origin, host string) bool {
	if a.anyOrigin {
		return true
	}
	for _, o := range a.origins {
		if strings.EqualFold(o, origin) {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(origin, "http://"); ok {
		return strings.EqualFold(rest, host)
	}
	if rest, ok := strings.CutPrefix(origin, "https://"); ok {
		return strings.EqualFold(rest, host)
	}
	return false
}

// admit applies the Host and Origin checks to a request over the network
// and answers 403 in format f when one fails. Requests through the
// embedded transport are in-process and skip them.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, f llm.Format) bool {
	if s.embedded(r) {
		return true
	}
	if n := headerBytes(r); n > s.maxHeader {
		w.Header().Set("Connection", "close")
		writeError(w, f, &llm.APIError{Status: http.StatusRequestHeaderFieldsTooLarge, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
			Message: fmt.Sprintf("request headers of about %d bytes exceed server.max_header_bytes (%d)", n, s.maxHeader)})
		return false
	}
	if !s.access.hostAllowed(r) {
		writeError(w, f, &llm.APIError{Status: http.StatusForbidden, Type: llm.ErrPermission, MeshCode: llm.MeshBadRequest,
			Message: fmt.Sprintf("Host %q is not allowed: list it in server.allowed_hosts", r.Host)})
		return false
	}
	if o := headerValue(r.Header, "Origin"); o != "" && !s.access.originAllowed(o, r.Host) {
		writeError(w, f, &llm.APIError{Status: http.StatusForbidden, Type: llm.ErrPermission, MeshCode: llm.MeshBadRequest,
			Message: fmt.Sprintf("cross-site request from Origin %q refused: list the origin in server.allowed_origins", o)})
		return false
	}
	return true
}

// headerBytes is about the size of r's request line and header section as
// sent: net/http's own limit (http.Server.MaxHeaderBytes) counts the same.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + len(r.RequestURI) + len(r.Proto) + 4 + len("Host: \r\n") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}

// jsonBody refuses (415) a POST whose Content-Type is not application/json
// (parameters allowed): text/plain and form types are what a browser may
// send cross-site without a preflight. A missing Content-Type is accepted,
// as clients written against the APIs often omit it.
func (s *Server) jsonBody(w http.ResponseWriter, r *http.Request, f llm.Format) bool {
	if s.embedded(r) {
		return true
	}
	ct := headerValue(r.Header, "Content-Type")
	if ct == "" {
		return true
	}
	mt, _, _ := strings.Cut(ct, ";")
	if strings.EqualFold(strings.TrimSpace(mt), "application/json") {
		return true
	}
	writeError(w, f, &llm.APIError{Status: http.StatusUnsupportedMediaType, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
		Message: fmt.Sprintf("Content-Type %q is not accepted: send the body as application/json", ct)})
	return false
}

// authorizeRead guards the observability routes (metrics, debug traces,
// dashboard): open on a loopback listen address, else they need
// "Authorization: Bearer" with the admin or the read token.
func (s *Server) authorizeRead(w http.ResponseWriter, r *http.Request, f llm.Format) bool {
	if s.embedded(r) || s.access.onLoopback(r) {
		return true
	}
	if s.adminToken == "" && s.readToken == "" {
		writeError(w, f, &llm.APIError{Status: http.StatusForbidden, Type: llm.ErrPermission,
			Message: r.URL.Path + " is served on a non-loopback listen address only with a token: set server.read_token (or server.admin_token) and send Authorization: Bearer <token>"})
		return false
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && (tokenIs(tok, s.readToken) || tokenIs(tok, s.adminToken)) {
		return true
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="keel"`)
	writeError(w, f, &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication,
		Message: "missing or wrong token (Authorization: Bearer <server.read_token or server.admin_token>)"})
	return false
}

// tokenIs compares in constant time; an empty want matches nothing.
func tokenIs(got, want string) bool {
	return want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}
