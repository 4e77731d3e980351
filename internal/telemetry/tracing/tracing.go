// Package tracing turns each finished call into OpenTelemetry spans: one
// span for the client's request and one child span per upstream attempt
// (retries, hedges, fallbacks and continuations are siblings under it), all
// built after the call from the callrec.Record's timestamps, with the GenAI
// semantic-convention attributes (internal/telemetry/semconv) and Keel's own
// mesh.* attributes. A client's W3C traceparent is continued: the request
// span is its child and shares its trace id.
//
// Spans go to an OTLP/HTTP exporter (protobuf, otlp.go) when one is
// configured, and nowhere by default: a Tracer built without an endpoint is
// disabled and RequestDone returns at once.
//
// A *Tracer is an callrec.Observer, safe for concurrent use. RequestDone
// never blocks on the network: the exporter batches spans on its own
// goroutine (a full queue drops spans). Shutdown flushes and stops it.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/telemetry/semconv"
)

// InstrumentationName names the tracer that creates Keel's spans.
const InstrumentationName = "github.com/keelmesh/keel"

// Options configure New. The zero value is a disabled Tracer.
type Options struct {
	// OTLPEndpoint is the OTLP/HTTP traces URL, for example
	// http://localhost:4318/v1/traces; empty means no exporter.
	OTLPEndpoint string
	// Headers are sent with every export (for example an auth header).
	Headers map[string]string
	// ServiceName is the service.name resource attribute (default "keel").
	ServiceName string
	// ProviderNames maps a config provider name to its gen_ai.provider.name
	// ("anthropic", "openai"); a provider missing here is reported under
	// its config name.
	ProviderNames map[string]string
	// TracerProvider, when set, is used instead of an OTLP pipeline (tests
	// pass one over tracetest.SpanRecorder). Shutdown leaves it running.
	TracerProvider trace.TracerProvider
}

// Tracer is the tracing observer. See the package doc for its concurrency
// rules.
type Tracer struct {
	tracer        trace.Tracer // nil when disabled
	sdk           *sdktrace.TracerProvider
	providerNames map[string]string
	cacheWrite    string
}

// New builds a Tracer. With an OTLPEndpoint it starts the exporter's
// batching goroutine; call Shutdown to flush and stop it.
func New(ctx context.Context, o Options) (*Tracer, error) {
	t := &Tracer{providerNames: o.ProviderNames, cacheWrite: semconv.Current().CacheWriteAttr}
	switch {
	case o.TracerProvider != nil:
		t.tracer = o.TracerProvider.Tracer(InstrumentationName)
	case o.OTLPEndpoint != "":
		if !strings.HasPrefix(o.OTLPEndpoint, "http://") && !strings.HasPrefix(o.OTLPEndpoint, "https://") {
			return nil, fmt.Errorf("tracing: otlp endpoint %q: want an http:// or https:// URL", o.OTLPEndpoint)
		}
		exp, err := otlptrace.New(ctx, newOTLPClient(o.OTLPEndpoint, o.Headers))
		if err != nil {
			return nil, fmt.Errorf("tracing: creating otlp exporter: %w", err)
		}
		name := o.ServiceName
		if name == "" {
			name = "keel"
		}
		t.sdk = sdktrace.NewTracerProvider(
			sdktrace.WithBatcher(exp),
			sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", name))),
		)
		t.tracer = t.sdk.Tracer(InstrumentationName)
	}
	return t, nil
}

// Enabled reports whether spans are recorded.
func (t *Tracer) Enabled() bool { return t.tracer != nil }

// Shutdown flushes pending spans and stops the exporter it started. It is
// a no-op for a disabled Tracer or an injected TracerProvider.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("tracing: shutting down: %w", err)
	}
	return nil
}

// RequestDone records r's spans. It returns at once when disabled.
func (t *Tracer) RequestDone(r *callrec.Record) {
	if t.tracer == nil {
		return
	}
	ctx := context.Background()
	if r.TraceParent != "" {
		ctx = propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": r.TraceParent})
	}
	end := r.Start.Add(r.Duration)
	attrs := []attribute.KeyValue{
		attribute.String(semconv.AttrOperationName, semconv.OperationChat),
		attribute.String(semconv.AttrRequestModel, r.Model),
		attribute.Bool(semconv.AttrRequestStream, r.Stream),
		attribute.String(semconv.AttrMeshRequestID, r.RequestID),
		attribute.String(semconv.AttrMeshFormat, r.Format.String()),
		attribute.Int(semconv.AttrMeshAttempts, len(r.Attempts)),
		attribute.Int(semconv.AttrMeshRetries, r.Retries),
		attribute.Int(semconv.AttrMeshHedges, r.Hedges),
		attribute.Bool(semconv.AttrMeshHedgeWon, r.HedgeWon),
		attribute.Float64(semconv.AttrMeshQueueWait, r.QueueWait.Seconds()),
	}
	if r.Status != 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrHTTPStatusCode, r.Status))
	}
	if r.Domain != "" {
		attrs = append(attrs, attribute.String(semconv.AttrMeshDomain, r.Domain))
	}
	if r.Fallback != "" {
		attrs = append(attrs, attribute.String(semconv.AttrMeshFallback, r.Fallback))
	}
	if r.ModelFallback {
		attrs = append(attrs, attribute.Bool(semconv.AttrMeshModelFallback, true))
	}
	if r.Legacy {
		attrs = append(attrs, attribute.Bool(semconv.AttrMeshLegacy, true))
	}
	if r.Recovered > 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrMeshRecovered, r.Recovered))
	}
	if n := r.Normalization; n != nil && n.Offset != 0 {
		attrs = append(attrs, attribute.Float64(semconv.AttrMeshNormOffset, n.Offset))
	}
	if r.TTFT > 0 {
		attrs = append(attrs, attribute.Float64(semconv.AttrResponseTimeToFirstChunk, r.TTFT.Seconds()))
	}
	if r.Err == nil {
		attrs = append(attrs,
			attribute.String(semconv.AttrProviderName, t.providerName(r.ServedProvider)),
			attribute.String(semconv.AttrResponseModel, r.ServedModel),
			attribute.String(semconv.AttrMeshEndpoint, r.ServedBy),
			attribute.String(semconv.AttrMeshRegion, r.ServedRegion))
		attrs = t.usage(attrs, r)
	}
	ctx, span := t.tracer.Start(ctx, semconv.OperationChat+" "+r.Model,
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(r.Start), trace.WithAttributes(attrs...))
	if r.Err != nil {
		span.SetAttributes(attribute.String(semconv.AttrErrorType, errorType(r)))
		span.SetStatus(codes.Error, r.Err.Message)
	}
	for i := range r.Attempts {
		t.attempt(ctx, r, &r.Attempts[i], end)
	}
	span.End(trace.WithTimestamp(end))
}

// attempt records one upstream attempt as a CLIENT child span.
func (t *Tracer) attempt(ctx context.Context, r *callrec.Record, a *callrec.Attempt, callEnd time.Time) {
	attrs := []attribute.KeyValue{
		attribute.String(semconv.AttrOperationName, semconv.OperationChat),
		attribute.String(semconv.AttrProviderName, t.providerName(providerOf(a.Endpoint))),
		attribute.String(semconv.AttrRequestModel, a.Model),
		attribute.Bool(semconv.AttrRequestStream, r.Stream),
		attribute.String(semconv.AttrMeshEndpoint, a.Endpoint),
		attribute.String(semconv.AttrMeshRegion, a.Region),
		attribute.String(semconv.AttrMeshAttemptKind, a.Kind),
		attribute.String(semconv.AttrMeshAttemptOutcome, a.Outcome),
		attribute.Bool(semconv.AttrMeshAttemptWinner, a.Winner),
	}
	if a.Wait > 0 {
		attrs = append(attrs, attribute.Float64(semconv.AttrMeshAttemptWait, a.Wait.Seconds()))
	}
	if a.Bytes > 0 {
		attrs = append(attrs, attribute.Int64(semconv.AttrMeshAttemptBytes, a.Bytes))
	}
	if a.Status != 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrHTTPStatusCode, a.Status))
	}
	if a.Winner && r.Err == nil {
		attrs = append(attrs, attribute.String(semconv.AttrResponseModel, r.ServedModel))
		attrs = t.usage(attrs, r)
	}
	start, end := a.Start, a.End
	if start.IsZero() {
		start = r.Start
	}
	if end.IsZero() || end.Before(start) {
		end = callEnd // the call ended before this attempt reported back
	}
	_, span := t.tracer.Start(ctx, semconv.OperationChat+" "+a.Model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(start), trace.WithAttributes(attrs...))
	if a.Outcome != "ok" && a.Outcome != "" {
		span.SetAttributes(attribute.String(semconv.AttrErrorType, a.Outcome))
		span.SetStatus(codes.Error, a.Outcome)
	}
	span.End(trace.WithTimestamp(end))
}

// usage appends the winner's token counts. gen_ai.usage.input_tokens
// includes cached tokens (PROTOCOLS §4.1).
func (t *Tracer) usage(attrs []attribute.KeyValue, r *callrec.Record) []attribute.KeyValue {
	u := r.Usage
	attrs = append(attrs,
		attribute.Int(semconv.AttrUsageInputTokens, u.PromptTokens()),
		attribute.Int(semconv.AttrUsageOutputTokens, u.OutputTokens))
	if u.CacheReadTokens > 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrUsageCacheRead, u.CacheReadTokens))
	}
	if u.CacheWriteTokens > 0 {
		attrs = append(attrs, attribute.Int(t.cacheWrite, u.CacheWriteTokens))
	}
	if u.ReasoningTokens > 0 {
		attrs = append(attrs, attribute.Int(semconv.AttrUsageReasoningOutput, u.ReasoningTokens))
	}
	return attrs
}

func (t *Tracer) providerName(p string) string {
	if n, ok := t.providerNames[p]; ok {
		return n
	}
	if p == "" {
		return semconv.ErrorTypeOther
	}
	return p
}

// providerOf reads the provider from an endpoint id, which the config
// spells model/region/provider.
func providerOf(endpoint string) string {
	if i := strings.LastIndexByte(endpoint, '/'); i >= 0 {
		return endpoint[i+1:]
	}
	return ""
}

// errorType is error.type for a failed call: the mesh code when Keel
// decided the outcome, else the upstream's error type, else its status.
func errorType(r *callrec.Record) string {
	switch e := r.Err; {
	case e.MeshCode != "":
		return e.MeshCode
	case e.Type != "":
		return string(e.Type)
	case e.Status != 0:
		return fmt.Sprint(e.Status)
	}
	return semconv.ErrorTypeOther
}
