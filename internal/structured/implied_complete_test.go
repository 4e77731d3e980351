package structured

import (
	"slices"
	"testing"
)

// TestImpliedSureNeedsCompleteness: a sure implied schema is sent upstream
// as the model's output format, so it must never leave out a key the prompt
// asks for (STYLE 23). The fourth blind corpus (heldout4) found six sure
// readings with a key missing, of four kinds; these are phrasings of each
// kind written fresh (none is a corpus case): a key added after the list
// ("… plus helpfulness", "Also add a severity"), a list cut at a semicolon,
// a markdown table read in part, the keys of a nested example object taken
// with or instead of the top level, and the input's keys kept while
// translating, which name no key at all. Each is either read whole or not
// sure; the negative gives no schema.
func TestImpliedSureNeedsCompleteness(t *testing.T) {
	for _, tt := range completenessCases {
		t.Run(tt.name, func(t *testing.T) {
			im, ok := ExtractConstraints(tt.prompt)
			if !ok {
				return // no schema: nothing sent, nothing corrupted
			}
			if im.Sure && !sameKeys(im.Required, tt.want) {
				t.Errorf("sure schema with keys %q sent upstream, the prompt asks for %q", im.Required, tt.want)
			}
		})
	}
	for _, p := range keptKeysNegatives {
		if im, ok := ExtractConstraints(p); ok {
			t.Errorf("%q: schema %s (sure %v): the input's keys kept are no key list", p, im.Schema, im.Sure)
		}
	}
}

// completenessCases are prompts whose key list a reading may take in part;
// FuzzExtractConstraints is seeded with them.
var completenessCases = []struct {
	name, prompt string
	// want are the keys the prompt asks for.
	want []string
}{
	{"also-add-sentence", "Return JSON with flagged (true/false) and categories (a list). Also add a severity from 1 to 5.", []string{"flagged", "categories", "severity"}},
	{"plus-after-note", "Grade the answer and reply with a JSON object with fields overall, clarity and accuracy (each 1-10), plus helpfulness.", []string{"overall", "clarity", "accuracy", "helpfulness"}},
	{"add-array-too", "Output a JSON object with title and summary. Add a tags array too.", []string{"title", "summary", "tags"}},
	{"include-as-well", "Reply in JSON with the keys verdict and reason. The reason field must be short. Include a confidence number as well.", []string{"verdict", "reason", "confidence"}},
	{"zh-also-field", "以 JSON 返回 name 和 age，另外加上 city 字段。", []string{"name", "age", "city"}},
	{"semicolon-list", "Respond in JSON. Keys: original; corrected; changes (a list of the edits you made).", []string{"original", "corrected", "changes"}},
	{"table-unreadable-row", "Return a JSON object with these fields:\n\n| field | type | notes |\n|---|---|---|\n| drug | string | generic name |\n| dose_mg | number | |\n| frequency | string | e.g. \"twice daily\" |\n| route (oral/iv) | string | |", []string{"drug", "dose_mg", "frequency", "route"}},
	{"table-escaped-pipe", "Return a JSON object with these fields:\n\n| field | type | notes |\n|-------|------|-------|\n| `drug` | string | generic name |\n| `dose_mg` | number | |\n| `frequency` | string | e.g. \"twice daily\" \\| \"daily\" |\n| `route` | string | oral or iv |", []string{"drug", "dose_mg", "frequency", "route"}},
	{"nested-example-after-list", `Read the receipt and return JSON with store, items and total. Each item looks like {"name": "milk", "price": 3.5}.`, []string{"store", "items", "total"}},
	{"nested-example-only", `Extract the receipt as JSON. The top level has store, items and total; items is an array of objects like {"name": "...", "price": 0.0}.`, []string{"store", "items", "total"}},
	{"bullet-note-sentence-end", "Given a message, return a JSON object with:\n- spam (boolean): true if it is spam\n- reasons (array): why, e.g. \"link farm\", \"phishing\"\n- score (integer): 0 to 10\nNothing else.", []string{"spam", "reasons", "score"}},
	{"paren-list-dash-note", "Rate the answer. Return a JSON object (fields: relevance, depth, tone — each an integer from 1 to 5).", []string{"relevance", "depth", "tone"}},
	{"zh-noted-keys-nested", "识别发票，返回 JSON 对象：seller（销售方）、lines（明细数组，每项包含 item 和 amount）、sum（合计）。", []string{"seller", "lines", "sum"}},
	{"zh-nested-example", `请识别小票，以 JSON 输出：store（店名）、items（商品列表，每项形如 {"name": "牛奶", "price": 5.5}）、total（总价）。`, []string{"store", "items", "total"}},
}

// keptKeysNegatives keep the input's keys while transforming it: no key
// list of the answer.
var keptKeysNegatives = []string{
	"Translate the values of this JSON into French. Keep every key unchanged and return the whole document as JSON.",
	"Translate the document. Keep the keys as they are and return the result as JSON.",
	"Convert the user's YAML to JSON. Preserve all field names exactly and return only the JSON.",
	"把下面 JSON 中的值翻译成英文，保持所有键名不变，返回翻译后的 JSON。",
}

// TestImpliedSureWhenClosed: the completeness rule still sends the readings
// whose key list is plainly whole: a list closed at its sentence's end, a
// stated count, bullets read to their end, a table read whole, an example
// object shown as the answer.
func TestImpliedSureWhenClosed(t *testing.T) {
	tests := []struct {
		name, prompt string
		want         []string
	}{
		{"list-and", "Return a JSON object with the keys intent, entities and confidence.", []string{"intent", "entities", "confidence"}},
		{"count", "Output JSON with two fields: city and country.", []string{"city", "country"}},
		{"zh-count", "仅输出 JSON，包含两个字段：question 和 answer。", []string{"question", "answer"}},
		{"bullets", "Return a JSON object with these fields:\n- name: string\n- email: string\n- company: string", []string{"name", "email", "company"}},
		{"table", "Return a JSON object with these fields:\n\n| field | type |\n|---|---|\n| drug | string |\n| dose_mg | number |", []string{"drug", "dose_mg"}},
		{"example", `Return JSON in this shape: {"name": "Ada", "age": 36, "tags": ["x"]}`, []string{"name", "age", "tags"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			im, ok := ExtractConstraints(tt.prompt)
			if !ok || !slices.Equal(im.Required, tt.want) || !im.Sure {
				t.Fatalf("got %+v (ok %v), want sure keys %q", im, ok, tt.want)
			}
		})
	}
}
