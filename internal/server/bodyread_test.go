package server_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// newBodyMesh serves a zero-latency simulated fleet (latency, when not
// zero, as every region's time to first token) through `keel serve`'s
// handler on a loopback test server.
func newBodyMesh(t *testing.T, ttft time.Duration, tune func(*config.Server)) (*httptest.Server, *server.Server) {
	t.Helper()
	sc := sim.ZeroLatency()
	for i := range sc.Regions {
		sc.Regions[i].Latency.TTFT = sim.Duration(ttft)
	}
	fleet, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := simfleet.Config(fleet, "http://sim.test")
	tune(&cfg.Server)
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	ts := httptest.NewServer(m.Handler())
	t.Cleanup(ts.Close)
	return ts, m.Handler().(*server.Server)
}

const smallCall = `{"model":"sim-sonnet","max_tokens":16,"messages":[{"role":"user","content":"Hello"}]}`

// 100 connections that declare a 10 MB body and send 10 bytes used to hold
// 1 GB (a buffer of the declared length each). Now each holds what it sent
// rounded up to the first 32 KiB buffer, all are cut by the body read
// deadline with 408 and closed, connections dripping a byte at a time too,
// and a normal client is served meanwhile.
func TestDeclaredBodiesHoldWhatArrived(t *testing.T) {
	const (
		liars    = 100
		drippers = 5
		declared = 10_000_000
		timeout  = 2 * time.Second
	)
	ts, srv := newBodyMesh(t, 0, func(s *config.Server) {
		s.BodyReadTimeout = config.Duration(timeout)
		s.MinBodyRateBytesPerSec = 1 // the timeout cuts them, not the rate
	})
	addr := ts.Listener.Addr().String()
	head := fmt.Sprintf("POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAnthropic-Version: 2023-06-01\r\nContent-Length: %d\r\n\r\n", declared)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	var conns []net.Conn
	for range liars + drippers {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, head+"0123456789"); err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	stop := make(chan struct{})
	var drips sync.WaitGroup
	for _, c := range conns[liars:] {
		drips.Add(1)
		go func() {
			defer drips.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
				if _, err := c.Write([]byte("x")); err != nil {
					return
				}
			}
		}()
	}
	defer func() { close(stop); drips.Wait() }()

	// Every connection's handler holds its first buffer.
	const first = 32 << 10
	for srv.BodyBytesInFlight() < (liars+drippers)*first {
		if time.Since(start) > timeout {
			t.Fatalf("only %d body bytes in flight before the read deadline, want %d (overloaded machine?)", srv.BodyBytesInFlight(), (liars+drippers)*first)
		}
		time.Sleep(time.Millisecond)
	}
	runtime.GC()
	var during runtime.MemStats
	runtime.ReadMemStats(&during)
	growth := int64(during.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d connections declaring %d bytes: heap %+.1f MiB, %d body bytes buffered", liars+drippers, declared, float64(growth)/(1<<20), srv.BodyBytesInFlight())
	if growth > 16<<20 {
		t.Errorf("heap grew %.1f MiB, want at most 16 MiB", float64(growth)/(1<<20))
	}

	resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(smallCall))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("a normal client meanwhile: %d %s", resp.StatusCode, b)
	}
	if held := srv.BodyBytesInFlight(); time.Since(start) < timeout && held < (liars+drippers)*first {
		t.Errorf("the slow connections were cut before their deadline: %d bytes in flight", held)
	}

	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(string(b), "server.body_read_timeout") {
			t.Errorf("connection %d: %d %s; want 408 naming server.body_read_timeout", i, resp.StatusCode, b)
		}
		if n, err := br.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("connection %d after its 408: read %d, %v; want EOF (closed)", i, n, err)
		}
	}
	if took := time.Since(start); took < timeout {
		t.Errorf("connections closed after %s, before the %s deadline", took, timeout)
	}
	if n := srv.BodyBytesInFlight(); n != 0 {
		t.Errorf("%d body bytes still in flight after every connection closed", n)
	}
}

// The body's read deadline ends with the body: net/http reads on in the
// background afterwards and would cancel the request if that read timed
// out. A call whose answer takes longer than body_read_timeout succeeds,
// streamed or not.
func TestBodyDeadlineDoesNotCutTheAnswer(t *testing.T) {
	ts, _ := newBodyMesh(t, 600*time.Millisecond, func(s *config.Server) {
		s.BodyReadTimeout = config.Duration(100 * time.Millisecond)
	})
	for _, body := range []string{smallCall, strings.Replace(smallCall, `{`, `{"stream":true,`, 1)} {
		req, _ := http.NewRequest("POST", ts.URL+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || time.Since(start) < 600*time.Millisecond {
			t.Errorf("%s: %d after %s, %v: %s; want 200 after the 600ms first token", body, resp.StatusCode, time.Since(start), err, b)
		}
		if strings.Contains(body, "stream") && !strings.Contains(string(b), "message_stop") {
			t.Errorf("stream did not finish: %s", b)
		}
	}
}
