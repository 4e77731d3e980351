package keel_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

const benchBody = `{"model":"sim-sonnet","max_tokens":16,"messages":[{"role":"user","content":"Hello there"}]}`

func roundTrip(b *testing.B, rt http.RoundTripper, url string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(benchBody))
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(benchBody)), nil }
	req.Body, _ = req.GetBody()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkDirect is the zero-latency simulator alone, in memory: the
// baseline the embedded figure is compared with.
func BenchmarkDirect(b *testing.B) {
	fleet, _ := sim.New(sim.ZeroLatency())
	rt := fleet.Transport()
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		roundTrip(b, rt, "http://sim.invalid/r/us-east/v1/messages")
	}
	cpu.report(b)
}

// BenchmarkEmbedded is the same call through Keel's embedded transport:
// parse, route, encode, the attempt, parse the answer, encode it back.
// Added latency of the embedded mode = Embedded − Direct.
func BenchmarkEmbedded(b *testing.B) {
	rt := embeddedTransport(b)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		roundTrip(b, rt, "https://api.anthropic.com/v1/messages")
	}
	cpu.report(b)
}

// BenchmarkEmbeddedCacheHit is BenchmarkEmbedded's call at temperature 0
// with the response cache on: after the first, every call is a hit (no
// upstream call): parse, the key's hash, the lookup, encode the answer.
func BenchmarkEmbeddedCacheHit(b *testing.B) {
	fleet, _ := sim.New(sim.ZeroLatency())
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	cfg.Cache.Enabled = true
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	rt := m.Transport()
	body := `{"model":"sim-sonnet","max_tokens":16,"temperature":0,"messages":[{"role":"user","content":"Hello there"}]}`
	trip := func() {
		req, _ := http.NewRequest("POST", "https://api.anthropic.com/v1/messages", strings.NewReader(body))
		req.Header.Set("anthropic-version", "2023-06-01")
		req.Header.Set("Content-Type", "application/json")
		resp, err := rt.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-Mesh-Cache") == "bypass" {
			b.Fatalf("status %d, X-Mesh-Cache %q", resp.StatusCode, resp.Header.Get("X-Mesh-Cache"))
		}
	}
	trip() // the miss that fills the cache
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		trip()
	}
	cpu.report(b)
}

// embeddedTransport is Keel's embedded transport in front of the
// zero-latency simulator, in memory; closed with the benchmark.
func embeddedTransport(b *testing.B) http.RoundTripper {
	fleet, _ := sim.New(sim.ZeroLatency())
	m, err := keel.New(simfleet.Config(fleet, "http://sim.invalid"), keel.WithUpstream(fleet.Transport()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m.Transport()
}

// cpuClock measures the process's CPU time (user + system, every thread:
// the GC's too) across a benchmark loop. On a shared, loaded machine CPU
// per call is steadier than wall time per call.
type cpuClock struct{ start time.Duration }

func startCPU() cpuClock { return cpuClock{processCPU()} }

func (c cpuClock) report(b *testing.B) {
	if b.N > 0 {
		b.ReportMetric(float64(processCPU()-c.start)/float64(b.N), "cpu-ns/op")
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// streamBody asks the simulator for a streamed answer of n tokens: one
// content_block_delta per token, eight events around them.
func streamBody(n int) string {
	return `{"model":"sim-sonnet","max_tokens":` + strconv.Itoa(n) + `,"stream":true,"messages":[{"role":"user","content":"Hello there"}]}`
}

func streamTrip(b *testing.B, rt http.RoundTripper, url, body string) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	n, _ := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || n == 0 {
		b.Fatalf("status %d, %d bytes", resp.StatusCode, n)
	}
}

// BenchmarkStream is a streamed answer of 16 and 256 tokens from the
// zero-latency simulator, direct and through Keel's embedded transport.
// Keel's cost per event = the difference of (embedded − direct) between
// the two lengths, divided by the 240 events between them.
func BenchmarkStream(b *testing.B) {
	for _, tokens := range []int{16, 256} {
		body := streamBody(tokens)
		b.Run("direct/"+strconv.Itoa(tokens), func(b *testing.B) {
			fleet, _ := sim.New(sim.ZeroLatency())
			rt := fleet.Transport()
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				streamTrip(b, rt, "http://sim.invalid/r/us-east/v1/messages", body)
			}
			cpu.report(b)
		})
		b.Run("embedded/"+strconv.Itoa(tokens), func(b *testing.B) {
			rt := embeddedTransport(b)
			b.ReportAllocs()
			cpu := startCPU()
			for b.Loop() {
				streamTrip(b, rt, "https://api.anthropic.com/v1/messages", body)
			}
			cpu.report(b)
		})
	}
}

// BenchmarkRequestLogPerCall is the CPU the request log (the default SQLite
// one, on a real file) costs per call: BenchmarkEmbedded's call through two
// meshes, one with the log on and one with it off, alternated in blocks
// within the same run so that the machine's drift hits both alike. The
// writer goroutine's CPU is in "on": each "on" block ends by flushing the
// log, so the batches it wrote are charged to it; "log-cpu-ns/op" is on
// minus off.
func BenchmarkRequestLogPerCall(b *testing.B) {
	fleet, _ := sim.New(sim.ZeroLatency())
	mesh := func(path string) *keel.Mesh {
		cfg := simfleet.Config(fleet, "http://sim.invalid")
		cfg.RequestLog.Path = path
		on := path != ""
		cfg.RequestLog.Enabled = &on
		m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	off := mesh("")
	defer off.Close()
	dbPath := filepath.Join(b.TempDir(), "requests.db")
	if p := os.Getenv("KEEL_BENCH_DB"); p != "" {
		dbPath = p
	}
	on := mesh(dbPath)
	rts := [2]http.RoundTripper{off.Transport(), on.Transport()}
	const block = 256
	var cpu [2]time.Duration
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		n++
		if n%block == 1 {
			for i, rt := range rts {
				t0 := processCPU()
				for range block {
					roundTrip(b, rt, "https://api.anthropic.com/v1/messages")
				}
				if i == 1 {
					if err := keel.FlushRequestLog(context.Background(), on); err != nil {
						b.Fatal(err)
					}
				}
				cpu[i] += processCPU() - t0
			}
		}
	}
	if err := on.Close(); err != nil {
		b.Fatal(err)
	}
	calls := float64((n + block - 1) / block * block)
	b.ReportMetric(float64(cpu[0])/calls, "off-cpu-ns/op")
	b.ReportMetric(float64(cpu[1])/calls, "on-cpu-ns/op")
	b.ReportMetric(float64(cpu[1]-cpu[0])/calls, "log-cpu-ns/op")
}
