package sim

import (
	"context"
	"io"
	"net/http"
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
