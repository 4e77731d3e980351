package structured

import "sync/atomic"

// Metrics counts structured-output outcomes. The zero value is ready to use;
// all methods are safe for concurrent use and never block. The observability
// layer reads the counters and exports them; this package imports no metrics
// library.
type Metrics struct {
	// Validated counts answers checked against a schema (first answers and
	// re-asked answers alike).
	Validated atomic.Uint64
	// ValidFirstTime counts answers that were valid as received.
	ValidFirstTime atomic.Uint64
	// Repaired counts answers made valid by Repair.
	Repaired atomic.Uint64
	// Reasked counts re-ask requests sent.
	Reasked atomic.Uint64
	// Failed counts answers that stayed invalid after repair and re-ask.
	Failed atomic.Uint64

	byStep [len(stepNames)]atomic.Uint64
}

// stepNames are the repair steps counted by Metrics, in pipeline order.
var stepNames = [...]string{StepExtract, StepCloseTruncated, StepTrailingCommas, StepQuotes, StepCoerce, StepDerive, StepGuardViolation}

// Observe counts one Repair result: Validated always, then ValidFirstTime,
// or Repaired and each applied step, or — for an invalid result — the
// guard_violation step if the guard rejected it. The engine calls Failed.Add
// itself once the re-ask also failed.
func (m *Metrics) Observe(r Result) {
	m.Validated.Add(1)
	switch {
	case r.Valid && !r.Changed:
		m.ValidFirstTime.Add(1)
	case r.Valid:
		m.Repaired.Add(1)
		for _, s := range r.Steps {
			m.countStep(s.Name)
		}
	default:
		for _, s := range r.Steps {
			if s.Name == StepGuardViolation {
				m.countStep(s.Name)
			}
		}
	}
}

func (m *Metrics) countStep(name string) {
	for i, n := range stepNames {
		if n == name {
			m.byStep[i].Add(1)
			return
		}
	}
}

// RepairedBy returns how many answers the named step repaired (for
// guard_violation: how many repairs it rejected).
func (m *Metrics) RepairedBy(step string) uint64 {
	for i, n := range stepNames {
		if n == step {
			return m.byStep[i].Load()
		}
	}
	return 0
}

// Steps returns the step names RepairedBy knows, in pipeline order.
func Steps() []string { return append([]string(nil), stepNames[:]...) }
