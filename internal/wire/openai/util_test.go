package openai

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/golden"
)

// checkGolden is golden.Check; diff is golden.Diff.
func checkGolden(t *testing.T, path string, got []byte) { t.Helper(); golden.Check(t, path, got) }

func diff(got, want string) string { return golden.Diff(got, want) }

// dump renders v as indented JSON for golden files and diffs.
func dump(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

// cases lists testdata files with the given extension, by base name.
func cases(t testing.TB, dir, ext string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata in %s: %v", dir, err)
	}
	m := make(map[string]string, len(paths))
	for _, p := range paths {
		m[strings.TrimSuffix(filepath.Base(p), ext)] = p
	}
	return m
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
