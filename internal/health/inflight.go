package health

// InFlight is the number of requests begun and not yet done: one atomic
// load, for the per-request path (power-of-two-choices).
func (t *Tracker) InFlight() int { return int(t.inflight.Load()) }
