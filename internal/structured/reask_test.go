package structured

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestRepairPrompt(t *testing.T) {
	s := mustCompile(t, riskSchema)
	answer := `{"risk_level": "severe", "mitigation_steps": []}`
	r := Repair(answer, s, Options{})
	if r.Valid {
		t.Fatal("answer unexpectedly valid")
	}
	got := RepairPrompt(string(r.Output), r.Violations, json.RawMessage(riskSchema))
	want := `Your previous answer is not valid JSON for the required schema.

Problems:
- (root): missing property 'confidence_score'
- /mitigation_steps: minItems: got 0, want 1
- /risk_level: value must be one of 'low', 'medium', 'high'

Previous answer:
<answer>
{"risk_level": "severe", "mitigation_steps": []}
</answer>

Required JSON Schema:
{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},"summary":{"type":"string"},"mitigation_steps":{"type":"array","items":{"type":"string"},"minItems":1},"confidence_score":{"type":"number","minimum":0,"maximum":1}},"required":["risk_level","mitigation_steps","confidence_score"]}

Reply with only the corrected JSON value: no code fences, no commentary. Fix only the problems listed. Keep every value that was already correct exactly as written (amounts with their currency symbols, numbers, percentages, dates and identifiers byte for byte), and do not invent values: if a required value is unknown, the answer must still state only what you know.
`
	if d := diff(got, want); d != "" {
		t.Error(d)
	}
}

func TestRepairPromptLimits(t *testing.T) {
	var vs []Violation
	for range 30 {
		vs = append(vs, Violation{Pointer: "/x", Keyword: "type", Message: "got string, want number"})
	}
	got := RepairPrompt("{}", vs, nil)
	if n := strings.Count(got, "- /x:"); n != maxPromptViolations {
		t.Errorf("listed %d violations, want %d", n, maxPromptViolations)
	}
	if !strings.Contains(got, "and 10 more") || strings.Contains(got, "Required JSON Schema") {
		t.Errorf("prompt:\n%s", got)
	}
	if got := RepairPrompt("x", nil, nil); !strings.Contains(got, "could not be parsed") {
		t.Errorf("prompt without violations:\n%s", got)
	}
}
