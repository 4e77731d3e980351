package server

import (
	"bufio"
	"fmt"
	"github.com/keelmesh/keel/internal/llm"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// bodyOf is a request body of exactly n bytes (n ≥ 200) with two messages:
// with MaxMessages 1 it is read, parsed and refused with 400 naming
// server.max_messages, so the engine is never reached.
func bodyOf(n int) string {
	const pre, post = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"},{"role":"user","content":"`, `"}]}`
	return pre + strings.Repeat("x", n-len(pre)-len(post)) + post
}

// rawPost opens a connection to addr and sends a POST's headers declaring
// length bytes, then the first part of body.
func rawPost(t *testing.T, addr, path string, length int, part string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\nContent-Length: %d\r\n\r\n%s", path, length, part); err != nil {
		t.Fatal(err)
	}
	return c
}

// readResponse reads one response off c within a bound.
func readResponse(t *testing.T, c net.Conn) (*http.Response, string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp, string(b)
}

// waitInFlight waits, within a bound, until the server holds n body bytes.
func waitInFlight(t *testing.T, s *Server, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.BodyBytesInFlight() != n {
		if time.Now().After(deadline) {
			t.Fatalf("body bytes in flight %d, want %d", s.BodyBytesInFlight(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// With the in-flight body budget taken, a request whose body cannot be
// buffered is answered 429 at once in its wire format, with retry-after;
// the request holding the budget finishes normally, and the budget is
// returned.
func TestInflightBodyBytesRefuseWith429(t *testing.T) {
	const size = 256 << 10
	s := New(Options{MaxBodyBytes: size, MaxInflightBodyBytes: size + 40<<10, MaxMessages: 1})
	ts := httptest.NewServer(s)
	defer ts.Close()
	addr := ts.Listener.Addr().String()

	body := bodyOf(size)
	holder := rawPost(t, addr, "/v1/messages", size, body[:200<<10])
	waitInFlight(t, s, size+1) // 32, 64, 128 KiB, then the declared length and a byte to see the end

	for _, c := range []struct {
		path           string
		anthropicShape bool
	}{{"/v1/messages", true}, {"/v1/chat/completions", false}} {
		conn := rawPost(t, addr, c.path, size, body)
		resp, b := readResponse(t, conn)
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("%s: status %d (%s), want 429", c.path, resp.StatusCode, b)
		}
		typ, mesh, msg, anthropicShape := wireError(t, []byte(b))
		if typ != inShape("rate_limit_error", c.anthropicShape) || mesh != llm.MeshOverloaded || !strings.Contains(msg, "server.max_inflight_body_bytes") || anthropicShape != c.anthropicShape {
			t.Errorf("%s: error %s, want rate_limit_error %s naming server.max_inflight_body_bytes (Anthropic shape %v)", c.path, b, llm.MeshOverloaded, c.anthropicShape)
		}
		if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("X-Should-Retry") != "true" || !resp.Close {
			t.Errorf("%s: Retry-After %q, X-Should-Retry %q, close %v; want 1, true, a closed connection", c.path,
				resp.Header.Get("Retry-After"), resp.Header.Get("X-Should-Retry"), resp.Close)
		}
	}
	if n := s.BodyBytesInFlight(); n != size+1 {
		t.Errorf("after the refusals %d body bytes in flight, want the holder's %d", n, size+1)
	}

	if _, err := io.WriteString(holder, body[200<<10:]); err != nil {
		t.Fatal(err)
	}
	resp, b := readResponse(t, holder)
	if _, _, msg, _ := wireError(t, []byte(b)); resp.StatusCode != 400 || !strings.Contains(msg, "server.max_messages") {
		t.Errorf("holder: %d %s; want its body read and parsed (400 for server.max_messages)", resp.StatusCode, b)
	}
	waitInFlight(t, s, 0)
}

// A body that stops arriving is cut by the minimum rate a second or so
// after it started, long before body_read_timeout, with 408 and a closed
// connection; the budget it held is returned.
func TestSlowBodyCutByMinimumRate(t *testing.T) {
	s := New(Options{BodyReadTimeout: time.Minute, MinBodyRate: 1024})
	ts := httptest.NewServer(s)
	defer ts.Close()
	start := time.Now()
	c := rawPost(t, ts.Listener.Addr().String(), "/v1/chat/completions", 100000, "0123456789")
	resp, b := readResponse(t, c)
	took := time.Since(start)
	if resp.StatusCode != http.StatusRequestTimeout || !resp.Close {
		t.Fatalf("status %d close %v (%s), want 408 and a closed connection", resp.StatusCode, resp.Close, b)
	}
	if typ, _, msg, _ := wireError(t, []byte(b)); typ != "invalid_request_error" || !strings.Contains(msg, "server.min_body_rate_bytes_per_sec") {
		t.Errorf("error %s, want invalid_request_error naming server.min_body_rate_bytes_per_sec", b)
	}
	// 10 bytes buy 10 ms past the 1 s grace.
	if took < bodyRateGrace || took > bodyRateGrace+5*time.Second {
		t.Errorf("cut after %s, want just after %s", took, bodyRateGrace)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("after the 408: read %d, %v; want the connection closed (EOF)", n, err)
	}
	waitInFlight(t, s, 0)
}

// A body declared or found larger than max_body_bytes is refused with 413.
func TestBodyOverLimit(t *testing.T) {
	s := New(Options{MaxBodyBytes: 1000, MaxMessages: 1})
	ts := httptest.NewServer(s)
	defer ts.Close()
	cases := []struct {
		name   string
		length int64 // -1: chunked
		body   string
		status int
	}{
		{"declared too large", 1001, bodyOf(1001), 413},
		{"chunked, too large", -1, bodyOf(1001), 413},
		{"chunked, at the limit", -1, bodyOf(1000), 400},
		{"declared, at the limit", 1000, bodyOf(1000), 400},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest("POST", ts.URL+"/v1/messages", strings.NewReader(c.body))
			req.ContentLength = c.length
			if c.length < 0 {
				req.Body = io.NopCloser(req.Body) // hide the length: chunked
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d (%s), want %d", resp.StatusCode, b, c.status)
			}
			typ, _, msg, _ := wireError(t, b)
			if c.status == 413 && (typ != "request_too_large" || !strings.Contains(msg, "server.max_body_bytes")) {
				t.Errorf("error %s, want request_too_large naming server.max_body_bytes", b)
			}
			if c.status == 400 && !strings.Contains(msg, "server.max_messages") {
				t.Errorf("error %s, want the body read whole (400 for server.max_messages)", b)
			}
		})
	}
	waitInFlight(t, s, 0)
}

// More messages than max_messages: 400 naming the limit, in each format.
func TestMaxMessages(t *testing.T) {
	s := New(Options{MaxMessages: 1})
	for _, path := range []string{"/v1/messages", "/v1/chat/completions"} {
		rw := call(s, http.MethodPost, path, "", nil, admitted)
		typ, mesh, msg, _ := wireError(t, rw.Body.Bytes())
		if rw.Code != 400 || typ != "invalid_request_error" || mesh != "MESH_BAD_REQUEST" || !strings.Contains(msg, "server.max_messages allows at most 1") {
			t.Errorf("%s: %d %s; want 400 invalid_request_error naming server.max_messages", path, rw.Code, rw.Body)
		}
	}
}

// An X-Mesh-Timeout too small to fit an upstream attempt is a 400 naming
// the header, before the engine is reached (this Server has none).
func TestMeshTimeoutBelowMinimum(t *testing.T) {
	s := New(Options{})
	const one = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"a"}]}`
	for _, v := range []string{"1ns", "999us", "0", "0s", "-5s", "-1", "soon"} {
		rw := call(s, http.MethodPost, "/v1/messages", "", map[string]string{"X-Mesh-Timeout": v}, one)
		if _, _, msg, _ := wireError(t, rw.Body.Bytes()); rw.Code != 400 || !strings.Contains(msg, "X-Mesh-Timeout") {
			t.Errorf("X-Mesh-Timeout %q: %d %s; want 400 naming the header", v, rw.Code, rw.Body)
		}
	}
	for v, want := range map[string]time.Duration{"1ms": time.Millisecond, "1": time.Millisecond, "2.5s": 2500 * time.Millisecond, "30000": 30 * time.Second} {
		if d, err := parseTimeout(v); err != nil || d != want {
			t.Errorf("parseTimeout(%q) = %s, %v; want %s", v, d, err, want)
		}
	}
}

// BenchmarkReadBody: a body's buffers as it arrives, by size (declared
// length known, as from the SDKs).
func BenchmarkReadBody(b *testing.B) {
	s := New(Options{})
	for _, n := range []int{2 << 10, 32 << 10, 200 << 10, 2 << 20} {
		body := bodyOf(n)
		b.Run(fmt.Sprintf("%dKiB", n>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(n))
			for b.Loop() {
				req := httptest.NewRequest("POST", "/v1/messages", strings.NewReader(body))
				_, held, ae := s.readBody(httptest.NewRecorder(), req)
				if ae != nil {
					b.Fatal(ae)
				}
				s.release(held)
			}
		})
	}
}
