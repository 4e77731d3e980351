package keel_test

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// The embedded transport under virtual time: a client that cancels
// mid-stream frees the simulator's slot at once, with no goroutine left.
func TestEmbeddedCancelMidStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := sim.DefaultConfig()
		for i := range cfg.Regions {
			cfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(50 * time.Millisecond), PerToken: sim.Duration(time.Second)}
		}
		fleet, err := sim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		m, err := keel.New(simfleet.Config(fleet, "http://sim.invalid"), keel.WithUpstream(fleet.Transport()))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "POST", "https://api.anthropic.com/v1/messages",
			strings.NewReader(`{"model":"sim-opus","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"Hello"}]}`))
		req.Header.Set("anthropic-version", "2023-06-01")
		start := time.Now()
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		// The mesh commits to a stream at its first content event: the
		// simulator's message_start after the 50ms TTFT, then one token per second.
		const firstContent = 50*time.Millisecond + time.Second
		if got := time.Since(start); got != firstContent {
			t.Errorf("headers after %v, want exactly %v", got, firstContent)
		}
		br := bufio.NewReader(resp.Body)
		if line, _ := br.ReadString('\n'); line != "event: message_start\n" {
			t.Fatalf("first line %q", line)
		}
		if n := fleet.InFlight(); n != 1 {
			t.Fatalf("in flight %d, want 1", n)
		}
		cancel()
		resp.Body.Close()
		synctest.Wait()
		if n := fleet.InFlight(); n != 0 {
			t.Fatalf("in flight %d after cancel, want 0", n)
		}
		if got := time.Since(start); got != firstContent {
			t.Errorf("cancellation took virtual time: %v after the first content", got-firstContent)
		}
	})
}
