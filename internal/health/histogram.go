package health

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInvalidConfig is wrapped by every constructor's error when a config
// field is out of range.
var ErrInvalidConfig = errors.New("invalid config")

// Bucket layout (HDR-style, log-linear). A duration is counted in units of
// 512ns. Values below 16 units get one bucket per unit; above that, every
// power of two [2^k, 2^(k+1)) is split into 16 equal sub-buckets, so a
// bucket is at most 1/16 = 6.25 % as wide as its lower bound. Reporting the
// bucket's midpoint keeps the relative error of any value from 10µs up to
// 2^31 units (about 18 minutes) within 3.2 %. Longer durations are counted
// in the last bucket.
const (
	unitShift  = 9 // 512ns
	subBits    = 4
	subCount   = 1 << subBits
	maxExp     = 30
	numBuckets = subCount + (maxExp-subBits+1)*subCount
	// A major is a run of subCount buckets (the linear range, then one
	// power of two each); per-major totals let a reader skip empty ranges.
	numMajors = numBuckets / subCount
)

func bucketOf(d time.Duration) int {
	if d <= 0 {
		return 0
	}
	v := uint64(d) >> unitShift
	if v < subCount {
		return int(v)
	}
	k := bits.Len64(v) - 1
	if k > maxExp {
		return numBuckets - 1
	}
	return subCount + (k-subBits)*subCount + int(v>>(k-subBits)&(subCount-1))
}

// bucketMid returns the middle of bucket i.
func bucketMid(i int) time.Duration {
	if i < subCount {
		return time.Duration(i<<unitShift + 1<<(unitShift-1))
	}
	j := i - subCount
	shift := j / subCount // k - subBits
	lo := (subCount + j%subCount) << shift
	return time.Duration(lo<<unitShift + 1<<shift<<(unitShift-1))
}

// HistogramConfig configures a Histogram. The zero value is the documented
// default.
type HistogramConfig struct {
	// SubWindow is the span of one slice of the sliding window. Zero means
	// 5s.
	SubWindow time.Duration
	// SubWindows is the number of slices; the window covers the current
	// slice and the SubWindows-1 before it. Zero means 6 (a 25–30s window).
	SubWindows int
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

func (c *HistogramConfig) fill() error {
	if c.SubWindow == 0 {
		c.SubWindow = 5 * time.Second
	}
	if c.SubWindows == 0 {
		c.SubWindows = 6
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.SubWindow < time.Millisecond {
		return fmt.Errorf("sub-window %v shorter than 1ms: %w", c.SubWindow, ErrInvalidConfig)
	}
	if c.SubWindows < 1 || c.SubWindows > 1000 {
		return fmt.Errorf("sub-windows %d outside [1, 1000]: %w", c.SubWindows, ErrInvalidConfig)
	}
	return nil
}

// Histogram is a sliding-window latency histogram with HDR-style log-linear
// buckets (relative error ≤ 3.2 % from 10µs to 18 minutes).
//
// A Histogram is safe for concurrent use. Record is lock-free and
// allocation-free (two atomic adds); once per sub-window one caller (Record
// or a reader) takes a short lock to expire the oldest slice. Readers see
// a consistent-enough view: an observation racing a rotation may be counted
// in the newer slice.
type Histogram struct {
	width int64 // ns per sub-window
	n     int64
	now   func() time.Time
	start time.Time

	head  atomic.Int64 // the latest epoch expired slices were cleared for
	total [numBuckets]atomic.Int64
	major [numMajors]atomic.Int64
	slots [][numBuckets]atomic.Uint32

	mu sync.Mutex // serialises rotation
}

func newHistogram(cfg HistogramConfig, start time.Time) *Histogram {
	return &Histogram{
		width: int64(cfg.SubWindow),
		n:     int64(cfg.SubWindows),
		now:   cfg.Now,
		start: start,
		slots: make([][numBuckets]atomic.Uint32, cfg.SubWindows),
	}
}

func (h *Histogram) epoch(now time.Time) int64 {
	return max(int64(now.Sub(h.start)), 0) / h.width
}

// Record adds one observation. Negative durations count as zero.
func (h *Histogram) Record(d time.Duration) { h.record(h.epoch(h.now()), d) }

func (h *Histogram) record(e int64, d time.Duration) {
	h.advance(e)
	b := bucketOf(d)
	// The total goes first so that it never drops below what a rotation
	// subtracts.
	h.major[b/subCount].Add(1)
	h.total[b].Add(1)
	h.slots[e%h.n][b].Add(1)
}

// advance clears the slices that epochs up to e reuse, and subtracts their
// counts from the window total.
func (h *Histogram) advance(e int64) {
	if e <= h.head.Load() {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	head := h.head.Load()
	if e <= head {
		return
	}
	for k := max(head+1, e-h.n+1); k <= e; k++ {
		s := &h.slots[k%h.n]
		for b := range s {
			if s[b].Load() != 0 {
				c := int64(s[b].Swap(0))
				h.total[b].Add(-c)
				h.major[b/subCount].Add(-c)
			}
		}
	}
	h.head.Store(e)
}

// Count returns the number of observations in the window.
func (h *Histogram) Count() int64 {
	h.advance(h.epoch(h.now()))
	var n int64
	for m := range h.major {
		n += max(h.major[m].Load(), 0)
	}
	return n
}

// Quantile returns the q-quantile (0 ≤ q ≤ 1) of the observations in the
// window: the smallest recorded value v such that at least a fraction q of
// the observations are ≤ v, to within the bucket error. It returns 0 for an
// empty window.
func (h *Histogram) Quantile(q float64) time.Duration {
	var out [1]time.Duration
	h.quantiles(h.epoch(h.now()), []float64{q}, out[:])
	return out[0]
}

// quantiles fills out[i] with the qs[i]-quantile (qs ascending) and returns
// the count. It reads the per-major totals, then the buckets of only the
// majors that hold a wanted rank. Counts racing with Record may disagree
// by a few observations; the walk clamps instead of overrunning.
func (h *Histogram) quantiles(e int64, qs []float64, out []time.Duration) int64 {
	h.advance(e)
	var majors [numMajors]int64
	var n int64
	for m := range h.major {
		majors[m] = max(h.major[m].Load(), 0)
		n += majors[m]
	}
	if n == 0 {
		clear(out)
		return 0
	}
	var cum int64 // observations in majors before m
	m := 0
	for i, q := range qs {
		rank := int64(math.Ceil(q*float64(n) - 1e-9))
		rank = min(max(rank, 1), n)
		for m < numMajors-1 && cum+majors[m] < rank {
			cum += majors[m]
			m++
		}
		b, c := m*subCount, cum
		for ; b < (m+1)*subCount-1; b++ {
			c += max(h.total[b].Load(), 0)
			if c >= rank {
				break
			}
		}
		out[i] = bucketMid(b)
	}
	return n
}
