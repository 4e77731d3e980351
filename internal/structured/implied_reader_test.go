package structured

import (
	"slices"
	"testing"
)

// TestImpliedReadsGeneralPhrasings: issue 25 defect 7, the readings the
// held-out corpus found missing, each in phrasings of its own (not the
// corpus's sentences): example objects shown without the word JSON, key
// lists after "need", "give me", "fields for", "a JSON document with", a
// dash after "N keys", quoted keys, keys named one by one, 字段分别是 /
// 键名依次为, 中文（key）, typed bullets under "Output format (JSON):", a
// demand in a later paragraph after "When you answer,".
func TestImpliedReadsGeneralPhrasings(t *testing.T) {
	tests := []struct {
		prompt string
		want   []string
		sure   bool
	}{
		{`Answer like {"sentiment": "positive", "confidence": 0.8}.`, []string{"sentiment", "confidence"}, true},
		{`Reply with {"kind": "bug" | "feature", "title": string}.`, []string{"kind", "title"}, true},
		{"Sample output:\n{\"city\": \"Paris\", \"country\": \"FR\"}", []string{"city", "country"}, true},
		{`请按以下格式返回：{"意图": "查询", "city": "北京"}`, []string{"意图", "city"}, false},
		{"输出样例：\n{\"tags\": [\"a\"], \"lang\": \"zh\"}", []string{"tags", "lang"}, true},
		// "to" is a word of the grammar too: right, but not sent.
		{`Follow this format: {"from": "EUR", "to": "USD"}`, []string{"from", "to"}, false},
		{"Reply in JSON; we need `verdict`, `evidence` and `confidence` for the dashboard.", []string{"verdict", "evidence", "confidence"}, true},
		{"Please respond as JSON and give me `title` and `tags`.", []string{"title", "tags"}, true},
		{`Return a JSON object with "sku" and "quantity".`, []string{"sku", "quantity"}, true},
		{"Output JSON with fields for `lat` and `lng`.", []string{"lat", "lng"}, true},
		{"The reply must be a JSON document with order_id, status and eta.", []string{"order_id", "status", "eta"}, true},
		{"Return JSON with three keys — route, stops, duration.", []string{"route", "stops", "duration"}, true},
		{"Answer in JSON. Use a key named verdict and a key named notes.", []string{"verdict", "notes"}, true},
		{"Emit JSON in which the field `lang` gives the language and the field `text` the translation.", []string{"lang", "text"}, true},
		{"请用 JSON 格式回答。字段分别为 sender、amount。", []string{"sender", "amount"}, true},
		{"返回 JSON，键名依次为 q、a。", []string{"q", "a"}, false},
		{"以JSON格式输出，包括作者（author）和年份（year）。", []string{"author", "year"}, true},
		{"Response format (JSON):\n- product: string\n- price: number", []string{"product", "price"}, true},
		{"You help with recipes.\n\nWhen you answer, return a JSON object with dish, steps and minutes.", []string{"dish", "steps", "minutes"}, true},
		{"When I send you a word, could you give me back a JSON object with a `word` and a `definition`?", []string{"word", "definition"}, true},
		{"Summarize the call.\nReturns: a JSON object with `summary` and `next_steps`.", []string{"summary", "next_steps"}, true},
		{"## 输出格式\nJSON，字段如下：\n1. title\n2. url", []string{"title", "url"}, true},
		{"每次回答都用 JSON 格式，里面要有 answer 和 source 这两个字段。", []string{"answer", "source"}, true},
		{"总结请用 JSON，包含 topic（主题）和 outcome（结论）。", []string{"topic", "outcome"}, true},
		// An intro cut inside a word ("Include the|se fields") reads no key.
		{"Please produce a JSON object. Include these fields:\n1. `id` — the id\n2. `name` — the name", []string{"id", "name"}, true},
	}
	for _, tt := range tests {
		im, ok := ExtractConstraints(tt.prompt)
		if !ok {
			t.Errorf("%q: no schema, want %q", tt.prompt, tt.want)
			continue
		}
		if !slices.Equal(im.Required, tt.want) || im.Sure != tt.sure {
			t.Errorf("%q: keys %q sure %v, want %q sure %v", tt.prompt, im.Required, im.Sure, tt.want, tt.sure)
		}
	}
}

// TestImpliedExampleNeedsAnAnswerIntro: an object in the prompt demands the
// answer's shape only when the prompt shows it as the answer; objects the
// prompt describes as input, as someone else's output, or under a
// condition or refusal give no schema, and quoted values are not keys.
func TestImpliedExampleNeedsAnAnswerIntro(t *testing.T) {
	for _, prompt := range []string{
		`The webhook sends events like {"type": "push", "repo": "keel"}; summarise them in plain English.`,
		`The user's config looks like {"retries": 3, "timeout": 10}. Explain what it does.`,
		`The tool's output is {"ok": true, "rows": 3}; describe it to the user in one sentence.`,
		`If the user asks for structured data, respond like {"a": 1, "b": 2}.`,
		`Do not answer with {"error": "..."} objects; write prose.`,
		`Input example: {"text": "hello"}. Translate the text into French.`,
		`Use {"x": 1} style literals when you write JavaScript examples.`,
		`You are a JS tutor. Return values like {a: 1, b: 2} are object literals; explain them.`,
		`输出示例：{"name": "张三"} 仅供参考，请用自然语言回答。`,
		"Sample output: {\"mood\": \"calm\"}. Answer in plain English, two sentences.",
		`服务器日志的输出格式：{"level": "info", "msg": "…"}。找出其中的错误并解释。`,
		`The monitoring tool's expected output: {"up": true, "ms": 12}. Tell the user whether it matches what they see.`,
		`Our logs use this format: {"ts": 1, "level": "warn"}. Explain the warnings to the user.`,
	} {
		if im, ok := ExtractConstraints(prompt); ok {
			t.Errorf("%q: schema %s (sure %v), want none", prompt, im.Schema, im.Sure)
		}
	}
	// Quoted values are not keys: the status values are an enumeration.
	im, ok := ExtractConstraints(`Respond in JSON with the keys status and note; status is "ok" or "error".`)
	if !ok || !slices.Equal(im.Required, []string{"status", "note"}) {
		t.Fatalf("got %+v, want keys status and note", im)
	}
}
