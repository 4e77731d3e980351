package resilience

import (
	"testing"
	"time"
)

func TestHedgePolicyDelay(t *testing.T) {
	tests := []struct {
		name string
		p    HedgePolicy
		p95  time.Duration
		want time.Duration
	}{
		{name: "no data uses default ceiling", p95: 0, want: 2 * time.Second},
		{name: "negative treated as no data", p95: -time.Second, want: 2 * time.Second},
		{name: "below default floor", p95: time.Millisecond, want: 20 * time.Millisecond},
		{name: "inside bounds", p95: 300 * time.Millisecond, want: 300 * time.Millisecond},
		{name: "above default ceiling", p95: time.Minute, want: 2 * time.Second},
		{name: "custom floor", p: HedgePolicy{Floor: 50 * time.Millisecond}, p95: 10 * time.Millisecond, want: 50 * time.Millisecond},
		{name: "custom ceiling with no data", p: HedgePolicy{Ceiling: 500 * time.Millisecond}, want: 500 * time.Millisecond},
		{name: "custom ceiling clamps", p: HedgePolicy{Ceiling: 500 * time.Millisecond}, p95: time.Second, want: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.p.Delay(tt.p95); got != tt.want {
				t.Errorf("Delay(%v) (-got +want):\n-%v\n+%v", tt.p95, got, tt.want)
			}
		})
	}
}
