package redis

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
)

// newStore is a Store on url, not started: sharing calibrations needs no
// subscriber.
func newStore(t *testing.T, url string) *Store {
	t.Helper()
	st, err := New(config.Redis{URL: config.Secret(url), KeyPrefix: "test:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func cal(id string, mid float64, created time.Time) *normalize.Calibration {
	return &normalize.Calibration{ID: id, Reference: "sim-opus", Target: "sim-haiku",
		Grid: []float64{0, 0.5, 1}, Mapped: []float64{0, mid, 0.6}, Clamped: []bool{false, false, false}, CreatedAt: created}
}

// summary is cs in id order, one line each, for comparing.
func summary(cs []*normalize.Calibration) []string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s %s→%s grid=%v mapped=%v clamped=%v created=%s", c.ID, c.Reference, c.Target,
			c.Grid, c.Mapped, c.Clamped, c.CreatedAt.UTC().Format(time.RFC3339Nano)))
	}
	slices.Sort(out)
	return out
}

// diff is "" when got and want hold the same calibrations, else the
// lines that differ, (-got +want).
func diff(got, want []*normalize.Calibration) string {
	g, w := summary(got), summary(want)
	if slices.Equal(g, w) {
		return ""
	}
	return "-" + strings.Join(g, "\n-") + "\n+" + strings.Join(w, "\n+")
}

// Two replicas on one Redis: what one publishes the other reads; for one
// id the calibration created last is kept, whichever replica publishes
// first; an older one published later neither replaces it nor comes back.
func TestCalibrationsSharedNewestWins(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newStore(t, srv.URL()), newStore(t, srv.URL())
	ctx := context.Background()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	old, newer := cal("opus-to-haiku", 0.3, t0), cal("opus-to-haiku", 0.4, t0.Add(time.Nanosecond))
	other := cal("opus-to-haiku-v2", 0.2, t0.Add(-time.Hour))
	tests := []struct {
		name  string
		s     *Store
		local []*normalize.Calibration
		want  []*normalize.Calibration
	}{
		{"nothing shared yet", b, nil, nil},
		{"a publishes", a, []*normalize.Calibration{old}, []*normalize.Calibration{old}},
		{"b without calibrations reads a's", b, nil, []*normalize.Calibration{old}},
		{"b's newer one replaces it", b, []*normalize.Calibration{newer, other}, []*normalize.Calibration{newer, other}},
		{"a's older one does not come back", a, []*normalize.Calibration{old}, []*normalize.Calibration{newer, other}},
		{"republishing the same one changes nothing", b, []*normalize.Calibration{newer}, []*normalize.Calibration{newer, other}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.s.ShareCalibrations(ctx, tt.local)
			if err != nil {
				t.Fatal(err)
			}
			if diff := diff(got, tt.want); diff != "" {
				t.Errorf("fleet's calibrations (-got +want):\n%s", diff)
			}
		})
	}
}

// An entry written by hand that is not a calibration is skipped, not fatal.
func TestCalibrationsSkipBadEntries(t *testing.T) {
	srv := redistest.Start(t)
	a := newStore(t, srv.URL())
	ctx := context.Background()
	for field, v := range map[string]string{
		"junk":     "{not json",
		"invalid":  `{"id":"invalid","grid":[1,0],"mapped":[0,0]}`,
		"misnamed": `{"id":"other","grid":[0,1],"mapped":[0,1]}`,
	} {
		if err := a.client.HSet(ctx, "test:calibrations", field, v).Err(); err != nil {
			t.Fatal(err)
		}
	}
	good := cal("opus-to-haiku", 0.3, time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	got, err := a.ShareCalibrations(ctx, []*normalize.Calibration{good})
	if err != nil {
		t.Fatal(err)
	}
	if diff := diff(got, []*normalize.Calibration{good}); diff != "" {
		t.Errorf("calibrations (-got +want):\n%s", diff)
	}
}

// Redis down (killed) or not answering (paused): an error within about
// the timeout, and no calibration; the caller goes on with its own.
func TestCalibrationsRedisDown(t *testing.T) {
	tests := []struct {
		name string
		stop func(*redistest.Server)
	}{
		{"killed", (*redistest.Server).Kill},
		{"paused", (*redistest.Server).Pause},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := redistest.Start(t)
			a := newStore(t, srv.URL())
			tt.stop(srv)
			start := time.Now()
			got, err := a.ShareCalibrations(context.Background(), []*normalize.Calibration{cal("x", 0.3, time.Now())})
			took := time.Since(start)
			if err == nil || got != nil {
				t.Errorf("with Redis %s: %v, %v; want an error and nothing", tt.name, got, err)
			}
			if took > 2*time.Duration(config.DefaultRedisTimeout) {
				t.Errorf("the failure took %v, want about the %v timeout", took, time.Duration(config.DefaultRedisTimeout))
			}
		})
	}
}
