package engine

import (
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/shadow"
)

// The attempt events the attempt lifecycle emits (package observe).
type (
	AttemptEvent = observe.AttemptEvent
	HedgeEvent   = observe.HedgeEvent
)

// events holds the engine's observer under each optional interface it
// implements, nil for the others. Each method is a nil check when nobody
// listens. The struct is written once, in New, and only read after.
type events struct {
	attemptObs observe.AttemptObserver
	hedgeObs   observe.HedgeObserver
	breakerObs observe.BreakerObserver
	valveObs   observe.ValveObserver
	shadowObs  shadow.Observer
}

// newEvents asserts o's optional interfaces once.
func newEvents(o Observer) events {
	var ev events
	if o == nil {
		return ev
	}
	ev.attemptObs, _ = o.(observe.AttemptObserver)
	ev.hedgeObs, _ = o.(observe.HedgeObserver)
	ev.breakerObs, _ = o.(observe.BreakerObserver)
	ev.valveObs, _ = o.(observe.ValveObserver)
	ev.shadowObs, _ = o.(shadow.Observer)
	return ev
}

func (ev *events) attempt(a observe.AttemptEvent) {
	if ev.attemptObs != nil {
		ev.attemptObs.OnAttempt(a)
	}
}

func (ev *events) hedge(h observe.HedgeEvent) {
	if ev.hedgeObs != nil {
		ev.hedgeObs.OnHedge(h)
	}
}

func (ev *events) breaker(b observe.BreakerEvent) {
	if ev.breakerObs != nil {
		ev.breakerObs.OnBreakerState(b)
	}
}

func (ev *events) valve(v observe.ValveEvent) {
	if ev.valveObs != nil {
		ev.valveObs.OnValve(v)
	}
}

func (ev *events) shadow(r shadow.Result) {
	if ev.shadowObs != nil {
		ev.shadowObs.OnShadow(r)
	}
}
