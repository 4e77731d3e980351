package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
	"github.com/keelmesh/keel/sim"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeRT is an in-memory upstream: it waits delay(n) for call number n
// (read from the prompt's "(request n)"), then answers with respond(n).
// Inside a synctest bubble its waits are virtual and exact.
type fakeRT struct {
	delay   func(n int, now time.Time) time.Duration
	respond func(n int) (int, string)
}

var seqRE = regexp.MustCompile(`\(request (\d+)\)`)

func (f *fakeRT) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	r.Body.Close()
	m := seqRE.FindSubmatch(body)
	n, _ := strconv.Atoi(string(m[1]))
	if f.delay != nil {
		t := time.NewTimer(f.delay(n, time.Now()))
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-t.C:
		}
	}
	status, out := http.StatusOK, anthropicOK
	if f.respond != nil {
		status, out = f.respond(n)
	}
	if status < 0 {
		return nil, errors.New("connection reset by peer")
	}
	return &http.Response{StatusCode: status, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(out)), Request: r}, nil
}

const anthropicOK = `{"id":"msg_1","type":"message","role":"assistant","model":"sim-sonnet","content":[{"type":"text","text":"{\"a\":1}"}],` +
	`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":5}}`

func fakeTarget(name string, rt http.RoundTripper) Target {
	return Target{Name: name, URL: "http://fake.invalid", Client: &http.Client{Transport: rt}}
}

// TestPercentilesKnownDistribution runs the open loop against an upstream
// whose latency distribution is known exactly (call n takes (n mod 100 + 1)
// × 5 ms, so 5..500 ms uniformly) on a virtual clock, and checks every
// reported percentile within 2 % (the histogram alone is within 1 %).
func TestPercentilesKnownDistribution(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := &fakeRT{delay: func(n int, _ time.Time) time.Duration { return time.Duration((n-1)%100+1) * 5 * time.Millisecond }}
		res, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("fake", rt)}, Rate: 200, Duration: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Targets[0]
		if got.Requests != 1000 || got.Errors != 0 {
			t.Fatalf("requests/errors = %d/%d, want 1000/0", got.Requests, got.Errors)
		}
		// 1000 calls, each delay value 10 times: the exact sample quantiles.
		tests := []struct {
			name      string
			got, want float64
		}{
			{"p50", got.P50Ms, 250}, {"p90", got.P90Ms, 450}, {"p99", got.P99Ms, 495},
			{"p99.9", got.P999Ms, 500}, {"max", got.MaxMs, 500},
		}
		for _, tt := range tests {
			if math.Abs(tt.got-tt.want)/tt.want > 0.02 {
				t.Errorf("%s = %.3f ms, want %.0f ms ± 2 %%", tt.name, tt.got, tt.want)
			}
		}
		// 1000 answers over 5 s of sending plus the last call's 500 ms.
		if want := 1000 / 5.5; math.Abs(got.ThroughputRPS-want) > 1 {
			t.Errorf("throughput = %.1f req/s, want %.1f", got.ThroughputRPS, want)
		}
	})
}

// TestOpenLoopCountsStalls shows the open loop is free of coordinated
// omission: the upstream stalls every call that arrives between t=1s and
// t=2s until t=2s. Calls keep being due during the stall, and each counts
// from its due time, so about a third of the calls see 0-1 s — while a
// closed-loop client sees a single slow call.
func TestOpenLoopCountsStalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		stall := func(_ int, now time.Time) time.Duration {
			off := now.Sub(start)
			if off >= time.Second && off < 2*time.Second {
				return 2*time.Second - off
			}
			return time.Millisecond
		}
		open, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("open", &fakeRT{delay: stall})}, Rate: 100, Duration: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		o := open.Targets[0]
		// 300 calls; 100 due in [1s, 2s) wait 1000, 990, ... 10 ms.
		if o.P90Ms < 600 || o.P90Ms > 850 || o.MaxMs < 990 {
			t.Errorf("open loop p90/max = %.1f/%.1f ms, want ~700/1000 ms (the stall counted for every call due in it)", o.P90Ms, o.MaxMs)
		}

		start = time.Now()
		closed, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("closed", &fakeRT{delay: stall})}, Concurrency: 1, Duration: 3 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		c := closed.Targets[0]
		if c.P90Ms > 2 || c.MaxMs < 990 {
			t.Errorf("closed loop p90/max = %.1f/%.1f ms, want ~1/1000 ms (one stalled call)", c.P90Ms, c.MaxMs)
		}
	})
}

// TestConcurrencyLimitDrops checks that calls due over the cap are dropped
// and counted, never delayed.
func TestConcurrencyLimitDrops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		inFlight, peak := 0, 0
		rt := &fakeRT{delay: func(int, time.Time) time.Duration {
			mu.Lock()
			inFlight++
			peak = max(peak, inFlight)
			mu.Unlock()
			return time.Second
		}, respond: func(int) (int, string) {
			mu.Lock()
			inFlight--
			mu.Unlock()
			return http.StatusOK, anthropicOK
		}}
		res, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("capped", rt)}, Rate: 100, Duration: 2 * time.Second, ConcurrencyLimit: 10})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Targets[0]
		if got.Requests+got.Dropped != 200 {
			t.Errorf("sent %d + dropped %d, want 200 calls due", got.Requests, got.Dropped)
		}
		if got.Requests != 20 || peak > 10 {
			t.Errorf("sent %d with peak %d in flight, want 20 sent (10 per second of 1 s calls) and peak ≤ 10", got.Requests, peak)
		}
		if got.P99Ms > 1001 {
			t.Errorf("p99 = %.1f ms, want 1000 ms: dropped calls must not be queued", got.P99Ms)
		}
	})
}

// TestTargetsInterleaved checks that several targets share the run evenly.
func TestTargetsInterleaved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fast := &fakeRT{delay: func(int, time.Time) time.Duration { return 10 * time.Millisecond }}
		slow := &fakeRT{delay: func(int, time.Time) time.Duration { return 100 * time.Millisecond }}
		res, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("fast", fast), fakeTarget("slow", slow)}, Rate: 50, Duration: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range res.Targets {
			if tg.Requests != 100 {
				t.Errorf("%s: %d requests, want 100", tg.Name, tg.Requests)
			}
		}
		if res.Targets[0].P50Ms != 10 || res.Targets[1].P50Ms != 100 {
			t.Errorf("p50 = %.2f / %.2f ms, want 10 / 100", res.Targets[0].P50Ms, res.Targets[1].P50Ms)
		}
	})
}

const (
	anthropicStreamHead = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":0}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"{\\\"a\\\":\"}}\n\n"
	anthropicStreamTail = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"1}\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":2}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	anthropicStreamError = "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n"
)

// TestErrorKinds checks the classification of every kind of failure.
func TestErrorKinds(t *testing.T) {
	tests := []struct {
		name     string
		req      Request
		status   int
		body     string
		wantKind string
	}{
		{"success", Request{}, 200, anthropicOK, ""},
		{"json asked and valid", Request{JSON: true}, 200, anthropicOK, ""},
		{"json asked, answer does not parse", Request{JSON: true}, 200, strings.Replace(anthropicOK, `{\"a\":1}`, `{\"a\":1`, 1), KindInvalidJSON},
		{"json not asked, answer is prose", Request{}, 200, strings.Replace(anthropicOK, `{\"a\":1}`, `hello`, 1), ""},
		{"status without mesh code", Request{}, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, "status_429"},
		{"status with mesh code", Request{}, 502, `{"type":"error","error":{"type":"api_error","message":"all failed","mesh_error_code":"MESH_FALLBACK_EXHAUSTED"}}`, "MESH_FALLBACK_EXHAUSTED"},
		{"non-JSON error body", Request{}, 503, `upstream connect error`, "status_503"},
		{"transport", Request{}, -1, "", KindTransport},
		{"200 that is not an answer", Request{}, 200, `<html>`, KindInvalidResponse},
		{"stream complete", Request{Stream: true, JSON: true}, 200, anthropicStreamHead + anthropicStreamTail, ""},
		{"stream cut", Request{Stream: true}, 200, anthropicStreamHead, KindStreamCut},
		{"stream error event", Request{Stream: true}, 200, anthropicStreamHead + anthropicStreamError, KindStreamError},
		{"stream json invalid", Request{Stream: true, JSON: true}, 200, strings.Replace(anthropicStreamHead+anthropicStreamTail, `1}`, `1`, 1), KindInvalidJSON},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &fakeRT{respond: func(int) (int, string) { return tt.status, tt.body }}
				res, err := Run(t.Context(), Options{Targets: []Target{fakeTarget("t", rt)}, Request: tt.req, Rate: 10, Duration: time.Second})
				if err != nil {
					t.Fatal(err)
				}
				got := res.Targets[0]
				want := map[string]int64{}
				if tt.wantKind != "" {
					want[tt.wantKind] = 10
				}
				if !equalCounts(got.ErrorsByKind, want) || got.Errors != want[tt.wantKind] {
					t.Errorf("errors %d by kind %v, want %v", got.Errors, got.ErrorsByKind, want)
				}
				if tt.wantKind == KindInvalidJSON && got.InvalidJSON != 10 {
					t.Errorf("invalid_json = %d, want 10", got.InvalidJSON)
				}
				if tt.req.Stream && tt.wantKind == "" && got.TTFTP50Ms != 0 {
					// Virtual time stands still: TTFT is exactly 0 here.
					t.Errorf("ttft p50 = %v, want 0 on a virtual clock", got.TTFTP50Ms)
				}
			})
		})
	}
}

func equalCounts(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestTimelineAndAmplification runs the real simulator in memory, direct,
// with a region killed from t=1.005s to t=2.005s of 3s: exactly the calls due in
// that second fail, the region is back afterwards, and a direct target's
// amplification is 1.
func TestTimelineAndAmplification(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		fs := FleetSim{Fleet: fleet}
		s, err := ParseScenario([]byte("load: {rate: 100, duration: 3s}\ntimeline:\n  - {at: 1005ms, region_down: us-east}\n  - {at: 2005ms, region_up: us-east}\n"))
		if err != nil {
			t.Fatal(err)
		}
		res, err := Run(t.Context(), Options{
			Targets:  []Target{{Name: "direct", URL: "http://" + sim.TransportHost, Direct: true, Client: &http.Client{Transport: fleet.Transport()}}},
			Request:  s.Load.Request,
			Rate:     s.Load.Rate,
			Duration: s.Load.Duration.D(),
			Timeline: s.Timeline,
			Sim:      fs,
			Prices:   fs.Prices(),
		})
		if err != nil {
			t.Fatal(err)
		}
		got := res.Targets[0]
		if got.Requests != 300 || got.ErrorsByKind[KindTransport] != 100 || got.Errors != 100 {
			t.Errorf("requests %d, errors %v, want 300 with 100 transport errors", got.Requests, got.ErrorsByKind)
		}
		if got.Amplification != 1 || got.UpstreamRequests != 300 {
			t.Errorf("amplification %v over %d upstream calls, want 1 over 300", got.Amplification, got.UpstreamRequests)
		}
		if st := fleet.Stats(); math.Abs(st.Total.CostUSD-got.UpstreamCostUSD) > 1e-9 || got.UpstreamCostUSD == 0 {
			t.Errorf("client-side cost %v, simulator billed %v", got.UpstreamCostUSD, st.Total.CostUSD)
		}
		if fleet.RegionDown("us-east") {
			t.Error("us-east still down after the run")
		}
		if want := []string{"t=1.005s region_down us-east", "t=2.005s region_up us-east"}; strings.Join(res.Actions, ";") != strings.Join(want, ";") {
			t.Errorf("actions = %q, want %q", res.Actions, want)
		}
	})
}

// TestAttribute checks how simulator counters are split between a direct
// target and gateways.
func TestAttribute(t *testing.T) {
	stats := func(req int64, cost float64) sim.Stats {
		return sim.Stats{Total: sim.EndpointStats{Requests: req, CostUSD: cost}}
	}
	tests := []struct {
		name      string
		targets   []*TargetResult
		priced    bool
		wantAmp   []float64
		wantCost  []float64
		wantShare []bool
	}{
		{"direct and one gateway", []*TargetResult{{Requests: 100, direct: true, cost: 1}, {Requests: 100}}, true,
			[]float64{1, 1.2}, []float64{1, 1.5}, []bool{false, false}},
		{"gateway alone, unpriced", []*TargetResult{{Requests: 100}}, false,
			[]float64{2.2}, []float64{2.5}, []bool{false}},
		{"direct unpriced hides cost", []*TargetResult{{Requests: 100, direct: true}, {Requests: 100}}, false,
			[]float64{1, 1.2}, []float64{0, 0}, []bool{false, false}},
		{"two gateways share", []*TargetResult{{Requests: 100}, {Requests: 120}}, true,
			[]float64{1, 1}, []float64{2.5, 2.5}, []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			attribute(tt.targets, stats(1000, 10), stats(1220, 12.5), tt.priced)
			for i, tr := range tt.targets {
				if tr.Amplification != tt.wantAmp[i] || math.Abs(tr.UpstreamCostUSD-tt.wantCost[i]) > 1e-9 || tr.AmplificationShared != tt.wantShare[i] {
					t.Errorf("target %d: amplification %v cost %v shared %v, want %v %v %v", i,
						tr.Amplification, tr.UpstreamCostUSD, tr.AmplificationShared, tt.wantAmp[i], tt.wantCost[i], tt.wantShare[i])
				}
			}
		})
	}
}

// TestRunBadInput checks the errors Run gives before sending anything.
func TestRunBadInput(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	ok := Target{Name: "t", URL: "http://x.invalid", Client: &http.Client{Transport: &fakeRT{}}}
	tests := []struct {
		name string
		opt  Options
		want error
		msg  string
	}{
		{"no target", Options{Rate: 1, Duration: time.Second}, ErrBadOptions, "no target"},
		{"no rate nor concurrency", Options{Targets: []Target{ok}, Duration: time.Second}, ErrBadOptions, "rate"},
		{"timeline without simulator", Options{Targets: []Target{ok}, Rate: 1, Duration: time.Second, Timeline: []Action{{RegionDown: "x"}}}, ErrBadOptions, "--sim"},
		{"unreachable", Options{Targets: []Target{{Name: "gone", URL: closed}}, Rate: 1, Duration: time.Second}, ErrUnreachable, "target gone: unreachable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Run(context.Background(), tt.opt)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error = %v, want %v containing %q", err, tt.want, tt.msg)
			}
		})
	}
}

// TestRequestBody checks the body of each format and option.
func TestRequestBody(t *testing.T) {
	tests := []struct {
		name   string
		req    Request
		format string
		want   []string
	}{
		{"anthropic", Request{}, "anthropic", []string{`"model":"sim-sonnet"`, `"max_tokens":16`, `(request 7)`}},
		{"anthropic json stream", Request{JSON: true, Stream: true}, "anthropic", []string{`"stream":true`, `"output_config":{"format":{"schema":{"additionalProperties":false`}},
		{"openai json stream", Request{JSON: true, Stream: true}, "openai", []string{`"stream_options":{"include_usage":true}`, `"response_format":{"type":"json_schema"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := tt.req
			r.Format = tt.format
			r.applyDefaults()
			f := map[string]int{"anthropic": 1, "openai": 2}[tt.format]
			b := requestBody(&r, llmFormat(f), 7)
			for _, w := range tt.want {
				if !bytes.Contains(b, []byte(w)) {
					t.Errorf("body %s lacks %s", b, w)
				}
			}
		})
	}
	for _, tc := range []struct{ base, want string }{
		{"http://h:1", "http://h:1/v1/messages"},
		{"http://h:1/r/eu/", "http://h:1/r/eu/v1/messages"},
		{"http://h:1/v1", "http://h:1/v1/messages"},
		{"http://h:1/v1/messages", "http://h:1/v1/messages"},
	} {
		if got := endpointPath(tc.base, llmFormat(1)); got != tc.want {
			t.Errorf("endpointPath(%q) = %q, want %q", tc.base, got, tc.want)
		}
	}
}

// TestRequestBodyTemplate checks the body template against encoding the
// whole request with the format's codec, for prompts JSON escapes (quotes,
// HTML, control characters, invalid UTF-8 at the cut).
func TestRequestBodyTemplate(t *testing.T) {
	marshalled := func(r *Request, f llm.Format, seq uint64) []byte {
		req := &llm.Request{Format: f, Model: r.Model, MaxTokens: r.MaxTokens, HasMaxTokens: true, Stream: r.Stream, IncludeUsage: r.Stream,
			Messages: []llm.Message{{Role: llm.RoleUser, ContentIsString: true,
				Content: []llm.Block{{Type: llm.BlockText, Text: r.Prompt + " (request " + strconv.FormatUint(seq, 10) + ")"}}}}}
		if r.JSON {
			var err error
			if req, err = translate.WithOutputSchema(req, f, json.RawMessage(jsonSchema)); err != nil {
				t.Fatal(err)
			}
		}
		b, err := wire.For(f).EncodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// JSON mode asks in each format's own form: Anthropic's schema subset
	// (objects closed, bounds moved into descriptions), OpenAI json_schema.
	ab := requestBody(&Request{Model: "m", MaxTokens: 8, JSON: true}, llm.FormatAnthropic, 1)
	if !json.Valid(ab) || !bytes.Contains(ab, []byte(`"output_config":{"format":{"schema":{"additionalProperties":false`)) || bytes.Contains(ab, []byte(`"minimum"`)) {
		t.Errorf("anthropic JSON body %s", ab)
	}
	if ob := requestBody(&Request{Model: "m", MaxTokens: 8, JSON: true}, llm.FormatOpenAI, 1); !bytes.Contains(ob, []byte(`"response_format":{"type":"json_schema"`)) {
		t.Errorf("openai JSON body %s", ob)
	}
	prompts := []string{"", "plain", `quote " and \ back`, "<html> & more", "tab\tnew\nline\u2028", "é ünïcode 日本", "bad \xff\xfe", "cut \xe6\x97"}
	for _, p := range prompts {
		for _, f := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
			for _, opt := range []Request{{}, {Stream: true}, {JSON: true}, {Stream: true, JSON: true, Model: "m<\"x\">"}} {
				r := opt
				r.Prompt = p
				r.applyDefaults()
				for _, seq := range []uint64{0, 7, 1 << 63} {
					got, want := requestBody(&r, f, seq), marshalled(&r, f, seq)
					if !bytes.Equal(got, want) {
						t.Errorf("prompt %q format %v seq %d:\n got %s\nwant %s", p, f, seq, got, want)
					}
				}
			}
		}
	}
}

func llmFormat(i int) llm.Format { return llm.Format(i) }

// cannedRT answers every call with the same 200 body, reading the request
// body as a server would.
type cannedRT struct{ body string }

func (c *cannedRT) RoundTrip(r *http.Request) (*http.Response, error) {
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, ContentLength: int64(len(c.body)),
		Body: io.NopCloser(strings.NewReader(c.body)), Request: r}, nil
}

// BenchmarkCall measures the generator's own work per call (building the
// request, reading and classifying the answer) over an in-memory upstream.
func BenchmarkCall(b *testing.B) {
	for _, tc := range []struct {
		name   string
		format llm.Format
		stream bool
		body   string
	}{
		{"anthropic", llm.FormatAnthropic, false, anthropicOK},
		{"openai", llm.FormatOpenAI, false, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"sim-sonnet","choices":[{"index":0,` +
			`"message":{"role":"assistant","content":"Anchor writes far evening does few."},"finish_reason":"length"}],` +
			`"usage":{"prompt_tokens":4,"completion_tokens":16,"total_tokens":20}}`},
		{"anthropic-stream", llm.FormatAnthropic, true, simAnswer(b, llm.FormatAnthropic)},
		{"openai-stream", llm.FormatOpenAI, true, simAnswer(b, llm.FormatOpenAI)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := Request{Format: tc.format.String(), Stream: tc.stream}
			req.applyDefaults()
			c := newCaller(&http.Client{Transport: &cannedRT{body: tc.body}}, "http://sim.invalid/v1/messages", tc.format, &req)
			ctx := context.Background()
			b.ReportAllocs()
			for i := range b.N {
				if o := c.call(ctx, uint64(i), time.Now()); o.kind != "" {
					b.Fatal(o.kind)
				}
			}
		})
	}
}

// simAnswer is the simulator's streamed answer to the generator's request.
func simAnswer(tb testing.TB, f llm.Format) string {
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		tb.Fatal(err)
	}
	req := Request{Format: f.String(), Stream: true}
	req.applyDefaults()
	rec := httptest.NewRecorder()
	fleet.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, endpointPath("http://sim.invalid", f), bytes.NewReader(requestBody(&req, f, 1))))
	if rec.Code != http.StatusOK {
		tb.Fatalf("simulator answered %d: %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}
