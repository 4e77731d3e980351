// Package golden holds the golden-file helpers the packages' tests share:
// compare output with a file in testdata, or rewrite the file when the
// test binary runs with -update, and a small line diff for the failure
// message. It is imported by tests only.
package golden

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// Update reports whether the test binary runs with -update.
func Update() bool { return *update }

// Check compares got with the golden file at path, or rewrites the file
// (creating its directory) when -update is set.
func Check(t testing.TB, path string, got []byte) {
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
		t.Errorf("%s differs (-got +want):\n%s", path, Diff(string(got), string(want)))
	}
}

// Diff is a small line diff (longest common subsequence): "-" lines only
// in got, "+" lines only in want, equal lines left out, each with its line
// number. For one-line documents it points at the first differing byte.
func Diff(got, want string) string {
	a, b := strings.Split(got, "\n"), strings.Split(want, "\n")
	if len(a) == 1 && len(b) == 1 {
		i := 0
		for i < len(got) && i < len(want) && got[i] == want[i] {
			i++
		}
		lo := max(0, i-40)
		return fmt.Sprintf("first difference at byte %d:\n-%q\n+%q", i, got[lo:min(len(got), i+40)], want[lo:min(len(want), i+40)])
	}
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
		case j == len(b) || (i < len(a) && lcs[i+1][j] >= lcs[i][j+1]):
			fmt.Fprintf(&sb, "%4d -%s\n", i+1, a[i])
			i++
		default:
			fmt.Fprintf(&sb, "%4d +%s\n", j+1, b[j])
			j++
		}
	}
	return sb.String()
}
