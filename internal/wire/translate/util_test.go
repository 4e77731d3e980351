package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/keelmesh/keel/internal/golden"
)

// checkGolden is golden.Check; diffLines is golden.Diff.
func checkGolden(t *testing.T, path string, got []byte) { t.Helper(); golden.Check(t, path, got) }

func diffLines(got, want string) string { return golden.Diff(got, want) }

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
