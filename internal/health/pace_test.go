package health

import (
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
