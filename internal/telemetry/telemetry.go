// Package telemetry holds Keel's observers of the engine: each subpackage
// turns the engine.Record of a finished call into one kind of signal —
// metrics (Prometheus), tracing (OpenTelemetry spans), debugtrace (the
// per-request debug trace ring) and dashboard (the live web page) — and
// semconv names the OpenTelemetry GenAI conventions they follow. The engine
// imports none of them; the wiring (cmd, keel.New) hands them to the engine
// as one engine.Observer built by Multi.
package telemetry

import "github.com/keelmesh/keel/internal/engine"

// Multi returns an Observer that hands each Record to every non-nil
// observer, in order, on the caller's goroutine. It is safe for concurrent
// use when each observer is; it never blocks unless one of them does.
// With no non-nil observer it returns nil, which the engine treats as none.
func Multi(obs ...engine.Observer) engine.Observer {
	var list []engine.Observer
	for _, o := range obs {
		if o != nil {
			list = append(list, o)
		}
	}
	switch len(list) {
	case 0:
		return nil
	case 1:
		return list[0]
	}
	return multi(list)
}

type multi []engine.Observer

func (m multi) RequestDone(r *engine.Record) {
	for _, o := range m {
		o.RequestDone(r)
	}
}
