package health

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"
)

// paceAlpha is the weight of a new stream in an endpoint's pace.
const paceAlpha = 0.1

// Pace is an endpoint's normal pace of streaming: an EWMA of the mean gap
// between the content events of its streams that ran to their end (each
// stream's mean from its first content event to its last). A slow stream
// is judged against it (slow-stream hedging); the zero value knows
// nothing. Safe for concurrent use; it never blocks.
type Pace struct {
	bits atomic.Uint64 // float64 nanoseconds; 0 = nothing learned
}

// Observe learns a stream whose content events came gap apart on
// average.
func (p *Pace) Observe(gap time.Duration) {
	if gap <= 0 {
		return
	}
	x := float64(gap)
	for {
		old := p.bits.Load()
		nv := x
		if old != 0 {
			prev := math.Float64frombits(old)
			nv = prev + paceAlpha*(x-prev)
		}
		if p.bits.CompareAndSwap(old, math.Float64bits(nv)) {
			return
		}
	}
}

// Gap is the endpoint's normal gap between content events; 0 before any
// stream was observed.
func (p *Pace) Gap() time.Duration {
	return time.Duration(math.Float64frombits(p.bits.Load()))
}

// PeerGap is the normal gap to judge a stream of an endpoint by when the
// endpoint has learned no pace of its own yet (its Pace.Gap is 0): the
// mean of the learned gaps of its peers, the other endpoints serving the
// same model — peer(i), for i < n, is the i-th one's Pace, or nil for an
// endpoint of another model. A model streams at much the same pace
// wherever it is served, and without this an endpoint new to the fleet,
// or never streamed to yet, let its first streams crawl unjudged. 0 when
// no peer has learned a pace either.
func PeerGap(n int, peer func(i int) *Pace) time.Duration {
	var sum time.Duration
	k := 0
	for i := range n {
		if p := peer(i); p != nil {
			if g := p.Gap(); g > 0 {
				sum += g
				k++
			}
		}
	}
	if k == 0 {
		return 0
	}
	return sum / time.Duration(k)
}

// PacePolicy says when a stream is slow against its endpoint's Pace. The
// zero value is the default; Keel's config decodes the key
// resilience.slow_stream_threshold into it. A plain value, safe for
// concurrent use.
type PacePolicy struct {
	// Threshold: a stream is slow when its recent mean gap between content
	// events reaches Threshold times its endpoint's normal gap. Zero means
	// 4; otherwise at least 2.
	Threshold float64 `yaml:"slow_stream_threshold"`
}

// Validate reports whether p is usable, as an error wrapping
// ErrInvalidConfig.
func (p PacePolicy) Validate() error {
	if p.Threshold != 0 && !(p.Threshold >= 2) {
		return fmt.Errorf("slow stream threshold %g below 2: %w", p.Threshold, ErrInvalidConfig)
	}
	return nil
}

// MinSlowGap is the least mean gap between content events that is slow,
// whatever the endpoint's normal one: a stream still delivering a token
// every few milliseconds is not crawling, and a scheduler's or a proxy's
// jitter can put a few milliseconds between the tokens of a very fast one.
const MinSlowGap = 10 * time.Millisecond

// SlowGap is the mean gap above which a stream of an endpoint whose
// normal gap is normal is slow (at least MinSlowGap); 0 when normal is
// (nothing learned).
func (p PacePolicy) SlowGap(normal time.Duration) time.Duration {
	if normal <= 0 {
		return 0
	}
	t := p.Threshold
	if t == 0 {
		t = 4
	}
	return max(time.Duration(float64(normal)*t), MinSlowGap)
}
