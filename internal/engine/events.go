package engine

import (
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/shadow"
)

// The optional observer interfaces and their events are package
// observe's; these names keep the engine's API.
type (
	AttemptObserver = observe.AttemptObserver
	HedgeObserver   = observe.HedgeObserver
	BreakerObserver = observe.BreakerObserver
	ValveObserver   = observe.ValveObserver
	AttemptEvent    = observe.AttemptEvent
	HedgeEvent      = observe.HedgeEvent
	BreakerEvent    = observe.BreakerEvent
	ValveEvent      = observe.ValveEvent
)

// The safety valve's event names (observe.ValveEventOpen, ValveEventClosed).
const (
	ValveEventOpen   = observe.ValveEventOpen
	ValveEventClosed = observe.ValveEventClosed
)

// events holds the engine's observer under each optional interface it
// implements, nil for the others. Each method is a nil check when nobody
// listens. The struct is written once, in New, and only read after.
type events struct {
	attemptObs AttemptObserver
	hedgeObs   HedgeObserver
	breakerObs BreakerObserver
	valveObs   ValveObserver
	shadowObs  ShadowObserver
}

// newEvents asserts o's optional interfaces once.
func newEvents(o Observer) events {
	var ev events
	if o == nil {
		return ev
	}
	ev.attemptObs, _ = o.(AttemptObserver)
	ev.hedgeObs, _ = o.(HedgeObserver)
	ev.breakerObs, _ = o.(BreakerObserver)
	ev.valveObs, _ = o.(ValveObserver)
	ev.shadowObs, _ = o.(ShadowObserver)
	return ev
}

func (ev *events) attempt(a AttemptEvent) {
	if ev.attemptObs != nil {
		ev.attemptObs.OnAttempt(a)
	}
}

func (ev *events) hedge(h HedgeEvent) {
	if ev.hedgeObs != nil {
		ev.hedgeObs.OnHedge(h)
	}
}

func (ev *events) breaker(b BreakerEvent) {
	if ev.breakerObs != nil {
		ev.breakerObs.OnBreakerState(b)
	}
}

func (ev *events) valve(v ValveEvent) {
	if ev.valveObs != nil {
		ev.valveObs.OnValve(v)
	}
}

func (ev *events) shadow(r shadow.Result) {
	if ev.shadowObs != nil {
		ev.shadowObs.OnShadow(r)
	}
}
