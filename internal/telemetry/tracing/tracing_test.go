package tracing

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
	"google.golang.org/protobuf/proto"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpan  = "00f067aa0ba902b7"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// hedgedRetried is a call whose primary attempt was overloaded, whose
// retry was hedged, and whose hedge won.
func hedgedRetried(traceparent string) *callrec.Record {
	return &callrec.Record{
		Call: callrec.Call{RequestID: "req-1", Format: llm.FormatResponses, Start: t0, Duration: 900 * time.Millisecond,
			Model: "claude-sonnet", TraceParent: traceparent},
		Route: callrec.Route{Domain: "finance", ServedBy: "claude-sonnet/eu-west/anthropic", ServedModel: "claude-sonnet",
			ServedRegion: "eu-west", ServedProvider: "anthropic", Fallback: "overloaded", Retries: 1, Hedges: 1, HedgeWon: true,
			QueueWait: 50 * time.Millisecond, Attempts: []callrec.Attempt{
				{Endpoint: "claude-sonnet/us-east/anthropic", Model: "claude-sonnet", Region: "us-east", Kind: "primary", Outcome: "overloaded", Status: 529,
					Start: t0, End: t0.Add(100 * time.Millisecond)},
				{Endpoint: "claude-sonnet/us-west/anthropic", Model: "claude-sonnet", Region: "us-west", Kind: "retry", Outcome: "canceled",
					Start: t0.Add(150 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Wait: 50 * time.Millisecond},
				{Endpoint: "claude-sonnet/eu-west/anthropic", Model: "claude-sonnet", Region: "eu-west", Kind: "hedge", Outcome: "ok", Winner: true,
					Start: t0.Add(450 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Bytes: 2048, Status: 200},
			}},
		Result: callrec.Result{Status: 200, Usage: llm.Usage{InputTokens: 100, CacheReadTokens: 30, CacheWriteTokens: 5, OutputTokens: 40}},
	}
}

func newRecorded(t *testing.T) (*Tracer, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	tr, err := New(context.Background(), Options{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	return tr, rec
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}

// The must-show: a hedged, retried call is one request span with its
// attempts as sibling children, in the client's trace.
func TestHedgedRetriedSpans(t *testing.T) {
	cases := []struct {
		name        string
		traceparent string
		wantTrace   string // "" = a new trace
		wantParent  string // the request span's parent span id, "" = root
	}{
		{"continues client traceparent", "00-" + clientTrace + "-" + clientSpan + "-01", clientTrace, clientSpan},
		{"no traceparent starts a trace", "", "", ""},
		{"malformed traceparent starts a trace", "00-zz-yy-01", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, rec := newRecorded(t)
			r := hedgedRetried(c.traceparent)
			tr.RequestDone(r)
			spans := rec.Ended()
			if len(spans) != 4 {
				t.Fatalf("got %d spans, want 4 (request + 3 attempts)", len(spans))
			}
			var root sdktrace.ReadOnlySpan
			var kids []sdktrace.ReadOnlySpan
			for _, s := range spans {
				if s.SpanKind() == trace.SpanKindServer {
					root = s
				} else {
					kids = append(kids, s)
				}
			}
			if root == nil {
				t.Fatal("no request (server) span")
			}
			tid := root.SpanContext().TraceID()
			if c.wantTrace != "" && tid.String() != c.wantTrace {
				t.Errorf("trace id %s, want the client's %s", tid, c.wantTrace)
			}
			if got := root.Parent().SpanID(); c.wantParent != "" && got.String() != c.wantParent {
				t.Errorf("request span parent %s, want the client's span %s", got, c.wantParent)
			} else if c.wantParent == "" && root.Parent().IsValid() {
				t.Errorf("request span has parent %s, want none", got)
			}
			if root.Name() != "chat claude-sonnet" {
				t.Errorf("request span name %q", root.Name())
			}
			if !root.StartTime().Equal(r.Start) || !root.EndTime().Equal(r.Start.Add(r.Duration)) {
				t.Errorf("request span %v–%v, want the record's %v–%v", root.StartTime(), root.EndTime(), r.Start, r.Start.Add(r.Duration))
			}
			wantKinds := []string{"primary", "retry", "hedge"}
			for i, k := range kids {
				a := r.Attempts[i]
				if k.Parent().SpanID() != root.SpanContext().SpanID() {
					t.Errorf("attempt %d parent %s, want the request span %s", i, k.Parent().SpanID(), root.SpanContext().SpanID())
				}
				if k.SpanContext().TraceID() != tid {
					t.Errorf("attempt %d in trace %s, want %s", i, k.SpanContext().TraceID(), tid)
				}
				if k.SpanKind() != trace.SpanKindClient {
					t.Errorf("attempt %d kind %v, want client", i, k.SpanKind())
				}
				at := attrs(k)
				if got := at["mesh.attempt.kind"].AsString(); got != wantKinds[i] {
					t.Errorf("attempt %d kind %q, want %q", i, got, wantKinds[i])
				}
				if got := at["mesh.attempt.outcome"].AsString(); got != a.Outcome {
					t.Errorf("attempt %d outcome %q, want %q", i, got, a.Outcome)
				}
				if !k.StartTime().Equal(a.Start) || !k.EndTime().Equal(a.End) {
					t.Errorf("attempt %d %v–%v, want %v–%v", i, k.StartTime(), k.EndTime(), a.Start, a.End)
				}
				wantErr := a.Outcome != "ok"
				if (k.Status().Code == codes.Error) != wantErr {
					t.Errorf("attempt %d status %v, want error=%v", i, k.Status(), wantErr)
				}
				if got := at["gen_ai.provider.name"].AsString(); got != "anthropic" {
					t.Errorf("attempt %d provider %q", i, got)
				}
			}
			ra := attrs(root)
			wantAttrs := map[attribute.Key]any{
				"gen_ai.operation.name":                    "chat",
				"gen_ai.provider.name":                     "anthropic",
				"gen_ai.request.model":                     "claude-sonnet",
				"gen_ai.response.model":                    "claude-sonnet",
				"gen_ai.usage.input_tokens":                int64(135), // cached tokens included
				"gen_ai.usage.output_tokens":               int64(40),
				"gen_ai.usage.cache_read.input_tokens":     int64(30),
				"gen_ai.usage.cache_creation.input_tokens": int64(5),
				"mesh.fallback.reason":                     "overloaded",
				"mesh.retries":                             int64(1),
				"mesh.hedges":                              int64(1),
				"mesh.hedge.won":                           true,
				"mesh.request_id":                          "req-1",
				"mesh.format":                              "responses",
			}
			for k, want := range wantAttrs {
				if got := ra[k].AsInterface(); got != want {
					t.Errorf("request span %s = %v, want %v", k, got, want)
				}
			}
			if got := attrs(kids[2])["gen_ai.usage.output_tokens"].AsInt64(); got != 40 {
				t.Errorf("winning attempt output tokens %d, want 40", got)
			}
		})
	}
}

func TestFailedCallSpan(t *testing.T) {
	tr, rec := newRecorded(t)
	tr.RequestDone(&callrec.Record{
		Call:   callrec.Call{RequestID: "req-2", Start: t0, Duration: time.Second, Model: "claude-sonnet"},
		Route:  callrec.Route{Attempts: []callrec.Attempt{{Endpoint: "claude-sonnet/us-east/anthropic", Kind: "primary", Outcome: "timeout", Start: t0}}},
		Result: callrec.Result{Status: 504, Err: &llm.APIError{Status: 504, MeshCode: llm.MeshTimeout, Message: "deadline passed"}},
	})
	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2", len(spans))
	}
	for _, s := range spans {
		if s.Status().Code != codes.Error {
			t.Errorf("span %s status %v, want error", s.Name(), s.Status())
		}
		if s.SpanKind() == trace.SpanKindServer {
			if got := attrs(s)["error.type"].AsString(); got != llm.MeshTimeout {
				t.Errorf("error.type %q, want %q", got, llm.MeshTimeout)
			}
		} else if !s.EndTime().Equal(t0.Add(time.Second)) {
			t.Errorf("unfinished attempt ends at %v, want the call's end", s.EndTime())
		}
	}
}

func TestDisabledByDefault(t *testing.T) {
	tr, err := New(context.Background(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Enabled() {
		t.Error("a Tracer without an endpoint is enabled")
	}
	tr.RequestDone(hedgedRetried(""))
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if _, err := New(context.Background(), Options{OTLPEndpoint: "collector:4318"}); err == nil {
		t.Error("New accepted an endpoint without a scheme")
	}
}

// With an OTLP endpoint, spans reach the collector over HTTP by Shutdown,
// as an ExportTraceServiceRequest a collector decodes: the service name,
// the request span in the client's trace and its three attempt spans.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var got []*tracepb.ResourceSpans
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" ||
			r.Header.Get("X-Token") != "secret" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, req.ResourceSpans...)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	tr, err := New(context.Background(), Options{OTLPEndpoint: srv.URL + "/v1/traces", Headers: map[string]string{"X-Token": "secret"}, ServiceName: "keel-test"})
	if err != nil {
		t.Fatal(err)
	}
	tr.RequestDone(hedgedRetried("00-" + clientTrace + "-" + clientSpan + "-01"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()

	mu.Lock()
	defer mu.Unlock()
	var names []string
	for _, rs := range got {
		if svc := rs.GetResource().GetAttributes(); len(svc) != 1 || svc[0].GetKey() != "service.name" || svc[0].GetValue().GetStringValue() != "keel-test" {
			t.Errorf("resource attributes %v, want service.name keel-test", svc)
		}
		for _, ss := range rs.GetScopeSpans() {
			if ss.GetScope().GetName() != InstrumentationName {
				t.Errorf("scope %q", ss.GetScope().GetName())
			}
			for _, sp := range ss.GetSpans() {
				names = append(names, sp.GetName())
				if hex.EncodeToString(sp.GetTraceId()) != clientTrace {
					t.Errorf("span %q in trace %x, want the client's %s", sp.GetName(), sp.GetTraceId(), clientTrace)
				}
			}
		}
	}
	slices.Sort(names)
	if want := []string{"chat claude-sonnet", "chat claude-sonnet", "chat claude-sonnet", "chat claude-sonnet"}; !slices.Equal(names, want) {
		t.Errorf("exported spans %q, want %q (the request and its three attempts)", names, want)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// collectorAnswering is a collector (an in-memory transport, so the test
// runs in a synctest bubble) answering the given statuses in turn (the last
// one ever after), with a Retry-After of after seconds on failures when
// after is set; it records when each export arrived.
func collectorAnswering(cl *otlpClient, after string, statuses ...int) *[]time.Time {
	var at []time.Time
	cl.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		r.Body.Close()
		st := statuses[min(len(at), len(statuses)-1)]
		at = append(at, time.Now())
		h := http.Header{}
		if after != "" && st != http.StatusOK {
			h.Set("Retry-After", after)
		}
		return &http.Response{StatusCode: st, Status: fmt.Sprintf("%d %s", st, http.StatusText(st)), Header: h,
			Body: io.NopCloser(strings.NewReader("no")), Request: r}, nil
	})
	return &at
}

// The exporter retries what otlptracehttp retries (429, 502, 503, 504) on
// its schedule — waits of 5s, then ×1.5 up to 30s, each jittered by ±50 %,
// for at most a minute — or after the collector's Retry-After, and gives
// up at once on any other status, with the collector's message in the
// error.
func TestOTLPClientRetries(t *testing.T) {
	cases := []struct {
		name     string
		statuses []int
		after    string
		posts    int    // 0: as many as the minute allows
		errPart  string // "": success
	}{
		{name: "ok", statuses: []int{200}, posts: 1},
		{name: "503 then ok", statuses: []int{503, 200}, posts: 2},
		{name: "429 with retry-after then ok", statuses: []int{429, 429, 200}, after: "2", posts: 3},
		{name: "502 504 then ok", statuses: []int{502, 504, 200}, posts: 3},
		{name: "400 is final", statuses: []int{400}, posts: 1, errPart: "400 Bad Request (body: no)"},
		{name: "retries run out", statuses: []int{503}, errPart: "giving up"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cl := newOTLPClient("http://collector.test/v1/traces", nil)
				at := collectorAnswering(cl, c.after, c.statuses...)
				start := time.Now()
				err := cl.UploadTraces(context.Background(), []*tracepb.ResourceSpans{{}})
				cl.Stop(context.Background())
				switch {
				case c.errPart == "" && err != nil:
					t.Errorf("UploadTraces: %v", err)
				case c.errPart != "" && (err == nil || !strings.Contains(err.Error(), c.errPart)):
					t.Errorf("UploadTraces: %v, want an error with %q", err, c.errPart)
				}
				if c.posts != 0 && len(*at) != c.posts {
					t.Errorf("%d posts, want %d", len(*at), c.posts)
				}
				if took := time.Since(start); took > time.Minute {
					t.Errorf("retried for %s, over a minute", took)
				}
				prev, wait := start, 5*time.Second
				for i, a := range *at {
					gap := a.Sub(prev)
					prev = a
					switch {
					case i == 0:
						if gap != 0 {
							t.Errorf("first post after %s", gap)
						}
						continue
					case c.after != "":
						if gap != 2*time.Second {
							t.Errorf("post %d %s after the last, want the Retry-After's 2s", i, gap)
						}
					case gap < wait/2 || gap >= wait*3/2:
						t.Errorf("post %d %s after the last, want [%s, %s)", i, gap, wait/2, wait*3/2)
					}
					wait = min(wait*3/2, 30*time.Second)
				}
				if c.posts == 0 && len(*at) < 4 {
					t.Errorf("only %d posts in the minute", len(*at))
				}
			})
		})
	}
}

// Stop cancels an upload that is waiting to retry.
func TestOTLPClientStopCancels(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cl := newOTLPClient("http://collector.test/v1/traces", nil)
		collectorAnswering(cl, "", http.StatusServiceUnavailable)
		time.AfterFunc(50*time.Millisecond, func() { cl.Stop(context.Background()) })
		start := time.Now()
		err := cl.UploadTraces(context.Background(), []*tracepb.ResourceSpans{{}})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("UploadTraces after Stop: %v, want context.Canceled", err)
		}
		if took := time.Since(start); took != 50*time.Millisecond {
			t.Errorf("UploadTraces returned %s after the start, want 50ms (at Stop)", took)
		}
	})
}

func BenchmarkRequestDone(b *testing.B) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(context.Background())
	// A processor that keeps spans would grow without bound; drop them.
	tp.UnregisterSpanProcessor(rec)
	tr, _ := New(context.Background(), Options{TracerProvider: tp})
	r := hedgedRetried("00-" + clientTrace + "-" + clientSpan + "-01")
	b.ReportAllocs()
	for b.Loop() {
		tr.RequestDone(r)
	}
}

func BenchmarkRequestDoneDisabled(b *testing.B) {
	tr, _ := New(context.Background(), Options{})
	r := hedgedRetried("")
	b.ReportAllocs()
	for b.Loop() {
		tr.RequestDone(r)
	}
}
