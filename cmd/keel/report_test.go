package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// runKeel runs the keel command line in-process and returns its standard
// output and error.
func runKeel(args ...string) (string, error) {
	var out bytes.Buffer
	root := rootCmd()
	root.SetArgs(args)
	root.SetOut(&out)
	root.SetErr(&out)
	err := root.Execute()
	return out.String(), err
}

// reportLog writes a request log of 10 recent calls (3 fell back, 1 in the
// rollout's monitor stage) and one from 40 days ago, and returns its path.
func reportLog(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "requests.db")
	l, err := sqlite.Open(sqlite.Config{Path: path, RetentionDays: 365})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	for i := range 10 {
		r := &callrec.Record{
			Call: callrec.Call{RequestID: "r", Start: now.Add(-time.Duration(i+1) * time.Minute),
				Duration: time.Duration(i+1) * time.Millisecond, Model: "m"},
			Route: callrec.Route{ServedModel: "m",
				Attempts: []callrec.Attempt{{Endpoint: "m@us", Model: "m", Region: "us", Kind: "primary", Outcome: "ok", Winner: true}}},
			Result: callrec.Result{Status: 200, Cost: 0.001},
		}
		if i < 3 {
			r.Fallback = "overloaded"
		}
		r.Stage, r.Legacy = "full", i == 5
		if r.Legacy {
			r.Stage = "monitor"
		}
		l.RequestDone(r)
	}
	l.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "old", Start: now.Add(-40 * 24 * time.Hour)}, Result: callrec.Result{Status: 200}})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestReportCommand(t *testing.T) {
	db := reportLog(t)
	dir := t.TempDir()
	tests := []struct {
		name  string
		args  []string
		file  string // output file, "" for standard output
		wants []string
	}{
		{name: "json to stdout", args: []string{"--format", "json"}, wants: []string{`"requests": 10,`, `"rate": 0.3,`, `"key": "overloaded"`}},
		{name: "md from extension", args: []string{"--out", filepath.Join(dir, "r.md")}, file: "r.md", wants: []string{"# Keel transparency report", "| overloaded | 3 |",
			"1 calls took the plain path to the primary model: 1 in the rollout's monitor stage, 0 because the safety valve was open."}},
		{name: "html default", args: []string{"--out", filepath.Join(dir, "r.html")}, file: "r.html", wants: []string{"<svg", `id="total-requests"><b>10</b>`}},
		{name: "since in days covers the old call", args: []string{"--since", "60d", "--format", "json"}, wants: []string{`"requests": 11,`}},
		{name: "short window", args: []string{"--since", "150s", "--format", "json"}, wants: []string{`"requests": 2,`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := runKeel(append([]string{"report", "--db", db}, tt.args...)...)
			if err != nil {
				t.Fatalf("keel report: %v", err)
			}
			text := out
			if tt.file != "" {
				b, err := os.ReadFile(filepath.Join(dir, tt.file))
				if err != nil {
					t.Fatal(err)
				}
				text = string(b)
				if !strings.HasPrefix(out, "wrote "+filepath.Join(dir, tt.file)+": 10 requests") {
					t.Errorf("summary line %q", out)
				}
			} else if strings.Contains(tt.args[len(tt.args)-1], "json") && !json.Valid([]byte(out)) {
				t.Errorf("stdout is not JSON: %s", out)
			}
			for _, w := range tt.wants {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// TestReportBadInput checks that bad input is a one-line error naming the
// problem, with exit code 2, and that no log file is created.
func TestReportBadInput(t *testing.T) {
	db := reportLog(t)
	dir := t.TempDir()
	notDB := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(notDB, bytes.Repeat([]byte("not a database\n"), 100), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.db")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"unparsable since", []string{"--db", db, "--since", "last week"}, []string{`--since: want a duration such as 720h, got "last week"`}},
		{"negative since", []string{"--db", db, "--since", "-5h"}, []string{"--since: want a duration such as 720h"}},
		{"bad days", []string{"--db", db, "--since", "xd"}, []string{"--since: want a duration such as 720h"}},
		{"unknown format", []string{"--db", db, "--format", "pdf"}, []string{`--format: want html, md or json, got "pdf"`}},
		{"missing log", []string{"--db", missing}, []string{"--db:", "missing.db", "no such file"}},
		{"directory", []string{"--db", dir}, []string{"--db:", "is a directory"}},
		{"not a log", []string{"--db", notDB}, []string{"--db:", "not a keel request log"}},
		{"extra argument", []string{"--db", db, "extra"}, []string{`report takes no arguments, got "extra"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runKeel(append([]string{"report"}, tt.args...)...)
			if err == nil {
				t.Fatal("no error")
			}
			if code := exitCode(err); code != 2 {
				t.Errorf("exit code %d, want 2 (error %v)", code, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("error is not one line: %q", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
		})
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("keel report created %s", missing)
	}
}
