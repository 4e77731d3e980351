package sqlite

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
)

func auditRecord(id string, at time.Time, values ...string) *callrec.Record {
	r := &callrec.Record{Call: callrec.Call{RequestID: id, Start: at, Model: "m", KeyID: "k1", Team: "search"},
		PII: &pii.Report{Action: pii.ActionRedact}}
	for i, v := range values {
		// the hash as the engine makes it is opaque here: any hex that is not the value
		r.PII.Findings = append(r.PII.Findings, pii.Finding{Kind: "EMAIL", Where: "messages[0].content[0]", Start: i * 10, End: i*10 + len(v), Hash: "h" + string(rune('a'+i))})
	}
	return r
}

// TestAuditRowsHoldHashesOnly: every byte of the database files is free of
// the values; rows carry the request, key, team, kind, position, action,
// outcome and hash; a failed detection has its own row.
func TestAuditRowsHoldHashesOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.db")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	a, err := OpenAudit(AuditConfig{Path: path, Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	key := a.HashKey()
	if len(key) != 32 {
		t.Fatalf("generated hash key of %d bytes, want 32", len(key))
	}
	a.RequestDone(auditRecord("r1", now, "alice@example.com", "bob@example.org"))
	blocked := auditRecord("r2", now, "carol@example.net")
	blocked.PII.Action, blocked.Err = pii.ActionBlock, &llm.APIError{MeshCode: llm.MeshPIIBlocked}
	a.RequestDone(blocked)
	a.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "r3", Start: now}, PII: &pii.Report{Action: pii.ActionRedact, Failed: true}})
	a.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "r4", Start: now}, PII: &pii.Report{Action: pii.ActionRedact}}) // nothing found: no row
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
		for _, v := range []string{"alice", "bob@", "carol"} {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds %q", f.Name(), v)
			}
		}
	}
	rd, err := OpenAuditReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rows, err := rd.Rows(context.Background(), AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []AuditRow{
		{now, "r1", "k1", "search", "m", "redact", AuditSent, "EMAIL", "messages[0].content[0]", 0, 17, "ha"},
		{now, "r1", "k1", "search", "m", "redact", AuditSent, "EMAIL", "messages[0].content[0]", 10, 25, "hb"},
		{now, "r2", "k1", "search", "m", "block", AuditBlocked, "EMAIL", "messages[0].content[0]", 0, 17, "ha"},
		{now, "r3", "", "", "", "redact", AuditUnavailable, "", "", 0, 0, ""},
	}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v, want %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d (-got +want):\n-%+v\n+%+v", i, rows[i], want[i])
		}
	}
	sum, err := rd.Summary(context.Background(), now.Add(-time.Hour))
	if err != nil || len(sum) != 3 || sum[0] != (AuditCount{"EMAIL", "redact", AuditSent, 2, 1}) {
		t.Errorf("summary %+v (%v)", sum, err)
	}
	// The generated key is stored: a reopened log hashes alike.
	b, err := OpenAudit(AuditConfig{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !bytes.Equal(b.HashKey(), key) {
		t.Error("the reopened audit log has another hash key")
	}
}

// TestAuditRetentionDeletes: rows older than retention_days are deleted at
// Open and when retention runs.
func TestAuditRetentionDeletes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.db")
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := now
	a, err := OpenAudit(AuditConfig{Path: path, RetentionDays: 7, HashKey: []byte("k"), Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	a.RequestDone(auditRecord("old", now.Add(-8*24*time.Hour), "x@y.z"))
	a.RequestDone(auditRecord("edge", now.Add(-6*24*time.Hour), "x@y.z"))
	a.RequestDone(auditRecord("new", now, "x@y.z"))
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := func() []string {
		rd, err := OpenAuditReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer rd.Close()
		rows, err := rd.Rows(context.Background(), AuditFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rows {
			out = append(out, r.RequestID)
		}
		return out
	}
	if got := ids(); len(got) != 2 || got[0] != "edge" || got[1] != "new" {
		t.Fatalf("after the first retention run: %v, want [edge new]", got)
	}
	clock = now.Add(2 * 24 * time.Hour) // edge is now 8 days old
	if err := a.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := ids(); len(got) != 1 || got[0] != "new" {
		t.Fatalf("two days later: %v, want [new]", got)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}
