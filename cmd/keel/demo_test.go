package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/store/sqlite"

	"github.com/keelmesh/keel/bench"
)

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// TestDemoQuick runs `keel demo --quick` in-process: it must print the
// side-by-side table (a header and a row per scenario, every field there),
// show 0 mesh errors on region-outage, write the JSON and a self-contained
// HTML report, and finish in under 60 s.
func TestDemoQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 45 s")
	}
	plan, err := demoPlan(true)
	if err != nil {
		t.Fatal(err)
	}
	if plan > 50*time.Second {
		t.Errorf("demo --quick is scheduled for %s, want ≤ 50 s (60 s with the drains)", plan)
	}
	dir := t.TempDir()
	f := &demoFlags{quick: true, jsonOut: filepath.Join(dir, "demo.json"), htmlOut: filepath.Join(dir, "demo.html"), requestLog: filepath.Join(dir, "requests.db")}
	race := raceEnabled()
	if race {
		// The race detector costs several times the CPU: a lighter load
		// keeps the run's shape without starving the machine.
		f.rate = 25
	}
	var out bytes.Buffer
	start := time.Now()
	if err := runDemo(context.Background(), f, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	took := time.Since(start)
	t.Logf("demo --quick took %s (race detector: %v)", took, race)
	if took > 60*time.Second && !race {
		t.Errorf("demo --quick took %s, want under 60 s", took)
	}
	text := out.String()
	t.Log("\n" + text)

	lines := strings.Split(text, "\n")
	hdr := -1
	for i, l := range lines {
		if f := strings.Fields(l); len(f) > 0 && f[0] == "scenario" && len(f) == len(bench.DemoColumns)+1 {
			hdr = i
		}
	}
	if hdr < 0 {
		t.Fatalf("no table header with %d columns", len(bench.DemoColumns)+1)
	}
	rows := map[string][]string{}
	for _, l := range lines[hdr+1 : hdr+1+len(demoOrder())] {
		f := strings.Fields(l)
		if len(f) != len(bench.DemoColumns)+1 {
			t.Fatalf("row %q has %d fields, want %d", l, len(f), len(bench.DemoColumns)+1)
		}
		for i := 1; i <= 8; i++ {
			if _, err := strconv.ParseFloat(f[i], 64); err != nil {
				t.Errorf("row %s: column %s = %q is not a number", f[0], bench.DemoColumns[i-1], f[i])
			}
		}
		rows[f[0]] = f
	}
	for _, name := range demoOrder() {
		if rows[name] == nil {
			t.Errorf("no row for scenario %s", name)
		}
	}
	if ro := rows["region-outage"]; ro != nil {
		if ro[8] != "0" {
			t.Errorf("region-outage: %s client errors through the mesh, want 0", ro[8])
		}
		if ro[7] == "0" {
			t.Errorf("region-outage: 0 errors direct; the outage did not happen")
		}
	}

	if pt := rows["provider-throttle"]; pt != nil {
		// The same Claude model on Bedrock and Vertex serves what
		// Anthropic's API throttles.
		if pt[8] != "0" {
			t.Errorf("provider-throttle: %s client errors through the mesh, want 0", pt[8])
		}
		if pt[7] == "0" {
			t.Errorf("provider-throttle: 0 errors direct; the throttling did not happen")
		}
	}

	var demo struct {
		Scenarios []struct {
			Name   string          `json:"name"`
			Direct json.RawMessage `json:"direct"`
			Mesh   json.RawMessage `json:"mesh"`
		} `json:"scenarios"`
	}
	b, err := os.ReadFile(f.jsonOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &demo); err != nil || len(demo.Scenarios) != len(demoOrder()) {
		t.Errorf("demo JSON: %v, %d scenarios, want %d", err, len(demo.Scenarios), len(demoOrder()))
	}
	// overload calls the alias sim-default through the mesh and its first
	// model, sim-sonnet, direct (the bare simulator has no aliases): both
	// sides know their model, and direct sees sim-sonnet's 529s.
	for _, sc := range demo.Scenarios {
		if sc.Name != "overload" {
			continue
		}
		var direct, mesh struct {
			Requests     int64            `json:"requests"`
			ErrorsByKind map[string]int64 `json:"errors_by_kind"`
		}
		json.Unmarshal(sc.Direct, &direct)
		json.Unmarshal(sc.Mesh, &mesh)
		if direct.ErrorsByKind["status_404"] != 0 || mesh.ErrorsByKind["status_404"] != 0 {
			t.Errorf("overload: 404s direct %d, mesh %d; want none (an unknown model)", direct.ErrorsByKind["status_404"], mesh.ErrorsByKind["status_404"])
		}
		if direct.ErrorsByKind["status_529"] == 0 {
			t.Errorf("overload: direct errors %v, want sim-sonnet's 529s", direct.ErrorsByKind)
		}
	}
	page, err := os.ReadFile(f.htmlOut)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(page), "<svg"); n != 2*len(demoOrder()) {
		t.Errorf("report has %d plots, want %d", n, 2*len(demoOrder()))
	}
	if !strings.Contains(text, "report: "+f.htmlOut) {
		t.Errorf("output does not print the report's path %s", f.htmlOut)
	}

	// keel report renders the log the demo wrote, and its numbers are the log's.
	checkDemoReport(t, f.requestLog, demo.Scenarios)
}

func checkDemoReport(t *testing.T, db string, scenarios []struct {
	Name   string          `json:"name"`
	Direct json.RawMessage `json:"direct"`
	Mesh   json.RawMessage `json:"mesh"`
}) {
	t.Helper()
	r, err := sqlite.OpenReader(db)
	if err != nil {
		t.Fatalf("the demo wrote no readable request log: %v", err)
	}
	rows, failed := 0, 0
	for row, err := range r.Query(context.Background(), time.Time{}) {
		if err != nil {
			t.Fatal(err)
		}
		rows++
		if row.Status >= 400 || row.MeshErrorCode != "" {
			failed++
		}
	}
	r.Close()
	meshRequests := 0
	for _, sc := range scenarios {
		var m struct{ Requests int }
		json.Unmarshal(sc.Mesh, &m)
		meshRequests += m.Requests
	}
	if rows < meshRequests {
		t.Errorf("log has %d rows, the demo sent %d requests through the mesh", rows, meshRequests)
	}
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := rootCmd()
	cmd.SetArgs([]string{"report", "--db", db, "--since", "1h", "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("keel report: %v", err)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Requests    int `json:"requests"`
		ErrorsTotal int `json:"errors_total"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Requests != rows || rep.ErrorsTotal != failed {
		t.Errorf("report: %d requests, %d errors; the log has %d rows, %d failed", rep.Requests, rep.ErrorsTotal, rows, failed)
	}
	html := filepath.Join(t.TempDir(), "report.html")
	cmd = rootCmd()
	cmd.SetArgs([]string{"report", "--db", db, "--since", "1h", "--out", html})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("keel report html: %v", err)
	}
	if page, _ := os.ReadFile(html); !strings.Contains(string(page), "<svg") {
		t.Error("the HTML report has no chart")
	}
}

// demoPlan is the time the demo's runs are scheduled for (without the
// drain of the calls still in flight at the end of each).
func demoPlan(quick bool) (time.Duration, error) {
	total := warmup
	for _, name := range demoOrder() {
		s, err := bench.LoadScenario(name)
		if err != nil {
			return 0, err
		}
		if quick {
			s = s.Quick()
		}
		total += s.Load.Duration.D()
	}
	return total, nil
}

// TestDemoScenarioFlag: --scenario runs only the scenarios named (its
// warm-up warms only what they send).
func TestDemoScenarioFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for about 6 s")
	}
	dir := t.TempDir()
	f := &demoFlags{quick: true, scenarios: []string{"steady"}, rate: 20, htmlOut: filepath.Join(dir, "demo.html")}
	var out bytes.Buffer
	if err := runDemo(context.Background(), f, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	var rows []string
	for _, l := range strings.Split(out.String(), "\n") {
		if fs := strings.Fields(l); len(fs) == len(bench.DemoColumns)+1 && fs[0] != "scenario" {
			rows = append(rows, fs[0])
		}
	}
	if len(rows) != 1 || rows[0] != "steady" {
		t.Errorf("table rows %v, want only steady\n%s", rows, out.String())
	}
}
