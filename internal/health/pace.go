package health

import (
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
