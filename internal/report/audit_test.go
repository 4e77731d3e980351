package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/store/sqlite"
)

// TestAuditSection: the report's audit section (issue 18 item 4) in
// Markdown and JSON: values by kind, action and outcome, failed detections
// apart; absent when no audit log was read.
func TestAuditSection(t *testing.T) {
	r := build(t, writeLog(t, fixture()))
	var plain bytes.Buffer
	if err := Render(&plain, r, "md"); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plain.String(), "Personal data") {
		t.Error("a report without an audit log has an audit section")
	}
	r.Audit = NewAudit(3, []sqlite.AuditCount{{Kind: "EMAIL", Action: "redact", Outcome: "sent", Values: 5, Requests: 2}, {Action: "redact", Outcome: "unavailable", Values: 1, Requests: 1}})
	var md, js bytes.Buffer
	if err := Render(&md, r, "md"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Personal data (audit log)", "5 personal-data values found in 3 requests; 1 requests whose detection failed",
		"| EMAIL | redact | sent | 5 | 2 |", "| (detection failed) | redact | unavailable | 1 | 1 |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if err := Render(&js, r, "json"); err != nil {
		t.Fatal(err)
	}
	var back struct{ Audit *Audit }
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.Audit == nil || back.Audit.Values != 5 || len(back.Audit.Counts) != 2 {
		t.Errorf("json audit %+v (%v)", back.Audit, err)
	}
}
