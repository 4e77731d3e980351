package golden

import (
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	got := Diff("a\nb\nc\n", "a\nx\nc\n")
	if !strings.Contains(got, "   2 -b") || !strings.Contains(got, "   2 +x") || strings.Contains(got, "a") {
		t.Errorf("Diff = %q", got)
	}
	if got := Diff(`{"k":1}`, `{"k":2}`); !strings.Contains(got, "first difference at byte 5") {
		t.Errorf("one-line Diff = %q", got)
	}
	if got := Diff("same\n", "same\n"); got != "" {
		t.Errorf("equal documents: Diff = %q", got)
	}
}
