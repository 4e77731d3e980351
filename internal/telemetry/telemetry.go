// Package telemetry holds Keel's observers of the engine: each subpackage
// turns the callrec.Record of a finished call, or the engine's events, into
// one kind of signal — metrics (Prometheus), tracing (OpenTelemetry spans),
// debugtrace (the per-request debug trace ring), dashboard (the live web
// page) and alert (the safety valve's webhook) — and semconv names the
// OpenTelemetry GenAI conventions they follow. The engine imports none of
// them; the wiring (cmd, keel.New) hands them to the engine as one
// callrec.Observer built by Multi.
package telemetry

import (
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/shadow"
)

// Multi returns an Observer that hands each Record to every non-nil
// observer, in order, on the caller's goroutine, and each optional event
// (observe.AttemptObserver, HedgeObserver, BreakerObserver, ValveObserver,
// ShadowObserver)
// to those of them that implement its interface. It is safe for concurrent
// use when each observer is; it never blocks unless one of them does.
// With no non-nil observer it returns nil, which the engine treats as none;
// with one it returns that observer itself.
func Multi(obs ...callrec.Observer) callrec.Observer {
	var m multi
	for _, o := range obs {
		if o == nil {
			continue
		}
		m.done = append(m.done, o)
		if a, ok := o.(observe.AttemptObserver); ok {
			m.attempt = append(m.attempt, a)
		}
		if h, ok := o.(observe.HedgeObserver); ok {
			m.hedge = append(m.hedge, h)
		}
		if b, ok := o.(observe.BreakerObserver); ok {
			m.breaker = append(m.breaker, b)
		}
		if v, ok := o.(observe.ValveObserver); ok {
			m.valve = append(m.valve, v)
		}
		if s, ok := o.(shadow.Observer); ok {
			m.shadow = append(m.shadow, s)
		}
	}
	switch len(m.done) {
	case 0:
		return nil
	case 1:
		return m.done[0]
	}
	return &m
}

// multi implements every optional interface, so the engine always finds
// them; each method loops over the observers that have it (often none).
type multi struct {
	done    []callrec.Observer
	attempt []observe.AttemptObserver
	hedge   []observe.HedgeObserver
	breaker []observe.BreakerObserver
	valve   []observe.ValveObserver
	shadow  []shadow.Observer
}

func (m *multi) RequestDone(r *callrec.Record) {
	for _, o := range m.done {
		o.RequestDone(r)
	}
}

func (m *multi) OnAttempt(ev observe.AttemptEvent) {
	for _, o := range m.attempt {
		o.OnAttempt(ev)
	}
}

func (m *multi) OnHedge(ev observe.HedgeEvent) {
	for _, o := range m.hedge {
		o.OnHedge(ev)
	}
}

func (m *multi) OnBreakerState(ev observe.BreakerEvent) {
	for _, o := range m.breaker {
		o.OnBreakerState(ev)
	}
}

func (m *multi) OnValve(ev observe.ValveEvent) {
	for _, o := range m.valve {
		o.OnValve(ev)
	}
}

func (m *multi) OnShadow(r shadow.Result) {
	for _, o := range m.shadow {
		o.OnShadow(r)
	}
}
