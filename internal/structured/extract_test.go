package structured

import (
	"encoding/json"
	"testing"
)

func TestExtractConstraints(t *testing.T) {
	tests := []struct {
		name       string
		prompt     string
		wantSchema string
		wantKeys   []string
	}{
		{
			name:       "english bracketed keys with enum",
			prompt:     "You are a risk analyst. Respond in JSON with keys [risk_level, mitigation_steps, confidence_score]; risk_level must be one of low, medium, high.",
			wantSchema: `{"properties":{"confidence_score":{},"mitigation_steps":{},"risk_level":{"enum":["low","medium","high"]}},"required":["risk_level","mitigation_steps","confidence_score"],"type":"object"}`,
			wantKeys:   []string{"risk_level", "mitigation_steps", "confidence_score"},
		},
		{
			name:       "fields a, b and c",
			prompt:     "Return a JSON object with fields a, b and c.",
			wantSchema: `{"properties":{"a":{},"b":{},"c":{}},"required":["a","b","c"],"type":"object"}`,
			wantKeys:   []string{"a", "b", "c"},
		},
		{
			name:       "template object",
			prompt:     `Output JSON: {"name": ..., "age": ...}`,
			wantSchema: `{"properties":{"age":{},"name":{}},"required":["name","age"],"type":"object"}`,
			wantKeys:   []string{"name", "age"},
		},
		{
			name:       "range with spaced key name",
			prompt:     "Always respond in JSON with keys risk_level and summary. Give the risk level 1–5.",
			wantSchema: `{"properties":{"risk_level":{"maximum":5,"minimum":1,"type":"number"},"summary":{}},"required":["risk_level","summary"],"type":"object"}`,
			wantKeys:   []string{"risk_level", "summary"},
		},
		{
			name:       "leading clause and trailing prose",
			prompt:     "As a reviewer, reply with a JSON object containing the fields verdict and reasons, sorted by importance.",
			wantSchema: `{"properties":{"reasons":{},"verdict":{}},"required":["verdict","reasons"],"type":"object"}`,
			wantKeys:   []string{"verdict", "reasons"},
		},
		{
			name:       "bullet list after colon",
			prompt:     "Respond in JSON with these keys:\n- risk_level: one of low, medium, high\n- summary\n\nBe concise.",
			wantSchema: `{"properties":{"risk_level":{"enum":["low","medium","high"]},"summary":{}},"required":["risk_level","summary"],"type":"object"}`,
			wantKeys:   []string{"risk_level", "summary"},
		},
		{
			name:       "parenthesised enumeration",
			prompt:     "Return JSON with keys status and note. status (open|closed)",
			wantSchema: `{"properties":{"note":{},"status":{"enum":["open","closed"]}},"required":["status","note"],"type":"object"}`,
			wantKeys:   []string{"status", "note"},
		},
		{
			name:       "required fields sentence",
			prompt:     "Output JSON with keys id and name. Required fields: id, name, email.",
			wantSchema: `{"properties":{"email":{},"id":{},"name":{}},"required":["id","name","email"],"type":"object"}`,
			wantKeys:   []string{"id", "name", "email"},
		},
		{
			name:       "chinese fields and range",
			prompt:     "以JSON格式返回，包含字段：风险等级、缓解措施。风险等级为1到5。",
			wantSchema: `{"properties":{"缓解措施":{},"风险等级":{"maximum":5,"minimum":1,"type":"number"}},"required":["风险等级","缓解措施"],"type":"object"}`,
			wantKeys:   []string{"风险等级", "缓解措施"},
		},
		{
			name:       "chinese keys in english",
			prompt:     "请用JSON输出，键为 risk_level, confidence_score",
			wantSchema: `{"properties":{"confidence_score":{},"risk_level":{}},"required":["risk_level","confidence_score"],"type":"object"}`,
			wantKeys:   []string{"risk_level", "confidence_score"},
		},
		{
			name:       "chinese enumeration",
			prompt:     "请用JSON输出，键为 risk_level, confidence_score。risk_level必须是low、medium、high之一",
			wantSchema: `{"properties":{"confidence_score":{},"risk_level":{"enum":["low","medium","high"]}},"required":["risk_level","confidence_score"],"type":"object"}`,
			wantKeys:   []string{"risk_level", "confidence_score"},
		},
		{
			name:       "numeric enumeration",
			prompt:     "Respond in JSON with keys priority. priority must be one of 1, 2, 3.",
			wantSchema: `{"properties":{"priority":{"enum":[1,2,3]}},"required":["priority"],"type":"object"}`,
			wantKeys:   []string{"priority"},
		},
		{name: "demand without keys", prompt: "Respond in JSON.", wantSchema: `{}`},
		{name: "prose after fields is not a key", prompt: "Return JSON with fields that describe the user.", wantSchema: `{}`},
		{name: "json object without keys", prompt: "Your answer must be a JSON object.", wantSchema: `{"type":"object"}`},
		{name: "json array without keys", prompt: "Return a JSON array of the names.", wantSchema: `{"type":"array"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, ok := ExtractConstraints(tt.prompt)
			if !ok {
				t.Fatalf("ExtractConstraints(%q) found nothing", tt.prompt)
			}
			if d := diff(string(im.Schema), tt.wantSchema); d != "" {
				t.Errorf("schema %s", d)
			}
			if d := diffJSON(im.Keys, tt.wantKeys); d != "" {
				t.Errorf("keys %s", d)
			}
			if len(im.Sources) == 0 {
				t.Error("no source phrases")
			}
			if _, err := Compile(im.Schema); err != nil {
				t.Errorf("implied schema does not compile: %v", err)
			}
		})
	}
}

// TestExtractConstraintsNegatives: prompts that mention JSON without
// demanding it get no schema.
func TestExtractConstraintsNegatives(t *testing.T) {
	tests := []struct{ name, prompt string }{
		{"no json at all", "You are a helpful assistant. Answer briefly."},
		{"likes json", "I like JSON."},
		{"json spec", "The JSON spec says numbers are decimal."},
		{"negated", "Do not respond in JSON."},
		{"never", "Never return JSON; use plain prose."},
		{"conditional", "If the user asks for JSON, return JSON."},
		{"conditional when", "When the user wants JSON output, give it with keys a, b."},
		{"parse input", "Parse the JSON below and summarise it."},
		{"convert", "Convert this JSON to YAML."},
		{"json as topic", "Write a JSON parser in Go."},
		{"json schema topic", "Generate JSON schema documentation for the API."},
		{"self description", "I answer in JSON sometimes."},
		{"json in a field name", "The field json_payload holds raw data."},
		{"chinese likes", "我喜欢JSON。"},
		{"chinese parse", "请解析下面的JSON并返回摘要。"},
		{"chinese negated", "不要用JSON格式返回。"},
		{"chinese conditional", "如果用户需要，用JSON输出。"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if im, ok := ExtractConstraints(tt.prompt); ok {
				t.Errorf("ExtractConstraints(%q) = %s %v, want nothing", tt.prompt, im.Schema, im.Sources)
			}
		})
	}
}

func TestImpliedSchemaDrivesRepair(t *testing.T) {
	im, ok := ExtractConstraints("Respond in JSON with keys [risk_level, mitigation_steps, confidence_score]; risk_level must be one of low, medium, high.")
	if !ok {
		t.Fatal("no constraints")
	}
	s, err := Compile(im.Schema)
	if err != nil {
		t.Fatal(err)
	}
	r := Repair("```json\n{\"risk_level\": \"low\", \"mitigation_steps\": [], \"confidence_score\": 0.9}\n```", s, Options{})
	if !r.Valid {
		t.Fatalf("Repair: %v", r.Violations)
	}
	if r := Repair(`{"risk_level": "extreme", "mitigation_steps": [], "confidence_score": 0.9}`, s, Options{}); r.Valid {
		t.Error("value outside the implied enumeration accepted")
	}
	var v map[string]any
	if err := json.Unmarshal(im.Schema, &v); err != nil {
		t.Fatal(err)
	}
}
