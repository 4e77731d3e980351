package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
	"github.com/keelmesh/keel/sim"
)

// temperatures records the temperature of each call sent upstream.
type temperatures struct {
	next http.RoundTripper
	mu   sync.Mutex
	got  []float64
}

func (r *temperatures) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		var body struct {
			Temperature *float64 `json:"temperature"`
		}
		if json.Unmarshal(b, &body) == nil && body.Temperature != nil {
			r.mu.Lock()
			r.got = append(r.got, *body.Temperature)
			r.mu.Unlock()
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return r.next.RoundTrip(req)
}

// last is the temperature of the last call sent upstream, -1 for none.
func (r *temperatures) last() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.got) == 0 {
		return -1
	}
	return r.got[len(r.got)-1]
}

// saveCalibrations writes cals to a new calibration file, as `keel
// calibrate` does, and returns its path.
func saveCalibrations(t *testing.T, cals ...*normalize.Calibration) string {
	t.Helper()
	db := filepath.Join(t.TempDir(), "cal.db")
	st, err := calstore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, c := range cals {
		if err := st.Save(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

// Issue 16: replicas sharing a Redis share calibrations. A replica
// publishes the calibrations of its file when it starts and reads the
// fleet's, so a replica without a calibration file maps temperatures with
// another's; for one id the calibration created last wins, wherever it
// was made; with Redis down a replica starts on its own calibrations,
// says so once, and New does not fail.
func TestCalibrationsSharedThroughRedis(t *testing.T) {
	rs := redistest.Start(t)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cal := func(mid float64, created time.Time) *normalize.Calibration {
		return &normalize.Calibration{ID: "opus-to-haiku", Reference: "sim-opus", Target: "sim-haiku",
			Grid: []float64{0, 0.5, 1}, Mapped: []float64{0, mid, 0.6}, Clamped: []bool{false, false, false}, CreatedAt: created}
	}
	none := filepath.Join(t.TempDir(), "none.db") // no such file: no local calibration
	first := saveCalibrations(t, cal(0.3, t0))
	older := saveCalibrations(t, cal(0.1, t0.Add(-time.Hour)))
	newer := saveCalibrations(t, cal(0.45, t0.Add(time.Hour)))

	// replica builds a mesh on calDB sharing rs, calls sim-haiku at
	// temperature 0.5 naming the calibration, and returns the answer's
	// status and offset header, the temperature sent upstream, and the
	// warnings logged while building it.
	replica := func(t *testing.T, calDB string) (status int, offset string, upstream float64, warnings []string) {
		t.Helper()
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		cfg := simfleet.Config(fleet, "http://sim.test")
		off := false
		cfg.RequestLog.Enabled = &off
		cfg.Normalization.CalibrationDB = calDB
		cfg.Redis = config.Redis{URL: config.Secret(rs.URL()), KeyPrefix: "caltest:"}
		var logs bytes.Buffer
		up := &temperatures{next: fleet.Transport()}
		m, err := keel.New(cfg, keel.WithUpstream(up), keel.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
		if err != nil {
			t.Fatalf("keel.New: %v", err)
		}
		defer m.Close()
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "calibrations") {
				warnings = append(warnings, l)
			}
		}
		r := (&simMesh{mesh: m}).call(t, "/v1/messages", msgBody("sim-haiku", "x", `,"temperature":0.5,"mesh_behavior":{"calibration_id":"opus-to-haiku"}`))
		return r.status, r.header.Get("X-Mesh-Normalization-Offset"), up.last(), warnings
	}

	tests := []struct {
		name      string
		calDB     string
		redisDown bool
		status    int
		offset    string  // X-Mesh-Normalization-Offset
		upstream  float64 // the temperature sent upstream (-1: no call)
		warnings  int     // about calibrations, logged by New
	}{
		{"the first replica serves with its file's calibration", first, false, 200, "-0.200", 0.3, 0},
		{"a replica without a file serves with the fleet's", none, false, 200, "-0.200", 0.3, 0},
		{"a replica whose own is older serves with the fleet's newer one", older, false, 200, "-0.200", 0.3, 0},
		{"a replica whose own is newer serves with it", newer, false, 200, "-0.050", 0.45, 0},
		{"and publishes it: a replica without a file now gets that one", none, false, 200, "-0.050", 0.45, 0},
		{"Redis down: a replica serves with its own, warned once", first, true, 200, "-0.200", 0.3, 1},
		{"Redis down: a replica without a file has none", none, true, 400, "", -1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.redisDown {
				rs.Kill()
			}
			status, offset, upstream, warnings := replica(t, tt.calDB)
			if status != tt.status || offset != tt.offset || upstream != tt.upstream {
				t.Errorf("status %d, offset %q, upstream temperature %v; want %d, %q, %v", status, offset, upstream, tt.status, tt.offset, tt.upstream)
			}
			if len(warnings) != tt.warnings {
				t.Errorf("%d warnings about calibrations, want %d: %q", len(warnings), tt.warnings, warnings)
			}
		})
	}
}
