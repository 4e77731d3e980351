package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/sim"
)

func writePrompts(t *testing.T, n int) string {
	t.Helper()
	var sb strings.Builder
	sb.WriteString("# calibration prompts\n\n")
	for i := range n {
		fmt.Fprintf(&sb, "Describe how request %d travels through a router and a queue.\n", i)
	}
	p := filepath.Join(t.TempDir(), "prompts.txt")
	if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// With simulated model B configured so that B at 0.3 behaves like A at 0.7
// (temperature scales 7/3 and 1), keel calibrate recovers the mapping
// T → 3T/7 within ±0.05 at every grid point, none of them clamped.
func TestCalibrateRecoversKnownOffset(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	simCfg := filepath.Join(dir, "sim.yaml")
	os.WriteFile(simCfg, []byte(`
seed: 7
regions: [{name: r1}]
models:
  - {name: model-a, capability: 3, regions: [r1], temperature_scale: 1}
  - {name: model-b, capability: 3, regions: [r1], temperature_scale: 2.3333333333}
`), 0o644)
	db := filepath.Join(dir, "cal.db")
	cases := []struct {
		name string
		id   string
		args []string
	}{
		{"sim config", "a-b", []string{"--sim-config", simCfg, "--reference", "model-a", "--target", "model-b"}},
		{"default fleet with a scale override", "opus-haiku", []string{"--sim", "--reference", "sim-opus", "--target", "sim-haiku", "--sim-scale", "sim-haiku=2.3333333333", "--format", "anthropic"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"calibrate", "--prompts", writePrompts(t, 30), "--samples", "8", "--grid", "0,0.1,...,1", "--db", db, "--id", tc.id}, tc.args...)
			out, err := execute(t, args...)
			if err != nil {
				t.Fatalf("keel calibrate: %v\n%s", err, out)
			}
			t.Logf("\n%s", out)
			s, err := calstore.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := storedCalibration(t, s, func(c *normalize.Calibration) bool { return c.ID == tc.id })
			if len(c.Grid) != 11 || c.Samples != 8 || c.Prompts != 30 {
				t.Errorf("stored %d grid points, %d samples, %d prompts", len(c.Grid), c.Samples, c.Prompts)
			}
			worst := 0.0
			for i, g := range c.Grid {
				if c.Clamped[i] {
					t.Errorf("T=%g clamped; the mapping is identifiable over the whole grid", g)
				}
				want := g * 3 / 7
				worst = max(worst, math.Abs(c.Mapped[i]-want))
				if math.Abs(c.Mapped[i]-want) > 0.05 {
					t.Errorf("T=%g maps to %.3f, want %.3f ± 0.05", g, c.Mapped[i], want)
				}
				if !strings.Contains(out, fmt.Sprintf("%10.3f", c.Mapped[i])) {
					t.Errorf("output does not print the mapped temperature %.3f", c.Mapped[i])
				}
			}
			t.Logf("worst mapping error %.4f", worst)
			if got, off := c.Apply(0.7); math.Abs(got-0.3) > 0.05 || math.Abs(off+0.4) > 0.05 {
				t.Errorf("Apply(0.7) = %.3f (offset %+.3f), want 0.3 (-0.4)", got, off)
			}
		})
	}
}

// The reverse direction is not identifiable above the target's range: the
// reference (scale 7/3) gets more diverse than the target (scale 1) ever
// does on a 0–1 grid, so those points are clamped and say so.
func TestCalibrateClampsReverse(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	db := filepath.Join(t.TempDir(), "cal.db")
	out, err := execute(t, "calibrate", "--prompts", writePrompts(t, 10), "--samples", "4", "--grid", "0,0.25,0.5,0.75,1", "--db", db,
		"--reference", "sim-haiku", "--target", "sim-opus", "--sim-scale", "sim-haiku=2.3333333333")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "clamped") {
		t.Errorf("no clamped point reported:\n%s", out)
	}
	s, err := calstore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := storedCalibration(t, s, func(c *normalize.Calibration) bool { return c.Reference == "sim-haiku" && c.Target == "sim-opus" })
	if c.ID != "sim-haiku-to-sim-opus" || !c.Clamped[4] || c.Clamped[1] {
		t.Errorf("id %q clamped %v", c.ID, c.Clamped)
	}
}

// A real endpoint (here the simulator on a loopback socket) in both formats.
func TestCalibrateBaseURL(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	cfg := sim.ZeroLatency()
	cfg.Models[2].TemperatureScale = 2
	fleet, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	for _, format := range []sim.Format{sim.FormatAnthropic, sim.FormatOpenAI} {
		t.Run(format.String(), func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "cal.db")
			out, err := execute(t, "calibrate", "--prompts", writePrompts(t, 10), "--samples", "6", "--grid", "0,0.5,1", "--db", db,
				"--reference", "sim-opus", "--target", "sim-haiku", "--base-url", srv.BaseURL("", format), "--format", format.String(), "--concurrency", "4")
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			s, err := calstore.Open(db)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			c := storedCalibration(t, s, func(c *normalize.Calibration) bool { return c.ID == "sim-opus-to-sim-haiku" })
			if math.Abs(c.Mapped[1]-0.25) > 0.08 || math.Abs(c.Mapped[2]-0.5) > 0.08 {
				t.Errorf("mapped %v, want about [0 0.25 0.5]", c.Mapped)
			}
		})
	}
}

// Bad input is a one-line error with exit code 2.
func TestCalibrateBadInput(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	prompts := writePrompts(t, 2)
	empty := filepath.Join(t.TempDir(), "empty.txt")
	os.WriteFile(empty, []byte("# nothing\n\n"), 0o644)
	base := func(extra ...string) []string {
		return append([]string{"calibrate", "--reference", "sim-opus", "--target", "sim-haiku", "--prompts", prompts, "--db", filepath.Join(t.TempDir(), "c.db")}, extra...)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"missing prompts file", []string{"calibrate", "--reference", "sim-opus", "--target", "sim-haiku", "--prompts", "/nonexistent/p.txt"}, "--prompts"},
		{"no prompts flag", []string{"calibrate", "--reference", "sim-opus", "--target", "sim-haiku"}, "--prompts FILE is required"},
		{"empty prompts file", []string{"calibrate", "--reference", "sim-opus", "--target", "sim-haiku", "--prompts", empty}, "no prompts"},
		{"unknown model", base("--target", "gpt-9"), `unknown model "gpt-9"`},
		{"bad grid", base("--grid", "0,zero,1"), "--grid"},
		{"decreasing grid", base("--grid", "1,0.5"), "must increase"},
		{"one-point grid", base("--grid", "0.5"), "at least 2"},
		{"one sample", base("--samples", "1"), "--samples"},
		{"same model", []string{"calibrate", "--reference", "sim-opus", "--target", "sim-opus", "--prompts", prompts}, "both"},
		{"sim and base url", base("--sim", "--base-url", "http://127.0.0.1:1"), "exclude"},
		{"base url without format", base("--base-url", "http://127.0.0.1:1"), "--format"},
		{"bad format", base("--format", "grpc"), "--format"},
		{"anthropic grid above 1", base("--format", "anthropic", "--grid", "0,1.5"), "stop at 1"},
		{"bad sim scale", base("--sim-scale", "sim-haiku"), "MODEL=SCALE"},
		{"sim scale for an unknown model", base("--sim-scale", "nope=2"), `unknown model "nope"`},
		{"bad sim config", base("--sim-config", prompts), "--sim-config"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := execute(t, tc.args...)
			if err == nil {
				t.Fatal("no error")
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (%v)", code, err)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line containing %q", msg, tc.want)
			}
		})
	}
}

// storedCalibration is the newest calibration in s that match accepts, read
// through Store.All as keel serve reads the store; the test fails without one.
func storedCalibration(t *testing.T, s *calstore.Store, match func(*normalize.Calibration) bool) *normalize.Calibration {
	t.Helper()
	all, err := s.All(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for i := len(all) - 1; i >= 0; i-- {
		if match(all[i]) {
			return all[i]
		}
	}
	t.Fatalf("no matching calibration among %d stored", len(all))
	return nil
}
