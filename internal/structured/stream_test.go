package structured

import (
	"strings"
	"testing"
)

func TestStreamValidator(t *testing.T) {
	risk := mustCompile(t, riskSchema)
	tests := []struct {
		name       string
		deltas     []string
		wantValid  bool
		wantChange bool
	}{
		{name: "valid tool input", deltas: Deltas([]byte(riskAnswer), 7), wantValid: true},
		{name: "fenced text", deltas: []string{"```json\n", riskAnswer[:60], riskAnswer[60:], "\n```"}, wantValid: true, wantChange: true},
		{name: "cut tool input", deltas: []string{riskAnswer[:100], riskAnswer[100:152]}, wantValid: true, wantChange: true},
		{name: "unrepairable", deltas: []string{`{"risk_level": "hi`}, wantValid: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sv := NewStreamValidator(risk, Options{Derive: riskDerive})
			for _, d := range tt.deltas {
				sv.Add(d)
			}
			relaxed := sv.Finish()
			if relaxed.Valid != tt.wantValid || relaxed.Changed != tt.wantChange {
				t.Errorf("Finish: valid %v changed %v, want %v %v", relaxed.Valid, relaxed.Changed, tt.wantValid, tt.wantChange)
			}
		})
	}
}

func TestDeltas(t *testing.T) {
	doc := []byte(`{"total": "¥1,234.50", "note": "已付清。"}`)
	for size := range 12 {
		parts := Deltas(doc, size)
		if got := strings.Join(parts, ""); got != string(doc) {
			t.Fatalf("size %d: %s", size, diff(got, string(doc)))
		}
		for _, p := range parts {
			if !utf8Valid(p) {
				t.Errorf("size %d: delta %q splits a character", size, p)
			}
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }
