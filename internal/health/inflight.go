package health

import (
	"math"
	"time"
)

// InFlight is the number of requests begun and not yet done: one atomic
// load, for the per-request path (power-of-two-choices).
func (t *Tracker) InFlight() int { return int(t.inflight.Load()) }

// Restore forgets the endpoint's failures: the error-rate window, the
// consecutive-failure count and any ejection in force. The engine calls it
// when an out-of-band probe shows an unreachable endpoint answering again,
// so that the failures of its outage do not keep it out of rotation.
// Latency statistics and the cooldown are kept.
func (t *Tracker) Restore() {
	t.rate.reset()
	t.ejectCount.reset()
	t.consec.Store(0)
	t.ejectedUntil.Store(0)
}

// Cold reports that no success has been recorded yet, so ExpectedLatency
// is only the configured prior. Routers treat cold endpoints
// optimistically, or a cold endpoint would never be tried.
func (t *Tracker) Cold() bool { return t.ewma.Load() == 0 }

// Until returns when the ejection and the retry-after cooldown in force end
// (zero times when none was ever set): four atomic loads, for publishing
// the endpoint's routing view after an outcome.
func (t *Tracker) Until() (ejected, cooling time.Time) {
	if u := t.ejectedUntil.Load(); u != 0 {
		ejected = t.start.Add(time.Duration(u))
	}
	if u := t.coolingUntil.Load(); u != 0 {
		cooling = t.start.Add(time.Duration(u))
	}
	return ejected, cooling
}

// Cooldown puts the endpoint in cooldown until at least until (a
// retry-after seen by an attempt whose outcome is otherwise not counted,
// such as a cancelled hedge).
func (t *Tracker) Cooldown(until time.Time) {
	storeMax(&t.coolingUntil, int64(until.Sub(t.start)))
}

// Eject takes the endpoint out of rotation until at least until: another
// process sharing the endpoint ejected it (Keel's replicas share
// ejections). It does not count as one of this tracker's ejections, so the
// lengths of its own later ejections are unchanged.
func (t *Tracker) Eject(until time.Time) {
	storeMax(&t.ejectedUntil, int64(until.Sub(t.start)))
}

// Headroom is the smallest remaining/limit fraction among the provider's
// rate-limit headers last seen, in [0, 1]; 1 when unknown. One atomic load.
func (t *Tracker) Headroom() float64 { return math.Float64frombits(t.headroom.Load()) }

// SetHeadroom records a headroom another process sharing the endpoint read
// from the provider's headers; it is clamped to [0, 1].
func (t *Tracker) SetHeadroom(h float64) {
	if math.IsNaN(h) {
		return
	}
	t.headroom.Store(math.Float64bits(min(max(h, 0), 1)))
}
