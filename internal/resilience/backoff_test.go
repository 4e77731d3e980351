package resilience

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffDelay(t *testing.T) {
	tests := []struct {
		name       string
		cfg        BackoffConfig
		rnd        float64
		attempt    int
		retryAfter time.Duration
		want       time.Duration
	}{
		{name: "first retry half jitter", rnd: 0.5, attempt: 0, want: 50 * time.Millisecond},
		{name: "third retry doubles twice", rnd: 0.5, attempt: 2, want: 200 * time.Millisecond},
		{name: "capped at max", rnd: 0.5, attempt: 10, want: 2500 * time.Millisecond},
		{name: "huge attempt does not overflow", rnd: 0.5, attempt: 1 << 20, want: 2500 * time.Millisecond},
		{name: "negative attempt counts as zero", rnd: 0.5, attempt: -3, want: 50 * time.Millisecond},
		{name: "zero jitter", rnd: 0, attempt: 4, want: 0},
		{name: "rand of one stays below cap", rnd: 1, attempt: 0, want: 100*time.Millisecond - 1},
		{name: "retry-after longer wins", rnd: 0.5, attempt: 0, retryAfter: time.Second, want: time.Second},
		{name: "retry-after shorter loses", rnd: 0.5, attempt: 3, retryAfter: time.Millisecond, want: 400 * time.Millisecond},
		{name: "retry-after above max still honoured", rnd: 0.9, attempt: 30, retryAfter: 30 * time.Second, want: 30 * time.Second},
		{name: "custom base and max", cfg: BackoffConfig{Base: 10 * time.Millisecond, Max: 50 * time.Millisecond}, rnd: 1.0 / 2, attempt: 3, want: 25 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tt.cfg
			cfg.Rand = func() float64 { return tt.rnd }
			b, err := NewBackoff(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if got := b.Delay(tt.attempt, tt.retryAfter); got != tt.want {
				t.Errorf("Delay(%d, %v) (-got +want):\n-%v\n+%v", tt.attempt, tt.retryAfter, got, tt.want)
			}
		})
	}
}

// TestBackoffFullJitter checks that delays spread uniformly over [0, cap):
// the mean is near cap/2 and both ends of the range are reached.
func TestBackoffFullJitter(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	b, err := NewBackoff(BackoffConfig{Rand: r.Float64})
	if err != nil {
		t.Fatal(err)
	}
	const n = 20000
	const ceil = 400 * time.Millisecond // attempt 2
	var sum time.Duration
	lo, hi := ceil, time.Duration(0)
	for range n {
		d := b.Delay(2, 0)
		if d < 0 || d >= ceil {
			t.Fatalf("Delay = %v outside [0, %v)", d, ceil)
		}
		sum += d
		lo, hi = min(lo, d), max(hi, d)
	}
	mean := sum / n
	if mean < 190*time.Millisecond || mean > 210*time.Millisecond {
		t.Errorf("mean delay = %v, want about 200ms", mean)
	}
	if lo > 5*time.Millisecond || hi < 395*time.Millisecond {
		t.Errorf("delays span [%v, %v], want nearly [0, 400ms)", lo, hi)
	}
}

func BenchmarkBackoffDelay(b *testing.B) {
	bo, err := NewBackoff(BackoffConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		bo.Delay(i&7, 0)
	}
}
