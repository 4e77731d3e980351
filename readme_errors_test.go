package keel

import (
	"os"
	"regexp"
	"testing"
)

// Every mesh_error_code the code can emit is listed in the README's error
// table, so a client reading the docs knows each one it can receive.
func TestREADMEListsEveryMeshErrorCode(t *testing.T) {
	src, err := os.ReadFile("internal/llm/llm.go")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	codes := regexp.MustCompile(`(?m)^\s*Mesh\w+\s*=\s*"(MESH_[A-Z_]+)"`).FindAllSubmatch(src, -1)
	if len(codes) < 8 {
		t.Fatalf("found %d mesh error codes in internal/llm/llm.go, want at least 8", len(codes))
	}
	for _, c := range codes {
		row := regexp.MustCompile("(?m)^\\| `" + string(c[1]) + "` \\|")
		if !row.Match(readme) {
			t.Errorf("README's error table has no row for %s", c[1])
		}
	}
}
