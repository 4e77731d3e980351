package structured

import (
	"strings"
	"testing"
)

// Issue 18: a personal-data placeholder ([EMAIL_1], [CN_ID_2]) the engine
// put in the prompt is one guarded span, brackets included, so no repair
// step and no fragment cut breaks it (only "EMAIL_1" was guarded: a step
// dropping a bracket passed the guard).
func TestGuardedSpansKeepPlaceholdersWhole(t *testing.T) {
	var got []string
	for _, s := range GuardedSpans(`mail [EMAIL_1] or call [PHONE_12]; id [CN_ID_2]`) {
		got = append(got, s.Kind.String()+":"+s.Text)
	}
	want := []string{"identifier:[EMAIL_1]", "identifier:[PHONE_12]", "identifier:[CN_ID_2]"}
	if d := diffJSON(got, want); d != "" {
		t.Error(d)
	}
	if _, ok := guardCheck(`{"to": "[EMAIL_1]"}`, `{"to": "EMAIL_1]"}`, ""); ok {
		t.Error("a repair that dropped a placeholder's bracket passed the guard")
	}
}

// TestRepairKeepsPlaceholders: a fenced answer with a trailing comma whose
// values are placeholders is repaired with every placeholder intact.
func TestRepairKeepsPlaceholders(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {"email": {"type": "string"}, "phone": {"type": "string"}}, "required": ["email", "phone"]}`)
	r := Repair("Here you go:\n```json\n{'email': '[EMAIL_1]', 'phone': '[PHONE_1]',}\n```", s, Options{Input: "email: [EMAIL_1]\nphone: [PHONE_1]"})
	if !r.Valid || !strings.Contains(string(r.Output), `"[EMAIL_1]"`) || !strings.Contains(string(r.Output), `"[PHONE_1]"`) {
		t.Fatalf("repair: valid %v output %s steps %+v", r.Valid, r.Output, r.Steps)
	}
}
