package bench

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// exactQuantile is the sample quantile Histogram.Quantile approximates.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// TestHistogramQuantiles checks every reported quantile against the exact
// sample quantile: within 1 % for every distribution.
func TestHistogramQuantiles(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	tests := []struct {
		name string
		gen  func() time.Duration
	}{
		{"constant", func() time.Duration { return 42 * time.Millisecond }},
		{"uniform 1µs-1s", func() time.Duration { return time.Microsecond + time.Duration(r.Int64N(int64(time.Second))) }},
		{"exponential mean 20ms", func() time.Duration { return time.Duration(r.ExpFloat64() * 20e6) }},
		{"lognormal 60ms sigma 0.5", func() time.Duration { return time.Duration(60e6 * math.Exp(0.5*r.NormFloat64())) }},
		{"heavy tail 5% x20", func() time.Duration {
			d := 50*time.Millisecond + time.Duration(r.Int64N(int64(20*time.Millisecond)))
			if r.Float64() < 0.05 {
				d *= 20
			}
			return d
		}},
		{"sub-microsecond", func() time.Duration { return time.Duration(r.Int64N(5000)) }},
	}
	qs := []float64{0, 0.5, 0.9, 0.99, 0.999, 1}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Histogram
			vals := make([]time.Duration, 100_000)
			for i := range vals {
				vals[i] = tt.gen()
				h.Record(vals[i])
			}
			slices.Sort(vals)
			for _, q := range qs {
				got, want := h.Quantile(q), exactQuantile(vals, q)
				if diff := math.Abs(float64(got-want)) / float64(max(want, 1)); diff > 0.01 && got-want > 1 {
					t.Errorf("q%v = %v, want %v (error %.3f%% > 1%%)", q, got, want, diff*100)
				}
			}
			if h.Max() != vals[len(vals)-1] || h.Min() != vals[0] || h.Count() != uint64(len(vals)) {
				t.Errorf("min/max/count = %v/%v/%d, want %v/%v/%d", h.Min(), h.Max(), h.Count(), vals[0], vals[len(vals)-1], len(vals))
			}
		})
	}
}

// TestHistogramBuckets checks the bucket layout: contiguous, increasing, a
// value always inside its bucket, and widths within 1/64 of the value.
func TestHistogramBuckets(t *testing.T) {
	next := uint64(0)
	for i := range histBuckets - 1 {
		lo, w := bucketRange(i)
		if lo != next {
			t.Fatalf("bucket %d starts at %d, want %d", i, lo, next)
		}
		if lo >= histSub && float64(w)/float64(lo) > 1.0/histSub {
			t.Fatalf("bucket %d: width %d too wide for %d", i, w, lo)
		}
		for _, v := range []uint64{lo, lo + w/2, lo + w - 1} {
			if got := bucketOf(v); got != i {
				t.Fatalf("bucketOf(%d) = %d, want %d", v, got, i)
			}
		}
		next = lo + w
	}
	if got := bucketOf(math.MaxInt64); got != histBuckets-1 {
		t.Errorf("bucketOf(max) = %d, want the last bucket %d", got, histBuckets-1)
	}
}

// TestHistogramMergeAndEmpty covers the zero value, negative values and Merge.
func TestHistogramMergeAndEmpty(t *testing.T) {
	var empty Histogram
	if empty.Quantile(0.99) != 0 || empty.Max() != 0 || empty.Mean() != 0 || len(empty.CDF()) != 0 {
		t.Errorf("empty histogram is not all zero")
	}
	var a, b Histogram
	a.Record(-time.Second)
	a.Record(10 * time.Millisecond)
	b.Record(30 * time.Millisecond)
	a.Merge(&b)
	a.Merge(&empty)
	if a.Count() != 3 || a.Min() != 0 || a.Max() != 30*time.Millisecond {
		t.Errorf("merged count/min/max = %d/%v/%v, want 3/0/30ms", a.Count(), a.Min(), a.Max())
	}
	cdf := a.CDF()
	if last := cdf[len(cdf)-1]; last.Fraction != 1 || last.Value != 30*time.Millisecond {
		t.Errorf("CDF ends at %+v, want {30ms 1}", last)
	}
}

// BenchmarkHistogramRecord measures the cost of recording one value.
func BenchmarkHistogramRecord(b *testing.B) {
	var h Histogram
	for i := range b.N {
		h.Record(time.Duration(i) * 997)
	}
}
