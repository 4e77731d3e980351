package report

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/store/sqlite"
)

var update = flag.Bool("update", false, "rewrite the golden HTML reports in testdata")

// The HTML report byte for byte: the fixture's, an empty log's, and one
// whose labels hold every character HTML escapes (a NUL, quotes, '&', '+',
// angle brackets) in the page's text and in its charts. The goldens were
// written by the html/template page that writeHTML replaced.
func TestRenderHTMLGolden(t *testing.T) {
	const bad = "<m&'\"+\x00>"
	cases := []struct {
		name   string
		report func(t *testing.T) *Report
	}{
		{name: "fixture", report: func(t *testing.T) *Report { return build(t, writeLog(t, fixture())) }},
		{name: "empty", report: func(t *testing.T) *Report { return build(t, writeLog(t, nil)) }},
		{name: "audit", report: func(t *testing.T) *Report {
			r := build(t, writeLog(t, fixture()))
			r.Audit = NewAudit(4, []sqlite.AuditCount{{Kind: "EMAIL", Action: "redact", Outcome: "sent", Values: 5, Requests: 3},
				{Kind: "CARD", Action: "block", Outcome: "blocked", Values: 1, Requests: 1}, {Kind: "", Action: "redact", Outcome: "unavailable", Values: 1, Requests: 1}})
			return r
		}},
		{name: "escaping", report: func(t *testing.T) *Report {
			r := build(t, writeLog(t, fixture()))
			r.Stages = append(r.Stages, Count{Key: bad, N: 1})
			r.Cost.ByModel[0].Model = bad
			r.Cost.Note = bad
			r.Cost.UnpricedAttempts = 3
			r.Errors[0].Code = bad
			r.AttemptErrors[0].Outcome = bad
			r.Fallbacks.ByReason[0].Key = bad
			r.Amplification.ByKind[0].Kind = bad
			return r
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, c.report(t), "html"); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", c.name+".golden.html")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := buf.Bytes(); !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Errorf("HTML differs from %s at byte %d (-got +want):\n-%q\n+%q", path, i, got[i:min(len(got), i+80)], want[i:min(len(want), i+80)])
			}
		})
	}
}
