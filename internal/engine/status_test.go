package engine

import (
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/fleet"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/resilience"
)

// Issue 13, seen 6: the dashboard showed an unreachable region's endpoint
// as healthy (EndpointStatus had only the breaker and the tracker's
// ejected/cooling flags, and connect failures mark an endpoint down
// without touching either). Endpoints() now reports State from the view the
// picker reads.
func TestEndpointStatusState(t *testing.T) {
	cases := []struct {
		name  string
		reply reply
		// refused: the transport refuses connections during the calls; it
		// accepts them (and the prober's GET) afterwards.
		refused bool
		calls   int
		wait    time.Duration // virtual time after the calls
		state   string
		breaker string
	}{
		{name: "answers", reply: anthropicJSON("ok"), calls: 1, state: fleet.StateHealthy, breaker: "closed"},
		{name: "connection refused", refused: true, calls: 1, state: fleet.StateDown, breaker: "closed"},
		{name: "back after a probe", refused: true, calls: 1, wait: firstProbe, state: fleet.StateHealthy, breaker: "closed"},
		{name: "500s open the breaker", reply: anthropicError(500, "api_error", ""), calls: 3, state: fleet.StateBreakerOpen, breaker: "open"},
		{name: "open interval over", reply: anthropicError(500, "api_error", ""), calls: 3, wait: time.Minute, state: fleet.StateHalfOpen, breaker: "half-open"},
		{name: "429 with retry-after", reply: anthropicError(429, "rate_limit_error", "30"), calls: 1, state: fleet.StateCooling, breaker: "closed"},
		{name: "retry-after over", reply: anthropicError(429, "rate_limit_error", "30"), calls: 1, wait: 30 * time.Second, state: fleet.StateHealthy, breaker: "closed"},
		{name: "503s eject", reply: anthropicError(503, "overloaded_error", ""), calls: 2, state: fleet.StateEjected, breaker: "closed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var refusing atomic.Bool
				refusing.Store(c.refused)
				a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(c.reply), up: func() bool { return !refusing.Load() }}
				h := newHarness(t, a)
				e := h.engine(Options{Resilience: Resilience{MaxAttempts: 1,
					Breaker: resilience.BreakerConfig{ConsecutiveFailures: 3, OpenFor: time.Minute},
					Health:  health.Config{ConsecutiveGatewayFailures: 2, BaseEjection: time.Minute}}},
					h.endpoints("m", "a")...)
				for range c.calls {
					call(t, e, ask(llm.FormatAnthropic, "m", false))
				}
				if n := a.count(); n != c.calls {
					t.Fatalf("endpoint received %d calls, want %d (one attempt per call)", n, c.calls)
				}
				refusing.Store(false)
				time.Sleep(c.wait)
				synctest.Wait()
				st := e.Endpoints()
				if len(st) != 1 {
					t.Fatalf("Endpoints() = %+v, want one", st)
				}
				if got := st[0].State + " " + st[0].Breaker; got != c.state+" "+c.breaker {
					t.Errorf("state, breaker (-got +want):\n-%s\n+%s %s", got, c.state, c.breaker)
				}
			})
		})
	}
}
