package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/structured"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func testOptions() Options {
	return Options{
		Models:           []string{"claude-sonnet", "claude-haiku"},
		Regions:          []string{"us-east", "eu-west"},
		ProviderNames:    map[string]string{"anthropic-prod": "anthropic", "local": "openai"},
		NoRuntimeMetrics: true,
	}
}

// scrape GETs /metrics from h and parses the text exposition.
func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rr.Code != http.StatusOK {
		t.Fatalf("GET /metrics: status %d", rr.Code)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(rr.Body)
	if err != nil {
		t.Fatalf("parsing exposition: %v", err)
	}
	return fams
}

// sample sums the values (counter, gauge, or histogram sample count) of
// family name's metrics whose labels include want.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func histSum(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	var sum float64
	for _, m := range fams[name].GetMetric() {
		ok := true
		for _, l := range m.GetLabel() {
			if v, in := want[l.GetName()]; in && v != l.GetValue() {
				ok = false
			}
		}
		if ok {
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return sum
}

func okRecord(i int) *callrec.Record {
	region := "us-east"
	if i%2 == 1 {
		region = "eu-west"
	}
	return &callrec.Record{
		Call: callrec.Call{RequestID: fmt.Sprintf("req-%d", i), Start: t0, Duration: 300 * time.Millisecond, Model: "claude-sonnet"},
		Route: callrec.Route{Domain: "finance", ServedBy: "claude-sonnet/" + region, ServedModel: "claude-sonnet", ServedRegion: region,
			ServedProvider: "anthropic-prod",
			Attempts:       []callrec.Attempt{{Endpoint: "claude-sonnet/" + region, Kind: "primary", Outcome: "ok", Winner: true}}},
		Result: callrec.Result{Status: 200, Usage: llm.Usage{InputTokens: 100, CacheReadTokens: 20, OutputTokens: 50}},
	}
}

// The must-show: 100 scripted calls, 7 of which fell back because
// the first choice was overloaded, scraped with exact counter values.
func TestScriptedRunExactCounters(t *testing.T) {
	m, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		r := okRecord(i)
		switch {
		case i%14 == 3: // 7 calls: primary overloaded, a retry on the other region served
			r.Fallback = "overloaded"
			r.Retries = 1
			r.QueueWait = 40 * time.Millisecond
			r.Normalization = &callrec.Normalization{Offset: -0.2}
			r.Attempts = []callrec.Attempt{
				{Endpoint: "claude-sonnet/us-east", Kind: "primary", Outcome: "overloaded", Status: 529},
				{Endpoint: "claude-sonnet/eu-west", Kind: "retry", Outcome: "ok", Winner: true, Wait: 40 * time.Millisecond},
			}
		case i == 50 || i == 51: // 2 hedged calls, one won by the hedge
			r.Hedges = 1
			r.HedgeWon = i == 51
			r.Attempts = append(r.Attempts, callrec.Attempt{Kind: "hedge", Outcome: "canceled"})
			if r.HedgeWon {
				r.Attempts[0].Outcome, r.Attempts[0].Winner = "canceled", false
				r.Attempts[1].Outcome, r.Attempts[1].Winner = "ok", true
			}
		case i == 40 || i == 41: // served by another model, once on the legacy path
			r.ModelFallback, r.Legacy = true, i == 41
			r.ServedModel = "claude-haiku"
		case i == 60: // a fragmented call
			r.Fragments = &callrec.Fragments{Count: 4, OK: 3, Fusions: 10, FusionConflicts: 2}
		case i == 70: // a stream continued once elsewhere
			r.Stream, r.TTFT, r.Recovered, r.Retries = true, 80*time.Millisecond, 1, 1
			r.Attempts = append(r.Attempts, callrec.Attempt{Kind: "continuation", Outcome: "ok", Winner: true})
			r.Attempts[0].Outcome, r.Attempts[0].Winner = "connection_reset", false
		}
		m.RequestDone(r)
	}
	fams := scrape(t, m.Handler())
	sonnet := map[string]string{"model": "claude-sonnet"}
	cases := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"requests", "mesh_requests_total", sonnet, 100},
		{"requests ok", "mesh_requests_total", map[string]string{"outcome": "ok"}, 100},
		{"requests per region", "mesh_requests_total", map[string]string{"region": "eu-west", "domain": "finance"}, 50},
		{"fallbacks overloaded", "mesh_fallbacks_total", map[string]string{"reason": "overloaded", "model": "claude-sonnet", "domain": "finance"}, 7},
		{"fallbacks any", "mesh_fallbacks_total", nil, 7},
		{"retries", "mesh_retries_total", nil, 8},
		{"model fallbacks", "mesh_model_fallbacks_total", sonnet, 2},
		{"legacy", "mesh_legacy_requests_total", nil, 1},
		{"genai response model", "gen_ai_client_operation_duration_seconds", map[string]string{"gen_ai_response_model": "claude-haiku"}, 2},
		{"hedges sent", "mesh_hedges_sent_total", nil, 2},
		{"hedges won", "mesh_hedges_won_total", nil, 1},
		{"recoveries", "mesh_recoveries_total", nil, 1},
		{"fragments sent", "mesh_fragments_sent_total", nil, 4},
		{"fragments ok", "mesh_fragments_succeeded_total", nil, 3},
		{"fusions", "mesh_fusions_total", nil, 10},
		{"fusion conflicts", "mesh_fusion_conflicts_total", nil, 2},
		{"attempts primary ok", "mesh_attempts_total", map[string]string{"kind": "primary", "outcome": "ok"}, 91},
		{"attempts primary overloaded", "mesh_attempts_total", map[string]string{"kind": "primary", "outcome": "overloaded"}, 7},
		{"attempts retry ok", "mesh_attempts_total", map[string]string{"kind": "retry", "outcome": "ok"}, 7},
		{"attempts hedge", "mesh_attempts_total", map[string]string{"kind": "hedge"}, 2},
		{"attempts continuation", "mesh_attempts_total", map[string]string{"kind": "continuation", "outcome": "ok"}, 1},
		{"attempts all", "mesh_attempts_total", nil, 110},
		{"queue wait observations", "mesh_queue_wait_seconds", nil, 100},
		{"offset observations", "mesh_normalization_offset", nil, 100},
		{"genai duration", "gen_ai_client_operation_duration_seconds", map[string]string{"gen_ai_operation_name": "chat", "gen_ai_provider_name": "anthropic", "gen_ai_request_model": "claude-sonnet", "gen_ai_response_model": "claude-sonnet"}, 98},
		{"genai ttfc", "gen_ai_client_operation_time_to_first_chunk_seconds", nil, 1},
		{"genai input tokens", "gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "input"}, 100},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sample(fams, c.metric, c.labels); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
			}
		})
	}
	sums := []struct {
		name   string
		metric string
		labels map[string]string
		want   float64
	}{
		{"queue wait seconds", "mesh_queue_wait_seconds", nil, 7 * 0.040},
		{"absolute offset", "mesh_normalization_offset", nil, 7 * 0.2},
		{"input tokens include cache reads", "gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "input"}, 100 * 120},
		{"output tokens", "gen_ai_client_token_usage", map[string]string{"gen_ai_token_type": "output"}, 100 * 50},
		{"duration seconds", "gen_ai_client_operation_duration_seconds", nil, 100 * 0.3},
	}
	for _, c := range sums {
		t.Run(c.name, func(t *testing.T) {
			if got := histSum(fams, c.metric, c.labels); fmt.Sprintf("%.6f", got) != fmt.Sprintf("%.6f", c.want) {
				t.Errorf("sum of %s%v = %v, want %v", c.metric, c.labels, got, c.want)
			}
		})
	}
}

// Label values stay bounded: unknown values collapse to "other", empty
// ones to "none".
func TestLabelBounding(t *testing.T) {
	cases := []struct {
		name string
		rec  callrec.Record
		want map[string]string
	}{
		{"known", callrec.Record{Call: callrec.Call{Model: "claude-haiku"}, Route: callrec.Route{ServedRegion: "us-east", Domain: "code"}},
			map[string]string{"model": "claude-haiku", "region": "us-east", "domain": "code"}},
		{"unknown model", callrec.Record{Call: callrec.Call{Model: "gpt-unknown-9"}, Route: callrec.Route{ServedRegion: "us-east", Domain: "legal"}},
			map[string]string{"model": "other", "region": "us-east", "domain": "legal"}},
		{"unknown region and domain", callrec.Record{Call: callrec.Call{Model: "claude-sonnet"}, Route: callrec.Route{ServedRegion: "mars-1", Domain: "astrology"}},

			map[string]string{"model": "claude-sonnet", "region": "other", "domain": "other"}},
		{"failed call has no region", callrec.Record{Call: callrec.Call{Model: "claude-sonnet"}, Route: callrec.Route{Domain: "medical"}, Result: callrec.Result{Err: &llm.APIError{Status: 504, MeshCode: llm.MeshTimeout}}},

			map[string]string{"model": "claude-sonnet", "region": "none", "domain": "medical", "outcome": "timeout"}},
		{"upstream 4xx", callrec.Record{Call: callrec.Call{Model: "claude-sonnet"}, Route: callrec.Route{Domain: "general"}, Result: callrec.Result{Err: &llm.APIError{Status: 401, Type: llm.ErrAuthentication}}},

			map[string]string{"outcome": "error_4xx", "domain": "general"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m, err := New(testOptions())
			if err != nil {
				t.Fatal(err)
			}
			m.RequestDone(&c.rec)
			fams := scrape(t, m.Handler())
			if got := sample(fams, "mesh_requests_total", c.want); got != 1 {
				t.Errorf("mesh_requests_total%v = %v, want 1 (families: %v)", c.want, got, fams["mesh_requests_total"])
			}
		})
	}
}

// Open-ended labels (failure reasons) keep their first MaxDynamicValues
// values; later ones become "other".
func TestDynamicLabelCap(t *testing.T) {
	o := testOptions()
	o.MaxDynamicValues = 3
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	reasons := []string{"overloaded", "rate_limited", "timeout", "status_502", "status_503", "overloaded"}
	for i, reason := range reasons {
		r := okRecord(i)
		r.Fallback = reason
		m.RequestDone(r)
	}
	fams := scrape(t, m.Handler())
	var got []string
	for _, mt := range fams["mesh_fallbacks_total"].GetMetric() {
		for _, l := range mt.GetLabel() {
			if l.GetName() == "reason" {
				got = append(got, fmt.Sprintf("%s=%v", l.GetValue(), mt.GetCounter().GetValue()))
			}
		}
	}
	sort.Strings(got)
	// Two regions alternate, so each reason is split by region; sum per reason.
	want := map[string]float64{"overloaded": 2, "rate_limited": 1, "timeout": 1, "other": 2}
	for reason, n := range want {
		if v := sample(fams, "mesh_fallbacks_total", map[string]string{"reason": reason}); v != n {
			t.Errorf("fallbacks{reason=%q} = %v, want %v (all: %v)", reason, v, n, got)
		}
	}
	if v := sample(fams, "mesh_fallbacks_total", nil); v != 6 {
		t.Errorf("fallbacks total = %v, want 6", v)
	}
}

type fakeEndpoints struct {
	mu  sync.Mutex // guards eps
	eps []fleet.Status
}

func (f *fakeEndpoints) get() []fleet.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fleet.Status(nil), f.eps...)
}

// Endpoint gauges are read from the engine at scrape time.
func TestEndpointGauges(t *testing.T) {
	fe := &fakeEndpoints{eps: []fleet.Status{
		{ID: "claude-sonnet/us-east", Model: "claude-sonnet", Region: "us-east", Provider: "anthropic-prod", Breaker: "open",
			Health: health.Snapshot{P95: 250 * time.Millisecond, InFlight: 7, Ejected: true, Headroom: 0.25, ErrorRate: 0.5}},
		{ID: "claude-sonnet/eu-west", Model: "claude-sonnet", Region: "eu-west", Provider: "anthropic-prod", Breaker: "half-open",
			Health: health.Snapshot{P95: time.Second, InFlight: 1, Headroom: 1}},
		{ID: "claude-haiku/us-east", Model: "claude-haiku", Region: "us-east", Provider: "anthropic-prod", Breaker: "closed"},
	}}
	o := testOptions()
	o.Endpoints = fe.get
	var sm structured.Metrics
	sm.Validated.Add(10)
	sm.ValidFirstTime.Add(6)
	sm.Repaired.Add(3)
	sm.Reasked.Add(1)
	sm.Failed.Add(1)
	o.Structured = &sm
	m, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	us := map[string]string{"endpoint": "claude-sonnet/us-east"}
	eu := map[string]string{"endpoint": "claude-sonnet/eu-west"}
	haiku := map[string]string{"endpoint": "claude-haiku/us-east"}
	cases := []struct {
		name, metric string
		labels       map[string]string
		want         float64
	}{
		{"breaker open", "mesh_endpoint_breaker_state", us, 2},
		{"breaker half-open", "mesh_endpoint_breaker_state", eu, 1},
		{"breaker closed", "mesh_endpoint_breaker_state", haiku, 0},
		{"ejected", "mesh_endpoint_ejected", us, 1},
		{"not ejected", "mesh_endpoint_ejected", eu, 0},
		{"in flight", "mesh_endpoint_in_flight", us, 7},
		{"p95", "mesh_endpoint_latency_p95_seconds", eu, 1},
		{"headroom", "mesh_endpoint_headroom", us, 0.25},
		{"error rate", "mesh_endpoint_error_rate", us, 0.5},
		{"structured validated", "mesh_structured_total", map[string]string{"outcome": "validated"}, 10},
		{"structured first time", "mesh_structured_total", map[string]string{"outcome": "valid_first_time"}, 6},
		{"structured repaired", "mesh_structured_total", map[string]string{"outcome": "repaired"}, 3},
		{"structured reasked", "mesh_structured_total", map[string]string{"outcome": "reasked"}, 1},
		{"structured failed", "mesh_structured_total", map[string]string{"outcome": "failed"}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := sample(fams, c.metric, c.labels); got != c.want {
				t.Errorf("%s%v = %v, want %v", c.metric, c.labels, got, c.want)
			}
		})
	}
	// The gauges follow the engine: a breaker that closes reads 0 next scrape.
	fe.mu.Lock()
	fe.eps[0].Breaker = "closed"
	fe.mu.Unlock()
	if got := sample(scrape(t, m.Handler()), "mesh_endpoint_breaker_state", us); got != 0 {
		t.Errorf("breaker after close = %v, want 0", got)
	}
}

// Concurrent observers and scrapes agree on the totals (run with -race).
func TestConcurrentObserve(t *testing.T) {
	m, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				r := okRecord(i)
				r.Domain = DefaultDomains[(g+i)%len(DefaultDomains)]
				if i%10 == 0 {
					r.Fallback = fmt.Sprintf("status_%d", 500+g)
				}
				m.RequestDone(r)
			}
		}()
	}
	for range 5 {
		scrape(t, m.Handler())
	}
	wg.Wait()
	fams := scrape(t, m.Handler())
	if got := sample(fams, "mesh_requests_total", nil); got != 4000 {
		t.Errorf("requests = %v, want 4000", got)
	}
	if got := sample(fams, "mesh_fallbacks_total", nil); got != 400 {
		t.Errorf("fallbacks = %v, want 400", got)
	}
}

func TestHandlerServesTextFormat(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rr := httptest.NewRecorder()
	m.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if ct := rr.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q, want text/plain", ct)
	}
	if !strings.Contains(rr.Body.String(), "go_goroutines") {
		t.Error("runtime metrics missing by default")
	}
	if _, err := New(Options{MaxDynamicValues: -1}); err == nil {
		t.Error("New accepted MaxDynamicValues -1")
	}
}

func BenchmarkObserve(b *testing.B) {
	m, err := New(testOptions())
	if err != nil {
		b.Fatal(err)
	}
	r := okRecord(0)
	r.Fallback = "overloaded"
	r.Retries, r.Hedges = 1, 1
	r.Attempts = []callrec.Attempt{
		{Kind: "primary", Outcome: "overloaded"},
		{Kind: "retry", Outcome: "ok", Winner: true},
		{Kind: "hedge", Outcome: "canceled"},
	}
	m.RequestDone(r)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.RequestDone(r)
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	m, err := New(testOptions())
	if err != nil {
		b.Fatal(err)
	}
	r := okRecord(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.RequestDone(r)
		}
	})
}

// mesh_shared_state_up and mesh_shared_observations_dropped_total follow
// the shared state at every scrape, and are absent when the mesh shares
// no state.
func TestSharedState(t *testing.T) {
	var up atomic.Bool
	var dropped atomic.Int64
	m, err := New(Options{NoRuntimeMetrics: true, SharedStateUp: up.Load, SharedStateDropped: dropped.Load})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float64{0, 1, 0} {
		up.Store(want == 1)
		dropped.Store(int64(i * 7))
		fams := scrape(t, m.Handler())
		if got := sample(fams, "mesh_shared_state_up", nil); got != want {
			t.Errorf("mesh_shared_state_up (-got +want):\n-%v\n+%v", got, want)
		}
		if got := sample(fams, "mesh_shared_observations_dropped_total", nil); got != float64(i*7) {
			t.Errorf("mesh_shared_observations_dropped_total (-got +want):\n-%v\n+%v", got, i*7)
		}
	}
	off, err := New(Options{NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, off.Handler())
	for _, name := range []string{"mesh_shared_state_up", "mesh_shared_observations_dropped_total"} {
		if _, ok := fams[name]; ok {
			t.Errorf("%s exposed by a mesh that shares nothing", name)
		}
	}
}

// TestCacheRequests: mesh_cache_requests_total counts each call by the
// response cache's part in it (issue 17 item 3: the hit rate an operator
// reads), and nothing for calls of a mesh without a cache.
func TestCacheRequests(t *testing.T) {
	m, err := New(Options{NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{cache.Hit, cache.Hit, cache.Miss, cache.Bypass, cache.Hit, ""} {
		m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, Cache: &callrec.Cache{Status: c}})
	}
	fams := scrape(t, m.Handler())
	for result, want := range map[string]float64{"hit": 3, "miss": 1, "bypass": 1} {
		if got := sample(fams, "mesh_cache_requests_total", map[string]string{"result": result}); got != want {
			t.Errorf("mesh_cache_requests_total{result=%q} = %v, want %v", result, got, want)
		}
	}
}

// TestPIIDetections: mesh_pii_detections_total counts values by kind and
// action, mesh_pii_detection_failures_total failed detections by outcome;
// no label holds a value.
func TestPIIDetections(t *testing.T) {
	m, err := New(Options{NoRuntimeMetrics: true})
	if err != nil {
		t.Fatal(err)
	}
	f := func(kind string) pii.Finding { return pii.Finding{Kind: kind, Hash: "ab"} }
	m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, PII: &pii.Report{Action: "redact", Findings: []pii.Finding{f("EMAIL"), f("EMAIL"), f("CARD")}}})
	m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, PII: &pii.Report{Action: "block", Findings: []pii.Finding{f("EMAIL")}}})
	m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, PII: &pii.Report{Action: "redact", Failed: true}})
	m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "sim-sonnet"}, PII: &pii.Report{Action: "redact", Failed: true, RawUpstream: true}})
	fams := scrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"mesh_pii_detections_total", map[string]string{"kind": "EMAIL", "action": "redact"}, 2},
		{"mesh_pii_detections_total", map[string]string{"kind": "CARD", "action": "redact"}, 1},
		{"mesh_pii_detections_total", map[string]string{"kind": "EMAIL", "action": "block"}, 1},
		{"mesh_pii_detection_failures_total", map[string]string{"outcome": "refused"}, 1},
		{"mesh_pii_detection_failures_total", map[string]string{"outcome": "sent_unscanned"}, 1},
	} {
		if got := sample(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
}

// Client calls are counted by the wire format the client spoke.
func TestClientRequestsByFormat(t *testing.T) {
	m, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []llm.Format{llm.FormatResponses, llm.FormatResponses, llm.FormatAnthropic, llm.FormatOpenAI} {
		m.RequestDone(&callrec.Record{Call: callrec.Call{Model: "claude-sonnet", Format: f}})
	}
	fams := scrape(t, m.Handler())
	for format, want := range map[string]float64{"responses": 2, "anthropic": 1, "openai": 1} {
		if got := sample(fams, "mesh_client_requests_total", map[string]string{"format": format}); got != want {
			t.Errorf("mesh_client_requests_total{format=%q} = %v, want %v", format, got, want)
		}
	}
}
