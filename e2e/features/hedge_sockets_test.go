package features_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// TestHedgeOverRealSockets runs the inline attempt and its hedge through
// Keel's own upstream client on real sockets: a primary that never answers
// loses to the hedge (streaming or not), and its connection is closed, so
// the simulator sees the abandoned call end instead of holding it.
func TestHedgeOverRealSockets(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency(), func(c *config.Config) {
		c.Resilience.Hedge.Ceiling = 50 * time.Millisecond
		c.Aliases = []config.Alias{{Name: "primary-east", Models: []string{"sim-sonnet"}, Strategy: "ordered"}}
	})
	if err := e.fleet.SetFaults([]sim.Fault{{Kind: sim.KindHang, Model: "sim-sonnet", Region: "us-east"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, extra string }{{"whole", ""}, {"stream", `,"stream":true`}} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			resp, body := e.post(t, "/v1/messages", msgBody("primary-east", "hello "+tc.name, tc.extra), "anthropic-version", "2023-06-01", "X-Mesh-Timeout", "3s")
			took := time.Since(start)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("X-Mesh-Hedged"); got != "won" {
				t.Fatalf("X-Mesh-Hedged = %q, want won (region %s)", got, resp.Header.Get("X-Mesh-Region"))
			}
			if r := resp.Header.Get("X-Mesh-Region"); r == "us-east" {
				t.Fatalf("served by the hung region")
			}
			if tc.extra != "" && !strings.Contains(string(body), "message_stop") {
				t.Fatalf("stream not complete: %s", body)
			}
			if took > 2*time.Second {
				t.Fatalf("took %v: the hedge did not win against a primary that never answers", took)
			}
		})
	}
	// The losers' connections were closed: the simulator's hung handlers
	// end (bounded wait for the close to travel, not a sleep-and-hope).
	deadline := time.Now().Add(10 * time.Second)
	for e.fleet.InFlight() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the simulator still holds %d calls: an abandoned attempt's connection was not closed", e.fleet.InFlight())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
