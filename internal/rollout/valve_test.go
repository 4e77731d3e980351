package rollout

import (
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/resilience"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// The valve opens when the fallback rate passes the threshold with enough
// calls in the window, holds, and closes at the first call after the hold.
func TestValveTripsHoldsCloses(t *testing.T) {
	v := NewValve(resilience.ValveConfig{Threshold: 0.5, Window: 10 * time.Second, MinRequests: 4, Hold: 30 * time.Second})
	if tr, _, _ := v.Observe(t0, false); tr != Unchanged {
		t.Fatalf("first call: %v", tr)
	}
	for i := range 2 {
		if tr, _, n := v.Observe(t0, true); tr != Unchanged {
			t.Fatalf("fallback %d with %d calls (under MinRequests): %v", i, n, tr)
		}
	}
	tr, rate, n := v.Observe(t0, true)
	if tr != Opened || rate != 0.75 || n != 4 {
		t.Fatalf("3 fallbacks in 4 calls: %v rate %v n %d, want Opened 0.75 4", tr, rate, n)
	}
	if !v.Open(t0) || !v.OpenUntil().Equal(t0.Add(30*time.Second)) {
		t.Fatalf("open %v until %v, want open until +30s", v.Open(t0), v.OpenUntil())
	}
	if tr, _, _ := v.Observe(t0.Add(29*time.Second), true); tr != Unchanged || !v.Open(t0.Add(29*time.Second)) {
		t.Fatalf("during the hold: %v", tr)
	}
	end := t0.Add(30 * time.Second)
	if v.Open(end) {
		t.Fatal("open at the end of the hold")
	}
	tr, rate, n = v.Observe(end, false)
	if tr != Closed || rate != 0.5 || n != 2 {
		t.Errorf("after the hold: %v rate %v n %d, want Closed 0.5 2", tr, rate, n)
	}
	if tr, _, _ := v.Observe(end, false); tr != Unchanged {
		t.Errorf("closed twice: %v", tr)
	}
}

// Calls older than the window leave it.
func TestValveWindowSlides(t *testing.T) {
	v := NewValve(resilience.ValveConfig{Threshold: 0.5, Window: 3 * time.Second, MinRequests: 4, Hold: time.Minute})
	for range 3 {
		v.Observe(t0, true)
	}
	if rate, n := v.Window(t0.Add(2 * time.Second)); rate != 1 || n != 3 {
		t.Errorf("inside the window: rate %v n %d, want 1 3", rate, n)
	}
	if rate, n := v.Window(t0.Add(3 * time.Second)); rate != 0 || n != 0 {
		t.Errorf("after the window: rate %v n %d, want 0 0", rate, n)
	}
	if tr, _, n := v.Observe(t0.Add(3*time.Second), true); tr != Unchanged || n != 1 {
		t.Errorf("a fallback after the window: %v with %d calls, want no trip with 1", tr, n)
	}
}

func TestValveCounts(t *testing.T) {
	on := NewValve(resilience.ValveConfig{})
	off := NewValve(resilience.ValveConfig{Disabled: true})
	for _, tc := range []struct {
		name                    string
		v                       *Valve
		legacy, failed, meshErr bool
		want                    bool
	}{
		{"served", on, false, false, false, true},
		{"mesh error", on, false, true, true, true},
		{"client error (a 400)", on, false, true, false, false},
		{"legacy path", on, true, false, false, false},
		{"disabled", off, false, false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.Counts(tc.legacy, tc.failed, tc.meshErr); got != tc.want {
				t.Errorf("Counts = %v, want %v", got, tc.want)
			}
		})
	}
	if !on.Enabled() || off.Enabled() {
		t.Error("Enabled wrong")
	}
}

// A disabled valve is never open, whatever it was told.
func TestValveDisabledNeverOpens(t *testing.T) {
	v := NewValve(resilience.ValveConfig{Disabled: true, MinRequests: 1})
	v.Observe(t0, true)
	if v.Open(t0) {
		t.Error("a disabled valve opened")
	}
}

// The zero config is the documented default.
func TestValveDefaults(t *testing.T) {
	c := NewValve(resilience.ValveConfig{}).Config()
	if c.Threshold != 0.05 || c.Window != time.Minute || c.MinRequests != 50 || c.Hold != 30*time.Second {
		t.Errorf("defaults %+v", c)
	}
	if n := len(NewValve(resilience.ValveConfig{Window: time.Millisecond}).buckets); n != 1 {
		t.Errorf("%d buckets for a window under a second, want 1", n)
	}
}

// TestValveFinishedReportsTransitions: a call that does not count (legacy,
// a client's error) changes nothing; the call that trips the valve
// reports its opening with the hold's end, at the clock's time, and the
// state says open until then; the first call after the hold reports the
// closing.
func TestValveFinishedReportsTransitions(t *testing.T) {
	v := NewValve(resilience.ValveConfig{Threshold: 0.5, Window: 10 * time.Second, MinRequests: 2, Hold: 30 * time.Second})
	at := t0.Add(time.Second)
	clock := func() time.Time { return at }
	if _, ok := v.Finished(t0, true, false, false, true, clock); ok {
		t.Fatal("a legacy call changed the valve")
	}
	if _, ok := v.Finished(t0, false, true, false, true, clock); ok {
		t.Fatal("a client's error changed the valve")
	}
	if _, ok := v.Finished(t0, false, false, false, true, clock); ok {
		t.Fatal("one call tripped the valve")
	}
	ev, ok := v.Finished(t0, false, true, true, true, clock)
	want := observe.ValveEvent{Event: observe.ValveEventOpen, FallbackRate: 1, Requests: 2, Threshold: 0.5, OpenUntil: t0.Add(30 * time.Second), Time: at}
	if !ok || !ev.OpenUntil.Equal(want.OpenUntil) {
		t.Fatalf("tripping call: %+v %v, want %+v", ev, ok, want)
	}
	if ev.OpenUntil = want.OpenUntil; ev != want {
		t.Fatalf("tripping call: %+v, want %+v", ev, want)
	}
	s := v.State(t0)
	if s.OpenUntil.Equal(want.OpenUntil) {
		s.OpenUntil = want.OpenUntil
	}
	if s != (State{Enabled: true, Open: true, OpenUntil: want.OpenUntil, Threshold: 0.5}) {
		t.Errorf("state while open: %+v", s)
	}
	ev, ok = v.Finished(t0.Add(30*time.Second), false, false, false, false, clock)
	if !ok || ev.Event != observe.ValveEventClosed || !ev.OpenUntil.IsZero() || ev.Requests != 1 {
		t.Errorf("after the hold: %+v %v, want a closing over 1 call", ev, ok)
	}
}
