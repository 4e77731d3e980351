package tracing

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/engine"
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
func hedgedRetried(traceparent string) *engine.Record {
	return &engine.Record{
		RequestID: "req-1", Start: t0, Duration: 900 * time.Millisecond, Model: "claude-sonnet", Domain: "finance",
		ServedBy: "claude-sonnet/eu-west/anthropic", ServedModel: "claude-sonnet", ServedRegion: "eu-west", ServedProvider: "anthropic",
		Fallback: "overloaded", Retries: 1, Hedges: 1, HedgeWon: true, QueueWait: 50 * time.Millisecond, Status: 200,
		Usage:       llm.Usage{InputTokens: 100, CacheReadTokens: 30, CacheWriteTokens: 5, OutputTokens: 40},
		TraceParent: traceparent,
		Attempts: []engine.Attempt{
			{Endpoint: "claude-sonnet/us-east/anthropic", Model: "claude-sonnet", Region: "us-east", Kind: "primary", Outcome: "overloaded", Status: 529,
				Start: t0, End: t0.Add(100 * time.Millisecond)},
			{Endpoint: "claude-sonnet/us-west/anthropic", Model: "claude-sonnet", Region: "us-west", Kind: "retry", Outcome: "canceled",
				Start: t0.Add(150 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Wait: 50 * time.Millisecond},
			{Endpoint: "claude-sonnet/eu-west/anthropic", Model: "claude-sonnet", Region: "eu-west", Kind: "hedge", Outcome: "ok", Winner: true,
				Start: t0.Add(450 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Bytes: 2048, Status: 200},
		},
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
	tr.RequestDone(&engine.Record{RequestID: "req-2", Start: t0, Duration: time.Second, Model: "claude-sonnet", Status: 504,
		Err:      &llm.APIError{Status: 504, MeshCode: llm.MeshTimeout, Message: "deadline passed"},
		Attempts: []engine.Attempt{{Endpoint: "claude-sonnet/us-east/anthropic", Kind: "primary", Outcome: "timeout", Start: t0}}})
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

// With an OTLP endpoint, spans reach the collector over HTTP by Shutdown.
func TestOTLPExport(t *testing.T) {
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method == http.MethodPost && r.URL.Path == "/v1/traces" && r.Header.Get("Content-Type") == "application/x-protobuf" &&
			r.Header.Get("X-Token") == "secret" && len(body) > 0 {
			posts.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	tr, err := New(context.Background(), Options{OTLPEndpoint: srv.URL + "/v1/traces", Headers: map[string]string{"X-Token": "secret"}})
	if err != nil {
		t.Fatal(err)
	}
	tr.RequestDone(hedgedRetried("00-" + clientTrace + "-" + clientSpan + "-01"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if posts.Load() == 0 {
		t.Error("no OTLP export reached the collector")
	}
	srv.CloseClientConnections()
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
