package sqlite

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/shadow"
)

// TestShadowStoreRoundTrip: results written are read back equal, filtered
// by alias and time, and rows past the retention are deleted at open.
func TestShadowStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shadow.db")
	now := time.Date(2026, 12, 2, 6, 0, 0, 0, time.UTC)
	s, err := OpenShadow(ShadowConfig{Path: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	rule, _ := shadow.ParseRule("score >= 0.8")
	want := []shadow.Result{
		{Time: now.Add(-40 * 24 * time.Hour), RequestID: "old", Alias: "a", Outcome: shadow.OutcomeDropped},
		{Time: now.Add(-time.Hour), RequestID: "r1", Alias: "a", Target: "model:m2", PrimaryModel: "m1", ShadowModel: "m2", Outcome: shadow.OutcomeCompared,
			PrimaryCost: 0.01, ShadowCost: 0.02, ShadowTime: 1500 * time.Millisecond, Rule: rule.Source(),
			Comparison: shadow.Compare(`{"score":0.81,"r":"x"}`, `{"score":0.79,"r":"x"}`, rule)},
		{Time: now, RequestID: "r2", Alias: "b", Target: "legacy", Outcome: shadow.OutcomeError, Error: "boom"},
	}
	for _, r := range want {
		s.OnShadow(r)
	}
	if err := s.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, err := ReadShadow(context.Background(), path, ShadowQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 {
		t.Fatalf("read %d results, want 3", len(got))
	}
	for i := range got {
		got[i].Time = got[i].Time.UTC()
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("result %d (-got +want):\n-%+v\n+%+v", i, got[i], want[i])
		}
	}
	got, _ = ReadShadow(context.Background(), path, ShadowQuery{Alias: "a", Since: now.Add(-2 * time.Hour)})
	if len(got) != 1 || got[0].RequestID != "r1" {
		t.Errorf("alias a since 2h: %+v", got)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = OpenShadow(ShadowConfig{Path: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, _ = ReadShadow(context.Background(), path, ShadowQuery{})
	if len(got) != 2 || got[0].RequestID != "r1" {
		t.Errorf("after reopening, the 40-day-old row should be gone: %+v", got)
	}
}
