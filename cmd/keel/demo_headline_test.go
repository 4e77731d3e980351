package main

import (
	"strings"
	"testing"

	"github.com/keelmesh/keel/bench"
)

// Under --quick the demo prints the timeline it plays, scaled to the quick
// duration, not the full run's times from the scenario's description.
func TestDemoHeadlineQuickTimeline(t *testing.T) {
	s, err := bench.LoadScenario("region-outage")
	if err != nil {
		t.Fatal(err)
	}
	q := s.Quick()
	got := demoHeadline(q, true)
	want := "quick timeline t=1s region_down us-east, t=4s region_up us-east"
	if got != want {
		t.Errorf("quick headline %q, want %q", got, want)
	}
	if strings.Contains(got, "10s") {
		t.Errorf("quick headline %q carries the full run's times", got)
	}
	if got := demoHeadline(s, false); got != s.Description {
		t.Errorf("full headline %q, want the description %q", got, s.Description)
	}
}
