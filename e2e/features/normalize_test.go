package features_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/sim"
)

// Issue 8: when a fallback serves another model, the requested temperature
// is mapped through the calibration for the pair, and the offset reported;
// disable_normalization skips it; parameters the serving API version
// rejects are dropped and reported.
func TestNormalizationOnFallback(t *testing.T) {
	db := filepath.Join(t.TempDir(), "cal.db")
	st, err := calstore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	cal := &normalize.Calibration{ID: "opus-to-haiku", Reference: "sim-opus", Target: "sim-haiku",
		Grid: []float64{0, 0.5, 1}, Mapped: []float64{0, 0.3, 0.6}, Clamped: []bool{false, false, false}}
	if err := st.Save(context.Background(), cal); err != nil {
		t.Fatal(err)
	}
	st.Close()
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Faults = []sim.Fault{{Kind: sim.KindOverloaded, Model: "sim-opus"}}
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Normalization.CalibrationDB = db
			c.Aliases = []config.Alias{{Name: "best", Models: []string{"sim-opus", "sim-haiku"}, Strategy: "ordered"}}
		})
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("best", "x", `,"temperature":0.5`))
		if r.status != 200 || r.header.Get("X-Mesh-Model") != "sim-haiku" {
			t.Fatalf("status %d model %s: %s", r.status, r.header.Get("X-Mesh-Model"), r.body)
		}
		if got := r.header.Get("X-Mesh-Normalization-Offset"); got != "-0.200" {
			t.Errorf("offset %q, want -0.200 (0.5 → 0.3)", got)
		}
		r = s.call(t, "/v1/messages", msgBody("best", "y", `,"temperature":0.5,"mesh_behavior":{"disable_normalization":true}`))
		if got := r.header.Get("X-Mesh-Normalization-Offset"); got != "" {
			t.Errorf("disable_normalization: offset %q", got)
		}
		r = s.call(t, "/v1/messages", msgBody("best", "z", `,"mesh_behavior":{"calibration_id":"nope"}`))
		if r.status != 400 || !strings.Contains(string(r.body), "calibration_id") {
			t.Errorf("unknown calibration_id: %d %s", r.status, r.body)
		}
		// Under API version 2026-10-21 sampling parameters are dropped, and said so.
		r = s.call(t, "/v1/messages", msgBody("sim-haiku", "w", `,"temperature":0.5,"top_k":3`), "anthropic-version", "2026-10-21")
		if r.status != 200 || !strings.Contains(r.header.Get("X-Mesh-Dropped"), "temperature") || !strings.Contains(r.header.Get("X-Mesh-Normalized"), "top_k") {
			t.Errorf("2026-10-21: %d dropped %q normalized %q", r.status, r.header.Get("X-Mesh-Dropped"), r.header.Get("X-Mesh-Normalized"))
		}
	})
}
