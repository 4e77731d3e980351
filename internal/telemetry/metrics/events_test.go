package metrics

import (
	"testing"

	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/shadow"
)

var (
	_ observe.BreakerObserver = (*Metrics)(nil)
	_ observe.ValveObserver   = (*Metrics)(nil)
)

// TestEventCounters: breaker transitions and valve state changes are
// counted from the engine's events, with exact values; both valve series
// exist (at zero) before any event.
func TestEventCounters(t *testing.T) {
	m, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	fams := scrape(t, m.Handler())
	for _, to := range []string{"open", "closed"} {
		if got := sample(fams, "mesh_safety_valve_transitions_total", map[string]string{"to": to}); got != 0 {
			t.Errorf("mesh_safety_valve_transitions_total{to=%q} before any event = %v, want 0", to, got)
		}
	}

	us, eu := "claude-sonnet/us-east", "claude-sonnet/eu-west"
	for _, ev := range []observe.BreakerEvent{
		{Endpoint: us, From: resilience.Closed, To: resilience.Open},
		{Endpoint: us, From: resilience.Open, To: resilience.HalfOpen},
		{Endpoint: us, From: resilience.HalfOpen, To: resilience.Open},
		{Endpoint: us, From: resilience.Open, To: resilience.HalfOpen},
		{Endpoint: us, From: resilience.HalfOpen, To: resilience.Closed},
		{Endpoint: eu, From: resilience.Closed, To: resilience.Open},
	} {
		m.OnBreakerState(ev)
	}
	for _, ev := range []observe.ValveEvent{{Event: observe.ValveEventOpen}, {Event: observe.ValveEventClosed}, {Event: observe.ValveEventOpen}, {Event: "unknown"}} {
		m.OnValve(ev)
	}

	fams = scrape(t, m.Handler())
	tests := []struct {
		name   string
		series string
		labels map[string]string
		want   float64
	}{
		{"us opened", "mesh_breaker_transitions_total", map[string]string{"endpoint": us, "from": "closed", "to": "open"}, 1},
		{"us half-opened", "mesh_breaker_transitions_total", map[string]string{"endpoint": us, "from": "open", "to": "half-open"}, 2},
		{"us re-opened", "mesh_breaker_transitions_total", map[string]string{"endpoint": us, "from": "half-open", "to": "open"}, 1},
		{"us closed", "mesh_breaker_transitions_total", map[string]string{"endpoint": us, "from": "half-open", "to": "closed"}, 1},
		{"eu opened", "mesh_breaker_transitions_total", map[string]string{"endpoint": eu, "to": "open"}, 1},
		{"all", "mesh_breaker_transitions_total", nil, 6},
		{"valve opened", "mesh_safety_valve_transitions_total", map[string]string{"to": "open"}, 2},
		{"valve closed", "mesh_safety_valve_transitions_total", map[string]string{"to": "closed"}, 1},
		{"valve all", "mesh_safety_valve_transitions_total", nil, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sample(fams, tt.series, tt.labels); got != tt.want {
				t.Errorf("%s%v (-got +want):\n-%v\n+%v", tt.series, tt.labels, got, tt.want)
			}
		})
	}
}

var _ shadow.Observer = (*Metrics)(nil)

// TestShadowCounters: shadow calls are counted by alias and result, and
// their spend goes to mesh_shadow_spend_usd_total, never to
// mesh_spend_usd_total.
func TestShadowCounters(t *testing.T) {
	m, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	alias := testOptions().Models[0]
	same := shadow.Compare(`{"a":1}`, `{"a":1}`, nil)
	moved := shadow.Compare(`{"a":1}`, `{"a":2}`, nil)
	for _, r := range []shadow.Result{
		{Alias: alias, Outcome: shadow.OutcomeCompared, Comparison: same, ShadowCost: 0.25},
		{Alias: alias, Outcome: shadow.OutcomeCompared, Comparison: moved, ShadowCost: 0.5},
		{Alias: alias, Outcome: shadow.OutcomeDropped},
		{Alias: "unlisted", Outcome: shadow.OutcomeShed},
	} {
		m.OnShadow(r)
	}
	fams := scrape(t, m.Handler())
	for _, c := range []struct {
		series string
		labels map[string]string
		want   float64
	}{
		{"mesh_shadow_calls_total", map[string]string{"alias": alias, "result": "equal"}, 1},
		{"mesh_shadow_calls_total", map[string]string{"alias": alias, "result": "differ"}, 1},
		{"mesh_shadow_calls_total", map[string]string{"alias": alias, "result": "dropped"}, 1},
		{"mesh_shadow_calls_total", map[string]string{"alias": Other, "result": "shed"}, 1},
		{"mesh_shadow_spend_usd_total", map[string]string{"alias": alias}, 0.75},
		{"mesh_spend_usd_total", nil, -1}, // no client spend series at all
	} {
		if got := sample(fams, c.series, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.series, c.labels, got, c.want)
		}
	}
}
