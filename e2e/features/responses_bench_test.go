package features_test

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// responsesBenchPaths are the four ways of asking the simulator's
// sim-sonnet (us-east) the same question: direct and through Keel's
// embedded transport, in Chat Completions and in the Responses API, each
// served by an endpoint of its own format (same-format pass-through).
type benchPath struct {
	name, url, body string
	keel            bool
}

var responsesBenchPaths = []benchPath{
	{"chat/direct", "http://sim.invalid/r/us-east/v1/chat/completions",
		`{"model":"sim-sonnet","max_completion_tokens":16,"messages":[{"role":"user","content":"Hello there"}]}`, false},
	{"chat/keel", "https://api.openai.com/v1/chat/completions",
		`{"model":"chat-sonnet","max_completion_tokens":16,"messages":[{"role":"user","content":"Hello there"}]}`, true},
	{"responses/direct", "http://sim.invalid/r/us-east/v1/responses",
		`{"model":"sim-sonnet","max_output_tokens":16,"input":"Hello there"}`, false},
	{"responses/keel", "https://api.openai.com/v1/responses",
		`{"model":"rsp-sonnet","max_output_tokens":16,"input":"Hello there"}`, true},
}

// benchResponsesMesh is an embedded mesh in front of the zero-latency
// simulator with chat-sonnet (a Chat Completions endpoint) and rsp-sonnet
// (a Responses endpoint), both the simulator's sim-sonnet in us-east.
func benchResponsesMesh(b testing.TB, fleet *sim.Fleet) *keel.Mesh {
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	withResponsesEndpoint(cfg)
	cfg.Models = append(cfg.Models, config.Model{Name: "chat-sonnet", Capability: 3, ContextWindow: 200_000,
		Endpoints: []config.Endpoint{{Provider: simfleet.OpenAIProvider, Region: "us-east", UpstreamModel: "sim-sonnet", BaseURL: "http://sim.invalid/r/us-east/v1"}}})
	for i := range cfg.Models {
		if cfg.Models[i].Name == "rsp-sonnet" {
			cfg.Models[i].Endpoints = cfg.Models[i].Endpoints[:1] // us-east only, as chat-sonnet
		}
	}
	cfg.ApplyDefaults()
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// timeCall posts body to url and returns the time to the whole answer, or
// for a stream the time to the first bytes holding want.
func timeCall(b testing.TB, rt http.RoundTripper, url, body, want string) time.Duration {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := rt.RoundTrip(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("%s: status %d %s", url, resp.StatusCode, msg)
	}
	if want == "" {
		io.Copy(io.Discard, resp.Body)
		return time.Since(start)
	}
	var seen []byte
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		seen = append(seen, buf[:n]...)
		if bytes.Contains(seen, []byte(want)) {
			d := time.Since(start)
			io.Copy(io.Discard, resp.Body)
			return d
		}
		if err != nil {
			b.Fatalf("%s: stream ended without %q", url, want)
		}
	}
}

func durPct(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p)]
}

// BenchmarkResponsesAdded measures, in one run, the latency Keel adds to a
// Responses API call and to a Chat Completions call (embedded transport,
// zero-latency simulator, each served by an endpoint of its own format),
// their ratio at p50 and p99 (goal ≤ 1.1), and the time Keel adds to the
// first text of a Responses stream (and, for scale, of a Chat one). The four paths take
// turns call by call, so a slow moment of the machine hits them alike.
func BenchmarkResponsesAdded(b *testing.B) {
	const calls = 5000
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		b.Fatal(err)
	}
	m := benchResponsesMesh(b, fleet)
	rts := map[bool]http.RoundTripper{false: fleet.Transport(), true: m.Transport()}
	streams := []benchPath{
		{"chat-stream/direct", "http://sim.invalid/r/us-east/v1/chat/completions",
			`{"model":"sim-sonnet","max_completion_tokens":64,"messages":[{"role":"user","content":"Hello there"}],"stream":true}`, false},
		{"chat-stream/keel", "https://api.openai.com/v1/chat/completions",
			`{"model":"chat-sonnet","max_completion_tokens":64,"messages":[{"role":"user","content":"Hello there"}],"stream":true}`, true},
		{"responses-stream/direct", "http://sim.invalid/r/us-east/v1/responses",
			`{"model":"sim-sonnet","max_output_tokens":64,"input":"Hello there","stream":true}`, false},
		{"responses-stream/keel", "https://api.openai.com/v1/responses",
			`{"model":"rsp-sonnet","max_output_tokens":64,"input":"Hello there","stream":true}`, true},
	}
	for range b.N {
		lat := map[string][]time.Duration{}
		for i := 0; i < calls; i++ {
			for _, p := range responsesBenchPaths {
				lat[p.name] = append(lat[p.name], timeCall(b, rts[p.keel], p.url, p.body, ""))
			}
			for _, p := range streams {
				first := `"response.output_text.delta"`
				if strings.HasPrefix(p.name, "chat") {
					first = `"content":"`
				}
				lat[p.name] = append(lat[p.name], timeCall(b, rts[p.keel], p.url, p.body, first))
			}
		}
		added := func(kind string, q float64) time.Duration {
			return durPct(lat[kind+"/keel"], q) - durPct(lat[kind+"/direct"], q)
		}
		cp50, cp99 := added("chat", 0.5), added("chat", 0.99)
		rp50, rp99 := added("responses", 0.5), added("responses", 0.99)
		tp50 := added("responses-stream", 0.5)
		b.ReportMetric(float64(cp50)/1e3, "chat-added-p50-µs")
		b.ReportMetric(float64(cp99)/1e3, "chat-added-p99-µs")
		b.ReportMetric(float64(rp50)/1e3, "resp-added-p50-µs")
		b.ReportMetric(float64(rp99)/1e3, "resp-added-p99-µs")
		b.ReportMetric(float64(rp50)/float64(cp50), "p50-ratio")
		b.ReportMetric(float64(rp99)/float64(cp99), "p99-ratio")
		b.ReportMetric(float64(tp50)/1e3, "stream-ttft-added-p50-µs")
		b.ReportMetric(float64(added("responses-stream", 0.99))/1e3, "stream-ttft-added-p99-µs")
		b.ReportMetric(float64(added("chat-stream", 0.5))/1e3, "chat-stream-ttft-added-p50-µs")
	}
}
