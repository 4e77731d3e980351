package server

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// admitted is a body that passes every check before the engine and is then
// refused for its two messages (MaxMessages 1): a 400 naming
// server.max_messages means the request was admitted.
const admitted = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`

// call serves one request as if it came over a connection to local (an IP),
// or in-process when local is empty.
func call(s *Server, method, path, local string, hdr map[string]string, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if local != "" {
		req = req.WithContext(context.WithValue(req.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.ParseIP(local), Port: 7878}))
	}
	req.Host = ""
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	rw := httptest.NewRecorder()
	s.ServeHTTP(rw, req)
	return rw
}

// wireError reads an error body in either format: its error type, mesh
// code, message and whether it had the Anthropic envelope.
func wireError(t *testing.T, b []byte) (typ, mesh, msg string, anthropicShape bool) {
	t.Helper()
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type     string `json:"type"`
			Message  string `json:"message"`
			MeshCode string `json:"mesh_error_code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("error body %q: %v", b, err)
	}
	return body.Error.Type, body.Error.MeshCode, body.Error.Message, body.Type == "error"
}

// Host, Origin and Content-Type decide who may call the API routes; each
// refusal is in the caller's wire format and names what to configure.
func TestWhoMayCall(t *testing.T) {
	loopback := New(Options{ListenAddr: "127.0.0.1:7878", MaxMessages: 1})
	listed := New(Options{ListenAddr: "127.0.0.1:7878", MaxMessages: 1, AllowedOrigins: []string{"https://console.example.com"}})
	public := New(Options{ListenAddr: "0.0.0.0:7878", MaxMessages: 1})
	hosts := New(Options{ListenAddr: ":7878", MaxMessages: 1, AllowedHosts: []string{"api.example.com", "*.corp.example", "pinned.example:8443"}})
	embedding := New(Options{MaxMessages: 1}) // no ListenAddr: the connection's local address decides

	const anth, oai = "/v1/messages", "/v1/chat/completions"
	cases := []struct {
		name   string
		s      *Server
		path   string
		local  string
		hdr    map[string]string
		status int
		typ    string // error type; "" for admitted
		says   string // in the message
	}{
		{"loopback: localhost with a port", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost:7878"}, 400, "", ""},
		{"loopback: 127.0.0.1", loopback, oai, "127.0.0.1", map[string]string{"Host": "127.0.0.1:9"}, 400, "", ""},
		{"loopback: [::1]", loopback, oai, "::1", map[string]string{"Host": "[::1]:7878"}, 400, "", ""},
		{"loopback: LOCALHOST, any case", loopback, anth, "127.0.0.1", map[string]string{"Host": "LOCALHOST"}, 400, "", ""},
		{"loopback: another name (DNS rebinding)", loopback, anth, "127.0.0.1", map[string]string{"Host": "evil.example:7878"}, 403, "permission_error", "server.allowed_hosts"},
		{"loopback: another name, openai", loopback, oai, "127.0.0.1", map[string]string{"Host": "evil.example"}, 403, "permission_error", "server.allowed_hosts"},
		{"loopback: localhost.evil.example", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost.evil.example"}, 403, "permission_error", "server.allowed_hosts"},
		{"models route checks Host too", loopback, "/v1/models", "127.0.0.1", map[string]string{"Host": "evil.example", "anthropic-version": "2023-06-01"}, 403, "permission_error", "server.allowed_hosts"},
		{"in-process call: no Host check", loopback, anth, "", map[string]string{"Host": "example.com"}, 400, "", ""},

		{"cross-site Origin", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "https://evil.example"}, 403, "permission_error", "server.allowed_origins"},
		{"cross-site Origin, openai", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "http://localhost:3000"}, 403, "permission_error", "server.allowed_origins"},
		{"Origin null", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "null"}, 403, "permission_error", "server.allowed_origins"},
		{"same origin", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "http://localhost:7878"}, 400, "", ""},
		{"listed origin", listed, oai, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "https://console.example.com"}, 400, "", ""},
		{"unlisted origin beside a listed one", listed, oai, "127.0.0.1", map[string]string{"Host": "localhost:7878", "Origin": "https://console.example.com.evil.example"}, 403, "permission_error", "server.allowed_origins"},

		{"text/plain", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost", "Content-Type": "text/plain"}, 415, "invalid_request_error", "application/json"},
		{"form", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost", "Content-Type": "application/x-www-form-urlencoded"}, 415, "invalid_request_error", "application/json"},
		{"multipart", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost", "Content-Type": "multipart/form-data; boundary=x"}, 415, "invalid_request_error", "application/json"},
		{"json with charset", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost", "Content-Type": "application/json; charset=utf-8"}, 400, "", ""},
		{"JSON in capitals", loopback, anth, "127.0.0.1", map[string]string{"Host": "localhost", "Content-Type": "Application/JSON"}, 400, "", ""},
		{"no content type", loopback, oai, "127.0.0.1", map[string]string{"Host": "localhost"}, 400, "", ""},

		{"public, no allowed_hosts: any Host", public, anth, "10.0.0.5", map[string]string{"Host": "keel.example.org"}, 400, "", ""},
		{"allowed host, any port", hosts, anth, "10.0.0.5", map[string]string{"Host": "api.example.com:443"}, 400, "", ""},
		{"allowed subdomain", hosts, oai, "10.0.0.5", map[string]string{"Host": "keel.corp.example"}, 400, "", ""},
		{"*.domain is not the domain", hosts, oai, "10.0.0.5", map[string]string{"Host": "corp.example"}, 403, "permission_error", "server.allowed_hosts"},
		{"pinned port", hosts, oai, "10.0.0.5", map[string]string{"Host": "pinned.example:8443"}, 400, "", ""},
		{"pinned port, other port", hosts, oai, "10.0.0.5", map[string]string{"Host": "pinned.example:80"}, 403, "permission_error", "server.allowed_hosts"},
		{"allowed_hosts replaces the localhost default", hosts, anth, "127.0.0.1", map[string]string{"Host": "localhost"}, 403, "permission_error", "server.allowed_hosts"},

		{"embedding, loopback connection: localhost only", embedding, anth, "127.0.0.1", map[string]string{"Host": "evil.example"}, 403, "permission_error", "server.allowed_hosts"},
		{"embedding, public connection: any Host", embedding, anth, "10.0.0.5", map[string]string{"Host": "evil.example"}, 400, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rw := call(c.s, http.MethodPost, c.path, c.local, c.hdr, admitted)
			if c.path == "/v1/models" {
				rw = call(c.s, http.MethodGet, c.path, c.local, c.hdr, "")
			}
			typ, mesh, msg, anthropicShape := wireError(t, rw.Body.Bytes())
			if rw.Code != c.status {
				t.Fatalf("status %d (%s), want %d", rw.Code, rw.Body, c.status)
			}
			if c.typ == "" {
				if !strings.Contains(msg, "server.max_messages") {
					t.Fatalf("want the request admitted (refused only for server.max_messages), got %s", rw.Body)
				}
				return
			}
			wantAnthropic := c.path == anth || c.hdr["anthropic-version"] != ""
			if typ != inShape(c.typ, anthropicShape) || mesh != "MESH_BAD_REQUEST" || !strings.Contains(msg, c.says) || anthropicShape != wantAnthropic {
				t.Errorf("error %s: want type %s, MESH_BAD_REQUEST, a message naming %q, Anthropic shape %v", rw.Body, c.typ, c.says, wantAnthropic)
			}
			if rw.Header().Get("X-Mesh-Error-Code") != "MESH_BAD_REQUEST" {
				t.Errorf("X-Mesh-Error-Code %q", rw.Header().Get("X-Mesh-Error-Code"))
			}
		})
	}
}

// The observability routes need a bearer token when the listen address is
// not loopback, and are open on loopback.
func TestObservabilityRoutesNeedATokenOffLoopback(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("shown")) })
	routes := []Route{{Path: "/metrics", Handler: ok}, {Path: "/debug/traces", Prefix: true, Handler: ok}, {Path: "/dashboard", Prefix: true, Handler: ok}}
	loop := New(Options{ListenAddr: "127.0.0.1:7878", Routes: routes})
	public := New(Options{ListenAddr: "0.0.0.0:7878", Routes: routes, AdminToken: "adm", ReadToken: "rd"})
	adminOnly := New(Options{ListenAddr: "10.1.2.3:7878", Routes: routes, AdminToken: "adm"})
	noToken := New(Options{ListenAddr: "[::]:7878", Routes: routes})
	embedding := New(Options{Routes: routes, ReadToken: "rd"})
	cases := []struct {
		name   string
		s      *Server
		local  string
		auth   string
		status int
		typ    string
	}{
		{"loopback, no token", loop, "127.0.0.1", "", 200, ""},
		{"public, no token", public, "10.0.0.5", "", 401, "authentication_error"},
		{"public, wrong token", public, "10.0.0.5", "Bearer nope", 401, "authentication_error"},
		{"public, read token", public, "10.0.0.5", "Bearer rd", 200, ""},
		{"public, admin token", public, "10.0.0.5", "Bearer adm", 200, ""},
		{"public, read token without Bearer", public, "10.0.0.5", "rd", 401, "authentication_error"},
		{"admin token only, admin token", adminOnly, "10.0.0.5", "Bearer adm", 200, ""},
		{"admin token only, empty bearer", adminOnly, "10.0.0.5", "Bearer ", 401, "authentication_error"},
		{"no token configured", noToken, "10.0.0.5", "Bearer x", 403, "permission_error"},
		{"embedding, public connection", embedding, "10.0.0.5", "", 401, "authentication_error"},
		{"embedding, loopback connection", embedding, "127.0.0.1", "", 200, ""},
		{"embedding, in-process", embedding, "", "", 200, ""},
	}
	for _, c := range cases {
		for _, path := range []string{"/metrics", "/debug/traces/mesh_0123", "/dashboard"} {
			t.Run(c.name+" "+path, func(t *testing.T) {
				hdr := map[string]string{"Host": "localhost:7878"}
				if c.auth != "" {
					hdr["Authorization"] = c.auth
				}
				rw := call(c.s, http.MethodGet, path, c.local, hdr, "")
				if rw.Code != c.status {
					t.Fatalf("status %d (%s), want %d", rw.Code, rw.Body, c.status)
				}
				if c.typ == "" {
					if rw.Body.String() != "shown" {
						t.Errorf("body %q, want the route's", rw.Body)
					}
					return
				}
				if typ, _, msg, anth := wireError(t, rw.Body.Bytes()); typ != inShape(c.typ, anth) || !strings.Contains(msg, "server.read_token") {
					t.Errorf("error %s: want type %s naming server.read_token", rw.Body, c.typ)
				}
				if c.status == 401 && rw.Header().Get("WWW-Authenticate") == "" {
					t.Error("401 without WWW-Authenticate")
				}
			})
		}
	}
}

func TestLoopbackListen(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:7878": true, "127.9.9.9:1": true, "[::1]:7878": true, "localhost:7878": true, "LocalHost:0": true,
		":7878": false, "0.0.0.0:7878": false, "[::]:7878": false, "10.0.0.1:7878": false, "keel.example.com:7878": false,
	} {
		if got := loopbackListen(addr); got != want {
			t.Errorf("loopbackListen(%q) = %v, want %v", addr, got, want)
		}
	}
}

// Request ids (which name debug traces) are random, not a sequence.
func TestRequestIDsAreRandom(t *testing.T) {
	s := New(Options{})
	re := regexp.MustCompile(`^mesh_[0-9a-f]{24}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := s.requestID()
		if !re.MatchString(id) {
			t.Fatalf("id %q, want mesh_ and 24 hex digits", id)
		}
		if seen[id] {
			t.Fatalf("id %q repeated", id)
		}
		seen[id] = true
	}
}

func BenchmarkRequestID(b *testing.B) {
	s := New(Options{})
	b.ReportAllocs()
	for b.Loop() {
		s.requestID()
	}
}

// Headers over max_header_bytes get 431 in the caller's wire format. Past
// net/http's own limit (1 MiB plus 4 KiB) Go's server answers first, in
// plain text, before any handler: there is no hook for that answer.
func TestHeadersTooLarge(t *testing.T) {
	s := New(Options{ListenAddr: "127.0.0.1:7878", MaxHeaderBytes: 8 << 10, MaxMessages: 1})
	ts := httptest.NewServer(s)
	defer ts.Close()
	cases := []struct {
		name      string
		size      int
		status    int
		jsonShape bool
	}{
		{"under the limit", 4 << 10, 400, true}, // admitted: refused for server.max_messages
		{"over max_header_bytes", 9 << 10, 431, true},
		{"over net/http's limit", 1<<20 + 8<<10, 431, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/messages", strings.NewReader(admitted))
			req.Header.Set("X-Big", strings.Repeat("a", c.size))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%.200s), want %d", resp.StatusCode, b, c.status)
			}
			if !c.jsonShape {
				if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
					t.Errorf("net/http's own 431 now has Content-Type %q: answer it in JSON too? (docs/config.md, max_header_bytes)", ct)
				}
				return
			}
			typ, _, msg, anthropicShape := wireError(t, b)
			switch {
			case c.status == 431 && (typ != "invalid_request_error" || !strings.Contains(msg, "server.max_header_bytes") || !anthropicShape):
				t.Errorf("error %s, want Anthropic's shape naming server.max_header_bytes", b)
			case c.status == 400 && !strings.Contains(msg, "server.max_messages"):
				t.Errorf("error %s, want the request admitted", b)
			}
		})
	}
}

// The authentication hook runs on the API routes after the Host and Origin
// checks and answers in the caller's format; nil admits.
func TestAuthenticateHook(t *testing.T) {
	s := New(Options{MaxMessages: 1, Authenticate: func(r *http.Request) (Caller, *llm.APIError) {
		if r.Header.Get("X-Api-Key") == "good" || r.Header.Get("Authorization") == "Bearer good" {
			return nil, nil
		}
		return nil, &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication, Message: "unknown key"}
	}})
	for _, c := range []struct {
		path   string
		hdr    map[string]string
		status int
		shape  bool
	}{
		{"/v1/messages", map[string]string{"Host": "localhost", "X-Api-Key": "bad", "Anthropic-Version": "2023-06-01"}, 401, true},
		{"/v1/chat/completions", map[string]string{"Host": "localhost", "Authorization": "Bearer bad"}, 401, false},
		{"/v1/messages", map[string]string{"Host": "localhost", "X-Api-Key": "good", "Anthropic-Version": "2023-06-01"}, 400, true},
		{"/v1/chat/completions", map[string]string{"Host": "localhost", "Authorization": "Bearer good"}, 400, false},
	} {
		rw := call(s, http.MethodPost, c.path, "127.0.0.1", c.hdr, admitted)
		if rw.Code != c.status {
			t.Errorf("%s %v: status %d, want %d: %s", c.path, c.hdr, rw.Code, c.status, rw.Body)
			continue
		}
		typ, _, msg, shape := wireError(t, rw.Body.Bytes())
		if shape != c.shape || c.status == 401 && (typ != inShape("authentication_error", shape) || msg != "unknown key") ||
			c.status == 400 && !strings.Contains(msg, "server.max_messages") {
			t.Errorf("%s: %s", c.path, rw.Body)
		}
	}
}

// inShape is the error type typ (Anthropic's word) as the shape the error
// came in says it: the OpenAI format uses OpenAI's words (wire/openai
// wireErrorType).
func inShape(typ string, anthropicShape bool) string {
	if anthropicShape {
		return typ
	}
	switch typ {
	case "permission_error", "authentication_error", "not_found_error":
		return "invalid_request_error"
	case "rate_limit_error":
		return "requests"
	case "overloaded_error", "api_error", "timeout_error":
		return "server_error"
	}
	return typ
}
