package structured

import (
	"slices"
	"testing"
)

// scorerCases are prompts, written fresh (no corpus case), whose keys the
// rules do not read and the key scorer does; FuzzExtractConstraints is
// seeded with them.
var scorerCases = []struct {
	name, prompt string
	want         []string
}{
	{"json-mode-emit", `You are in JSON mode. Emit {"city": ..., "nights": ..., "budget": ...} for each travel request.`, []string{"city", "nights", "budget"}},
	{"zh-fenced-reply-format", "请严格按照下面的格式回复：\n```json\n{\n  \"category\": \"分类\",\n  \"answer\": \"回答\"\n}\n```", []string{"category", "answer"}},
	{"zh-structure-shape", `根据简历制定面试问题。请按此 JSON 结构返回：{"role": "", "questions": [], "focus_areas": []}`, []string{"role", "questions", "focus_areas"}},
	// A demand that also names the input ("从…识别文本中提取…并以 JSON 输出").
	{"zh-demand-names-input", "你是体检中心的报告助手。请从体检报告的识别文本中提取以下项目并以 JSON 输出：身高、体重、血压、血糖。", []string{"身高", "体重", "血压", "血糖"}},
	{"zh-demand-names-input-return", "你是物流客服。请从运单截图的文字中读出以下信息并以 JSON 返回：寄件人、收件人、运单号。", []string{"寄件人", "收件人", "运单号"}},
}

// scorerNegatives may look like a demand to a reader of words, but ask for
// no JSON answer: someone else's output format, prose, a title, kept keys.
var scorerNegatives = []string{
	`Our logs use this format: {"ts": 1, "level": "warn"}. Explain the warnings to the user.`,
	`Write a blog post titled "Why we output JSON: speed, safety, simplicity" in a casual tone.`,
	`Each webhook delivery is a JSON body like {"event": "order.paid", "order_id": "o_1"}. Explain in plain text how to verify it.`,
	"When you write code that outputs JSON, keep keys in snake_case: user_id, created_at.",
	"Translate the values of this JSON into French. Keep every key unchanged and return the whole document as JSON.",
	"如果用户需要，用JSON输出，包含 name 和 age。",
}

// TestImpliedScorerFallback: where the rules read no key, the key scorer's
// reading is the implied schema — never sure, so never sent upstream — and
// it reads nothing from prompts that ask for no JSON answer.
func TestImpliedScorerFallback(t *testing.T) {
	for _, tt := range scorerCases {
		t.Run(tt.name, func(t *testing.T) {
			if _, keyed, _ := extractRules(tt.prompt, clauses(tt.prompt)); keyed {
				t.Fatalf("the rules read keys: not a case of the fallback")
			}
			im, ok := ExtractConstraints(tt.prompt)
			if !ok || !slices.Equal(im.Required, tt.want) || im.Sure {
				t.Fatalf("got %+v (ok %v), want keys %q, not sure", im, ok, tt.want)
			}
			if _, ok := ExtractJSONDemand(tt.prompt); ok {
				t.Errorf("a keyless demand too")
			}
		})
	}
	for _, p := range scorerNegatives {
		if im, ok := ExtractConstraints(p); ok {
			t.Errorf("%q: schema %s, want none", p, im.Schema)
		}
	}
}

// TestKeyScorerNeverKeys: grammar words, JSON literals and a demand's verbs
// are never candidates; a list with two keys read is read whole.
func TestKeyScorerNeverKeys(t *testing.T) {
	for _, w := range []string{"the", "and", "null", "true", "return", "string", "json"} {
		if !neverKey(w) {
			t.Errorf("neverKey(%q) = false", w)
		}
	}
	got := listRuns("Return symbol, action (buy/sell), quantity and limit_price.")
	if want := [][]string{{"symbol", "action", "quantity", "limit_price"}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("listRuns = %q, want %q", got, want)
	}
}
