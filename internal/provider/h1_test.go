package provider

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The official SDK's vertex package (platform_sdk_test.go) imports
// google.golang.org/api, whose opencensus dependency starts a worker at init.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("go.opencensus.io/stats/view.(*worker).start"))
}

// newH1 returns a lean transport whose fallback fails the test if used.
func newH1(t *testing.T) *H1Transport {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	tr := &H1Transport{
		Fallback: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			t.Errorf("fallback used for %s", r.URL)
			return nil, errors.New("fallback")
		}),
		Dial: d.DialContext,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countConns starts srv counting the connections it accepts.
func countConns(srv *httptest.Server) *atomic.Int64 {
	var n atomic.Int64
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			n.Add(1)
		}
	}
	srv.Start()
	return &n
}

// rawServer serves each connection a loopback listener accepts with serve
// (which owns and closes it), one after another, until the test ends. It
// returns the server's base URL.
func rawServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

func post(t *testing.T, tr http.RoundTripper, ctx context.Context, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Api-Key", "k")
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	return resp
}

func readAll(t *testing.T, resp *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestH1RoundTripReusesOneConnection(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Seen-Key", r.Header.Get("X-Api-Key"))
		fmt.Fprintf(w, "%s %s %d %s", r.Method, r.URL.Path, r.ContentLength, b)
	}))
	conns := countConns(srv)
	defer srv.Close()
	tr := newH1(t)
	for i := range 20 {
		resp := post(t, tr, context.Background(), srv.URL+"/v1/messages?beta=true", fmt.Sprintf(`{"n":%d}`, i))
		want := fmt.Sprintf(`POST /v1/messages %d {"n":%d}`, len(fmt.Sprintf(`{"n":%d}`, i)), i)
		if got := readAll(t, resp); got != want || resp.StatusCode != 200 {
			t.Fatalf("call %d: %d %q, want 200 %q", i, resp.StatusCode, got, want)
		}
		if resp.Header.Get("X-Seen-Key") != "k" {
			t.Fatalf("header not sent: %v", resp.Header)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 sequential calls used %d connections, want 1", n)
	}
}

func TestH1ChunkedStreamThenReuse(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/plain" {
			io.WriteString(w, "ok")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for i := range 5 {
			fmt.Fprintf(w, "data: %d\n\n", i)
			w.(http.Flusher).Flush()
		}
	}))
	conns := countConns(srv)
	defer srv.Close()
	tr := newH1(t)
	resp := post(t, tr, context.Background(), srv.URL+"/stream", "{}")
	if len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("want a chunked answer, got %v", resp.TransferEncoding)
	}
	if got := readAll(t, resp); got != "data: 0\n\ndata: 1\n\ndata: 2\n\ndata: 3\n\ndata: 4\n\n" {
		t.Fatalf("stream = %q", got)
	}
	if got := readAll(t, post(t, tr, context.Background(), srv.URL+"/plain", "{}")); got != "ok" {
		t.Fatalf("second call = %q", got)
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("a fully read stream did not return its connection: %d connections", n)
	}
}

func TestH1EarlyCloseAndConnectionCloseAreNotReused(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/close" {
			w.Header().Set("Connection", "close")
		}
		io.WriteString(w, strings.Repeat("x", 64<<10))
	}))
	conns := countConns(srv)
	defer srv.Close()
	tr := newH1(t)

	resp := post(t, tr, context.Background(), srv.URL+"/big", "{}")
	buf := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, buf); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // unread bytes: the connection cannot be reused
	readAll(t, post(t, tr, context.Background(), srv.URL+"/close", "{}"))
	readAll(t, post(t, tr, context.Background(), srv.URL+"/big", "{}"))
	if n := conns.Load(); n != 3 {
		t.Fatalf("connections = %d, want 3 (early close, Connection: close, fresh)", n)
	}
}

// TestH1ServerClosedIdleConnection: the server closes a kept-alive
// connection while it sits in the pool; the next call must not fail.
func TestH1ServerClosedIdleConnection(t *testing.T) {
	var accepted atomic.Int64
	closed := make(chan struct{}, 4)
	base := rawServer(t, func(c net.Conn) {
		accepted.Add(1)
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
		c.Close() // keep-alive promised, connection closed anyway
		closed <- struct{}{}
	})
	tr := newH1(t)
	for i := range 3 {
		if got := readAll(t, post(t, tr, context.Background(), base+"/v1/messages", "{}")); got != "ok" {
			t.Fatalf("call %d = %q", i, got)
		}
		<-closed // the server has closed it before the next call
	}
	if n := accepted.Load(); n != 3 {
		t.Fatalf("accepted %d, want 3", n)
	}
}

func TestH1CancelUnblocksABlockedRead(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := newH1(t)
	ctx, cancel := context.WithCancel(context.Background())
	resp := post(t, tr, ctx, srv.URL, "{}")
	buf := make([]byte, 64)
	n, err := resp.Body.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "first") {
		t.Fatalf("first read: %q %v", buf[:n], err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := resp.Body.Read(buf)
		errc <- err
	}()
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("read after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled read stayed blocked")
	}
	resp.Body.Close()
}

func TestH1CancelBeforeHeaders(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	tr := newH1(t)
	ctx, cancel := context.WithCancelCause(context.Background())
	why := errors.New("hedge won")
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
		_, err := tr.RoundTrip(req)
		errc <- err
	}()
	cancel(why)
	select {
	case err := <-errc:
		if !errors.Is(err, why) && !errors.Is(err, context.Canceled) {
			t.Fatalf("RoundTrip after cancel: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled RoundTrip stayed blocked")
	}
}

func TestH1RejectsHeaderInjection(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	defer srv.Close()
	tr := newH1(t)
	for _, h := range []struct{ k, v string }{
		{"X-Beta", "a\r\nX-Evil: 1"},
		{"X-Beta", "a\nb"},
		{"Bad Key", "v"},
		{"", "v"},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
		req.Header[h.k] = []string{h.v}
		if _, err := tr.RoundTrip(req); !errors.Is(err, errBadHeader) {
			t.Errorf("header %q: %q: err = %v, want errBadHeader", h.k, h.v, err)
		}
	}
	if hits.Load() != 0 {
		t.Fatalf("%d bad requests reached the server", hits.Load())
	}
	// The transport still works.
	if got := readAll(t, post(t, tr, context.Background(), srv.URL, "{}")); got != "" {
		t.Fatalf("good call = %q", got)
	}
}

func TestH1HandsOtherRequestsToFallback(t *testing.T) {
	var used []string
	tr := &H1Transport{
		Fallback: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			used = append(used, r.URL.String())
			return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
		}),
		Dial:     func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("dialled") },
		Standard: map[string]bool{"std.example:80": true},
		Proxy: func(r *http.Request) (*url.URL, error) {
			if r.URL.Hostname() == "proxied.example" {
				return &url.URL{Scheme: "http", Host: "proxy:3128"}, nil
			}
			return nil, nil
		},
	}
	for _, u := range []string{"https://api.anthropic.com/v1/messages", "http://std.example/v1", "http://proxied.example/v1"} {
		req, _ := http.NewRequest(http.MethodPost, u, strings.NewReader("{}"))
		if _, err := tr.RoundTrip(req); err != nil {
			t.Fatalf("%s: %v", u, err)
		}
	}
	if len(used) != 3 {
		t.Fatalf("fallback saw %v, want all three", used)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://lean.example/v1", strings.NewReader("{}"))
	if _, err := tr.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "dialled") {
		t.Fatalf("plain http did not take the lean path: %v", err)
	}
}

// TestH1ParallelCalls runs concurrent calls through the pool (with -race).
func TestH1ParallelCalls(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
	}))
	conns := countConns(srv)
	defer srv.Close()
	tr := newH1(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				body := fmt.Sprintf("%d-%d", g, i)
				req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != body {
					t.Errorf("got %q want %q", b, body)
				}
			}
		}()
	}
	wg.Wait()
	if n := conns.Load(); n > 8 {
		t.Fatalf("8 concurrent callers opened %d connections", n)
	}
}

// FuzzReadResponse checks the lean response-head parser against net/http's:
// wherever both accept a head, they must agree on what it says.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 3\r\nx-custom-key: a\r\nX-Custom-Key: b\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200\r\nConnection: close\r\n\r\n",
		"HTTP/1.1 100 Continue\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n",
		"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
		"HTTP/2.0 200 OK\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, _ := http.NewRequest(http.MethodPost, "http://x/v1/messages", nil)
		ours, err := readResponse(bufio.NewReader(strings.NewReader(string(b))), req)
		std, serr := http.ReadResponse(bufio.NewReader(strings.NewReader(string(b))), req)
		if (err == nil) != (serr == nil) {
			// Both parsers take the same inputs: one that net/http refuses
			// is refused here too, and the other way round — but for a
			// status line of another major version, which net/http's
			// ReadResponse parses and an HTTP/1.1 connection cannot carry,
			// and a status below 100, which HTTP does not define (net/http
			// takes any three digits).
			if !(err != nil && serr == nil && (std.ProtoMajor != 1 || std.StatusCode < 100)) {
				t.Fatalf("ours: %v; net/http: %v", err, serr)
			}
		}
		if err != nil {
			return
		}
		if ours.StatusCode != std.StatusCode || ours.ProtoMinor != std.ProtoMinor {
			t.Fatalf("status %d HTTP/1.%d, net/http %d HTTP/1.%d", ours.StatusCode, ours.ProtoMinor, std.StatusCode, std.ProtoMinor)
		}
		if chunked(ours) != chunked(std) {
			t.Fatalf("chunked %v, net/http %v", ours.TransferEncoding, std.TransferEncoding)
		}
		if !chunked(std) && std.ContentLength >= 0 && ours.ContentLength != std.ContentLength {
			t.Fatalf("content length %d, net/http %d", ours.ContentLength, std.ContentLength)
		}
		if ours.Close != std.Close && ours.StatusCode >= 200 {
			t.Fatalf("close %v, net/http %v", ours.Close, std.Close)
		}
		for k, v := range std.Header {
			if k == "Content-Length" || k == "Transfer-Encoding" || k == "Connection" {
				continue
			}
			if strings.Join(ours.Header[k], "\x00") != strings.Join(v, "\x00") {
				t.Fatalf("header %s = %q, net/http %q", k, ours.Header[k], v)
			}
		}
	})
}

// TestH1ChunkedTrailerAndLengths: a chunked answer with trailers and a
// Content-Length answer on one connection, both read whole, then reused.
func TestH1ChunkedTrailerAndLengths(t *testing.T) {
	answers := []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
	}
	base := rawServer(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for _, a := range answers {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, a)
		}
		br.ReadByte() // until the client closes
	})
	tr := newH1(t)
	for i, want := range []string{"hello world", "abc", "", "ok"} {
		resp := post(t, tr, context.Background(), base+"/", "{}")
		if got := readAll(t, resp); got != want {
			t.Fatalf("answer %d = %q, want %q (all on one connection)", i, got, want)
		}
	}
}

func TestH1BodyCutMidway(t *testing.T) {
	base := rawServer(t, func(c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err == nil {
			io.Copy(io.Discard, req.Body)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
		}
		c.Close()
	})
	tr := newH1(t)
	resp := post(t, tr, context.Background(), base+"/", "{}")
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !errors.Is(err, io.ErrUnexpectedEOF) || string(b) != "abc" {
		t.Fatalf("cut body: %q, %v; want abc and io.ErrUnexpectedEOF", b, err)
	}
}

// TestH1LargeBody: a body past the copy threshold goes out with writev.
func TestH1LargeBody(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %d", r.ContentLength, len(b))
	}))
	defer srv.Close()
	tr := newH1(t)
	big := strings.Repeat("abcdefgh", 40<<10) // 320 KiB
	for range 2 {
		if got := readAll(t, post(t, tr, context.Background(), srv.URL, big)); got != fmt.Sprintf("%d %d", len(big), len(big)) {
			t.Fatalf("server saw %q", got)
		}
	}
}

// TestH1ServerRestartPurgesThePool: when the server drops every kept-alive
// connection at once (a restart) and they are reused before the liveness
// peek applies, the first failure closes the rest of the pool, so at most
// one call fails instead of one per pooled connection.
func TestH1ServerRestartPurgesThePool(t *testing.T) {
	var mu sync.Mutex
	var conns []net.Conn
	drop := make(chan struct{})
	base := rawServer(t, func(c net.Conn) {
		mu.Lock()
		conns = append(conns, c)
		mu.Unlock()
		go func() {
			br := bufio.NewReader(c)
			for {
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if req.URL.Path == "/slow" {
					<-drop // hold the call so the three overlap
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
			}
		}()
	})
	tr := newH1(t)
	tr.TrustIdle = time.Hour // reuse without the peek, as within a second of idleness
	var wg sync.WaitGroup
	for range 3 { // three overlapping calls: three pooled connections
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest(http.MethodPost, base+"/slow", strings.NewReader("{}"))
			if resp, err := tr.RoundTrip(req); err == nil {
				io.ReadAll(resp.Body)
				resp.Body.Close()
			}
		}()
	}
	for {
		mu.Lock()
		n := len(conns)
		mu.Unlock()
		if n == 3 {
			break
		}
		runtime.Gosched()
	}
	close(drop)
	wg.Wait()
	mu.Lock()
	for _, c := range conns { // the restart
		c.Close()
	}
	mu.Unlock()
	failures := 0
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, base+"/fast", strings.NewReader("{}"))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			failures++
			continue
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	if failures > 0 {
		t.Fatalf("%d of 3 calls failed after the server dropped its connections; a stale reused connection is sent again once, so none may", failures)
	}
}

// TestH1ProviderBodyUncopied: the provider's in-memory body goes out as
// its bytes, whole; one partly read already, or whose length disagrees
// with ContentLength, is read and checked as any other body.
func TestH1ProviderBodyUncopied(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%d %s", r.ContentLength, b)
	}))
	defer srv.Close()
	tr := newH1(t)
	send := func(body *bytesBody, n int64) (string, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/messages", nil)
		req.Body, req.ContentLength = body, n
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return "", err
		}
		return readAll(t, resp), nil
	}
	whole := []byte(`{"model":"m"}`)
	if got, err := send(newBytesBody(whole), int64(len(whole))); err != nil || got != `13 {"model":"m"}` {
		t.Fatalf("whole body: %q, %v", got, err)
	}
	read := newBytesBody(whole)
	read.Read(make([]byte, 3))
	if got, err := send(read, int64(len(whole)-3)); err != nil || got != `10 odel":"m"}` {
		t.Fatalf("partly read body: %q, %v (want the unread rest)", got, err)
	}
	if _, err := send(newBytesBody(whole), 5); err == nil {
		t.Fatal("a body longer than its ContentLength was sent")
	}
}
