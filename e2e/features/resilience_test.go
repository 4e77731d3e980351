package features_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/inproc"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// simMesh is a mesh in front of an in-memory simulator: no sockets, so
// tests run under testing/synctest with exact virtual time.
type simMesh struct {
	fleet *sim.Fleet
	mesh  *keel.Mesh
	cfg   *config.Config
	up    *timedRecorder

	mu      sync.Mutex
	records []*callrec.Record
}

func newSimMesh(t *testing.T, simCfg sim.Config, tweak func(*config.Config), opts ...keel.Option) *simMesh {
	t.Helper()
	fleet, err := sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	return startSimMesh(t, fleet, simfleet.Config(fleet, "http://sim.test"), tweak, opts...)
}

// startSimMesh builds a mesh of cfg in front of fleet (see newSimMesh).
func startSimMesh(t *testing.T, fleet *sim.Fleet, cfg *config.Config, tweak func(*config.Config), opts ...keel.Option) *simMesh {
	t.Helper()
	s := &simMesh{fleet: fleet, up: &timedRecorder{next: fleet.Transport()}, cfg: cfg}
	var err error
	off := false
	s.cfg.RequestLog.Enabled = &off
	if tweak != nil {
		tweak(s.cfg)
	}
	s.mesh, err = keel.New(s.cfg, append([]keel.Option{keel.WithUpstream(s.up), keel.WithObserver(callrec.ObserverFunc(func(r *callrec.Record) {
		s.mu.Lock()
		s.records = append(s.records, r)
		s.mu.Unlock()
	}))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type result struct {
	status  int
	header  http.Header
	trailer http.Header
	body    []byte
	took    time.Duration
}

// call sends one request through the embedded transport.
func (s *simMesh) call(t *testing.T, path, body string, hdr ...string) result {
	t.Helper()
	req, err := http.NewRequest("POST", "http://keel.test"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.HasSuffix(path, "/messages") {
		req.Header.Set("anthropic-version", "2023-06-01")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	resp, err := s.mesh.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("transport error: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading body: %v", err)
	}
	return result{status: resp.StatusCode, header: resp.Header, trailer: resp.Trailer, body: b, took: time.Since(start)}
}

// timedRecorder records when each upstream call was sent, and where.
type timedRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls []upCall
}

type upCall struct {
	at     time.Time
	method string
	region string
}

func (r *timedRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	region := ""
	if rest, ok := strings.CutPrefix(req.URL.Path, "/r/"); ok {
		region, _, _ = strings.Cut(rest, "/")
	}
	r.mu.Lock()
	r.calls = append(r.calls, upCall{at: time.Now(), method: req.Method, region: region})
	r.mu.Unlock()
	return r.next.RoundTrip(req)
}

func (r *timedRecorder) posts() []upCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []upCall
	for _, c := range r.calls {
		if c.method == http.MethodPost {
			out = append(out, c)
		}
	}
	return out
}

func msgBody(model, text string, extra string) string {
	return fmt.Sprintf(`{"model":%q,"max_tokens":200%s,"messages":[{"role":"user","content":%q}]}`, model, extra, text)
}

func steadyLatency() sim.LatencySpec {
	return sim.LatencySpec{Concurrency: 64, TTFT: sim.Duration(30 * time.Millisecond), PerToken: sim.Duration(time.Millisecond)}
}

// Must show: a region killed under steady load — zero client-visible
// errors, and no request sent to the dead region later than 200 ms after
// the kill; the region is used again soon after it returns.
func TestRegionKilledUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = steadyLatency()
		}
		s := newSimMesh(t, simCfg, nil)
		defer s.mesh.Close()
		start := time.Now()
		kill, restore := start.Add(time.Second), start.Add(3*time.Second)
		var wg sync.WaitGroup
		var mu sync.Mutex
		statuses := map[int]int{}
		for i := range 400 { // 100 req/s for 4 s
			wg.Add(1)
			go func() {
				defer wg.Done()
				time.Sleep(time.Duration(i) * 10 * time.Millisecond)
				// max_tokens 12 makes every answer the same length, so the
				// three regions are equally fast and share the load.
				r := s.call(t, "/v1/messages", fmt.Sprintf(`{"model":"sim-sonnet","max_tokens":12,"messages":[{"role":"user","content":"steady load %d"}]}`, i))
				mu.Lock()
				statuses[r.status]++
				if r.status != 200 && statuses[r.status] == 1 {
					t.Logf("t=%v status %d: %s", time.Since(start), r.status, r.body)
				}
				mu.Unlock()
			}()
		}
		time.Sleep(time.Second)
		s.fleet.SetRegionDown("us-east", true)
		time.Sleep(2 * time.Second)
		s.fleet.SetRegionDown("us-east", false)
		wg.Wait()
		if statuses[200] != 400 {
			t.Fatalf("statuses %v, want 400 × 200", statuses)
		}
		var late, after, before int
		for _, c := range s.up.posts() {
			if c.region != "us-east" {
				continue
			}
			switch {
			case c.at.Before(kill):
				before++
			case c.at.After(kill.Add(200*time.Millisecond)) && c.at.Before(restore):
				late++
				t.Logf("late request at kill+%v", c.at.Sub(kill))
			case !c.at.Before(restore):
				after++
			}
		}
		if before == 0 {
			t.Fatal("us-east served nothing before the kill; the test proves nothing")
		}
		if late != 0 {
			t.Errorf("%d requests sent to the dead region more than 200ms after the kill", late)
		}
		if after == 0 {
			t.Errorf("us-east got no request after it came back")
		}
	})
}

// Must show: a 429 storm with retry-after: 1 — retries to the endpoint
// wait at least that long; retries stay inside the budget; a spent budget
// answers MESH_BUDGET_EXHAUSTED at once, never a hang.
func TestRateLimitStormHonoursRetryAfterAndBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		simCfg.Models = simCfg.Models[2:3] // sim-haiku only
		simCfg.Models[0].Regions = []string{"us-east"}
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond)}
		}
		simCfg.Faults = []sim.Fault{{Kind: sim.KindRateLimit, RetryAfter: sim.Duration(time.Second)}}
		s := newSimMesh(t, simCfg, nil)
		defer s.mesh.Close()

		r := s.call(t, "/v1/messages", msgBody("sim-haiku", "one", ""))
		if r.status != 429 || !bytes.Contains(r.body, []byte("MESH_FALLBACK_EXHAUSTED")) {
			t.Fatalf("status %d body %s", r.status, r.body)
		}
		posts := s.up.posts()
		if len(posts) != 4 {
			t.Fatalf("%d attempts, want 4", len(posts))
		}
		for i := 1; i < len(posts); i++ {
			if gap := posts[i].at.Sub(posts[i-1].at); gap < time.Second {
				t.Errorf("retry %d sent %v after a 429 with retry-after: 1", i, gap)
			}
		}

		// A storm: 60 calls at once, every one rate-limited.
		before := len(s.up.posts())
		var wg sync.WaitGroup
		var mu sync.Mutex
		codes := map[string]int{}
		for i := range 60 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := s.call(t, "/v1/messages", msgBody("sim-haiku", fmt.Sprint("storm ", i), ""))
				var eb struct {
					Error struct {
						MeshErrorCode string `json:"mesh_error_code"`
					}
				}
				json.Unmarshal(r.body, &eb)
				mu.Lock()
				codes[eb.Error.MeshErrorCode]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		sent := len(s.up.posts()) - before
		// Each call deposits 0.2 tokens; the bucket holds at most 10.
		if limit := 61 + 12 + 10; sent > limit {
			t.Errorf("%d upstream attempts for 61 calls, want ≤ %d (the retry budget)", sent, limit)
		}
		if codes[llm.MeshBudgetExhausted] == 0 {
			t.Errorf("no call got MESH_BUDGET_EXHAUSTED: %v", codes)
		}
	})
}

// latencies sends n calls at a fixed rate and returns their sorted latencies.
func latencies(t *testing.T, s *simMesh, n int, every time.Duration, model string) []time.Duration {
	var wg sync.WaitGroup
	out := make([]time.Duration, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * every)
			r := s.call(t, "/v1/messages", msgBody(model, fmt.Sprint("tail ", i), ""))
			if r.status != 200 {
				t.Errorf("status %d: %s", r.status, r.body)
			}
			out[i] = r.took
		}()
	}
	wg.Wait()
	slices.Sort(out)
	return out
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	return sorted[int(q*float64(len(sorted)-1))]
}

// Must show: a heavy-tailed fleet (5 % of calls 20× slower): with hedging,
// p99 ≤ 0.3 × the p99 without, and ≤ 10 % extra upstream requests.
func TestHeavyTailHedging(t *testing.T) {
	run := func(hedging bool) (p99 time.Duration, extra float64) {
		var p time.Duration
		var ex float64
		synctest.Test(t, func(t *testing.T) {
			simCfg := sim.DefaultConfig()
			for i := range simCfg.Regions {
				simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(40 * time.Millisecond), TTFTSigma: 0.1, PerToken: sim.Duration(time.Millisecond), TailProb: 0.05, TailFactor: 20}
			}
			s := newSimMesh(t, simCfg, func(c *config.Config) {
				c.Resilience.Hedging = &hedging
			})
			defer s.mesh.Close()
			lat := latencies(t, s, 2000, 5*time.Millisecond, "sim-sonnet")
			p = quantile(lat, 0.99)
			ex = float64(len(s.up.posts()))/2000 - 1
		})
		return p, ex
	}
	off, offExtra := run(false)
	on, onExtra := run(true)
	t.Logf("p99 without hedging %v, with %v (ratio %.3f); extra upstream requests %.1f%% / %.1f%%", off, on, float64(on)/float64(off), offExtra*100, onExtra*100)
	if float64(on) > 0.3*float64(off) {
		t.Errorf("p99 with hedging %v > 0.3 × %v", on, off)
	}
	if onExtra > 0.10 {
		t.Errorf("hedging sent %.1f%% extra upstream requests, want ≤ 10%%", onExtra*100)
	}
}

// Must show: context-length-exceeded on the small model falls back to the
// larger-window model.
func TestContextLengthFallsBackToLargerWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Models[2].ContextWindow = 20 // sim-haiku: tiny window
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			for i := range c.Models {
				if c.Models[i].Name == "sim-haiku" {
					c.Models[i].ContextWindow = 20
				}
			}
			c.Aliases = []config.Alias{{Name: "chain", Models: []string{"sim-haiku", "sim-opus"}, Strategy: "ordered"}}
		})
		defer s.mesh.Close()
		long := strings.Repeat("many words in a long prompt ", 10)
		r := s.call(t, "/v1/messages", msgBody("chain", long, ""))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		if r.header.Get("X-Mesh-Model") != "sim-opus" || r.header.Get("X-Mesh-Fallback") != "context_length_exceeded" {
			t.Errorf("served by %s, fallback %q", r.header.Get("X-Mesh-Model"), r.header.Get("X-Mesh-Fallback"))
		}
		// Only one attempt on the small model: its other regions cannot help.
		if n := r.header.Get("X-Mesh-Attempts"); n != "2" {
			t.Errorf("attempts %s, want 2", n)
		}
		short := s.call(t, "/v1/messages", msgBody("chain", "short", ""))
		if short.header.Get("X-Mesh-Model") != "sim-haiku" {
			t.Errorf("a short prompt was served by %s, want the first model", short.header.Get("X-Mesh-Model"))
		}
	})
}

// Must show: 401 and 400 are never retried.
func TestClientErrorsAreNotRetried(t *testing.T) {
	for _, c := range []struct {
		status int
		body   string
	}{
		{401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}`},
		{403, `{"type":"error","error":{"type":"permission_error","message":"no"}}`},
	} {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			up := &inproc.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				io.WriteString(w, c.body)
			})}
			fleet, _ := sim.New(sim.ZeroLatency())
			m, err := keel.New(simfleet.Config(fleet, "http://up.test"), keel.WithUpstream(up))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			req, _ := http.NewRequest("POST", "http://keel.test/v1/messages", strings.NewReader(msgBody("sim-opus", "x", "")))
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := m.HTTPClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status || calls != 1 {
				t.Fatalf("status %d after %d upstream calls, want %d after 1: %s", resp.StatusCode, calls, c.status, b)
			}
			if !bytes.Contains(b, []byte(`"type":"error"`)) {
				t.Errorf("error shape lost: %s", b)
			}
		})
	}
}

// Must show (engine level): the breaker of a failing endpoint opens, the
// mesh answers MESH_CIRCUIT_OPEN instead of hammering it, then half-opens
// after open_for and closes after successes.
func TestBreakerOpensHalfOpensCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Models = simCfg.Models[2:3]
		simCfg.Models[0].Regions = []string{"us-east"}
		simCfg.Faults = []sim.Fault{{Kind: sim.KindServerError, Status: 500}}
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Resilience.Breaker.ConsecutiveFailures = 3
			c.Resilience.Breaker.OpenFor = 5 * time.Second
		})
		defer s.mesh.Close()
		body := msgBody("sim-haiku", "x", "")
		first := s.call(t, "/v1/messages", body)
		if first.status != 500 {
			t.Fatalf("first call: %d %s", first.status, first.body)
		}
		sent := len(s.up.posts())
		open := s.call(t, "/v1/messages", body)
		if open.status != 503 || !bytes.Contains(open.body, []byte("MESH_CIRCUIT_OPEN")) {
			t.Fatalf("with the breaker open: %d %s", open.status, open.body)
		}
		if len(s.up.posts()) != sent {
			t.Errorf("a call went upstream while the breaker was open")
		}
		s.fleet.SetFaults(nil)
		time.Sleep(5 * time.Second) // open_for passes: half-open
		for i := range 3 {
			if r := s.call(t, "/v1/messages", body); r.status != 200 {
				t.Fatalf("call %d after open_for: %d %s", i, r.status, r.body)
			}
		}
		st := s.mesh.Endpoints()
		if len(st) != 1 || st[0].Breaker != "closed" {
			t.Errorf("breaker state %+v, want closed", st)
		}
	})
}

// longPrompt finds a prompt whose simulated answer is at least n tokens.
func longPrompt(t *testing.T, simCfg sim.Config, model string, n int) (string, *llm.Response) {
	for i := range 500 {
		p := fmt.Sprintf("Tell me a long story, number %d.", i)
		ans := sim.Answer(simCfg, userText(model, p, 200))
		if ans.Usage.OutputTokens >= n {
			return p, ans
		}
	}
	t.Fatal("no long answer found")
	return "", nil
}

// sseText reassembles the text of an Anthropic SSE body and reports
// whether it ended with message_stop and whether it had an error event.
func sseText(t *testing.T, body []byte) (text string, stopped, errored bool) {
	var sb strings.Builder
	for _, ev := range strings.Split(string(body), "\n\n") {
		lines := strings.Split(ev, "\n")
		if len(lines) < 2 {
			continue
		}
		name := strings.TrimPrefix(lines[0], "event: ")
		data := strings.TrimPrefix(lines[1], "data: ")
		switch name {
		case "content_block_delta":
			var d struct {
				Delta struct{ Type, Text string }
			}
			if err := json.Unmarshal([]byte(data), &d); err != nil {
				t.Fatal(err)
			}
			sb.WriteString(d.Delta.Text)
		case "message_stop":
			stopped = true
		case "error":
			errored = true
		}
	}
	return sb.String(), stopped, errored
}

// Must show: a stream cut after 40 tokens reaches the client as the exact
// full text, once, with no token lost or doubled, and X-Mesh-Attempts: 2.
func TestStreamCutIsContinuedExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = steadyLatency()
		}
		prompt, want := longPrompt(t, simCfg, "sim-sonnet", 45)
		simCfg.Faults = []sim.Fault{{Kind: sim.KindStreamCut, AfterTokens: 40, Count: 1}}
		s := newSimMesh(t, simCfg, nil)
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("sim-sonnet", prompt, `,"stream":true`))
		text, stopped, errored := sseText(t, r.body)
		if text != want.Text() || !stopped || errored {
			t.Fatalf("text %q (stopped %v, error %v), want %q", text, stopped, errored, want.Text())
		}
		if got := r.trailer.Get("X-Mesh-Attempts"); got != "2" {
			t.Errorf("X-Mesh-Attempts trailer %q, want 2", got)
		}
		if got := r.trailer.Get("X-Mesh-Recovered"); got != "1" {
			t.Errorf("X-Mesh-Recovered trailer %q, want 1", got)
		}
		// The usage covers the whole answer.
		if !bytes.Contains(r.body, []byte(fmt.Sprintf(`"output_tokens":%d`, want.Usage.OutputTokens))) {
			t.Errorf("final usage does not count %d output tokens", want.Usage.OutputTokens)
		}
	})
}

// Must show: an overloaded_error event inside a 200 stream before any
// content is retried elsewhere and the client sees one clean stream; a
// silent upstream is cut by the idle timeout and recovered; with recovery
// impossible, a stream missing message_stop reaches the client as an error
// event, never as a clean finish.
func TestStreamFaults(t *testing.T) {
	cases := []struct {
		name     string
		fault    sim.Fault
		recovery bool
		wantOK   bool
		minTook  time.Duration
	}{
		{"error event before content", sim.Fault{Kind: sim.KindStreamError, AfterTokens: 0, Count: 1}, true, true, 0},
		{"stall mid-stream", sim.Fault{Kind: sim.KindStall, AfterTokens: 10, Count: 1}, true, true, 2 * time.Second},
		{"cut without recovery", sim.Fault{Kind: sim.KindStreamCut, AfterTokens: 10, Count: 1}, false, false, 0},
		{"error event mid-stream without recovery", sim.Fault{Kind: sim.KindStreamError, AfterTokens: 10, Count: 1}, false, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				simCfg := sim.DefaultConfig()
				for i := range simCfg.Regions {
					simCfg.Regions[i].Latency = steadyLatency()
				}
				prompt, want := longPrompt(t, simCfg, "sim-opus", 20)
				simCfg.Faults = []sim.Fault{c.fault}
				s := newSimMesh(t, simCfg, func(cf *config.Config) {
					cf.Resilience.Recovery = &c.recovery
				})
				defer s.mesh.Close()
				r := s.call(t, "/v1/messages", msgBody("sim-opus", prompt, `,"stream":true`))
				text, stopped, errored := sseText(t, r.body)
				if c.wantOK {
					if text != want.Text() || !stopped || errored {
						t.Fatalf("text %q stopped %v error %v; want the exact text %q and a clean stop", text, stopped, errored, want.Text())
					}
					if r.took < c.minTook {
						t.Errorf("took %v, want ≥ %v (the idle timeout floor)", r.took, c.minTook)
					}
					return
				}
				if stopped || !errored {
					t.Fatalf("stopped %v error %v: a broken stream must end with an error event, not message_stop:\n%s", stopped, errored, tail(r.body))
				}
				if !strings.HasPrefix(want.Text(), text) || text == "" {
					t.Errorf("partial text %q is not a prefix of %q", text, want.Text())
				}
			})
		})
	}
}

// Must show: min_model_capability never routes below the tier, even to the
// fastest model; preferred_region is honoured while healthy.
func TestCapabilityFloorAndPreferredRegion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = steadyLatency()
		}
		simCfg.Models[2].Latency = sim.LatencySpec{TTFT: sim.Duration(2 * time.Millisecond)} // sim-haiku: fastest
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Aliases = []config.Alias{{Name: "any", Models: []string{"sim-opus", "sim-sonnet", "sim-haiku"}, Strategy: "latency"}}
		})
		defer s.mesh.Close()
		served := func(hdr ...string) map[string]int {
			got := map[string]int{}
			for i := range 60 {
				r := s.call(t, "/v1/messages", msgBody("any", fmt.Sprint("q", i), ""), hdr...)
				if r.status != 200 {
					t.Fatalf("status %d %s", r.status, r.body)
				}
				got[r.header.Get("X-Mesh-Model")+"@"+r.header.Get("X-Mesh-Region")]++
			}
			return got
		}
		warm := served()
		haiku := 0
		for k, n := range warm {
			if strings.HasPrefix(k, "sim-haiku@") {
				haiku += n
			}
		}
		if haiku < 30 {
			t.Fatalf("the fastest model served only %d of 60 unconstrained calls: %v", haiku, warm)
		}
		for k := range served("X-Mesh-Behavior", `{"min_model_capability":"sonnet"}`) {
			if strings.HasPrefix(k, "sim-haiku@") {
				t.Errorf("min_model_capability sonnet routed to %s", k)
			}
		}
		for k := range served("X-Mesh-Behavior", `{"preferred_region":"eu-west"}`) {
			if !strings.HasSuffix(k, "@eu-west") {
				t.Errorf("preferred_region eu-west routed to %s", k)
			}
		}
		// Unhealthy preferred region: abandoned.
		s.fleet.SetRegionDown("eu-west", true)
		for range 5 {
			r := s.call(t, "/v1/messages", msgBody("any", "down", ""), "X-Mesh-Behavior", `{"preferred_region":"eu-west"}`)
			if r.status != 200 {
				t.Fatalf("status %d with the preferred region down", r.status)
			}
		}
		var sb []string
		for k := range served("X-Mesh-Behavior", `{"preferred_region":"eu-west"}`) {
			sb = append(sb, k)
		}
		sort.Strings(sb)
		for _, k := range sb {
			if strings.HasSuffix(k, "@eu-west") {
				t.Errorf("served from the dead preferred region: %v", sb)
			}
		}
	})
}

// Must show: turning hedging off through the admin API takes effect on the
// next request without a restart; no token → 401.
func TestAdminSwitchesHedging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond)}
		}
		simCfg.Regions[0].Latency.TTFT = sim.Duration(time.Second) // us-east: slow primary
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Server.AdminToken = "s3cret"
			c.Resilience.Hedge.Ceiling = 50 * time.Millisecond
			c.Aliases = []config.Alias{{Name: "primary-east", Models: []string{"sim-sonnet"}, Strategy: "ordered"}}
		})
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("primary-east", "x", ""))
		if r.header.Get("X-Mesh-Hedged") != "won" || r.took != 60*time.Millisecond {
			t.Fatalf("hedging on: hedged %q took %v, want won after 50ms + 10ms", r.header.Get("X-Mesh-Hedged"), r.took)
		}
		admin := func(body string, hdr ...string) (int, string) {
			req, _ := http.NewRequest("POST", "http://keel.test/admin/features", strings.NewReader(body))
			for i := 0; i+1 < len(hdr); i += 2 {
				req.Header.Set(hdr[i], hdr[i+1])
			}
			resp, err := s.mesh.HTTPClient().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		if code, _ := admin(`{"hedging":false}`); code != 401 {
			t.Fatalf("no token: %d, want 401", code)
		}
		if code, _ := admin(`{"hedging":false}`, "Authorization", "Bearer wrong"); code != 401 {
			t.Fatalf("wrong token: %d, want 401", code)
		}
		if code, b := admin(`{"hedgin":false}`, "Authorization", "Bearer s3cret"); code != 400 {
			t.Fatalf("unknown key: %d %s, want 400", code, b)
		}
		if code, b := admin(`{"hedging":false}`, "Authorization", "Bearer s3cret"); code != 200 || !strings.Contains(b, `"hedging":false`) {
			t.Fatalf("switch: %d %s", code, b)
		}
		r = s.call(t, "/v1/messages", msgBody("primary-east", "y", ""))
		if r.header.Get("X-Mesh-Hedged") != "" {
			t.Errorf("hedging off: still hedged %q", r.header.Get("X-Mesh-Hedged"))
		}
		if r.took < time.Second {
			t.Errorf("hedging off: took %v, want the slow primary's 1s", r.took)
		}
	})
}

// Percentage rollout, switched at runtime: sticky by the rollout key.
func TestRolloutStickyByKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, sim.ZeroLatency(), func(c *config.Config) { c.Server.AdminToken = "tok" })
		defer s.mesh.Close()
		req, _ := http.NewRequest("POST", "http://keel.test/admin/features", strings.NewReader(`{"rollout":{"stage":"hedging","percent":30}}`))
		req.Header.Set("Authorization", "Bearer tok")
		resp, err := s.mesh.HTTPClient().Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("admin: %v %v", resp, err)
		}
		resp.Body.Close()
		stages := map[string]string{}
		counts := map[string]int{}
		for i := range 200 {
			key := fmt.Sprint("user-", i%100)
			r := s.call(t, "/v1/messages", msgBody("sim-sonnet", "x", ""), "X-Mesh-Rollout-Key", key)
			st := r.header.Get("X-Mesh-Stage")
			if prev, ok := stages[key]; ok && prev != st {
				t.Fatalf("key %s got stage %q then %q", key, prev, st)
			}
			stages[key] = st
			counts[st]++
			if st == "monitor" && r.header.Get("X-Mesh-Mode") != "legacy" {
				t.Errorf("monitor stage without the legacy path")
			}
		}
		if counts["hedging"] < 30 || counts["hedging"] > 90 || counts["monitor"] == 0 {
			t.Errorf("stages %v, want about 30 %% hedging", counts)
		}
	})
}
