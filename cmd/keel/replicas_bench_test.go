package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/store/redis/redistest"
	"github.com/keelmesh/keel/sim"
)

// BenchmarkSharedStateOverhead measures what sharing state through Redis
// adds to a call through keel serve: two servers on the same config, one
// with a redis: section (a real redis-server), in front of the same
// zero-latency simulator, called alternately (ABBA) by one client, so both
// see the same machine at the same moments. It reports each server's p50 and
// p99 and their ratios (redis / local); the bar is ≤ 1.05.
func BenchmarkSharedStateOverhead(b *testing.B) {
	rs := redistest.Start(b)
	fl, err := sim.New(sim.ZeroLatency())
	if err != nil {
		b.Fatal(err)
	}
	srv, err := fl.Start("127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Close() })
	const base = `server:
  drain_delay: 0s
  shutdown_timeout: 2s
request_log:
  enabled: false
telemetry:
  dashboard: false
providers:
  - {name: sim, type: anthropic, base_url: SIMURL}
models:
  - name: m
    endpoints:
      - {provider: sim, region: us-east, base_url: SIMURL/r/us-east, upstream_model: sim-haiku}
      - {provider: sim, region: eu-west, base_url: SIMURL/r/eu-west, upstream_model: sim-haiku}
`
	yamls := [2]string{base, base + "redis:\n  url: " + rs.URL() + "\n"}
	var addrs [2]string
	for i, y := range yamls {
		path := filepath.Join(b.TempDir(), "keel.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(y, "SIMURL", srv.URL())), 0o600); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done, ready := make(chan error, 1), make(chan string, 1)
		go func() { done <- runServe(ctx, path, "127.0.0.1:0", true, io.Discard, ready) }()
		b.Cleanup(func() { cancel(); <-done })
		select {
		case addrs[i] = <-ready:
		case err := <-done:
			b.Fatalf("serve ended: %v", err)
		}
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr}
	body := `{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hello"}]}`
	call := func(addr string) time.Duration {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("anthropic-version", "2023-06-01")
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		d := time.Since(start)
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("status %d", resp.StatusCode)
		}
		return d
	}
	for range 200 { // warm both: connections, health, the first leases
		call(addrs[0])
		call(addrs[1])
	}
	var lat [2][]time.Duration
	n := 0
	for b.Loop() {
		// ABBA order: each server follows the other as often as itself.
		m := [4]int{0, 1, 1, 0}[n%4]
		lat[m] = append(lat[m], call(addrs[m]))
		n++
	}
	q := func(m int, p float64) float64 {
		s := slices.Clone(lat[m])
		slices.Sort(s)
		if len(s) == 0 {
			return 0
		}
		return float64(s[min(int(p*float64(len(s))), len(s)-1)].Microseconds())
	}
	for _, p := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		off, on := q(0, p.q), q(1, p.q)
		b.ReportMetric(off, p.name+"-local-µs")
		b.ReportMetric(on, p.name+"-redis-µs")
		if off > 0 {
			b.ReportMetric(on/off, p.name+"-ratio")
		}
	}
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "calls: %d local, %d redis\n", len(lat[0]), len(lat[1]))
	}
}
