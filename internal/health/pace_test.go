package health

import (
	"errors"
	"testing"
	"time"
)

func TestPace(t *testing.T) {
	var p Pace
	if p.Gap() != 0 {
		t.Fatalf("zero Pace has gap %v", p.Gap())
	}
	p.Observe(0) // a stream of one content event says nothing
	if p.Gap() != 0 {
		t.Fatalf("gap %v after a stream with no gap", p.Gap())
	}
	p.Observe(10 * time.Millisecond)
	if p.Gap() != 10*time.Millisecond {
		t.Errorf("first stream: gap %v, want 10ms", p.Gap())
	}
	p.Observe(20 * time.Millisecond)
	if p.Gap() != 11*time.Millisecond {
		t.Errorf("after a 20ms stream: gap %v, want 11ms (EWMA, alpha 0.1)", p.Gap())
	}
}

func TestPacePolicy(t *testing.T) {
	tests := []struct {
		name   string
		p      PacePolicy
		normal time.Duration
		want   time.Duration
		bad    bool
	}{
		{name: "default threshold 4", normal: 5 * time.Millisecond, want: 20 * time.Millisecond},
		{name: "nothing learned", normal: 0, want: 0},
		{name: "a very fast endpoint", normal: time.Millisecond, want: MinSlowGap},
		{name: "threshold 2.5", p: PacePolicy{Threshold: 2.5}, normal: 10 * time.Millisecond, want: 25 * time.Millisecond},
		{name: "threshold below 2", p: PacePolicy{Threshold: 1.5}, bad: true},
		{name: "negative threshold", p: PacePolicy{Threshold: -4}, bad: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.p.Validate()
			if (err != nil) != tt.bad || err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("Validate() = %v, want error %v", err, tt.bad)
			}
			if !tt.bad {
				if got := tt.p.SlowGap(tt.normal); got != tt.want {
					t.Errorf("SlowGap(%v) = %v, want %v", tt.normal, got, tt.want)
				}
			}
		})
	}
}

// PeerGap is the mean of the peers' learned gaps, leaving out the
// unlearned and those of other models (nil); 0 when none has learned.
func TestPeerGap(t *testing.T) {
	learned := func(d time.Duration) *Pace {
		var p Pace
		p.Observe(d)
		return &p
	}
	for _, tc := range []struct {
		name  string
		peers []*Pace
		want  time.Duration
	}{
		{"none", nil, 0},
		{"none learned", []*Pace{{}, {}}, 0},
		{"other models only", []*Pace{nil, nil}, 0},
		{"one learned", []*Pace{{}, learned(5 * time.Millisecond), nil}, 5 * time.Millisecond},
		{"mean of the learned", []*Pace{learned(4 * time.Millisecond), {}, learned(8 * time.Millisecond), nil}, 6 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PeerGap(len(tc.peers), func(i int) *Pace { return tc.peers[i] }); got != tc.want {
				t.Errorf("PeerGap = %v, want %v", got, tc.want)
			}
		})
	}
}
