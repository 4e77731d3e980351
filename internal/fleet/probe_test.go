package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/provider"
)

// TestProberBacksOffUntilTheEndpointAnswers: the first probe 5ms after
// the endpoint went down, then doubling up to the interval; the endpoint
// is back (and said so to the other replicas) at the first answer, and
// the prober stops.
func TestProberBacksOffUntilTheEndpointAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{}
		ep := newEndpoint(t, b, nil)
		start := time.Now()
		var mu sync.Mutex
		var probes []time.Duration
		stop := make(chan struct{})
		var wg sync.WaitGroup
		p := &Prober{
			Probe: func(context.Context, *provider.Endpoint) error {
				mu.Lock()
				defer mu.Unlock()
				probes = append(probes, time.Since(start))
				if len(probes) < 5 {
					return errors.New("refused")
				}
				return nil
			},
			Interval: 30 * time.Millisecond, Shared: b, Log: slog.New(slog.DiscardHandler), Stop: stop, WG: &wg, Closed: func() bool { return false },
		}
		p.SetDown(ep, true)
		p.SetDown(ep, true) // already down: no second prober
		if !ep.Down() || ep.View().State(time.Now()) != StateDown {
			t.Fatal("SetDown did not take the endpoint down")
		}
		wg.Wait()
		ms := time.Millisecond
		// 5, +10, +20, +30 (capped), +30.
		if want := fmt.Sprint([]time.Duration{5 * ms, 15 * ms, 35 * ms, 65 * ms, 95 * ms}); fmt.Sprint(probes) != want {
			t.Errorf("probes at %v, want %s", probes, want)
		}
		if ep.Down() || ep.View().State(time.Now()) != StateHealthy {
			t.Error("the endpoint that answered is still down")
		}
		if got := b.kinds(); got != "[down up]" {
			t.Errorf("published %s, want [down up]", got)
		}
		close(stop)
	})
}

// TestProberStopsWhenAnotherReplicaSawItUp: a remote ObsUp brings the
// endpoint back; its prober stops at its next tick without probing, and a
// remote outage is not published back.
func TestProberStopsWhenAnotherReplicaSawItUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := &board{}
		ep := newEndpoint(t, b, nil)
		probed := 0
		var wg sync.WaitGroup
		p := &Prober{
			Probe:    func(context.Context, *provider.Endpoint) error { probed++; return errors.New("refused") },
			Interval: time.Second, Log: slog.New(slog.DiscardHandler), Shared: b, Stop: make(chan struct{}), WG: &wg, Closed: func() bool { return false },
		}
		p.SetDown(ep, false)
		ep.Apply(Observation{Endpoint: ep.ID, Kind: ObsUp})
		wg.Wait()
		if probed != 0 || ep.Down() {
			t.Errorf("probed %d times, down %v; want no probe, up", probed, ep.Down())
		}
		if got := b.kinds(); got != "[]" {
			t.Errorf("a remote outage and return were published back: %s", got)
		}
	})
}

func TestProberStopsWithTheEngine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ep := newEndpoint(t, nil, nil)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		closed := false
		p := &Prober{
			Probe: func(context.Context, *provider.Endpoint) error { return errors.New("refused") },
			Log:   slog.New(slog.DiscardHandler), Stop: stop, WG: &wg, Closed: func() bool { return closed },
		}
		p.SetDown(ep, true)
		time.Sleep(time.Second) // virtual: the prober backs off to 50ms probes
		close(stop)
		wg.Wait()
		closed = true
		other := newEndpoint(t, nil, nil)
		p.SetDown(other, true)
		if other.Down() {
			t.Error("a closed engine took an endpoint down")
		}
	})
}
