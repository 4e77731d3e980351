package keel_test

import (
	"bufio"
	"bytes"
	"os"
	"strings"
	"testing"
)

// TestSecurityListsDirectDependencies: SECURITY.md's table of direct
// dependencies (issue 29) names every direct requirement of go.mod, and
// nothing that is not one.
func TestSecurityListsDirectDependencies(t *testing.T) {
	gomod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	direct := map[string]bool{}
	inBlock := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "require (":
			inBlock = true
			continue
		case inBlock && line == ")":
			inBlock = false
			continue
		case strings.HasPrefix(line, "require "):
			line = strings.TrimPrefix(line, "require ")
		case !inBlock:
			continue
		}
		if f := strings.Fields(line); len(f) >= 2 && !strings.Contains(line, "// indirect") {
			direct[f[0]] = true
		}
	}
	if len(direct) == 0 {
		t.Fatal("no direct requirement found in go.mod")
	}

	sec, err := os.ReadFile("SECURITY.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(sec), "### Direct dependencies")
	if !ok {
		t.Fatal(`SECURITY.md has no "### Direct dependencies" section`)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cell := strings.Split(line, "|")[1]
		for _, name := range strings.Split(cell, ",") {
			listed[strings.Trim(strings.TrimSpace(name), "`")] = true
		}
	}
	for m := range direct {
		if !listed[m] {
			t.Errorf("go.mod requires %s directly; SECURITY.md does not say why", m)
		}
	}
	for m := range listed {
		if !direct[m] {
			t.Errorf("SECURITY.md lists %s, which is not a direct requirement of go.mod", m)
		}
	}
}
