package structured

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// spanCases are demand clauses and the keys, types and sureness their
// marked span gives.
var spanCases = []struct {
	clause  string
	keys    []string
	types   map[string]string
	written bool // keys written as keys: sure unless loose
	loose   bool
}{
	{"Output a JSON object with: address (string), bedrooms (integer), asking_price (number).", []string{"address", "bedrooms", "asking_price"}, map[string]string{"address": "string", "bedrooms": "integer", "asking_price": "number"}, true, false},
	{"Respond with a JSON object — front, back, difficulty (\"easy\", \"medium\" or \"hard\").", []string{"front", "back", "difficulty"}, map[string]string{}, false, false},
	{"Reply in JSON – genre, mood, tempo – and nothing more.", []string{"genre", "mood", "tempo"}, map[string]string{}, false, false},
	{"Output a JSON object with three arrays: people, organizations, locations.", []string{"people", "organizations", "locations"}, map[string]string{}, false, false},
	{"Respond in JSON format: team, priority (P1–P4) and a one-sentence summary.", []string{"team", "priority", "summary"}, map[string]string{}, false, true},
	{"4. Return a JSON object containing \"sku\", \"quantity\" (integer) and \"warehouse\".", []string{"sku", "quantity", "warehouse"}, map[string]string{"quantity": "integer"}, true, false},
	{"Reply with JSON having exactly 2 keys: ok (boolean), message.", []string{"ok", "message"}, map[string]string{"ok": "boolean"}, true, false},
	{"返回 JSON 对象：name（字符串）、cost（整数）、finished（布尔值）。", []string{"name", "cost", "finished"}, map[string]string{"name": "string", "cost": "integer", "finished": "boolean"}, true, false},
	{"请以 JSON 格式给出 total_score（整数）和 comment，不要输出其他内容。", []string{"total_score", "comment"}, map[string]string{"total_score": "integer"}, true, false},
	{"返回一个 JSON 对象——city、weather。", []string{"city", "weather"}, map[string]string{}, false, false},
	{"用 JSON 输出摘要（summary）和标签（tags）。", []string{"summary", "tags"}, map[string]string{}, true, false},
	// The list after the demand's last colon.
	{"输出 JSON，键名用英文：title、content。", []string{"title", "content"}, map[string]string{}, false, false},
	{"Respond in JSON, using snake_case keys: first_name, last_name.", []string{"first_name", "last_name"}, map[string]string{}, true, false},
	// A list cut by a phrase: its first word is read, as a guess.
	{"Output a JSON object with: id, name, price in EUR.", []string{"id", "name", "price"}, map[string]string{}, false, true},
	// No key list: a stated count that does not match, prose after the
	// colon, a list of one, nothing after JSON.
	{"Output a JSON object with three arrays: people, places.", nil, nil, false, false},
	{"Respond with a JSON object: it should be short and valid.", nil, nil, false, false},
	{"Reply in JSON: answer.", nil, nil, false, false},
	{"Reply in JSON and keep it short.", nil, nil, false, false},
	{"以 JSON 输出，字段为 name、skills。", nil, nil, false, false},
}

func TestSpanKeys(t *testing.T) {
	for _, c := range spanCases {
		ks, ts, written, loose := spanKeys(c.clause, true)
		if !slices.Equal(ks, c.keys) {
			t.Errorf("spanKeys(%q) = %q, want %q", c.clause, ks, c.keys)
			continue
		}
		if ks == nil {
			continue
		}
		if !maps.Equal(ts, c.types) || written != c.written || loose != c.loose {
			t.Errorf("spanKeys(%q): types %v written %v loose %v, want %v %v %v", c.clause, ts, written, loose, c.types, c.written, c.loose)
		}
	}
}

// keyLineCases are the lines under a demand ending in a colon.
var keyLineCases = []struct {
	lines   string
	keys    []string
	types   map[string]string
	written bool
}{
	{"dish — the name\ningredients — array of strings\nprep_minutes — integer", []string{"dish", "ingredients", "prep_minutes"}, map[string]string{"ingredients": "array", "prep_minutes": "integer"}, true},
	{"host: string\nport: integer\ntls: boolean", []string{"host", "port", "tls"}, map[string]string{"host": "string", "port": "integer", "tls": "boolean"}, true},
	{"- street\n- city\n- zip", []string{"street", "city", "zip"}, map[string]string{}, true},
	{"lat = number, latitude\nlng = number, longitude", []string{"lat", "lng"}, map[string]string{"lat": "number", "lng": "number"}, true},
	{"title - the book's title\nauthor - full name", []string{"title", "author"}, map[string]string{}, false},
	// Not a key list: one line, prose lines.
	{"name - how to pronounce it", nil, nil, false},
	{"Answer in flowing prose.\nBe kind.", nil, nil, false},
}

func TestKeyLines(t *testing.T) {
	for _, c := range keyLineCases {
		ks, ts, written := keyLines(clauses(c.lines), false)
		if !slices.Equal(ks, c.keys) || ks != nil && (!maps.Equal(ts, c.types) || written != c.written) {
			t.Errorf("keyLines(%q) = %q %v %v, want %q %v %v", c.lines, ks, ts, written, c.keys, c.types, c.written)
		}
	}
}

// tableCases are markdown tables; only a key column gives keys, never the
// header row.
var tableCases = []struct {
	table string
	keys  []string
	types map[string]string
}{
	{"| key | type | description |\n|---|---|---|\n| title | string | paper title |\n| keywords | array | up to 5 |", []string{"title", "keywords"}, map[string]string{"title": "string", "keywords": "array"}},
	{"| Field | Meaning |\n| --- | --- |\n| question | the question |\n| answer | the answer |", []string{"question", "answer"}, map[string]string{}},
	{"| 字段 | 类型 | 说明 |\n| --- | --- | --- |\n| name | 字符串 | 姓名 |", []string{"name"}, map[string]string{"name": "string"}},
	// No key column; "name" alone is a column of names, not keys; a cell
	// that is no identifier.
	{"| plan | price |\n|---|---|\n| basic | 10 |", nil, nil},
	{"| name | price |\n|---|---|\n| basic | 10 |", nil, nil},
	{"| field | type |\n|---|---|\n| full name | string |", nil, nil},
	{"| name | type |\n|---|---|\n| apple | fruit |", nil, nil},
}

func TestTableKeys(t *testing.T) {
	for _, c := range tableCases {
		ks, ts := tableKeys(clauses(c.table))
		if !slices.Equal(ks, c.keys) || ks != nil && !maps.Equal(ts, c.types) {
			t.Errorf("tableKeys(%q) = %q %v, want %q %v", c.table, ks, ts, c.keys, c.types)
		}
	}
}

// slotCases are sentences that say where each part of the answer goes.
var slotCases = []struct {
	clause string
	keys   []string
	loose  bool
}{
	{"Put the result in verdict and your reasoning in explanation.", []string{"verdict", "explanation"}, true},
	{`The headline goes in "headline" and the text in "body".`, []string{"headline", "body"}, false},
	{"Write the summary in markdown and the title in plain text.", nil, false},
	{"Put citations in brackets.", nil, false},
	{"标题放在 title 中，正文放在 body 中。", []string{"title", "body"}, false},
}

func TestSlotKeys(t *testing.T) {
	for _, c := range slotCases {
		ks, loose := slotKeys(c.clause)
		if !slices.Equal(ks, c.keys) || ks != nil && loose != c.loose {
			t.Errorf("slotKeys(%q) = %q loose %v, want %q %v", c.clause, ks, loose, c.keys, c.loose)
		}
	}
}

func TestDescribedKeys(t *testing.T) {
	for c, want := range map[string][]string{
		"Return a JSON payload where `status` is \"ok\" or \"partial\" and `items` is an array of missing SKUs.": {"status", "items"},
		`"verdict" must be yes or no; "reason" holds one sentence.`:                                              {"verdict", "reason"},
		"The `id` is a string.":                  nil,
		`Say "hello" is fine and "bye" is rude.`: {"hello", "bye"},
		"返回 JSON，其中 score 为分数，level 为等级。":        {"score", "level"},
		"返回 JSON，格式为 json 对象。":                   nil,
	} {
		if got := describedKeys(c); !slices.Equal(got, want) {
			t.Errorf("describedKeys(%q) = %q, want %q", c, got, want)
		}
	}
}

// TestWrittenKeysNear: the last resort reads the keys a demand and the
// sentences after it write as keys, at least two, stopping at a sentence
// that writes none or is about something else.
func TestWrittenKeysNear(t *testing.T) {
	for prompt, want := range map[string][]string{
		"Find the window and answer in JSON, giving start_date first and end_date second.":          {"start_date", "end_date"},
		`Write a cover line as JSON. Use "headline" for the main line. Use "dek" for the subtitle.`: {"headline", "dek"},
		"请回答问题并以 JSON 返回，字段名用英文 answer、evidence。":                                                   {"answer", "evidence"},
		"Answer in JSON. Mention the user_id once.":                                                 nil,
		"Answer in JSON. Keep it short. The log has fields user_id and created_at.":                 nil,
	} {
		cls := clauses(prompt)
		demand := make([]bool, len(cls))
		for i, c := range cls {
			demand[i] = isDemand(c.text)
		}
		var got []string
		for i, d := range demand {
			if d {
				for j := i; j < len(cls); j++ {
					got = append(got, writtenKeysNear(cls, i, demand)[j]...)
				}
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("writtenKeysNear(%q) = %q, want %q", prompt, got, want)
		}
	}
}

func TestNoteType(t *testing.T) {
	for note, want := range map[string]string{
		"an integer": "integer", "integer 1-6": "integer", "bool": "boolean", "true/false": "boolean",
		"array of 4 strings": "array", "list of strings": "array", "number 0-1": "number", "string, may be empty": "string",
		"整数": "integer", "布尔值，材料是否齐全": "boolean", "字符串": "string",
		"0-100 的整数": "integer", "ISO code": "", "P1–P4": "", "the message to the rider": "", "stringent rules": "", "菜品数组": "",
	} {
		if got := noteType(note); got != want {
			t.Errorf("noteType(%q) = %q, want %q", note, got, want)
		}
	}
}

func TestProseKeys(t *testing.T) {
	for c, want := range map[string][]string{
		"Find the invoice_id, the due_date and the amount in the email.":                    {"invoice_id", "due_date", "amount"},
		"Extract from the docket entry the case_number, the filing_deadline and the court.": {"case_number", "filing_deadline", "court"},
		"Read the email carefully.": nil,
	} {
		if got := proseKeys(c); !slices.Equal(got, want) {
			t.Errorf("proseKeys(%q) = %q, want %q", c, got, want)
		}
	}
}

// TestObjectKeysNameSet: an example written as a set of names, "{name,
// email}", gives its names; a single placeholder "{name}" gives none.
func TestObjectKeysNameSet(t *testing.T) {
	for s, want := range map[string][]string{
		"{name, email}":                    {"name", "email"},
		"{name}":                           nil,
		`{"spam": bool, "reason": string}`: {"spam", "reason"},
		"{a, 1}":                           nil,
	} {
		if got, _ := objectKeys(s); !slices.Equal(got, want) {
			t.Errorf("objectKeys(%q) = %q, want %q", s, got, want)
		}
	}
	_, ts := objectKeys(`{"spam": bool, "salary": <number>, "reason": string}`)
	if !maps.Equal(ts, map[string]string{"spam": "boolean", "salary": "number", "reason": "string"}) {
		t.Errorf("types of written type names: %v", ts)
	}
}

// TestDescribesInput: only the last part of the sentence before an example
// object says whether it is input.
func TestDescribesInput(t *testing.T) {
	for before, want := range map[string]bool{
		"对用户输入做意图识别，输出 JSON，格式为 ":                                                false,
		"For each clause the user pastes, classify it and reply with JSON only:": false,
		"The user will send you a JSON object like ":                             true,
		"Each request body looks like this: ":                                    true,
		"Reply in JSON like ":                                                    false,
	} {
		if got := describesInput(before); got != want {
			t.Errorf("describesInput(%q) = %v, want %v", before, got, want)
		}
	}
}

// FuzzAnswerSpans: the span readers never panic, and every key they return
// is an identifier written in their input.
func FuzzAnswerSpans(f *testing.F) {
	for _, c := range spanCases {
		f.Add(c.clause)
	}
	for _, c := range keyLineCases {
		f.Add(c.lines)
	}
	for _, c := range tableCases {
		f.Add(c.table)
	}
	for _, c := range slotCases {
		f.Add(c.clause)
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := func(what string, ks []string) {
			for _, k := range ks {
				if !identKeyRe.MatchString(k) || !strings.Contains(s, k) {
					t.Fatalf("%s(%q) gave key %q", what, s, k)
				}
			}
		}
		ks, _, _, _ := spanKeys(s, true)
		check("spanKeys", ks)
		ks, _, _ = keyLines(clauses(s), true)
		check("keyLines", ks)
		ks, _ = tableKeys(clauses(s))
		check("tableKeys", ks)
		ks, _ = slotKeys(s)
		check("slotKeys", ks)
		check("proseKeys", proseKeys(s))
		check("describedKeys", describedKeys(s))
		noteType(s)
	})
}
