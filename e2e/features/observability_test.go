package features_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

func get(t *testing.T, m *keel.Mesh, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", "http://keel.test"+path, nil)
	resp, err := m.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

// metricValue reads one series from the text exposition.
func metricValue(t *testing.T, exposition, name string, labels ...string) float64 {
	t.Helper()
	total, found := 0.0, false
	for _, line := range strings.Split(exposition, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		ok := true
		for _, l := range labels {
			if !strings.Contains(line, l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		total += v
		found = true
	}
	if !found {
		t.Fatalf("no series %s %v in /metrics", name, labels)
	}
	return total
}

// Must show (issue 6): after a scripted simulator run, /metrics has exact
// counter values: 100 requests, 7 fallbacks with reason overloaded.
func TestMetricsAfterScriptedRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		// The first 7 calls to us-east are overloaded; the ordered alias
		// always tries us-east first, so exactly 7 calls fall back.
		simCfg.Faults = []sim.Fault{{Kind: sim.KindOverloaded, Count: 7, Model: "sim-sonnet", Region: "us-east"}}
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Resilience.Breaker.ConsecutiveFailures = 50 // keep us-east in play for all 7
			c.Aliases = []config.Alias{{Name: "east-first", Models: []string{"sim-sonnet"}, Strategy: "ordered"}}
		})
		defer s.mesh.Close()
		for i := range 100 {
			r := s.call(t, "/v1/messages", msgBody("east-first", fmt.Sprint("metrics ", i), ""))
			if r.status != 200 {
				t.Fatalf("call %d: %d %s", i, r.status, r.body)
			}
		}
		code, body := get(t, s.mesh, "/metrics")
		if code != 200 {
			t.Fatalf("/metrics: %d", code)
		}
		if got := metricValue(t, body, "mesh_requests_total", `model="east-first"`); got != 100 {
			t.Errorf("mesh_requests_total = %v, want 100", got)
		}
		if got := metricValue(t, body, "mesh_fallbacks_total", `reason="overloaded"`); got != 7 {
			t.Errorf("mesh_fallbacks_total{reason=overloaded} = %v, want 7", got)
		}
		if got := metricValue(t, body, "mesh_attempts_total"); got != 107 {
			t.Errorf("mesh_attempts_total = %v, want 107", got)
		}
		if !strings.Contains(body, "gen_ai_client_operation_duration_seconds_bucket") {
			t.Error("no GenAI operation duration histogram")
		}
	})
}

// Must show (issue 6): the debug trace of a hedged, retried request lists
// both attempts with their outcomes; an unknown id is a 404.
func TestDebugTraceOfHedgedRetriedCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond)}
		}
		simCfg.Regions[1].Latency.TTFT = sim.Duration(time.Second) // eu-west: slow, hedged
		simCfg.Faults = []sim.Fault{{Kind: sim.KindOverloaded, Count: 1, Region: "us-east"}}
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Resilience.Hedge.Ceiling = 50 * time.Millisecond
			c.Aliases = []config.Alias{{Name: "east-first", Models: []string{"sim-sonnet"}, Strategy: "ordered"}}
		})
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("east-first", "trace me", ""), "X-Mesh-Debug", "true")
		id := r.header.Get("X-Mesh-Trace-Id")
		if r.status != 200 || id == "" {
			t.Fatalf("status %d trace id %q", r.status, id)
		}
		code, body := get(t, s.mesh, "/debug/traces/"+id)
		if code != 200 {
			t.Fatalf("trace: %d %s", code, body)
		}
		var tr map[string]any
		if err := json.Unmarshal([]byte(body), &tr); err != nil {
			t.Fatal(err)
		}
		kinds := regexp.MustCompile(`"kind":\s*"(primary|retry|hedge)"`).FindAllStringSubmatch(body, -1)
		outcomes := regexp.MustCompile(`"outcome":\s*"([a-z_]+)"`).FindAllStringSubmatch(body, -1)
		var ks, os []string
		for _, k := range kinds {
			ks = append(ks, k[1])
		}
		for _, o := range outcomes {
			os = append(os, o[1])
		}
		t.Logf("attempt kinds %v outcomes %v", ks, os)
		if len(ks) < 3 || !contains(ks, "retry") || !contains(ks, "hedge") {
			t.Errorf("trace attempts %v, want a primary, a retry and a hedge:\n%s", ks, body)
		}
		if !contains(os, "overloaded") || !contains(os, "ok") {
			t.Errorf("trace outcomes %v, want overloaded and ok", os)
		}
		if code, body := get(t, s.mesh, "/debug/traces/no-such-id"); code != 404 || !strings.Contains(body, "error") {
			t.Errorf("unknown trace: %d %s", code, body)
		}
	})
}

func contains(ss []string, v string) bool {
	for _, s := range ss {
		if s == v {
			return true
		}
	}
	return false
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Issue 6: one log line per request with its id, model, attempts and
// latency; API keys never appear in the logs.
func TestLogsOneLinePerRequestWithoutSecrets(t *testing.T) {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	cfg := simfleet.Config(fleet, "http://sim.test")
	cfg.Providers[0].APIKey = "sk-ant-THIS-MUST-NEVER-BE-LOGGED"
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()), keel.WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fleet.SetFaults([]sim.Fault{{Kind: sim.KindRateLimit, Count: 1}})
	for i := range 3 {
		req, _ := http.NewRequest("POST", "http://keel.test/v1/messages", strings.NewReader(msgBody("sim-opus", fmt.Sprint("log ", i), "")))
		req.Header.Set("x-api-key", "client-secret-key-ALSO-NEVER-LOGGED")
		req.Header.Set("anthropic-version", "2023-06-01")
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	out := buf.String()
	if strings.Contains(out, "NEVER-BE-LOGGED") || strings.Contains(out, "ALSO-NEVER-LOGGED") {
		t.Fatalf("a key reached the logs:\n%s", out)
	}
	lines := 0
	for _, l := range strings.Split(out, "\n") {
		if !strings.Contains(l, `"msg":"request"`) {
			continue
		}
		lines++
		for _, k := range []string{`"request_id":"mesh_`, `"model":"sim-opus"`, `"attempts":`, `"latency":`, `"served_by":`} {
			if !strings.Contains(l, k) {
				t.Errorf("request line lacks %s: %s", k, l)
			}
		}
	}
	if lines != 3 {
		t.Errorf("%d request lines, want 3:\n%s", lines, out)
	}
	if !strings.Contains(out, `"fallback":"rate_limited"`) {
		t.Errorf("the rate-limited call's line does not say its fallback reason:\n%s", out)
	}
}
