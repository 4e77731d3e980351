package structured

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestExtractConstraints(t *testing.T) {
	tests := []struct {
		name       string
		prompt     string
		wantSchema string
		wantKeys   []string
		keyless    bool // a demand without keys: ExtractJSONDemand, not ExtractConstraints
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
		{name: "demand without keys", prompt: "Respond in JSON.", wantSchema: `{}`, keyless: true},
		{name: "prose after fields is not a key", prompt: "Return JSON with fields that describe the user.", wantSchema: `{}`, keyless: true},
		{name: "json object without keys", prompt: "Your answer must be a JSON object.", wantSchema: `{"type":"object"}`, keyless: true},
		{name: "json array without keys", prompt: "Return a JSON array of the names.", wantSchema: `{"type":"array"}`, keyless: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A demand without keys is no key schema (a negative of the
			// corpora yields none); ExtractJSONDemand reports it.
			im, ok := ExtractConstraints(tt.prompt)
			dm, dok := ExtractJSONDemand(tt.prompt)
			if tt.keyless {
				if ok {
					t.Fatalf("ExtractConstraints(%q) = %s, want no key schema", tt.prompt, im.Schema)
				}
				if !dok {
					t.Fatalf("ExtractJSONDemand(%q) found nothing", tt.prompt)
				}
				if dm.Sure {
					t.Errorf("ExtractJSONDemand(%q) is sure", tt.prompt)
				}
				im, ok = dm, dok
			} else if dok {
				t.Errorf("ExtractJSONDemand(%q) = %s for a prompt with keys", tt.prompt, dm.Schema)
			}
			if !ok {
				t.Fatalf("ExtractConstraints(%q) found nothing", tt.prompt)
			}
			if d := diff(string(im.Schema), tt.wantSchema); d != "" {
				t.Errorf("schema %s", d)
			}
			if d := diffJSON(im.Required, tt.wantKeys); d != "" {
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

// phrasing is one system prompt of the phrasing corpus in testdata.
type phrasing struct {
	name     string
	prompt   string
	required []string          // positives: the expected required keys
	types    map[string]string // positives, optional: expected property types
}

const (
	positivePhrasings = "testdata/implied_positive.txt"
	negativePhrasings = "testdata/implied_negative.txt"
)

// readPhrasings reads a corpus file: cases start with "=== name", may go on
// with "required: a, b" and "types: {json}" lines, then the prompt up to the
// next case. Lines starting with "#" before the first case are comments.
func readPhrasings(t testing.TB, path string) []phrasing {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var (
		out  []phrasing
		cur  *phrasing
		body []string
	)
	flush := func() {
		if cur != nil {
			cur.prompt = strings.TrimSpace(strings.Join(body, "\n"))
			out = append(out, *cur)
		}
		body = nil
	}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "=== "):
			flush()
			cur = &phrasing{name: strings.TrimPrefix(line, "=== ")}
		case cur == nil:
			if line != "" && !strings.HasPrefix(line, "#") {
				t.Fatalf("%s: text before the first case: %q", path, line)
			}
		case len(body) == 0 && strings.HasPrefix(line, "required: "):
			for k := range strings.SplitSeq(strings.TrimPrefix(line, "required: "), ",") {
				cur.required = append(cur.required, strings.TrimSpace(k))
			}
		case len(body) == 0 && strings.HasPrefix(line, "types: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "types: ")), &cur.types); err != nil {
				t.Fatalf("%s: %s: types: %v", path, cur.name, err)
			}
		default:
			body = append(body, line)
		}
	}
	flush()
	return out
}

// TestImpliedPhrasingCorpus runs ExtractConstraints over the natural
// phrasings in testdata, English and Chinese. Targets: at least 95 % of the
// positives give exactly the expected required keys (and the expected types
// where a case states them), and no negative gives a schema.
func TestImpliedPhrasingCorpus(t *testing.T) {
	pos := readPhrasings(t, positivePhrasings)
	neg := readPhrasings(t, negativePhrasings)
	zh := 0
	for _, p := range pos {
		if len(p.required) == 0 {
			t.Fatalf("positive %s has no required keys", p.name)
		}
		if strings.HasPrefix(p.name, "zh/") {
			zh++
		}
	}
	if len(pos) < 80 || zh < len(pos)/2 || len(neg) < 80 {
		t.Fatalf("corpus too small: %d positives (%d Chinese), %d negatives; want ≥ 80 (half Chinese) and ≥ 80", len(pos), zh, len(neg))
	}

	hits := 0
	for _, p := range pos {
		t.Run("positive/"+p.name, func(t *testing.T) {
			im, ok := ExtractConstraints(p.prompt)
			if !ok {
				t.Logf("MISS %s: no schema", p.name)
				return
			}
			if _, err := Compile(im.Schema); err != nil {
				t.Errorf("schema %s does not compile: %v", im.Schema, err)
			}
			if im.Sentence == "" || !strings.Contains(p.prompt, strings.Split(im.Sentence, "\n")[0]) {
				t.Errorf("sentence %q is not text of the prompt", im.Sentence)
			}
			if d := diffJSON(im.Required, p.required); d != "" {
				if im.Sure {
					// Keel would send it upstream: a false schema.
					t.Errorf("FALSE SCHEMA %s: a sure schema with other keys: required %s", p.name, d)
				}
				t.Logf("MISS %s: required %s", p.name, d)
				return
			}
			if len(p.types) > 0 {
				var s struct {
					Properties map[string]struct {
						Type string `json:"type"`
					} `json:"properties"`
				}
				if err := json.Unmarshal(im.Schema, &s); err != nil {
					t.Fatal(err)
				}
				got := map[string]string{}
				for k := range p.types {
					got[k] = s.Properties[k].Type
				}
				if d := diffJSON(got, p.types); d != "" {
					t.Logf("MISS %s: types %s", p.name, d)
					return
				}
			}
			hits++
		})
	}
	fps := 0
	for _, n := range neg {
		t.Run("negative/"+n.name, func(t *testing.T) {
			if im, ok := ExtractConstraints(n.prompt); ok {
				fps++
				t.Errorf("FALSE POSITIVE %s: schema %s from %q", n.name, im.Schema, im.Sentence)
			}
		})
	}
	recall := float64(hits) / float64(len(pos))
	t.Logf("implied-schema phrasing corpus: recall %d/%d = %.1f %% (exact required keys), false positives %d/%d",
		hits, len(pos), 100*recall, fps, len(neg))
	if recall < 0.95 {
		t.Errorf("recall %.1f %% < 95 %%", 100*recall)
	}
	if fps != 0 {
		t.Errorf("%d false positives, want 0", fps)
	}
}

// TestImpliedSchemaMustInclude: the wordings of issue 13 ("The output must
// include …", "必须包含 …") give the keys as required, and the schema's
// source sentence is the prompt's own text. Both gave an "any JSON" schema
// before.
func TestImpliedSchemaMustInclude(t *testing.T) {
	tests := []struct {
		name, prompt, wantSentence string
		wantRequired               []string
	}{
		{
			name:         "english",
			prompt:       "You assess incidents. Respond in JSON format. The output must include risk_level, mitigation_steps, confidence_score. Be brief.",
			wantSentence: "Respond in JSON format. The output must include risk_level, mitigation_steps, confidence_score.",
			wantRequired: []string{"risk_level", "mitigation_steps", "confidence_score"},
		},
		{
			name:         "chinese",
			prompt:       "你是风险评估助手。以 JSON 格式输出，必须包含 risk_level、mitigation_steps、confidence_score",
			wantSentence: "以 JSON 格式输出，必须包含 risk_level、mitigation_steps、confidence_score",
			wantRequired: []string{"risk_level", "mitigation_steps", "confidence_score"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, ok := ExtractConstraints(tt.prompt)
			if !ok {
				t.Fatal("no schema")
			}
			if d := diffJSON(im.Required, tt.wantRequired); d != "" {
				t.Errorf("required %s", d)
			}
			if d := diff(im.Sentence, tt.wantSentence); d != "" {
				t.Errorf("sentence %s", d)
			}
			s := mustCompile(t, string(im.Schema))
			if vs := s.Validate([]byte(`{"risk_level": "low", "mitigation_steps": []}`)); len(vs) == 0 {
				t.Error("an answer without confidence_score validates")
			}
		})
	}
}
