package bench

import (
	"math"
	"math/bits"
	"time"
)

// histSubBits sets the resolution: every power of two is split into
// 2^histSubBits linear buckets, so a value is known to within half a bucket,
// a relative error of at most 1/2^(histSubBits+1) = 0.78 %.
const (
	histSubBits  = 6
	histSub      = 1 << histSubBits
	histMaxShift = 40 - histSubBits // values up to 2^40 ns (18 minutes)
	histBuckets  = histSub + (histMaxShift+1)*histSub
)

// Histogram is a log-linear (HDR-style) histogram of durations: values
// below 64 ns are exact, larger ones fall in buckets whose width is 1/64 of
// their power of two, so every quantile it reports is within 1 % of the
// true sample quantile. Recording is O(1) and allocation-free; the counts
// take 18 KiB. The zero value is empty and ready to use. A Histogram is not
// safe for concurrent use.
type Histogram struct {
	counts [histBuckets]uint32
	n      uint64
	min    time.Duration
	max    time.Duration
	sum    time.Duration
}

// bucketOf maps a value in nanoseconds to its bucket index.
func bucketOf(v uint64) int {
	if v < histSub {
		return int(v)
	}
	e := bits.Len64(v) - 1 // v in [2^e, 2^(e+1)), e >= histSubBits
	shift := e - histSubBits
	if shift > histMaxShift {
		return histBuckets - 1
	}
	sub := int(v>>uint(shift)) - histSub // 0 .. histSub-1
	return histSub + shift*histSub + sub
}

// bucketRange returns the lowest value of bucket i and its width.
func bucketRange(i int) (lo, width uint64) {
	if i < histSub {
		return uint64(i), 1
	}
	shift := (i - histSub) / histSub
	sub := (i - histSub) % histSub
	return uint64(histSub+sub) << uint(shift), 1 << uint(shift)
}

// Record adds one value; negative values count as 0.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	if d > h.max {
		h.max = d
	}
	h.n++
	h.sum += d
}

// Merge adds every value recorded in o.
func (h *Histogram) Merge(o *Histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.n }

// Max returns the largest recorded value exactly (0 when empty).
func (h *Histogram) Max() time.Duration { return h.max }

// Min returns the smallest recorded value exactly (0 when empty).
func (h *Histogram) Min() time.Duration { return h.min }

// Mean returns the exact mean (0 when empty).
func (h *Histogram) Mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}

// Quantile returns the value at quantile q in [0, 1] (0.99 for p99): the
// smallest recorded value v such that at least ceil(q·n) values are ≤ v,
// reported as the middle of its bucket and clamped to [Min, Max]. An empty
// histogram gives 0.
func (h *Histogram) Quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.n)))
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += uint64(c)
		if seen >= rank {
			lo, w := bucketRange(i)
			v := time.Duration(lo + w/2)
			if w == 1 {
				v = time.Duration(lo)
			}
			return min(max(v, h.min), h.max)
		}
	}
	return h.max
}

// CDFPoint is one step of a histogram's cumulative distribution.
type CDFPoint struct {
	Value    time.Duration
	Fraction float64 // share of values ≤ Value
}

// CDF returns the cumulative distribution, one point per non-empty bucket
// (valued at the bucket's middle, clamped to [Min, Max]).
func (h *Histogram) CDF() []CDFPoint {
	var out []CDFPoint
	var seen uint64
	for i, c := range h.counts {
		if c == 0 {
			continue
		}
		seen += uint64(c)
		lo, w := bucketRange(i)
		v := min(max(time.Duration(lo+w/2), h.min), h.max)
		out = append(out, CDFPoint{Value: v, Fraction: float64(seen) / float64(h.n)})
	}
	return out
}
