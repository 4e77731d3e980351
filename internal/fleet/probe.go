package fleet

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/provider"
)

// Probe backoff for an unreachable endpoint: the first probe soon after it
// went down (in case it was a blip), then doubling up to the probe
// interval, so a region that returns gets traffic again within one
// interval (default 50ms) of answering.
const (
	FirstProbe           = 5 * time.Millisecond
	DefaultProbeInterval = 50 * time.Millisecond
	// probeTimeout bounds one probe (a GET of the models list).
	probeTimeout = 2 * time.Second
)

// Prober takes unreachable endpoints out of rotation and probes each until
// it answers. Its fields are set once; it is safe for concurrent use.
type Prober struct {
	// Probe asks ep whether it answers (the provider client's GET of its
	// models list).
	Probe func(ctx context.Context, ep *provider.Endpoint) error
	// Interval caps the gap between probes (DefaultProbeInterval when 0).
	Interval time.Duration
	// Shared, when set, is told when this replica sees an endpoint go down
	// or come back.
	Shared SharedState
	Log    *slog.Logger
	// Stop ends every prober; WG counts them; Closed reports an engine
	// closing (no prober starts then).
	Stop   <-chan struct{}
	WG     *sync.WaitGroup
	Closed func() bool
}

// SetDown takes ep out of rotation until a probe reaches it; local says
// this replica saw the failure (so it publishes it). At most one prober
// runs per endpoint; it stops when the endpoint answers or another replica
// reports it reachable.
func (p *Prober) SetDown(ep *Endpoint, local bool) {
	if p.Closed() || !ep.MarkDown() {
		return
	}
	if local && p.Shared != nil {
		p.Shared.Publish(Observation{Endpoint: ep.ID, Kind: ObsDown})
	}
	if local {
		p.Log.Warn("endpoint unreachable; probing until it answers", "endpoint", ep.ID, "interval", p.interval().String())
	} else {
		p.Log.Warn("endpoint unreachable (seen by another replica); probing until it answers", "endpoint", ep.ID, "interval", p.interval().String())
	}
	if !ep.StartProbing() {
		return // the prober of an earlier outage still runs: it takes this one
	}
	p.WG.Add(1)
	go p.run(ep)
}

func (p *Prober) interval() time.Duration {
	if p.Interval <= 0 {
		return DefaultProbeInterval
	}
	return p.Interval
}

// run probes ep until it answers or is no longer down: the first probe
// soon, then backing off to the probe interval.
func (p *Prober) run(ep *Endpoint) {
	defer p.WG.Done()
	iv := p.interval()
	d := min(FirstProbe, iv)
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-p.Stop:
			return
		case <-t.C:
		}
		if !ep.Down() {
			// Another replica found it reachable.
			ep.StopProbing()
			if !ep.Down() || !ep.StartProbing() {
				return
			}
			// Down again meanwhile, and no other prober took it.
		}
		if p.probe(ep) && (!ep.Down() || !ep.StartProbing()) {
			return
		}
		// Still down, or down again meanwhile: keep probing.
		d = min(2*d, iv)
		t.Reset(d)
	}
}

// probe probes ep once and, when it answers, brings it back; it reports
// whether it answered (the prober is released then).
func (p *Prober) probe(ep *Endpoint) bool {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	err := p.Probe(ctx, ep.Endpoint)
	cancel()
	if err != nil {
		return false
	}
	ep.Health.Restore()
	ep.StopProbing()
	if ep.MarkUp() {
		ep.Publish()
		if p.Shared != nil {
			p.Shared.Publish(Observation{Endpoint: ep.ID, Kind: ObsUp})
		}
		p.Log.Info("endpoint reachable again", "endpoint", ep.ID)
	}
	return true
}
