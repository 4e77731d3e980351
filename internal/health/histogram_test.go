package health

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a manually advanced clock for the Now fields.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestBucketError checks the layout's promise over 10µs … 10min: every
// value maps to a bucket whose midpoint is within 1/32 of it, and bucket
// indices never decrease as values grow.
func TestBucketError(t *testing.T) {
	prev := 0
	for d := 10 * time.Microsecond; d <= 10*time.Minute; d = d*1001/1000 + 1 {
		b := bucketOf(d)
		if b < prev {
			t.Fatalf("bucketOf(%v) = %d, below bucketOf of a smaller value (%d)", d, b, prev)
		}
		prev = b
		if rel := math.Abs(float64(bucketMid(b)-d)) / float64(d); rel > 1.0/32+1e-9 {
			t.Fatalf("bucketOf(%v) = %d with midpoint %v: relative error %.4f > 1/32", d, b, bucketMid(b), rel)
		}
	}
	for i := range numBuckets {
		if got := bucketOf(bucketMid(i)); got != i {
			t.Fatalf("bucketOf(bucketMid(%d) = %v) = %d", i, bucketMid(i), got)
		}
	}
	if got := bucketOf(time.Hour); got != numBuckets-1 {
		t.Errorf("bucketOf(1h) = %d, want the last bucket %d", got, numBuckets-1)
	}
	if got := bucketOf(-time.Second); got != 0 {
		t.Errorf("bucketOf(-1s) = %d, want 0", got)
	}
}

// TestHistogramAccuracy compares quantiles of a heavy-tailed sample with
// the exact quantiles of the sorted sample.
func TestHistogramAccuracy(t *testing.T) {
	tests := []struct {
		name string
		gen  func(r *rand.Rand) time.Duration
	}{
		{"lognormal around 300ms", func(r *rand.Rand) time.Duration {
			return time.Duration(math.Exp(r.NormFloat64()*0.8) * float64(300*time.Millisecond))
		}},
		{"uniform 10µs to 10ms", func(r *rand.Rand) time.Duration {
			return 10*time.Microsecond + time.Duration(r.Int64N(int64(10*time.Millisecond)))
		}},
		{"5 percent 20x slower", func(r *rand.Rand) time.Duration {
			d := 80*time.Millisecond + time.Duration(r.Int64N(int64(40*time.Millisecond)))
			if r.Float64() < 0.05 {
				d *= 20
			}
			return d
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, err := NewHistogram(HistogramConfig{Now: newFakeClock().Now})
			if err != nil {
				t.Fatal(err)
			}
			r := rand.New(rand.NewPCG(3, 5))
			sample := make([]time.Duration, 20000)
			for i := range sample {
				sample[i] = tt.gen(r)
				h.Record(sample[i])
			}
			slices.Sort(sample)
			if got := h.Count(); got != int64(len(sample)) {
				t.Fatalf("Count() = %d, want %d", got, len(sample))
			}
			for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1} {
				rank := max(int(math.Ceil(q*float64(len(sample)))), 1)
				want := sample[rank-1]
				got := h.Quantile(q)
				if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.0625 {
					t.Errorf("Quantile(%v) (-got +want):\n-%v\n+%v\n(relative error %.3f)", q, got, want, rel)
				}
			}
		})
	}
}

func TestHistogramWindow(t *testing.T) {
	clk := newFakeClock()
	h, err := NewHistogram(HistogramConfig{Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Quantile(0.5); got != 0 {
		t.Errorf("empty Quantile(0.5) = %v, want 0", got)
	}
	for range 100 {
		h.Record(10 * time.Millisecond)
	}
	clk.Advance(12 * time.Second) // third sub-window
	for range 100 {
		h.Record(time.Second)
	}
	steps := []struct {
		name    string
		advance time.Duration
		count   int64
		p25     time.Duration // bucket midpoint
	}{
		{"both slices in the window", 0, 200, bucketMid(bucketOf(10 * time.Millisecond))},
		{"first slice at the window's edge", 17*time.Second + 999*time.Millisecond, 200, bucketMid(bucketOf(10 * time.Millisecond))},
		{"first slice expired", time.Millisecond, 100, bucketMid(bucketOf(time.Second))},
		{"second slice at the edge", 10*time.Second - time.Millisecond, 100, bucketMid(bucketOf(time.Second))},
		{"all expired", time.Millisecond, 0, 0},
		{"long idle", time.Hour, 0, 0},
	}
	for _, s := range steps {
		clk.Advance(s.advance)
		if got := h.Count(); got != s.count {
			t.Errorf("%s: Count() (-got +want):\n-%d\n+%d", s.name, got, s.count)
		}
		if got := h.Quantile(0.25); got != s.p25 {
			t.Errorf("%s: Quantile(0.25) (-got +want):\n-%v\n+%v", s.name, got, s.p25)
		}
	}
	h.Record(time.Millisecond)
	if got := h.Count(); got != 1 {
		t.Errorf("Count() after idle and one record = %d, want 1", got)
	}
}

func TestHistogramConcurrent(t *testing.T) {
	clk := newFakeClock()
	h, err := NewHistogram(HistogramConfig{SubWindow: time.Second, SubWindows: 3, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 5000 {
				h.Record(time.Duration(g*i) * time.Microsecond)
				if g == 0 && i%1000 == 0 {
					h.Quantile(0.99)
				}
			}
		})
	}
	wg.Wait()
	if got := h.Count(); got != 40000 {
		t.Errorf("Count() = %d, want 40000", got)
	}
	clk.Advance(3 * time.Second)
	if got := h.Count(); got != 0 {
		t.Errorf("Count() after the window = %d, want 0", got)
	}
}

func TestHistogramConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  HistogramConfig
	}{
		{"sub-window too short", HistogramConfig{SubWindow: time.Microsecond}},
		{"negative sub-windows", HistogramConfig{SubWindows: -1}},
		{"too many sub-windows", HistogramConfig{SubWindows: 1001}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := NewHistogram(tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("NewHistogram error = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

// benchClocks runs a benchmark with the real clock and with a fixed one:
// where time.Now is slow (no vDSO in some sandboxes, ~350ns here) the fixed
// clock shows the package's own cost.
var benchClocks = []struct {
	name string
	now  func() time.Time
}{
	{"clock=time.Now", nil},
	{"clock=fixed", func() time.Time { return time.Time{} }},
}

func BenchmarkRecord(b *testing.B) {
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			h, err := NewHistogram(HistogramConfig{Now: c.now})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				d := 137 * time.Millisecond
				for pb.Next() {
					h.Record(d)
					d += 7 * time.Microsecond
				}
			})
		})
	}
}

func BenchmarkQuantile(b *testing.B) {
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			h, err := NewHistogram(HistogramConfig{Now: c.now})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 10000 {
				h.Record(time.Duration(i) * 50 * time.Microsecond)
			}
			b.ReportAllocs()
			for b.Loop() {
				h.Quantile(0.99)
			}
		})
	}
}

// NewHistogram validates cfg, fills in defaults and returns an empty
// Histogram.
func NewHistogram(cfg HistogramConfig) (*Histogram, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	return newHistogram(cfg, cfg.Now()), nil
}
