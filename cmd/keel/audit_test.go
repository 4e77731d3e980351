package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// Issue 18 item 4: keel audit queries the audit log and exports CSV and
// JSON; --value finds a value's rows by its hash, and no output holds it.
func TestAuditCommand(t *testing.T) {
	db := filepath.Join(t.TempDir(), "audit.db")
	a, err := sqlite.OpenAudit(sqlite.AuditConfig{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	hash := func(v string) string {
		mac := hmac.New(sha256.New, a.HashKey())
		mac.Write([]byte(v))
		return hex.EncodeToString(mac.Sum(nil))
	}
	now := time.Now()
	for i, v := range []string{"alice@example.com", "bob@example.org", "alice@example.com"} {
		a.RequestDone(&callrec.Record{
			Call: callrec.Call{RequestID: "r" + string(rune('1'+i)), Start: now, Model: "sim-sonnet", KeyID: "key1",
				Team: []string{"search", "ads", "search"}[i]},
			PII: &pii.Report{Action: "redact", Findings: []pii.Finding{{Kind: "EMAIL", Where: "messages[0].content[0]", Start: 3, End: 3 + len(v), Hash: hash(v)}}},
		})
	}
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	a.Close()

	out, err := runKeel("audit", "--db", db, "--format", "csv", "--team", "search")
	if err != nil {
		t.Fatalf("csv: %v\n%s", err, out)
	}
	recs, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(recs) != 3 || strings.Join(recs[0], ",") != "time,request_id,key_id,team,model,action,outcome,kind,location,start,end,hash" ||
		recs[1][1] != "r1" || recs[2][1] != "r3" || recs[1][11] != hash("alice@example.com") {
		t.Fatalf("csv export:\n%s (%v)", out, err)
	}

	out, err = runKeel("audit", "--db", db, "--format", "json", "--value", "alice@example.com")
	if err != nil {
		t.Fatalf("json: %v\n%s", err, out)
	}
	var rows []sqlite.AuditRow
	if err := json.Unmarshal([]byte(out), &rows); err != nil || len(rows) != 2 || rows[0].RequestID != "r1" || rows[1].RequestID != "r3" || rows[0].Kind != "EMAIL" {
		t.Fatalf("--value alice: %s (%v)", out, err)
	}

	out, err = runKeel("audit", "--db", db)
	if err != nil || strings.Count(out, "EMAIL") != 3 {
		t.Fatalf("table:\n%s (%v)", out, err)
	}
	for _, o := range []string{out} {
		if strings.Contains(o, "alice") || strings.Contains(o, "bob@") {
			t.Errorf("output holds a value:\n%s", o)
		}
	}
}

// TestReportAuditSection: keel report reads the audit log named by
// --audit-db into its audit section; without one (and no default file) the
// section is left out.
func TestReportAuditSection(t *testing.T) {
	db := reportLog(t)
	audit := filepath.Join(t.TempDir(), "audit.db")
	a, err := sqlite.OpenAudit(sqlite.AuditConfig{Path: audit})
	if err != nil {
		t.Fatal(err)
	}
	a.RequestDone(&callrec.Record{
		Call: callrec.Call{RequestID: "p1", Start: time.Now()},
		PII: &pii.Report{Action: "block",
			Findings: []pii.Finding{{Kind: "CARD", Hash: "h1"}, {Kind: "EMAIL", Hash: "h2"}}},
	})
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	out, err := runKeel("report", "--db", db, "--audit-db", audit, "--format", "md")
	if err != nil {
		t.Fatalf("keel report: %v\n%s", err, out)
	}
	for _, w := range []string{"## Personal data (audit log)", "2 personal-data values found in 1 requests", "| CARD | block | sent | 1 | 1 |"} {
		if !strings.Contains(out, w) {
			t.Errorf("report lacks %q:\n%s", w, out)
		}
	}
	if out, err := runKeel("report", "--db", db, "--format", "md"); err != nil || strings.Contains(out, "Personal data") {
		t.Errorf("without an audit log: %v, section present %v", err, strings.Contains(out, "Personal data"))
	}
}

// keel serve writes the audit log to keel-audit.db when pii is on and the
// file names none; with pii off it writes none.
func TestServeDefaultsAuditPath(t *testing.T) {
	on := &config.Config{PII: config.PII{Enabled: true}}
	serveDefaults(on)
	off := &config.Config{}
	serveDefaults(off)
	named := &config.Config{PII: config.PII{Enabled: true, Audit: config.PIIAudit{Path: "/var/lib/keel/audit.db"}}}
	serveDefaults(named)
	if on.PII.Audit.Path != sqlite.DefaultAuditPath || off.PII.Audit.Path != "" || named.PII.Audit.Path != "/var/lib/keel/audit.db" {
		t.Errorf("audit paths %q %q %q", on.PII.Audit.Path, off.PII.Audit.Path, named.PII.Audit.Path)
	}
}
