package provider

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

// BenchmarkUpstreamClient is the A/B of the lean HTTP/1.1 client against
// net/http's Transport (tuned as NewTransport tunes it) on the same
// loopback server and load: 32 callers in parallel, a small JSON answer
// (non-streaming) or a 20-event SSE stream. cpu-µs/op is the process's
// CPU (user + system, both the client and the shared server) per call;
// the server's share is the same in both arms, so the difference is the
// client's. The bar for keeping the lean client: ≥ 10 % less CPU
// per call.
func BenchmarkUpstreamClient(b *testing.B) {
	answer := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"` + strings.Repeat("word ", 40) +
		`"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":40}}`
	var events strings.Builder
	for i := range 20 {
		events.WriteString("event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"w")
		events.WriteString(strings.Repeat("x", i%7))
		events.WriteString("\"}}\n\n")
	}
	stream := events.String()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/stream") {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer)
	}))
	defer srv.Close()
	body := `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":"` + strings.Repeat("q", 200) + `"}]}`
	clients := map[string]func() (http.RoundTripper, func()){
		"lean": func() (http.RoundTripper, func()) {
			d := &net.Dialer{Timeout: 5 * time.Second}
			t := &H1Transport{Fallback: http.DefaultTransport, Dial: d.DialContext, MaxIdlePerHost: 1024, IdleTimeout: 90 * time.Second, TrustIdle: time.Second}
			return t, t.CloseIdleConnections
		},
		"std": func() (http.RoundTripper, func()) {
			t := NewTransport(TransportOptions{})
			return t, t.CloseIdleConnections
		},
	}
	for _, path := range []string{"/v1/messages", "/stream"} {
		for _, name := range []string{"lean", "std"} {
			b.Run(strings.TrimPrefix(path, "/")+"/"+name, func(b *testing.B) {
				rt, closeIdle := clients[name]()
				defer closeIdle()
				url := srv.URL + path
				b.SetParallelism(16) // 32 callers on 2 cores
				b.ReportAllocs()
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
						req.Header.Set("Content-Type", "application/json")
						resp, err := rt.RoundTrip(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				cpu := time.Duration(ru1.Utime.Nano()-ru0.Utime.Nano()) + time.Duration(ru1.Stime.Nano()-ru0.Stime.Nano())
				b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
			})
		}
	}
}
