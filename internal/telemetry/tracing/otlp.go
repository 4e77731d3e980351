package tracing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

// otlpClient is the otlptrace.Client Keel exports spans with: OTLP/HTTP
// with the binary protobuf encoding (the OTLP specification's
// "OTLP/HTTP", POST to the configured traces URL), behaving as
// otlptracehttp's client does by default: a 10s timeout per request; 429,
// 502, 503, 504 and temporary network errors retried with exponential
// backoff (5s, ×1.5, at most 30s apart, jittered) or after the collector's
// Retry-After, for at most a minute; any other status an error carrying the
// start of the collector's answer. It is Keel's own because otlptracehttp's
// configuration package imports gRPC, and gRPC imports
// golang.org/x/net/trace, whose html/template turns off the linker's
// removal of unused methods for the whole binary (BENCHMARKS.md, session 5).
// OTEL_EXPORTER_OTLP_* environment variables are not read: the endpoint and
// headers come from Keel's config.
//
// It is safe for concurrent use (the batch span processor calls it from
// one goroutine); Stop cancels an upload in flight.
type otlpClient struct {
	url     string
	headers map[string]string
	http    *http.Client

	stopped context.Context
	stop    context.CancelFunc
}

// The retry schedule, otlptracehttp's default: the first wait, the longest
// one, and the most time spent retrying one upload.
const (
	retryFirst = 5 * time.Second
	retryMax   = 30 * time.Second
	retryFor   = time.Minute
)

func newOTLPClient(url string, headers map[string]string) *otlpClient {
	stopped, stop := context.WithCancel(context.Background())
	return &otlpClient{url: url, headers: headers,
		http:    &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone(), Timeout: 10 * time.Second},
		stopped: stopped, stop: stop}
}

// Start does nothing: connections are made per upload.
func (c *otlpClient) Start(context.Context) error { return nil }

// Stop cancels an upload in flight and closes idle connections.
func (c *otlpClient) Stop(context.Context) error {
	c.stop()
	c.http.CloseIdleConnections()
	return nil
}

// UploadTraces posts one ExportTraceServiceRequest holding spans.
func (c *otlpClient) UploadTraces(ctx context.Context, spans []*tracepb.ResourceSpans) error {
	body, err := exportRequest(spans)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(c.stopped, cancel)()

	start := time.Now()
	wait := retryFirst
	for {
		retryAfter, err := c.post(ctx, body)
		var rerr *retryableError
		if !errors.As(err, &rerr) {
			return err
		}
		// ±50 % around the backoff step, as otlptracehttp's (randomization
		// factor 0.5); the collector's Retry-After wins.
		d := wait/2 + rand.N(wait)
		if retryAfter > 0 {
			d = retryAfter
		}
		if time.Since(start)+d > retryFor {
			return fmt.Errorf("tracing: giving up after %s: %w", time.Since(start).Round(time.Millisecond), err)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("tracing: %w (last: %w)", ctx.Err(), err)
		case <-t.C:
		}
		wait = min(wait*3/2, retryMax)
	}
}

// retryableError is a failed upload worth sending again.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() + " (retryable)" }
func (e *retryableError) Unwrap() error { return e.err }

// post sends body once. A failure worth retrying is a *retryableError,
// with the collector's Retry-After when it gave one.
func (c *otlpClient) post(ctx context.Context, body []byte) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("tracing: %w", err)
	}
	for k, v := range c.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("User-Agent", "keel")
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			if ue, ok := errors.AsType[*url.Error](err); ok && ue.Temporary() {
				return 0, &retryableError{fmt.Errorf("tracing: exporting spans: %w", err)}
			}
		}
		return 0, fmt.Errorf("tracing: exporting spans: %w", err)
	}
	defer resp.Body.Close()
	// The answer is read to its end, within a bound, so the connection can
	// be reused; a partial-success message in a 2xx answer is not looked at.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return 0, nil
	}
	text := strings.TrimSpace(string(msg))
	if text == "" {
		text = "(empty)"
	}
	err = fmt.Errorf("tracing: exporting spans to %s: %s (body: %s)", c.url, resp.Status, text)
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		var after time.Duration
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			after = time.Duration(s) * time.Second
		}
		return after, &retryableError{err}
	}
	return 0, err
}

// exportRequest encodes an opentelemetry.proto.collector.trace.v1
// ExportTraceServiceRequest, whose one field is resource_spans = 1, by
// hand: the generated type's package registers the gRPC service too.
func exportRequest(spans []*tracepb.ResourceSpans) ([]byte, error) {
	var b []byte
	for _, rs := range spans {
		m, err := proto.Marshal(rs)
		if err != nil {
			return nil, fmt.Errorf("tracing: encoding spans: %w", err)
		}
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	return b, nil
}
