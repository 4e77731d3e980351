package translate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// checkGolden compares got with the golden file at path, or rewrites the
// file when -update is set.
func checkGolden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run go test -update to create it): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (-got +want):\n%s", path, diffLines(string(got), string(want)))
	}
}

// diffLines is a small longest-common-subsequence line diff, "-" for got
// and "+" for want, with unchanged lines elided.
func diffLines(got, want string) string {
	a, b := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(a)*len(b) > 4_000_000 {
		return fmt.Sprintf("-%d lines\n+%d lines (too long to diff)", len(a), len(b))
	}
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var sb strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			i++
			j++
		case j == len(b) || i < len(a) && lcs[i+1][j] >= lcs[i][j+1]:
			fmt.Fprintf(&sb, "-%s\n", a[i])
			i++
		default:
			fmt.Fprintf(&sb, "+%s\n", b[j])
			j++
		}
	}
	return sb.String()
}

// indentJSON pretty-prints a JSON document, keeping member order.
func indentJSON(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatalf("invalid JSON %s: %v", b, err)
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// dump renders any value as indented JSON for diffs.
func dump(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}
