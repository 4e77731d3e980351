package sim

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// A slow_stream fault keeps the endpoint's pace for AfterTokens tokens,
// then sends each token Factor times later (10 by default), and the
// answer is the same, complete and cleanly ended, in both wire formats.
func TestSlowStreamFault(t *testing.T) {
	for _, format := range []Format{FormatAnthropic, FormatOpenAI} {
		for _, factor := range []float64{0, 4} {
			name := map[Format]string{FormatAnthropic: "anthropic", FormatOpenAI: "openai"}[format] + map[float64]string{0: "/default factor", 4: "/factor 4"}[factor]
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := ZeroLatency()
					for i := range cfg.Regions {
						cfg.Regions[i].Latency = LatencySpec{PerToken: Duration(5 * time.Millisecond)}
					}
					f, err := New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					c := &http.Client{Transport: f.Transport()}
					read := func() (string, []time.Duration, llm.StopReason) {
						path := "/v1/messages"
						if format == FormatOpenAI {
							path = "/v1/chat/completions"
						}
						req, _ := http.NewRequestWithContext(context.Background(), "POST", "http://"+TransportHost+path, strings.NewReader(chatBody(format, "sim-opus", "a slow answer please", true, "")))
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("anthropic-version", "2023-06-01")
						resp, err := c.Do(req)
						if err != nil {
							t.Fatal(err)
						}
						defer resp.Body.Close()
						er := newEventReader(format, resp.Body)
						var text strings.Builder
						var gaps []time.Duration
						var stop llm.StopReason
						last := time.Now()
						for {
							ev, err := er.Next()
							if err == io.EOF {
								break
							}
							if err != nil {
								t.Fatal(err)
							}
							if ev.Type == llm.EventBlockDelta && ev.Delta != "" {
								gaps = append(gaps, time.Since(last))
								last = time.Now()
								text.WriteString(ev.Delta)
							}
							if ev.StopReason != "" {
								stop = ev.StopReason
							}
						}
						return text.String(), gaps, stop
					}
					clean, cleanGaps, cleanStop := read()
					if len(cleanGaps) < 10 {
						t.Fatalf("answer of %d tokens, want a longer one", len(cleanGaps))
					}
					f.SetFaults([]Fault{{Kind: KindSlowStream, AfterTokens: 6, Factor: factor, Count: 1}})
					slow, gaps, stop := read()
					if slow != clean || stop != cleanStop {
						t.Errorf("slow answer %q (%s), want the clean %q (%s)", slow, stop, clean, cleanStop)
					}
					want := 10.0
					if factor != 0 {
						want = factor
					}
					for i, g := range gaps {
						w := 5 * time.Millisecond
						if i >= 6 { // the first six at the normal pace
							w = time.Duration(want * float64(5*time.Millisecond))
						}
						if i > 0 && g != w {
							t.Errorf("gap before token %d: %v, want %v", i, g, w)
						}
					}
				})
			})
		}
	}
}
