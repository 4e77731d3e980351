package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// TestShadowReportCommand: keel shadow report prints, per field, the
// comparisons, the share that differ and the |delta| distribution, and
// the decision rule's agreement; --alias and --since select; json parses
// back to the report.
func TestShadowReportCommand(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shadow.db")
	s, err := sqlite.OpenShadow(sqlite.ShadowConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rule, _ := shadow.ParseRule("confidence_score >= 0.8")
	now := time.Now()
	for i := range 10 {
		sh := `{"confidence_score":0.85,"risk_level":"high"}`
		if i < 3 {
			sh = `{"confidence_score":0.84,"risk_level":"high"}`
		}
		s.OnShadow(shadow.Result{Time: now.Add(-time.Minute), RequestID: "r", Alias: "risk", Target: "model:b", Outcome: shadow.OutcomeCompared, Rule: rule.Source(),
			ShadowCost: 0.001, Comparison: shadow.Compare(`{"confidence_score":0.85,"risk_level":"high"}`, sh, rule)})
	}
	s.OnShadow(shadow.Result{Time: now.Add(-time.Minute), Alias: "other", Outcome: shadow.OutcomeDropped})
	s.OnShadow(shadow.Result{Time: now.Add(-48 * time.Hour), Alias: "risk", Outcome: shadow.OutcomeShed})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	out, err := runKeel("shadow", "report", "--db", path, "--since", "24h", "--alias", "risk")
	if err != nil {
		t.Fatal(err, out)
	}
	for _, want := range []string{
		"shadowed calls 10: compared 10, error 0, dropped 0, shed 0",
		"answers that differ: 3 of 10 compared (30.0 %)",
		"confidence_score",
		"30.0 %",
		"numeric_delta 3",
		`decision rule "confidence_score >= 0.8": agrees in 10 of 10 (100.0 %)`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	out, err = runKeel("shadow", "report", "--db", path, "--since", "72h", "--format", "json")
	if err != nil {
		t.Fatal(err, out)
	}
	var rep shadow.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err, out)
	}
	if rep.Calls != 12 || rep.Outcomes[shadow.OutcomeShed] != 1 || rep.Fields[0].AbsDelta == nil || rep.Fields[0].AbsDelta.Max < 0.0099 {
		t.Errorf("json report %+v", rep)
	}
	if _, err := runKeel("shadow", "report", "--db", path, "--format", "xml"); err == nil {
		t.Error("--format xml accepted")
	}
	if _, err := runKeel("shadow", "report", "--db", filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("a missing store accepted")
	}
}
