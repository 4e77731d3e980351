package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/structured"
)

// BreakerStateValue maps a breaker state name to the value of
// mesh_endpoint_breaker_state: 0 closed, 1 half-open, 2 open (-1 unknown).
func BreakerStateValue(state string) float64 {
	switch state {
	case "closed":
		return 0
	case "half-open":
		return 1
	case "open":
		return 2
	}
	return -1
}

// endpointCollector reads the engine's endpoint states at scrape time. The
// endpoint label is bounded by the configured endpoints.
type endpointCollector struct {
	endpoints                                                         func() []fleet.Status
	breaker, ejected, cooling, inFlight, p95, ewma, errRate, headroom *prometheus.Desc
}

func newEndpointCollector(f func() []fleet.Status) *endpointCollector {
	l := []string{"endpoint", "model", "region", "provider"}
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, l, nil) }
	return &endpointCollector{
		endpoints: f,
		breaker:   d("mesh_endpoint_breaker_state", "Circuit breaker state: 0 closed, 1 half-open, 2 open."),
		ejected:   d("mesh_endpoint_ejected", "1 while the endpoint is ejected as an outlier."),
		cooling:   d("mesh_endpoint_cooling", "1 while a provider retry-after is in force."),
		inFlight:  d("mesh_endpoint_in_flight", "Requests sent to the endpoint and not yet done."),
		p95:       d("mesh_endpoint_latency_p95_seconds", "95th percentile latency of successes in the health window."),
		ewma:      d("mesh_endpoint_latency_ewma_seconds", "Exponentially weighted mean latency of successes."),
		errRate:   d("mesh_endpoint_error_rate", "Failures / outcomes in the health window."),
		headroom:  d("mesh_endpoint_headroom", "Smallest remaining/limit fraction of the provider's rate-limit headers (1 when unknown)."),
	}
}

func (c *endpointCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.breaker, c.ejected, c.cooling, c.inFlight, c.p95, c.ewma, c.errRate, c.headroom} {
		ch <- d
	}
}

func (c *endpointCollector) Collect(ch chan<- prometheus.Metric) {
	for _, e := range c.endpoints() {
		l := []string{e.ID, e.Model, e.Region, e.Provider}
		g := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
		}
		h := e.Health
		g(c.breaker, BreakerStateValue(e.Breaker))
		g(c.ejected, b2f(h.Ejected))
		g(c.cooling, b2f(h.Cooling))
		g(c.inFlight, float64(h.InFlight))
		g(c.p95, h.P95.Seconds())
		g(c.ewma, h.EWMA.Seconds())
		g(c.errRate, h.ErrorRate)
		g(c.headroom, h.Headroom)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// structuredCollector exports structured.Metrics' atomic counters.
type structuredCollector struct {
	m               *structured.Metrics
	outcomes, steps *prometheus.Desc
}

func newStructuredCollector(m *structured.Metrics) *structuredCollector {
	return &structuredCollector{m: m,
		outcomes: prometheus.NewDesc("mesh_structured_total",
			"Structured-output outcomes: validated (answers checked), valid_first_time, repaired, reasked (re-asks sent), failed.", []string{"outcome"}, nil),
		steps: prometheus.NewDesc("mesh_structured_repair_steps_total",
			"Answers each lossless repair step changed (guard_violation: repairs rejected for losing a guarded span).", []string{"step"}, nil),
	}
}

func (c *structuredCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.outcomes; ch <- c.steps }

func (c *structuredCollector) Collect(ch chan<- prometheus.Metric) {
	for _, o := range []struct {
		name string
		v    uint64
	}{
		{"validated", c.m.Validated.Load()},
		{"valid_first_time", c.m.ValidFirstTime.Load()},
		{"repaired", c.m.Repaired.Load()},
		{"reasked", c.m.Reasked.Load()},
		{"failed", c.m.Failed.Load()},
	} {
		ch <- prometheus.MustNewConstMetric(c.outcomes, prometheus.CounterValue, float64(o.v), o.name)
	}
	for _, s := range structured.Steps() {
		ch <- prometheus.MustNewConstMetric(c.steps, prometheus.CounterValue, float64(c.m.RepairedBy(s)), s)
	}
}
