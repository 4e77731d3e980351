package sim

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkFleetNonStream measures one non-streaming Messages call through
// Transport with no simulated latency: the fleet's own overhead.
func BenchmarkFleetNonStream(b *testing.B) {
	f, err := New(ZeroLatency())
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: f.Transport()}
	body := chatBody(FormatAnthropic, "sim-sonnet", "benchmark me please", false, "")
	url := f.BaseURL("us-east", FormatAnthropic) + "/v1/messages"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		req.Header.Set("Anthropic-Version", "2026-10-21")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("status %d", resp.StatusCode)
		}
	}
}

// BenchmarkFleetStream measures one streamed Chat Completions call through
// Transport with no simulated latency.
func BenchmarkFleetStream(b *testing.B) {
	f, err := New(ZeroLatency())
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: f.Transport()}
	body := chatBody(FormatOpenAI, "sim-sonnet", "benchmark me please", true, "")
	url := f.BaseURL("us-east", FormatOpenAI) + "/chat/completions"
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

func BenchmarkAnswer(b *testing.B) {
	cfg := DefaultConfig()
	req := userReq("sim-opus", "a question of modest length for the benchmark")
	b.ReportAllocs()
	for b.Loop() {
		Answer(cfg, req)
	}
}

// discardWriter is a reusable http.ResponseWriter and http.Flusher that
// keeps only the status and the body's length.
type discardWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *discardWriter) Header() http.Header { return w.h }
func (w *discardWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
}
func (w *discardWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.n += len(p)
	return len(p), nil
}
func (w *discardWriter) Flush() {}

// BenchmarkServeAPI measures the fleet's handler alone on the request keel
// bench sends, with no simulated latency: what a zero-latency simulator
// costs per call on top of net/http.
func BenchmarkServeAPI(b *testing.B) {
	const prompt = `Summarise the operational risks of this deployment plan. (request 12345)`
	for _, tc := range []struct {
		name   string
		format Format
		stream bool
	}{
		{"anthropic", FormatAnthropic, false},
		{"openai", FormatOpenAI, false},
		{"anthropic-stream", FormatAnthropic, true},
		{"openai-stream", FormatOpenAI, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f, err := New(ZeroLatency())
			if err != nil {
				b.Fatal(err)
			}
			body := []byte(`{"model":"sim-sonnet","max_tokens":16,"messages":[{"role":"user","content":"` + prompt + `"}]`)
			if tc.stream {
				body = append(body, `,"stream":true`...)
				if tc.format == FormatOpenAI {
					body = append(body, `,"stream_options":{"include_usage":true}`...)
				}
			}
			body = append(body, '}')
			br := bytes.NewReader(body)
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7879"+apiPath(tc.format), br)
			req.Header.Set("Content-Type", "application/json")
			if tc.format == FormatAnthropic {
				req.Header.Set("Anthropic-Version", "2023-06-01")
			}
			h := f.Handler()
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				br.Reset(body)
				clear(w.h)
				w.status, w.n = 0, 0
				h.ServeHTTP(w, req)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}
