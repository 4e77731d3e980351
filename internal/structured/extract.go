package structured

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Implied is an output schema implied by a system prompt's format demands.
type Implied struct {
	// Schema is a draft 2020-12 JSON Schema: an object with the demanded
	// keys as required properties, types taken from a JSON example,
	// enumerations and ranges on them; {} or {"type":"object"} /
	// {"type":"array"} for a demand that names no keys (ExtractJSONDemand).
	Schema json.RawMessage
	// Sentence is the system-prompt text the schema came from, as written:
	// from the first to the last clause that demanded JSON or named keys
	// (clauses further apart than 600 bytes are joined with a newline).
	Sentence string
	// Required are the demanded keys in order of first mention.
	Required []string
	// Sources are the clauses of the prompt the schema was built from
	// (demand, key lists, enumerations, ranges), in the order they were used.
	Sources []string
	// Count is the number of keys the prompt states ("two fields: a and
	// b", "三个字段"), 0 when it states none.
	Count int
	// Sure reports an unambiguous reading, the only kind worth sending to
	// the model as its output format: keys were found, every one an
	// identifier (letters, digits, _ and -, not starting with a digit)
	// that the prompt writes out as a word of its own and that is not a
	// word of the sentence's grammar, and the stated count, if any, is the
	// number of keys; and the keys account for every token the schema's
	// clauses (and a next sentence about keys) write as a key — quoted or
	// backticked, snake_case or camelCase, or after "called"/"named" — so
	// "a key called answer and a key called sources" read as answer alone
	// is not sure; and the span is closed and complete (closedSpan: no
	// key marked and left out, no further list item, no "etc."/"…"/"等",
	// not what the task receives, not a code demand, not a value's
	// example object). An implied schema that is not sure still serves to
	// validate and repair the answer; it is never sent.
	Sure bool
}

// ExtractConstraints finds hard output-format requirements in a system
// prompt, in English and Chinese, and turns them into an implied schema.
//
// A schema needs a demand for JSON — a directive with JSON as the answer's
// format ("Respond in JSON format", "Your output must be valid JSON",
// "Output format: JSON", "Output format (JSON):", "Returns: a JSON object",
// "以 JSON 格式输出", "请返回 JSON", "输出格式为JSON", "总结请用 JSON，…"), or an
// example object shown as the answer, with or without the word JSON
// ("Respond like {…}", "Example output:" + object, "按如下格式输出：{…}",
// "输出示例：{…}"). "When you answer, …" and "When I send you …, …" are no
// conditions. Given a demand, keys come from any clause of the prompt that
// names them:
//
//   - "with keys [a, b]", "with the fields a, b and c", "Fields: a, b";
//   - "The output must include / contain / have a, b, c", "should return",
//     "Include the following keys:", "containing a and b", "Return a, b and c
//     as JSON";
//   - a bulleted or numbered list after such a clause ending in a colon;
//   - a JSON example in the prompt: its top-level keys, and the types of
//     their example values;
//   - "必须包含 / 需包含 / 应包含 a、b、c", "包括以下字段：", "输出以下键：",
//     "返回 a、b 两个字段", "包含 a 和 b 的 JSON 对象", "键为 a, b";
//   - "required fields: a, b" / "必填字段：a、b";
//   - "N keys — a, b", "a JSON document with a, b", "字段分别是 a、b",
//     "键名依次为 a、b", "标题（title）和摘要（abstract）";
//   - keys named one by one ("a key called a and a key called b", "the
//     field `a` holds …"), and a list of quoted or backticked keys after
//     "need", "give me", "with", "for", "include" … ("I need `a` and `b`").
//
// When these find no key, the span the prompt marks as the answer's keys is
// read (answer.go): the rest of the demand after "with:", "—", "：", a count
// and a noun ("three arrays:"), or its last colon; the lines under a clause
// ending in a colon, bulleted or not ("dish — the name", "port: integer");
// a markdown table's key column (never its header row); "Return them as
// JSON" after a list; "`a` is …" / "其中 a 为…"; "Put X in a and Y in b";
// and, as a last resort that is never sure, the keys the demand and the
// sentences after it write as keys. Items are parsed as `key [note]`, the
// note giving the key's JSON type ("(integer)", "（布尔值）", "– string").
// Keys of what the task reads (a tool's arguments, "Each ticket arrives with
// the fields …") are not the answer's.
//
// Where all of these read no key, a learned key scorer reads the prompt
// (keyscore.go): every token that may be a key is scored from how it is
// written and where it stands by weights fit on the tuning corpora, when a
// clause may ask for a JSON answer (looseDemand). Its reading is never Sure.
// It is also the second opinion on the rules: a reading of the rules is Sure
// only when the scorer reads no key or the same keys (scorerAgrees).
//
// Lists are separated by 、 ， , ; and 和 及 与 以及; a parenthesised note
// after a key is dropped, and a list ends at its first item that is not
// key-like. Enumerations and ranges on the keys follow ("risk_level must be
// one of low, medium, high", "风险等级为1到5").
//
// Precision comes before recall: a clause that only mentions JSON ("I like
// JSON", "the JSON spec says", "parse the JSON below"), a negated or
// conditional clause ("do not answer in JSON", "if asked, return JSON") and a
// JSON example the prompt describes as input yield nothing. ok is false when
// the prompt demands no JSON or names no key of the answer: a demand for JSON
// without keys ("Respond only in valid JSON.", "a JSON array of strings") is
// no key schema; ExtractJSONDemand reports it. ExtractConstraints is safe for
// concurrent use.
func ExtractConstraints(systemPrompt string) (*Implied, bool) {
	im, keyed, ok := extract(systemPrompt)
	if !ok || !keyed {
		return nil, false
	}
	return im, true
}

// ExtractJSONDemand reports a system prompt's demand for a JSON answer that
// names no key ("Respond only in valid JSON.", "Output a JSON object.",
// "以 JSON 数组形式输出"): its Schema is {} or {"type":"object"} /
// {"type":"array"}, its Required empty, and it is never Sure (never sent
// upstream). It serves to validate and repair the answer as JSON. ok is false
// when the prompt demands no JSON or when ExtractConstraints reads keys from
// it.
func ExtractJSONDemand(systemPrompt string) (*Implied, bool) {
	im, keyed, ok := extract(systemPrompt)
	if !ok || keyed {
		return nil, false
	}
	return im, true
}

// extract is ExtractConstraints and ExtractJSONDemand: keyed is false for a
// demand without keys.
func extract(systemPrompt string) (im *Implied, keyed, ok bool) {
	return extractWith(systemPrompt, (*candidate).score)
}

// extractWith is extract with the key scorer's candidates scored by score
// (the committed weights in production; weights fit without one corpus in
// the leave-one-corpus-out measurement).
func extractWith(systemPrompt string, score func(*candidate) float64) (im *Implied, keyed, ok bool) {
	if !containsFoldASCII(systemPrompt, "json") && !strings.Contains(systemPrompt, "{") {
		return nil, false, false // the cheap common case
	}
	cls := clauses(systemPrompt)
	if im, keyed, ok = extractRules(systemPrompt, cls); keyed {
		if im.Sure && !scorerAgrees(systemPrompt, cls, im.Required, score) {
			// A second opinion: the key scorer, fit on every corpus,
			// reads another key set from the prompt. A sure reading is
			// one that may be sent upstream; two readers that disagree
			// are no evidence the key list is whole (keyscore.go).
			im.Sure = false
		}
		return im, keyed, ok
	}
	// The rules read no key: the key scorer's reading, a guess never sent
	// upstream (keyscore.go).
	if lim := learnedImplied(systemPrompt, cls, score); lim != nil {
		return lim, true, true
	}
	return im, keyed, ok
}

// extractRules is extract by the rules alone.
func extractRules(systemPrompt string, cls []clause) (im *Implied, keyed, ok bool) {
	demand := make([]bool, len(cls))
	demanded := false
	worded := false // a demand says JSON, not only shows an example
	kind := ""      // "object" or "array" for a demand without keys
	for i, c := range cls {
		if asksForCode(c.text) {
			continue // "写一个函数，…返回序列化后的 JSON 字符串": the code's JSON
		}
		if c.demand || terseDemandRe.MatchString(stripBullet(c.text)) && !negated(c.text) || bareJSONObjectRe.MatchString(stripBullet(c.text)) && jsonHeadingAt(cls, i) {
			worded = true
		} else if !exampleDemand(cls, i) {
			continue
		}
		demand[i], demanded = true, true
		if kind == "" {
			switch {
			case jsonObjectRe.MatchString(c.text):
				kind = "object"
			case jsonArrayRe.MatchString(c.text):
				kind = "array"
			}
		}
	}
	if !demanded || !worded && proseRe.MatchString(systemPrompt) {
		// An example object alone does not outweigh "answer in plain
		// English" / "请用自然语言回答".
		return nil, false, false
	}
	var (
		keys  []string
		types = map[string]string{}
		used  []int // clauses the schema came from
		// loose: some keys were read from words of a sentence ("include
		// the verdict and the reasons"), not written as keys.
		loose bool
	)
	addKeys := func(i int, ks []string) {
		if len(ks) == 0 {
			return
		}
		for _, k := range ks {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		used = append(used, i)
	}
	consumed := make([]bool, len(cls)) // lines read as a list of keys
	for i, c := range cls {
		if consumed[i] || negated(c.text) || conditional(c.text) || tableRowRe.MatchString(c.text) || keepKeysRe.MatchString(c.text) {
			// "Keep every key unchanged": the input's keys, not a list.
			continue // a table's rows are read whole, by tableKeys
		}
		if !demand[i] && otherOwnerRe.MatchString(c.text) && !answerWordRe.MatchString(c.text) {
			continue // "its arguments are JSON with keys query and top_k"
		}
		if !demand[i] && !schemaClauseRe.MatchString(hanFalseKeyWords.Replace(c.text)) {
			if i > 0 && demand[i-1] {
				if ks, l := includeKeys(c.text); len(ks) > 0 {
					addKeys(i, ks)
					loose = loose || l
				} else if qk := quotedKeys(c.text); len(qk) > 0 {
					// "Reply in JSON; we need `a` and `b`."
					addKeys(i, qk)
				} else if dk := describedKeys(c.text); len(dk) > 0 {
					addKeys(i, dk) // "`status` is … and `items` is …"
				} else if sk, l := slotKeys(c.text); len(sk) > 0 {
					// "Put the result in verdict and the reasoning in
					// explanation."
					addKeys(i, sk)
					loose = loose || l
				}
			}
			continue
		}
		ks := keysIn(c.text)
		if len(ks) > 0 && !slices.ContainsFunc(ks, func(k string) bool { return !typeWord(k) && !hanProse(k) }) {
			ks = nil // "containing a reason string and an approved boolean": types, not keys
		}
		if demand[i] {
			if pk := parenKeys(c.text); len(pk) > len(ks) {
				ks = pk // "return JSON (name, email, company)"
			}
		}
		if t := hanFalseKeyWords.Replace(c.text); t != c.text && len(keysIn(t)) == 0 {
			ks = nil // "提取关键信息": 关键 is "crucial", not a key
		}
		if !slices.ContainsFunc(ks, notKeyWord) {
			// "Output format (JSON):" names no key: "format" is a word of
			// the heading; the lines below may hold the keys.
			ks = nil
			if endsWithColon(c.text) || belowRe.MatchString(c.text) {
				if tk, tt := tableKeys(cls[i+1:]); len(tk) > 0 {
					ks = tk
					maps.Copy(types, tt)
				} else if bk := bulletKeys(systemPrompt, cls[i+1:]); len(bk) > 0 && (demand[i] || listIntroRe.MatchString(c.text)) {
					ks = bk
					bulletTypes(cls[i+1:], types)
				} else if lk, lt, w := keyLines(cls[i+1:], keyNounRe.MatchString(c.text)); len(lk) > 0 {
					ks = lk
					maps.Copy(types, lt)
					loose = loose || !w
				} else if i+1 < len(cls) {
					// "Respond in JSON with these keys:" over "mood, color,
					// song".
					if lk := listItems(cls[i+1].text, true); len(lk) > 1 && !slices.ContainsFunc(lk, func(k string) bool { return !identKeyRe.MatchString(k) || !notKeyWord(k) }) {
						ks = lk
						consumed[i+1] = true
					}
				}
				if len(ks) > 0 {
					// "- key_points: a list of key points" is a key and its
					// note: no line of the list is read again.
					for j := i + 1; j < len(cls) && listLine(cls[j].text); j++ {
						consumed[j] = true
					}
				}
			}
		}
		if len(ks) == 0 {
			sk, st, w, l := spanKeys(c.text, demand[i])
			if slices.ContainsFunc(sk, hanProse) || len(sk) > 0 && !slices.ContainsFunc(sk, func(k string) bool { return !typeWord(k) }) {
				sk = nil // "sql 字段写查询语句", "a reason string": no span of keys
			}
			if end := systemPrompt[:c.end]; len(sk) == 0 && i+1 < len(cls) && (strings.HasSuffix(end, ";") || strings.HasSuffix(end, "；")) {
				// "Reply in JSON: answer — your answer; sources — list of
				// URLs.": the list goes on past the semicolon.
				if sk, st, w, l = spanKeys(c.text+", "+cls[i+1].text, demand[i]); len(sk) > 0 {
					consumed[i+1] = true
				}
			}
			if len(sk) > 0 {
				ks = sk
				maps.Copy(types, st)
				loose = loose || l || !w
			} else if !demand[i] {
			} else if dk := describedKeys(c.text); len(dk) > 0 {
				ks = dk // "a JSON payload where `status` is … and `items` is …"
			} else if nk := notedKeys(c.text); len(nk) > 0 {
				ks = nk // "含 name（商品名）、price（价格）"
			} else if nk := nounKeys(c.text); len(nk) > 0 {
				ks = nk // "with a subject field and a body field"
				loose = true
			} else if i > 0 && anaphoraRe.MatchString(stripBullet(c.text)) {
				// "Find the a, the b and the c. Return them as JSON."
				if pk := proseKeys(cls[i-1].text); len(pk) > 0 {
					addKeys(i-1, pk)
					loose = true
				}
			}
		}
		addKeys(i, ks)
	}
	if len(keys) == 0 {
		// The last resort, a guess never sent upstream: the keys a demand
		// and the sentences after it write as keys ("answer in JSON, giving
		// start_date first and end_date second", `Use "headline" for the
		// main line. Use "dek" for the subtitle.`).
		for i, d := range demand {
			if !d || negated(cls[i].text) || conditional(cls[i].text) {
				continue
			}
			if sk, _ := slotKeys(cls[i].text); len(sk) > 0 {
				addKeys(i, sk)
			} else {
				for j, ks := range writtenKeysNear(cls, i, demand) {
					addKeys(j, ks)
				}
			}
			if len(keys) > 0 {
				loose = true
				break
			}
		}
	}
	if j, raw, req, ok := schemaExample(cls); ok {
		// The prompt shows a JSON Schema ("compatible with this schema:
		// {…}", pydantic-ai's PromptedOutput): it is the schema, not an
		// example whose keys are type and properties.
		var at []int
		var srcs []string
		for i, d := range demand {
			if d {
				at, srcs = append(at, i), append(srcs, cls[i].text)
			}
		}
		at, srcs = append(at, j), append(srcs, cls[j].text)
		return &Implied{Schema: raw, Sentence: sentenceOf(systemPrompt, cls, at), Required: req, Sources: dedupe(srcs), Sure: true}, true, true
	}
	exampleAt := -1 // the clause of an example object the keys came from
	// mixed: the example object and other clauses name different keys
	// ("store, items and total. Each item looks like {name, price}").
	mixed := false
	if i, ks, ts := templateKeys(systemPrompt, cls); len(ks) > 0 {
		exampleAt = i
		mixed = len(keys) > 0 && !sameSet(keys, ks)
		addKeys(i, ks)
		for k, t := range ts {
			types[k] = t
		}
	}
	for i, c := range cls {
		if m := requiredRe.FindStringSubmatch(c.text); m != nil {
			addKeys(i, listItems(m[1]+m[2]+m[3], true))
		} else if bareRequiredRe.MatchString(c.text) {
			addKeys(i, bulletKeys(systemPrompt, cls[i+1:]))
			bulletTypes(cls[i+1:], types)
		}
	}
	// "不要有任何解释", "数字保持为数字类型": a clause of Chinese prose is
	// no key; a Chinese key is a short noun phrase ("风险等级", "是否赔付").
	keys = slices.DeleteFunc(keys, hanProse)
	var sources []string
	for i, d := range demand {
		if d && (len(used) == 0 || len(sources) == 0) {
			sources = append(sources, cls[i].text)
			used = append(used, i)
		}
	}
	for _, i := range used {
		sources = append(sources, cls[i].text)
	}
	sentence := sentenceOf(systemPrompt, cls, used)
	if len(keys) == 0 {
		schema := `{}`
		if kind != "" {
			schema = `{"type":"` + kind + `"}`
		}
		return &Implied{Schema: json.RawMessage(schema), Sentence: sentence, Sources: dedupe(sources)}, false, true
	}
	if exampleAt < 0 {
		if more := missedKeys(cls, used, keys); len(more) > 0 {
			// "a list of pros (key: pros)", "facts and preferences
			// arrays": read, never sure.
			keys = append(keys, more...)
			loose = true
		}
	}
	b, sources, err := keySchema(systemPrompt, cls, keys, types, sources)
	if err != nil {
		return nil, false, false
	}
	count := statedCount(cls, used)
	sure := (count == 0 || count == len(keys)) && !loose && !mixed && accounted(cls, used, keys) && closedSpan(systemPrompt, cls, used, keys, exampleAt) && complete(systemPrompt, cls, demand, used, keys, exampleAt, count)
	for _, k := range keys {
		sure = sure && identKeyRe.MatchString(k) && !slices.Contains(grammarWords, strings.ToLower(k)) && namedInPrompt(systemPrompt, k)
	}
	return &Implied{Schema: b, Sentence: sentence, Required: keys, Sources: dedupe(sources), Count: count, Sure: sure}, true, true
}

// keySchema is the object schema requiring keys: their types (from types,
// then the notes the prompt writes), enumerations and ranges; the clauses
// that state a constraint are appended to sources.
func keySchema(prompt string, cls []clause, keys []string, types map[string]string, sources []string) (json.RawMessage, []string, error) {
	noteTypes(prompt, keys, types)
	props := make(map[string]map[string]any, len(keys))
	for _, k := range keys {
		p := map[string]any{}
		if t := types[k]; t != "" {
			p["type"] = t
		}
		for _, c := range cls {
			if constrainKey(k, c.text, p) {
				sources = append(sources, c.text)
			}
		}
		props[k] = p
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": keys})
	return b, sources, err
}

// learnedImplied is the key scorer's reading of a prompt that may ask for
// a JSON answer (looseDemand) and whose keys the rules did not read: never
// sure, so it validates and repairs the answer and is never sent upstream.
func learnedImplied(prompt string, cls []clause, score func(*candidate) float64) *Implied {
	loose := looseClauses(cls)
	if !looseDemand(prompt, loose) {
		return nil
	}
	keys, used := pickKeys(prompt, cls, loose, score, keyMargin)
	if len(keys) == 0 {
		return nil
	}
	var sources []string
	for _, i := range used {
		sources = append(sources, cls[i].text)
	}
	b, sources, err := keySchema(prompt, cls, keys, map[string]string{}, sources)
	if err != nil {
		return nil
	}
	return &Implied{Schema: b, Sentence: sentenceOf(prompt, cls, used), Required: keys, Sources: dedupe(sources), Count: statedCount(cls, used)}
}

// hanProse reports whether a key read from a prompt is a fragment of a
// Chinese sentence rather than a key: longer than 8 characters, or holding a
// verb, a negation or a particle no noun-phrase key has (为 "be", 放 "put",
// 不 "not", 的, 任何 "any", 保持 "keep" …).
func hanProse(k string) bool {
	if !hasHan(k) {
		return false
	}
	if utf8.RuneCountInString(k) > 8 {
		return true
	}
	for _, w := range hanProseWords {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

var hanProseWords = []string{"为", "放", "把", "将", "请", "不", "的", "了", "任何", "保持", "需", "要", "必须", "输出", "返回", "包含", "使用", "写"}

// terseDemandRe is a demand written as a label or a noun phrase:
// "Format: JSON object.", "JSON output with a, b, c.", "JSON, two keys:",
// "JSON keys: a, b".
var terseDemandRe = regexp.MustCompile(`(?i)^\s*(?:(?:output\s+|response\s+|answer\s+)?format\s*[:：]\s*(?:an?\s+)?(?:single\s+)?json\b|json\s+(?:output|response|answer|reply)\s+with\b|json\s*[,，]\s*(?:\w+\s+)?(?:keys|fields)\s*[:：]|json\s+(?:keys|fields)\s*[:：]|(?:输出|返回|回答)?格式\s*[:：]\s*json\b)`)

// bareJSONObjectRe is a line that is only "JSON object." — a demand under
// a format heading, a glossary entry elsewhere.
var bareJSONObjectRe = regexp.MustCompile(`(?i)^\s*(?:an?\s+)?json\s+object\s*[.!]?\s*$`)

// jsonHeadingAt reports whether the bare "JSON object." line at clause i
// answers a heading about the output ("### Format", "## Output") or goes on
// with its keys ("Keys: a, b").
func jsonHeadingAt(cls []clause, i int) bool {
	if i > 0 && outputHeadingRe.MatchString(cls[i-1].text) {
		return true
	}
	return i+1 < len(cls) && keyNounRe.MatchString(cls[i+1].text) && cls[i+1].start-cls[i].end < 3
}

// outputHeadingRe is a heading about the answer's format.
var outputHeadingRe = regexp.MustCompile(`(?i)^#+\s*(?:output|format|response|answer|reply|return)(?:\s+format)?\s*:?$`)

// statedCount returns the number of keys the used clauses state ("two
// fields", "3 keys", "三个字段"), 0 when none does or they disagree.
func statedCount(cls []clause, used []int) int {
	n := 0
	for _, i := range used {
		for _, m := range countRe.FindAllStringSubmatch(cls[i].text, -1) {
			c := countValue(m[1] + m[2])
			if c == 0 || n != 0 && c != n {
				return 0
			}
			n = c
		}
	}
	return n
}

// accounted reports whether keys account for every token the schema's
// clauses write as a key: a quoted or backticked identifier, a snake_case
// or camelCase one, a word after "called" or "named" ("a key called answer
// and a key called sources" read as answer alone is not sure). The clause
// after each used one is checked too when it talks about keys, so a demand
// that goes on in the next sentence is not cut short. Example objects are
// left out: their keys are read whole.
func accounted(cls []clause, used []int, keys []string) bool {
	check := func(c string) bool {
		if !mayWriteKey(c) {
			return true // the cheap common case: nothing written as a key
		}
		for _, m := range writtenKeyRe.FindAllStringSubmatch(stripObjects(c), -1) {
			k := ""
			for _, g := range m[1:] {
				if g != "" {
					k = g
					break
				}
			}
			if k != "" && !slices.Contains(keys, k) && !slices.Contains(grammarWords, strings.ToLower(k)) {
				return false
			}
		}
		return true
	}
	for _, i := range used {
		if !check(cls[i].text) {
			return false
		}
		if j := i + 1; j < len(cls) && !slices.Contains(used, j) && goesOnRe.MatchString(cls[j].text) && !check(cls[j].text) {
			return false
		}
	}
	return true
}

// notKeyWord reports whether k is not a word of the sentence's grammar
// (which is never a key the prompt means).
func notKeyWord(k string) bool { return !slices.Contains(grammarWords, strings.ToLower(k)) }

// mayWriteKey is a cheap test that c may hold a token writtenKeyRe finds:
// a quote, a backtick, an underscore, "called"/"named", or a lower-case
// letter followed by an upper-case one.
func mayWriteKey(c string) bool {
	if strings.ContainsAny(c, "`\"“_") || containsFoldASCII(c, "called") || containsFoldASCII(c, "named") {
		return true
	}
	for i := 1; i < len(c); i++ {
		if c[i] >= 'A' && c[i] <= 'Z' && c[i-1] >= 'a' && c[i-1] <= 'z' {
			return true
		}
	}
	return false
}

// stripObjects returns c without the text inside braces.
func stripObjects(c string) string {
	if !strings.Contains(c, "{") {
		return c
	}
	var b strings.Builder
	depth := 0
	for _, r := range c {
		switch {
		case r == '{':
			depth++
		case r == '}':
			depth = max(depth-1, 0)
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// countValue reads a count: digits, an English number word or Chinese
// numerals up to 十九.
func countValue(s string) int {
	if n, err := strconv.Atoi(s); err == nil {
		return n
	}
	if i := slices.Index(enNumbers, strings.ToLower(s)); i >= 0 {
		return i + 1
	}
	zh := map[rune]int{'一': 1, '二': 2, '两': 2, '三': 3, '四': 4, '五': 5, '六': 6, '七': 7, '八': 8, '九': 9}
	rs := []rune(s)
	switch {
	case len(rs) == 1 && rs[0] == '十':
		return 10
	case len(rs) == 1:
		return zh[rs[0]]
	case len(rs) == 2 && rs[0] == '十':
		return 10 + zh[rs[1]]
	}
	return 0
}

// namedInPrompt reports whether the prompt writes key k as a word of its
// own (not only inside a longer identifier).
func namedInPrompt(prompt, k string) bool {
	for from := 0; ; {
		i := strings.Index(prompt[from:], k)
		if i < 0 {
			return false
		}
		i += from
		from = i + len(k)
		if (i == 0 || !isWordByte(prompt[i-1])) && (from == len(prompt) || !isWordByte(prompt[from])) {
			return true
		}
	}
}

// isDemand reports whether clause c demands JSON as the answer's format.
//
// The clause is read without a leading bullet or step number ("4. Return a
// JSON object …") and with example objects left out ("Return {…} as
// JSON"). JSON someone else sends is no demand, and JSON the task reads is
// none unless the clause also makes it the answer's format ("Summarize the
// call as a JSON object", "把点单转成 JSON").
func isDemand(c string) bool {
	if !containsFoldASCII(c, "json") {
		return false // the cheap common case
	}
	c = stripObjects(stripBullet(c))
	if strings.Contains(c, "**") {
		c = strings.ReplaceAll(c, "**", "")
	}
	if containsFoldASCII(c, "json-") || strings.Contains(c, "类似") || strings.Contains(c, "像") {
		c = jsonLikeRe.ReplaceAllString(c, "jsonlike")
	}
	if !containsFoldASCII(c, "json") || !demandRe.MatchString(c) && !taskDemandRe.MatchString(c) || negatedRe.MatchString(c) || conditional(c) || historyRe.MatchString(c) || senderRe.MatchString(c) || howToRe.MatchString(c) || keptAsRe.MatchString(c) {
		return false
	}
	// "Parse the receipt and reply in JSON": the task reads the input, the
	// answer is JSON.
	return !topicRe.MatchString(intoJSONRe.ReplaceAllString(c, " as FORMAT")) || andDemandRe.MatchString(c)
}

// exampleDemand reports whether clause i shows the answer by an example
// object, with or without the word JSON: "Respond like {…}", "Example
// output:" and an object on the next line, "按如下格式输出：{…}",
// "输出示例：{…}". The object must have keys; a negated or conditional
// clause, or one describing input, is no demand.
func exampleDemand(cls []clause, i int) bool {
	c := cls[i].text
	open := strings.IndexByte(c, '{')
	if open < 0 {
		return false
	}
	before := c[:open]
	if strings.TrimSpace(before) == "" && i > 0 {
		// The label is the clause before, over a code fence's opening
		// line ("Respond using this format:", "```json", "{…}").
		j := i - 1
		if fenceRe.MatchString(cls[j].text) && j > 0 {
			j--
		}
		before = cls[j].text
	}
	if !exampleIntroRe.MatchString(before) || negatedRe.MatchString(before) || conditional(before) || inputRe.MatchString(before) {
		return false
	}
	ks, _ := objectKeys(c[open:])
	return len(ks) > 0
}

// conditional reports whether clause c makes its demand on a condition
// ("if the user asks, return JSON"). "When you answer, …" and "When I send
// you a topic, …" set the scene for every answer: no condition.
func conditional(c string) bool {
	return conditionalRe.MatchString(c) && (!everyTimeRe.MatchString(c) || askRe.MatchString(c))
}

// negated reports whether clause c refuses JSON; every refusal names JSON.
func negated(c string) bool { return containsFoldASCII(c, "json") && negatedRe.MatchString(c) }

// sentenceOf returns the prompt text spanning the clauses used, in prompt
// order.
func sentenceOf(text string, cls []clause, used []int) string {
	if len(used) == 0 {
		return ""
	}
	idx := slices.Clone(used)
	slices.Sort(idx)
	idx = slices.Compact(idx)
	var parts []string
	start, end := cls[idx[0]].start, cls[idx[0]].end
	for _, i := range idx[1:] {
		if cls[i].start-end > 600 {
			parts = append(parts, strings.TrimSpace(text[start:end]))
			start = cls[i].start
		}
		end = cls[i].end
	}
	parts = append(parts, strings.TrimSpace(text[start:end]))
	return strings.Join(parts, "\n")
}

const (
	// labelStart is where a label introducing the answer's example may
	// stand: the clause's start, after a comma or "here is".
	labelStart = `(?:^|[,，;；:：—]\s*|\b(?:here\s+is|here's|see)\s+)(?:#+\s*)?(?:\*\*)?(?:please\s+|请|务必|必须)?(?:(?:an?|the|your|this)\s+)?`
	// quotedKey is one key written in backticks or double quotes.
	quotedKey = "(?:`([A-Za-z_][A-Za-z0-9_]*)`|\"([A-Za-z_][A-Za-z0-9_]*)\"|“([A-Za-z_][A-Za-z0-9_]*)”)"
	// jsonAdj are the words that may stand between a preposition and JSON:
	// "in valid JSON", "as a single JSON object".
	jsonAdj = `(?:(?:a|an|the|one|single|valid|strict|strictly|pure|raw|plain|proper|well-formed|parseable|parsable|minified|compact|machine-readable|following|structured|only)\s+)*`
	// outputNoun names the answer.
	outputNoun = `(?:response|answer|output|reply|result|completion|message|everything\s+you\s+(?:return|output|write|say))s?`
)

var (
	demandRe = regexp.MustCompile(`(?i)` +
		// English: a directive verb whose object is JSON: "Respond in JSON",
		// "Please always return a JSON object", "format your answer as JSON".
		`(?:^(?:[^,，]{0,60}[,，:：]\s*)?|^(?:for\s+(?:each|every|any)|after\s+(?:each|every)|on\s+(?:each|every))\b[^,.;:]{0,40}?\s+|\b(?:please|always|only|kindly|then|and|must|should|shall|will|to|strictly|simply|just|so|(?:could|can|would)\s+you)\s+)` +
		`(?:(?:please|always|only|kindly|then|and|you\s+(?:must|should|shall|will|need\s+to|have\s+to|are\s+to)|make\s+sure\s+(?:to|you)|be\s+sure\s+to|remember\s+to)\s+)*` +
		`(?:respond|reply|answer|return|output|format|produce|emit|give|provide|write|generate|structure|send|deliver|print|express|present|put|spit\s+out|create|make|draft|compose)\b` +
		`(?:\s+(?:only|always|strictly|exclusively|back|me|us))*` +
		`(?:\s+` + jsonAdj + `json\b|[^.\n]{0,50}?\b(?:in|as|using|into|with|in\s+the\s+form\s+of)\s+` + jsonAdj + `json\b)` +
		// "The output must be valid JSON", "answers should be JSON objects".
		`|\b` + outputNoun + `\b[^.\n]{0,30}?\b(?:must|should|shall|will|has\s+to|have\s+to|needs\s+to|is\s+to)\s+(?:always\s+|only\s+|strictly\s+)?be\b[^.\n]{0,25}?\bjson\b` +
		// "Output format: JSON", "The response format is JSON".
		`|\b(?:output|response|answer|reply|return)\s+format\s*(?:is|should\s+be|must\s+be|=|[:：-])\s*` + jsonAdj + `json\b` +
		// "Output format (JSON):", "Returns: a JSON object with …".
		`|^\s*(?:#+\s*)?(?:output\s+)?format\s*[:：]\s*json\s*[.。]?\s*$|\b(?:output|response|answer|reply|return)\s+(?:format|schema|structure|shape)\s*[(（]\s*json\s*[)）]|^\s*(?:(?:your|the)\s+)?(?:returns?|outputs?|reply|answer|response)\s*[:：]\s*` + jsonAdj + `json\b` +
		// "The JSON you return needs …", "Each answer is a JSON object".
		`|\bjson\s+(?:that\s+)?you\s+(?:return|output|produce|send\s+back|give|write|generate)\b|\byour\s+json\s+(?:should|must|will)\s+(?:look|be\s+shaped|follow|match)\b|^(?:the\s+)?(?:result|output|answer|reply|response)\s+(?:is|will\s+be)\s+` + jsonAdj + `json\s+(?:object|document)\b|\b(?:each|every|your)\s+` + outputNoun + `\s+(?:is|are)\s+(?:always\s+)?` + jsonAdj + `json(?:\s+(?:object|array|document|dict)\b|\s*$|\s*[.,;:!])` +
		// "JSON, fields as follows:" under an output-format heading.
		`|^\s*json\s*(?:object|对象)?\s*[，,]\s*(?:字段|键名|键|属性|fields?\b|keys?\b)` +
		// "The assistant replies in JSON", "You always answer with JSON".
		`|\b(?:you\s+(?:always\s+|only\s+)?(?:respond|reply|answer|return|output|write)|(?:assistant|model|bot|agent)\s+(?:always\s+|only\s+)?(?:responds|replies|answers|returns|outputs|writes))\s+(?:only\s+)?(?:in|with|using|as)\s+` + jsonAdj + `json\b` +
		// "Use JSON for your answer", "use JSON format in every response".
		`|\buse\s+` + jsonAdj + `json(?:\s+format)?\s+(?:for|in|when)\s+(?:your|the|all|every|each)\s+` + outputNoun + `\b` +
		`|^\s*(?:json|json\s+only|json\s+output|json\s+format|json\s+response)\s*[:：.!]?\s*$|^\s*json\s*(?:only|object|output|format|response)?\s*[:：]\s*(?:$|[{\[` + "`" + `"“]|[A-Za-z_][A-Za-z0-9_]*\s*(?:[,，、;(（:：]|$)|字段|键|包含|包括)|^\s*json\s+only\b` +
		// "Describe the film as JSON with seven fields", "Your JSON response
		// contains …".
		`|\b(?:as|into)\s+` + jsonAdj + `json\s+(?:object\s+)?(?:with|containing|having)\b|\byour\s+json\s+(?:response|answer|output|reply)\b` +
		// "请按如下格式返回 JSON", "严格按照以下 JSON 结构回答".
		`|(?:按|按照|参照|依照)\s*(?:如下|以下|下面的?|这个|这种|该|下列)?\s*(?:的)?\s*(?:json\s*)?(?:格式|结构|形式|样式|示例|模板)\s*(?:来)?\s*(?:返回|输出|回复|回答|给出|生成)` +
		// Chinese: 以/用/按 JSON (格式) 返回/输出…, 返回/输出 JSON, JSON格式返回.
		`|(?:以|用|按|使用|采用|按照)\s*(?:标准|合法|严格|纯)?(?:的)?\s*json\s*(?:格式|对象|结构|数组)?\s*(?:的形式|形式)?\s*(?:来|进行)?\s*(?:返回|输出|回答|回复|响应|给出|作答|提供|表示|呈现)` +
		`|(?:^|[，,：:]|请|务必|必须|只|仅|需要|需|应|应当|应该|直接|都|一律|要|并|后|再|然后)\s*(?:以|用)?\s*(?:返回|输出|回答|回复|给出|生成|提供)\s*(?:一个|一段|一份)?\s*(?:[^。\n，,]{0,60}?的)?\s*(?:如下|以下|下面)?\s*(?:的)?\s*(?:合法的|有效的|标准的|严格的|纯|格式正确的)?\s*json` +
		`|json\s*格式\s*(?:返回|输出|回答|回复)` +
		// "1. 使用 JSON 格式；" under "输出要求：", "- Use JSON format."
		`|^(?:使用|采用|用)\s*json\s*(?:格式)?\s*(?:输出|返回|回答)?\s*$|^use\s+(?:the\s+)?json(?:\s+format)?\s*[.!]?\s*$` +
		// "回答时使用 JSON 格式", "把点单整理成 JSON", "按下表字段输出 JSON".
		`|(?:回答|输出|返回|回复)时?\s*(?:请|须|必须|需|要|一律)?\s*(?:使用|用|采用|以)\s*json` +
		`|(?:把|将)[^，,。\n]{0,30}?(?:转成|转为|转换为|转换成|转化为|整理成|整理为|拆分为|拆分成|写成)\s*(?:一个|一份)?\s*(?:合法的|标准的|有效的)?\s*json\s*(?:对象|格式|数组)?\s*(?:$|[^的\s\p{Han}]|[，,。：:])` +
		`|(?:按|按照|依照|参照)[^，,。\n]{0,12}?(?:输出|返回|给出)\s*json` +
		// "总结请用 JSON，包含 …": a bare directive to use JSON.
		`|(?:请|务必|必须|需要|需|都|一律)\s*(?:使用|用|以|采用)\s*json\s*(?:格式)?\s*(?:[，,：:]|$)` +
		`|(?:输出|返回|回答|回复|响应|答案|结果)(?:的)?(?:内容)?(?:格式)?\s*(?:必须|应该|应当|应|需要|需|须|只能|一律|均|都)?\s*(?:是|为|采用|使用|用)\s*(?:一个)?\s*(?:合法的?|有效的?|标准的?|严格的?|纯)?\s*json` +
		`|(?:输出|返回|回答|回复)(?:的)?(?:格式|要求|格式要求)\s*[:：]\s*(?:合法的|标准的|严格的)?\s*json`)
	// taskDemandRe is a task whose answer is to be JSON: "Summarize the
	// call notes as a JSON object", "Turn the receipt into JSON".
	taskDemandRe = regexp.MustCompile(`(?i)^(?:please\s+)?(?:summari[sz]e|describe|classify|extract|analy[sz]e|list|convert|turn|transform|split|break\s+down|render|encode|package|report|capture|record|represent|rewrite|restructure|organi[sz]e|map|tag|rate|score|grade|evaluate|assess|parse)\b[^.\n]{0,60}?\b(?:as|into)\s+` + jsonAdj + `json\b`)
	// intoJSONRe is JSON as the format something is made into: "as a JSON
	// object", "into JSON", "转成 JSON".
	intoJSONRe = regexp.MustCompile(`(?i)\b(?:as|into|in)\s+` + jsonAdj + `json\b|(?:转成|转为|转换为|转换成|转化为|整理成|整理为|拆分为|拆分成)\s*(?:一个|一份)?\s*json`)
	// keptAsRe is JSON as the form something is kept in, not the answer's:
	// "The inventory is tracked as a JSON object with keys …".
	keptAsRe = regexp.MustCompile(`(?i)\b(?:is|are|was|were|be|been|gets?)\s+(?:\w+ly\s+)?(?:tracked|stored|kept|logged|saved|recorded|represented|encoded|serialized|serialised|sent|received|persisted|cached|exported|imported)\s+(?:as|in)\s+` + jsonAdj + `json\b`)
	// howToRe is JSON as a skill taught: "how to write a JSON object".
	howToRe = regexp.MustCompile(`(?i)\bhow\s+(?:to|do\s+(?:i|you|we)|can\s+(?:i|you|we))\s+\w+[^.\n:;,]{0,40}\bjson\b|(?:如何|怎么|怎样|的方法|的工具)[^。\n，,：:]{0,20}json|json\s*(?:对象|格式)?\s*的(?:方法|工具|技巧|步骤)`)
	// topicRe marks a clause where JSON is the subject matter, not the
	// answer's format: "write a JSON parser", "convert this JSON to YAML".
	topicRe = regexp.MustCompile(`(?i)\bjson[\s-]+(?:examples?|snippets?|samples?|excerpts?|fragments?|parsers?|parsing|schemas?|files?|specs?|specification|librar(?:y|ies)|encoders?|decoders?|seriali[sz]\w*|deseriali[sz]\w*|validators?|tools?|modules?|packages?|standard|syntax|rfc|configs?|configuration|logs?|payloads?\s+(?:you|they)|documents?\s+(?:you|they|the\s+user)|inputs?|data\s+(?:you|they|the\s+user))\b` +
		`|^(?:[^,，]{0,40}[,，]\s*)?(?:please\s+)?(?:parse|read|convert|validate|analy[sz]e|summari[sz]e|explain|translate|debug|fix|load|decode|compare|review|transform|turn|rewrite|migrate)\b[^.\n]{0,30}\bjson\b` +
		`|\bjson\b[^.\n]{0,40}\b(?:into|to)\s+(?:yaml|xml|csv|toml|prose|plain|a\s+table|markdown|english)` +
		// JSON beside another format: "Present JSON and Protobuf side by
		// side".
		`|\bjson\s+(?:and|or|vs\.?|versus)\s+(?:xml|yaml|protobuf|protocol\s+buffers|csv|toml|msgpack|bson|avro|thrift|html|markdown)\b` +
		// JSON as an attribute: "JSON 格式的例子", "JSON 数据的含义".
		`|json\s*(?:格式|对象|数据)?\s*的\s*(?:例子|数据|文件|字符串|文档|工具|库|方法|概念|知识|问题|区别|含义|语法)` +
		`|json\s*(?:文件|数据|字符串|文本)?\s*(?:中|里|内|当中)|(?:解析|读取|转换|校验|验证|分析|解释|翻译|调试|修复|比较|转成|转为|转化)[^。\n，,]{0,10}json|json[^。\n，,]{0,15}(?:转换|转成|转为|转化)`)
	// andDemandRe is a demand joined to a task about the input: "Read the
	// complaint and respond in JSON", "Parse the CV line into JSON with
	// five fields".
	andDemandRe = regexp.MustCompile(`(?i)\band\s+(?:then\s+)?(?:respond|reply|answer|return|output|give|write)\b[^.\n]{0,30}?\bjson\b|\binto\s+` + jsonAdj + `json\s+(?:object\s+)?(?:with|containing|having)\b`)
	// senderRe marks JSON someone else sends: "The user will send JSON
	// payloads".
	senderRe = regexp.MustCompile(`(?i)\b(?:the\s+user|users|clients?|customers?|they|we|partners?|the\s+webhook)\s+(?:will\s+|may\s+|might\s+|can\s+|often\s+)?(?:send|sends|paste|pastes|post|posts|upload|uploads|submit|submits)\b(?:[^,.;:\n]{0,40}\bjson\b|\s*[.;]?$)`)
	// negatedRe marks a clause that refuses JSON as the format.
	negatedRe = regexp.MustCompile(`(?i)\b(?:don'?t|do\s+not|never|not|no\s+need\s+to|avoid|refrain\s+from|stop)\s+(?:\w+\s+){0,3}?(?:respond|reply|answer|return|output|use|using|format|produce|give|write|generate|send|wrap|emit|provide)\b[^.\n]{0,30}?\bjson\b` +
		`|\b(?:not|never|instead\s+of|rather\s+than|other\s+than|no|without|avoid)\s+(?:in\s+|as\s+|any\s+|using\s+)?(?:a\s+)?json\b` +
		`|\bjson\b[^.\n]{0,25}\b(?:not|isn'?t|never)\s+(?:needed|required|necessary|wanted|allowed|expected|appropriate|helpful)` +
		`|\bjson\b[^.\n]{0,25}\b(?:is|are)\s+(?:forbidden|prohibited|not\s+allowed)` +
		`|(?:不要|不用|别|勿|无需|不需要|不必|禁止|不得|避免|不能|不可以|请勿|切勿|不应)\s*(?:再)?\s*(?:使用|用|以|采用|按|返回|输出|回复|回答|给出|生成|写成|写|输出成)?\s*(?:任何)?\s*(?:\p{Han}{0,4}的)?\s*json` +
		`|(?:而不是|不是|非|并非)\s*json|json\s*(?:格式)?\s*(?:是)?(?:不需要|不必要|没有必要)`)
	conditionalRe = regexp.MustCompile(`(?i)\bonly\s+(?:when|if)\b|^\s*(?:if|when|whenever|unless|whether|in\s+case|only\s+if|should\s+the\s+user)\b|\bif\b[^.\n]{0,40}\b(?:asks?|wants?|requests?|needs?|explicitly|requires?)\b|\bwhen\s+(?:the\s+user|asked|requested|they)\b|\bunless\b|^\s*(?:如果|若|假如|当|如|除非|只有当|仅当|一旦)|(?:时|的话)\s*[，,]?\s*(?:才|再|就)|(?:要求|需要)\s*(?:时|的话)`)
	// goesOnRe is a sentence that may go on with a demand's keys: it talks
	// about keys, says what the answer includes, or starts with "also".
	goesOnRe = regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes|include|includes|contain|contains|add|plus)\b|^\s*(?:also|and|additionally|in\s+addition|besides|as\s+well)\b|字段|键|属性|包含|包括|另外|此外|还要|还需|同时`)
	// proseRe asks for an answer in prose.
	proseRe = regexp.MustCompile(`(?i)\b(?:in|with|using)\s+(?:plain\s+|natural\s+|normal\s+)?(?:english|prose|natural\s+language|plain\s+text|markdown|sentences)\b|自然语言|纯文本|用中文回答|用文字回答|段落形式`)
	// everyTimeRe is a "when" that holds for every answer: "When you
	// answer", "When I send you a topic", "When you have enough
	// information", "每次回答时".
	everyTimeRe = regexp.MustCompile(`(?i)^\s*(?:when|whenever)\s+(?:you\s+(?:answer|respond|reply|output)|you\s+(?:have|are|'re)\s+(?:enough|done|finished|ready|gathered)|(?:you\s+are\s+)?(?:done|finished|ready)\b|(?:i|we|the\s+user|users)\s+(?:send|sends|give|gives|paste|pastes|provide|provides|share|shares)\b|(?:the\s+|a\s+|an\s+|each\s+|every\s+)(?:user|player|student|customer|client|caller|visitor|patient|employee|human)\s+[a-z]+s\b)`)
	// askRe is a condition on what the user asks for.
	askRe = regexp.MustCompile(`(?i)\b(?:asks?|asked|wants?|requests?|requested|explicitly|requires?|prefers?)\b`)
	// historyRe marks a clause about a former demand: "last week we asked
	// you to respond in JSON", "之前要求用JSON返回".
	historyRe = regexp.MustCompile(`(?i)\b(?:previously|used\s+to|formerly|earlier|last\s+(?:week|time|month|year)|we\s+(?:once\s+)?asked|you\s+were\s+(?:asked|told)|no\s+longer)\b|(?:之前|以前|过去|此前|曾经|原来|原先)(?:要求|让你|会|都|用|是)|不再`)
	// exampleIntroRe is the text right before an example of the answer:
	// a directive to answer "like", "with", "as" or "such as" it, an
	// "Example output:" label, "输出格式：", "按如下格式输出：".
	exampleIntroRe = regexp.MustCompile(`(?i)(?:^(?:[^,，.]{0,40}[,，:：—]\s*|[^,，.:：]{0,60}\sand\s+)?(?:please\s+)?(?:always\s+|only\s+|just\s+)*(?:respond|reply|answer|return|output|format\s+(?:your|the)\s+(?:answer|response|output|reply))\b` +
		`(?:\s+(?:only|always|just|exactly|strictly|back|me|us|it|(?:your|the)\s+(?:answer|response|output|reply|result)s?|(?:(?:in|with|using|as)\s+)?(?:a\s+|an\s+)?(?:valid\s+)?json(?:\s+(?:object|format))?))*` +
		`\s*(?:\blike|\bwith|\bas|\bsuch\s+as|\b(?:in|using|with|per|following|matching)\s+(?:this|the\s+following)\s+(?:json\s+)?(?:shape|format|form|structure|template|schema)\s*[:：]?|[:：])` +
		// The labels start the clause or follow a comma: "the log's
		// output format: {…}" labels someone else's output.
		`|` + labelStart + `(?:example|sample|expected)\s+(?:json\s+)?(?:output|response|answer|reply|result)\s*[:：]?` +
		`|` + labelStart + `(?:output|response|answer|reply|return)\s+(?:example|sample|format|shape|template)\s*(?:[(（]\s*json\s*[)）])?\s*[:：]` +
		// A heading: "## Response format" over a fenced example.
		`|^#+\s*(?:\*\*)?(?:output|response|answer|reply|return)\s+(?:example|sample|format|shape|template|schema)(?:\s*[(（]\s*json\s*[)）])?\s*(?:\*\*)?` +
		`|` + labelStart + `(?:use|follow|match)\s+(?:this|the\s+following|the\s+format\s+below)\s+(?:json\s+)?(?:format|shape|structure|template|schema)?(?:\s+and\s+(?:fill|complete|replace)[^.:：]{0,40})?\s*[:：]?` +
		`|` + labelStart + `json\s*(?:格式|结构|示例|模板|样例)\s*(?:如下|为|是)\s*[:：]` +
		// "Your JSON should look like this:"
		`|\b(?:your|the)\s+(?:json|answer|response|output|reply)\s+(?:should|must|will)\s+look\s+like(?:\s+this)?\s*[:：]?` +
		`|` + labelStart + `(?:输出|返回|回复|回答|响应)(?:的)?(?:示例|样例|例子|格式|模板|结构)\s*(?:如下|为|是)?\s*[:：]` +
		`|` + labelStart + `(?:按|按照|参照|依照|参考)\s*(?:如下|以下|下面的?|这个|这种|该|下列)?\s*(?:的)?\s*(?:json\s*)?(?:格式|结构|形式|样式|示例|模板)\s*(?:来)?\s*(?:返回|输出|回复|回答|给出|生成)?\s*[:：]?)\s*$`)
	// belowRe ends a clause that introduces the lines below it without a
	// colon: "… with the keys listed below.", "… as follows."
	belowRe = regexp.MustCompile(`(?i)\b(?:below|as\s+follows|the\s+following)\s*[.。]?$|如下\s*[。.]?$`)
	// fenceRe is the opening line of a fenced code block.
	fenceRe = regexp.MustCompile("^(?:```|~~~)\\s*[A-Za-z]*$")
	// otherOwnerRe is a clause about the keys of something other than the
	// answer: a tool's arguments, the input, an API, logs, a form.
	otherOwnerRe = regexp.MustCompile(`(?i)\b(?:arguments?|parameters?|params|inputs?|requests?|tools?|functions?|api|apis|endpoints?|logs?|config(?:uration)?|database|tables?|csv|forms?|webhooks?|events?)\b[^.;:]{0,40}\b(?:keys?|fields?|properties|columns)\b|(?:参数|输入|请求|工具|接口|日志|配置|数据库|表格|表单)[^。；]{0,20}(?:字段|键|属性|包含)` +
		// What the task reads: "Each ticket arrives with the fields …",
		// "工单包含 title、content 两个字段".
		`|^(?:(?:each|every|the|a|an|your)\s+)?(?:incoming\s+)?(?:tickets?|messages?|emails?|records?|rows?|items?|orders?|documents?|entr(?:y|ies)|receipts?|reviews?|reports?|posts?|products?|submissions?|applications?|payloads?)\s+(?:arrives?|comes?|has|have|contains?|includes?|holds?|carries|carry)\b` +
		`|^(?:每条|每个|每份|每封|用户的?)?\s*(?:工单|消息|邮件|记录|订单|文档|请求|数据|商品|评论|简历|帖子|申请)\s*(?:中|里)?\s*(?:包含|包括|含有|都有|有)`)
	// jsonLikeRe is JSON as a likeness, no format: "a JSON-like list",
	// "类似 JSON 的格式".
	jsonLikeRe = regexp.MustCompile(`(?i)\bjson-(?:like|ish|style|esque|escaped|compatible|y)\b|(?:类似|像)\s*json\s*的?`)
	// keyNounRe names keys.
	keyNounRe = regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes)\b|键|字段|属性`)
	// answerWordRe names the answer.
	answerWordRe = regexp.MustCompile(`(?i)\b(?:respond|reply|answer|return|output|response)\b|输出|返回|回复|回答`)
	// outputWordRe is a word that introduces the answer.
	outputWordRe = regexp.MustCompile(`(?i)\b(?:respond|reply|answer|return|output|json|format)\b|输出|返回|回复|回答|格式`)
	jsonObjectRe = regexp.MustCompile(`(?i)\bjson\s+object\b|json\s*对象`)
	jsonArrayRe  = regexp.MustCompile(`(?i)\bjson\s+(?:array|list)\b|json\s*数组`)

	// schemaClauseRe marks a clause other than the demand that may name
	// keys: it talks about keys or fields, or says what the output must
	// include.
	schemaClauseRe = regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes)\b` +
		`|\b(?:` + outputNoun + `|json|object|payload|it)\b[^.\n]{0,30}?\b(?:must|should|shall|will|needs?\s+to|has\s+to|is\s+to|always)\s+(?:always\s+|also\s+|only\s+)?(?:include|contain|have|return|list|provide|consist\s+of)\b` +
		`|\b(?:` + outputNoun + `|json|object|payload|it)\s+(?:always\s+|also\s+)?(?:includes|contains|has|consists\s+of)\b` +
		`|^\s*(?:please\s+|always\s+|also\s+)*(?:include|contain|return|output|provide)\s+(?:exactly\s+|only\s+)?(?:the\s+following|these|all\s+of\s+(?:the\s+following|these))\b` +
		`|^\s*(?:you\s+)?(?:must|should)\s+(?:always\s+)?(?:return|include|output|provide)\b` +
		`|字段|键名|键|属性` +
		`|^(?:(?:输出|返回|回答|回复|结果|答案|内容|json|对象|响应|你的回答|返回的内容|输出的内容|返回结果|输出结果)(?:中|里)?(?:的)?\s*)?(?:必须|务必|需要|需|应当|应该|应|须|要|都要)\s*(?:包含|包括|含有|具有|有)` +
		`|^(?:请|务必)?\s*(?:输出|返回|给出|提供|包含|包括)\s*(?:以下|如下|下列)`)
	// listIntroRe marks a clause ending in a colon whose bullets are keys.
	listIntroRe = regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes|following|these|include|contain|structure|format|schema|shape)\b|以下|如下|下列|字段|键|属性|包含|包括|结构|格式`)

	// introRes find where a key list starts, most specific first.
	introRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes)\b(?:\s+(?:named|called|of))?\s*(?:are|is)?\s*(?:[:：—–]|\s-\s)?`),
		regexp.MustCompile(`(?i)\b(?:(?:must|should|shall|will|to|needs?\s+to|has\s+to|have\s+to|always)\s+(?:also\s+|always\s+|only\s+)?(?:include|contain|have|return|provide|output|list|give|consist\s+of)s?\b|includes|including|contains|containing|consisting\s+of|consists\s+of|has|having|^\s*(?:please\s+|always\s+|also\s+)*(?:include|contain|return|output|provide))` +
			`(?:\s+(?:only|exactly|just|at\s+least|all|both|the|these|those|its|their|following|of|below))*\s*[:：]?`),
		regexp.MustCompile(`(?:(?:必须|务必|需要|需|应当|应该|应|须|要|都要|只)?\s*(?:包含|包括|含有|具有|带有)|(?:必须|需要|要|应|应该|须|都要)\s*有)\s*(?:以下|如下|这些|下列|下面的|下面这些)?\s*(?:\d+|[一二两三四五六七八九十几]+)?\s*个?\s*(?:(?:字段|键名|键|属性)(?:名)?\s*(?:为|是)?|内容|信息|项)?\s*[:：]?`),
		regexp.MustCompile(`(?:输出|返回|给出|提供)\s*(?:以下|如下|下列|这些)\s*(?:\d+|[一二两三四五六七八九十几]+)?\s*个?\s*(?:字段|键名|键|属性)?\s*[:：]?`),
		regexp.MustCompile(`(?:字段|键名|键|属性)(?:名)?\s*(?:分别|依次)?\s*(?:为|是|包括|包含|有|如下|如下所示)?\s*[:：]?`),
		// "Return JSON with decision and reason": the list right after the
		// JSON it describes.
		regexp.MustCompile(`(?i)\bjson(?:\s+(?:object|document|payload|response|reply|answer))?\s+(?:with|containing|having)\s+(?:the\s+|only\s+|both\s+)?`),
	}
	// Lists written before what they are: "Return name, age and city as
	// JSON", "返回 name、age 两个字段", "包含 a 和 b 的 JSON 对象".
	preListRes = []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bwith\s+(?:the\s+)?([A-Za-z_"'` + "`" + `][^.\n:]*?)\s+(?:keys|fields|properties)\b`),
		regexp.MustCompile(`(?i)^(?:please\s+)?(?:return|output|give|provide|extract|respond\s+with)\s+(?:the\s+|only\s+)?(.+?)\s+(?:as|in)\s+` + jsonAdj + `json\b`),
		regexp.MustCompile(`(?:返回|输出|包含|包括|给出|提供|含有|带有|有)\s*([^，,：:；]+?)\s*等?\s*(?:这|这些)?\s*(?:\d+|[一二两三四五六七八九十几]+)?\s*个?\s*(?:字段|键名|键|属性|fields?\b|keys?\b)(?:$|[^\p{Han}]|的)`),
		regexp.MustCompile(`(?i)(?:包含|包括|含有|带有)\s*([^，,：:；]+?)\s*(?:\d+|[一二两三四五六七八九十几]+)?\s*个?\s*(?:字段|键|属性)?\s*的\s*json`),
	}
	requiredRe = regexp.MustCompile(`(?i)^\s*(?:\*\*)?(?:required|mandatory)(?:\s+(?:fields?|keys?|properties))?\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?\s*(.+)$|\brequired\s+(?:fields?|keys?|properties)\s*(?:are|is)?\s*[:：]?\s*(.+)$|(?:必填字段|必需字段|必填项|必须包含的字段)\s*(?:为|是|包括)?\s*[:：]?\s*(.+)$`)
	// bareRequiredRe is a "Required:" heading over a bullet list of keys.
	bareRequiredRe = regexp.MustCompile(`(?i)^\s*(?:\*\*)?(?:required|mandatory)(?:\s+(?:fields?|keys?|properties))?\s*(?:\*\*)?\s*[:：]\s*(?:\*\*)?$|^(?:必填字段|必需字段|必填项)\s*[:：]$`)
	// includeRe is a sentence after a JSON demand that lists what the
	// answer holds: "Include verdict and reasons", "It should contain the
	// title and the tags", "Add score and label".
	includeRe = regexp.MustCompile(`(?i)^(?:please\s+|also\s+|and\s+)*(?:(?:it|this|that|the\s+(?:object|json|answer|response|output))\s+(?:must|should|shall|needs\s+to|has\s+to)\s+)?(?:make\s+sure\s+(?:to\s+|it\s+)?)?(?:include|contain|add|give|provide|report)s?\s+(?:(?:only|exactly|both)\s+)?(.+)$`)
	// jsonColonRe is a key list right after "JSON:": "Output JSON: ok,
	// errors."
	jsonColonRe = regexp.MustCompile(`(?i)\bjson\s*[:：]\s*([A-Za-z_][^{}\[\]\n]*)$`)
	// itemWordRe is a key followed by a phrase that says what it is for:
	// "title for the blog post".
	itemWordRe = regexp.MustCompile(`(?i)^([A-Za-z_][A-Za-z0-9_]*)\s+(?:for|about|of|from|in|on|per|when|with|that|which)\s`)
	// articleRe is an article or possessive before a key read from prose.
	articleRe = regexp.MustCompile(`(?i)^(?:the|a|an|its|your|their)\s+`)
	// countRe is a stated number of keys: "two fields", "3 keys", "三个字段".
	countRe = regexp.MustCompile(`(?i)\b(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)\s+(?:(?:top-level|json|required|separate|distinct|string)\s+)?(?:fields|keys|properties|members|attributes|entries)\b|(\d{1,2}|[一二两三四五六七八九十]{1,2})\s*(?:个\s*(?:顶层)?\s*(?:字段|键名|键|属性|key|field)|项)`)
	// numeralRe is a count, never a key: "两", "三个" (a bare number may
	// be an enumeration value: "priority is one of 1, 2, 3").
	numeralRe = regexp.MustCompile(`^(?:[一二两三四五六七八九十几]+\s*个?|\d+\s*个)$`)
	// writtenKeyRe is a token a prompt writes as a key: quoted or
	// backticked, snake_case or camelCase, or named by "called"/"named".
	writtenKeyRe = regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_.-]*)`" + `|"([A-Za-z_][A-Za-z0-9_.-]*)"|“([A-Za-z_][A-Za-z0-9_.-]*)”|\b([A-Za-z][a-z0-9]*(?:_[A-Za-z0-9]+)+|[a-z]+[A-Z][A-Za-z0-9]*)\b|(?i:\b(?:called|named)\s+([A-Za-z_][A-Za-z0-9_]*))`)
	// namedKeyRe is a key named by a noun of its own.
	namedKeyRe = regexp.MustCompile("(?i)\\b(?:key|field|property|attribute)\\s+(?:(?:called|named)\\s+)?(?:`([A-Za-z_][A-Za-z0-9_]*)`|\"([A-Za-z_][A-Za-z0-9_]*)\")|\\b(?:key|field|property|attribute)\\s+(?:called|named)\\s+([A-Za-z_][A-Za-z0-9_]*)" +
		// `a "reply" key`, "an `escalate` field".
		"|\\b(?:an?|the)\\s+(?:`([A-Za-z_][A-Za-z0-9_]*)`|\"([A-Za-z_][A-Za-z0-9_]*)\"|“([A-Za-z_][A-Za-z0-9_]*)”)\\s+(?:key|field|property|attribute)\\b")
	// quotedListRe is a list of quoted keys; quotedIntroRe what may stand
	// before it.
	quotedListRe  = regexp.MustCompile(quotedKey + `(?:\s*(?:\([^()]*\))?\s*(?:,|，|、|;|&|\band\b|和|及|与|以及)+\s*(?:(?:a|an|the)\s+)?` + quotedKey + `)+`)
	quotedKeyRe   = regexp.MustCompile(quotedKey)
	quotedIntroRe = regexp.MustCompile(`(?i)(?:\b(?:need|needs|want|wants|expect|expects|with|for|include|includes|including|contain|contains|containing|has|have|having|return|returns|give\s+me|provide|output|keys?|fields?|properties)|[:：—–]|\s-)\s*(?:(?:a|an|the|both|exactly|just|only)\s+)*$`)
	// identKeyRe is an identifier-like key, the only kind sent upstream.
	identKeyRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]{0,63}$`)
	bulletRe   = regexp.MustCompile(`^(?:[-*•·+]|\d{1,2}[.)、．]|[（(]\d{1,2}[)）])\s*(?:\*\*)?["'` + "`" + `“]?([A-Za-z_][A-Za-z0-9_.]*|\p{Han}{1,12})["'` + "`" + `”]?(?:\*\*)?(?:\s*$|\s*[:：(（\-–—,，=]|\s+[(（])`)
	identRe    = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_.-]{0,63}|[\p{Han}A-Za-z0-9_]{1,12})$`)
	hanStopRe  = regexp.MustCompile(`[的了吗呢请不并把被让若就都也还须必该每各]|以下|如下|下列|下面|这些|上述|包含|包括|输出|返回|格式|内容|说明|见|下表|表格`)
	listSepRe  = regexp.MustCompile(`\s*(?:,|，|、|;|；|/|\||\band\b|\bor\b|以及|和|及|与|或)\s*`)
	// itemTailRe is what may follow the last key of a list: "… and c in
	// it", "… 和 c 两个字段".
	itemTailRe = regexp.MustCompile(`(?i)\s+(?:(?:in|inside|within|to|for)\s+(?:it|the\s+(?:json|object|output|response|answer)|your\s+(?:answer|response|output|reply|json))|only|as\s+well|too)$|\s*等?\s*(?:\d+|[一二两三四五六七八九十几]+)?\s*个?\s*(?:字段|键名|键|属性|fields?|keys?)$|\s*(?:\d+|[一二两三四五六七八九十几]+)\s*个?\s*项$`)
	// hanParenIdentRe is a Chinese label with its key in parentheses:
	// "标题（title）".
	hanParenIdentRe = regexp.MustCompile(`\p{Han}{1,12}\s*[（(]\s*([A-Za-z_][A-Za-z0-9_]*)\s*[)）]`)
	// typedBulletRe is a bullet that states its key's type: "- city:
	// string".
	typedBulletRe = regexp.MustCompile(`(?i)^(?:[-*•·+]|\d{1,2}[.)、．])\s*["'` + "`" + `]?([A-Za-z_][A-Za-z0-9_]*)["'` + "`" + `]?\s*[:：]\s*(string|str|number|float|integer|int|boolean|bool|array|list|object)\s*(?:$|[,，;(（—–-])`)
	typeNames     = map[string]string{"string": "string", "str": "string", "number": "number", "float": "number", "integer": "integer", "int": "integer", "boolean": "boolean", "bool": "boolean", "array": "array", "list": "array", "object": "object"}
	parenRe       = regexp.MustCompile(`\s*(?:\([^()]*\)|（[^（）]*）)`)
	typeNoteRe    = regexp.MustCompile(`(?i)^([A-Za-z_][A-Za-z0-9_]*)\s*[:：]\s*(?:string|number|integer|int|float|boolean|bool|array|list|object|str)$`)
	// stopWords end a list: "must include the summary" names no key.
	// enNumbers are the count words countRe reads, one to twelve.
	enNumbers = []string{"one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"}
	// grammarWords are words of a sentence, never a key the prompt means:
	// a schema with one is not sure.
	grammarWords  = append([]string{"a", "an", "and", "or", "with", "of", "to", "in", "as", "for", "is", "are", "be", "must", "should", "include", "contain", "one", "two", "three", "four", "five", "field", "key", "object", "format", "schema", "structure", "shape", "template"}, stopWords...)
	stopWords     = []string{"the", "it", "its", "this", "that", "these", "those", "them", "all", "both", "only", "exactly", "following", "everything", "nothing", "any", "some", "no", "more", "prose", "json", "keys", "key", "fields", "field", "properties", "attributes", "etc", "other", "each", "every", "your", "their", "which", "what", "how"}
	inputRe       = regexp.MustCompile(`(?i)\b(?:input|inputs|receive|receives|received|you\s+(?:will\s+)?(?:get|be\s+given|be\s+sent)|is\s+given|are\s+given|provided\s+(?:by|as)|the\s+user\s+(?:sends|will\s+send|pastes|provides)|request\s+body|looks\s+like\s+this\s+when)\b|输入|收到|给定|用户(?:会|将)?(?:发送|提供|粘贴)|传入`)
	numberRangeRe = `\s*(?:\(|（)?\s*(?:is|are|must be|should be|of|from|between|on a scale of|scale of|ranges? from|为|是|取值为|范围为|在|:|：)?\s*(?:from|between)?\s*(-?\d+)\s*(?:-|–|—|~|～|to|and|through|到|至)\s*(-?\d+)`
	enumTailRe    = `\s*(?:must be|should be|is|can be|may be|has to be|:|：)?\s*(?:one of|either)\s*[:：]?\s*(.+)$`
	enumZhRe      = `\s*(?:必须是|只能是|应为|应该是|取值为|可以是|为|是)\s*[:：]?\s*(.+?)(?:之一|中的一个|其中之一)`
	enumParenRe   = `\s*[(（]\s*([A-Za-z0-9_]+(?:\s*[|/]\s*[A-Za-z0-9_]+)+)\s*[)）]`
)

// clause is one clause of a prompt: its trimmed text and the byte range it
// spans, terminator included.
type clause struct {
	text       string
	start, end int
	demand     bool // isDemand(text), read once for the rules and the key scorer
}

// clauses splits text at line breaks and sentence ends (". ", "; ", "。",
// "；" …), but never inside braces, so a template object stays whole.
func clauses(text string) []clause {
	var out []clause
	depth, start := 0, 0
	cut := func(end, next int) {
		raw := text[start:end]
		if s := strings.TrimSpace(raw); s != "" {
			lead := len(raw) - len(strings.TrimLeft(raw, " \t\r\n"))
			out = append(out, clause{text: s, start: start + lead, end: next, demand: isDemand(s)})
		}
		start = next
	}
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		switch r {
		case '{':
			depth++
		case '}':
			depth = max(depth-1, 0)
		case '\n', '。', '；', '！', '？':
			if depth == 0 {
				cut(i, i+n)
			}
		case '.', ';', '!', '?':
			atEnd := i+n >= len(text) || text[i+n] == ' ' || text[i+n] == '\n' || text[i+n] == '\t'
			afterDigit := i > 0 && isDigit(text[i-1]) && strings.TrimSpace(text[start:i]) != "" && allDigits(strings.TrimSpace(text[start:i]))
			if depth == 0 && atEnd && !afterDigit && (r != ';' || !listGoesOn(text[i+n:])) {
				cut(i, i+n)
			}
		}
		i += n
	}
	cut(len(text), len(text))
	return out
}

// listGoesOn reports whether the text after a semicolon is one more key of
// a list ("fields lat; lng"), not a new clause.
func listGoesOn(rest string) bool {
	if end := strings.IndexAny(rest, ".;\n"); end >= 0 {
		rest = rest[:end]
	}
	rest = strings.TrimSpace(rest)
	return !strings.ContainsAny(rest, " \t") && keyLike(strings.Trim(rest, "\"'`"))
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isDigit(s[i]) {
			return false
		}
	}
	return s != ""
}

func endsWithColon(c string) bool {
	c = strings.TrimRight(strings.TrimSpace(c), "*")
	return strings.HasSuffix(c, ":") || strings.HasSuffix(c, "：")
}

// keysIn returns the keys a clause names: a bracketed list or a list after
// "keys"/"must include"/"字段"…, or one written before "as JSON"/"字段".
func keysIn(c string) []string {
	if ks := namedKeys(c); len(ks) > 1 {
		return ks
	}
	for i, re := range preListRes {
		if m := re.FindStringSubmatch(c); m != nil {
			// An English list needs two keys: "return the summary as JSON"
			// names the content, not a key.
			if ks := listItems(m[1], true); (len(ks) > 1 || (i > 1 && len(ks) > 0)) && !slices.ContainsFunc(ks, allDigits) {
				return ks
			}
		}
	}
	if m := jsonColonRe.FindStringSubmatch(c); m != nil {
		if ks := listItems(m[1], true); len(ks) > 1 {
			return ks
		}
	}
	for _, re := range introRes {
		for _, loc := range re.FindAllStringIndex(c, -1) {
			if e := loc[1]; e > 0 && e < len(c) && isWordByte(c[e-1]) && isWordByte(c[e]) {
				continue // cut inside a word: "Include the|se fields"
			}
			rest := strings.TrimSpace(c[loc[1]:])
			if strings.HasPrefix(rest, "[") {
				if end := strings.IndexByte(rest, ']'); end > 0 {
					if ks := listItems(rest[1:end], true); len(ks) > 0 {
						return ks
					}
				}
				continue
			}
			if strings.HasPrefix(rest, "{") {
				continue // a template: templateKeys reads it
			}
			if ks := listItems(rest, false); len(ks) > 0 {
				return ks
			}
		}
	}
	return quotedKeys(c)
}

// namedKeys reads keys each introduced by a noun of their own: "a key
// called answer and a key called sources", "the field `label` holds … and
// the field `evidence` holds …".
func namedKeys(c string) []string {
	if !strings.ContainsAny(c, "`\"") && !containsFoldASCII(c, "called") && !containsFoldASCII(c, "named") {
		return nil // the cheap common case
	}
	var ks []string
	for _, m := range namedKeyRe.FindAllStringSubmatch(c, -1) {
		for _, g := range m[1:] {
			if g != "" && !slices.Contains(ks, g) && !slices.Contains(grammarWords, strings.ToLower(g)) {
				ks = append(ks, g)
			}
		}
	}
	return ks
}

// quotedKeys reads a list of at least two quoted or backticked keys after
// a word that introduces what the answer holds: "I need `category`,
// `priority` and `reason`", `with "question" and "answer"`, "give me
// `grade`, `feedback` and `hints`", "fields for `origin` and `destination`".
func quotedKeys(c string) []string {
	if !strings.ContainsAny(c, "`\"“") {
		return nil // the cheap common case
	}
	c = stripObjects(c)
	for _, loc := range quotedListRe.FindAllStringIndex(c, -1) {
		if !quotedIntroRe.MatchString(c[:loc[0]]) {
			continue
		}
		var ks []string
		for _, m := range quotedKeyRe.FindAllStringSubmatch(c[loc[0]:loc[1]], -1) {
			if k := m[1] + m[2] + m[3]; !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
		if len(ks) > 1 {
			return ks
		}
	}
	return nil
}

// includeKeys reads the keys of a sentence that follows a JSON demand and
// says what the answer includes ("Include verdict and reasons."): at least
// two items, all key-like once an article is dropped. loose reports that an
// article was dropped (the keys are words of the sentence, not written as
// keys).
func includeKeys(c string) (keys []string, loose bool) {
	m := includeRe.FindStringSubmatch(c)
	if m == nil {
		return nil, false
	}
	body := strings.TrimRight(strings.TrimSpace(parenRe.ReplaceAllString(m[1], "")), ".。!！")
	items := listSepRe.Split(body, -1)
	for i, it := range items {
		it = strings.TrimSpace(it)
		if a := articleRe.FindString(it); a != "" {
			it, loose = it[len(a):], true
		}
		items[i] = it
	}
	keys = listItems(strings.Join(items, ", "), true)
	if len(keys) < 2 {
		return nil, false
	}
	return keys, loose
}

// listItems splits a list of key names or values. With strict, every item
// must be key-like or the whole list is rejected; otherwise the leading run
// of key-like items is kept, so "fields a, b and c, sorted by date" gives
// a, b, c. A parenthesised note after an item and a ": type" note are
// dropped.
func listItems(s string, strict bool) []string {
	s = hanParenIdentRe.ReplaceAllString(s, ", ${1}")
	s = parenRe.ReplaceAllString(s, "")
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), ".。:：!！"))
	var out []string
	for _, it := range listSepRe.Split(s, -1) {
		it = strings.Trim(strings.TrimSpace(it), "\"'`“”‘’「」*[]")
		if !strings.ContainsAny(it, "(（") {
			it = strings.TrimRight(it, ")）") // "(keys: lang, confidence)"
		}
		if m := typeNoteRe.FindStringSubmatch(it); m != nil {
			it = m[1]
		}
		it = strings.TrimSuffix(itemTailRe.ReplaceAllString(it, ""), "等")
		if it == "" {
			continue
		}
		if !keyLike(it) {
			if strict {
				return nil
			}
			if m := itemWordRe.FindStringSubmatch(it); m != nil && len(out) > 0 && keyLike(m[1]) && notKeyWord(m[1]) && !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
			break
		}
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// keyLike reports whether it can be a key name: an identifier, or a short
// run of Han characters without function words.
func keyLike(it string) bool {
	if !identRe.MatchString(it) || slices.Contains(stopWords, strings.ToLower(it)) || numeralRe.MatchString(it) {
		return false
	}
	if it[0] < utf8.RuneSelf {
		// "b_ratio两项": a key is written in one script.
		return !hasHan(it)
	}
	return !hanStopRe.MatchString(it) && !strings.ContainsAny(it, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
}

// bulletKeys reads the key names of a bullet list that follows a clause
// ending in a colon: one key per "- key: …" line at the list's own
// indentation (deeper bullets describe a nested value), stopping at the
// first line that is not a bullet.
func bulletKeys(text string, rest []clause) []string {
	var ks []string
	indent := -1
	for _, c := range rest {
		m := bulletRe.FindStringSubmatch(c.text)
		if m == nil {
			break
		}
		in := c.start - (strings.LastIndexByte(text[:c.start], '\n') + 1)
		if indent < 0 {
			indent = in
		}
		if in > indent {
			continue
		}
		if !keyLike(m[1]) {
			break
		}
		if !slices.Contains(ks, m[1]) {
			ks = append(ks, m[1])
		}
	}
	return ks
}

// bulletTypes adds to types the JSON type a bullet list states for a key
// ("- city: string", "- temperature_c: number"), up to the first line that
// is not a bullet. A key keeps the first type it is given.
func bulletTypes(rest []clause, types map[string]string) {
	for _, c := range rest {
		if !bulletRe.MatchString(c.text) {
			return
		}
		m := typedBulletRe.FindStringSubmatch(c.text)
		if m == nil {
			continue
		}
		if _, ok := types[m[1]]; !ok {
			types[m[1]] = typeNames[strings.ToLower(m[2])]
		}
	}
}

// schemaExample finds a JSON Schema written in the prompt (an object with
// "properties" and "type": "object", "$schema" or "required"), not
// described as input, and returns it with its required keys (its property
// names when it lists none).
func schemaExample(cls []clause) (int, json.RawMessage, []string, bool) {
	for i, c := range cls {
		open := strings.IndexByte(c.text, '{')
		if open < 0 || !strings.Contains(c.text, `"properties"`) {
			continue
		}
		if inputRe.MatchString(c.text[:open]) || (i > 0 && inputRe.MatchString(cls[i-1].text)) {
			continue
		}
		var raw json.RawMessage
		if json.NewDecoder(strings.NewReader(c.text[open:])).Decode(&raw) != nil {
			continue
		}
		var sc struct {
			Type       any                        `json:"type"`
			Schema     string                     `json:"$schema"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if json.Unmarshal(raw, &sc) != nil || len(sc.Properties) == 0 || (sc.Type != "object" && sc.Schema == "" && sc.Required == nil) {
			continue
		}
		req := sc.Required
		if req == nil {
			for k := range sc.Properties {
				req = append(req, k)
			}
			slices.Sort(req)
		}
		return i, raw, req, true
	}
	return 0, nil, nil, false
}

// templateKeys finds the first JSON example object in the prompt that is not
// described as input, and returns the clause it is in, its top-level keys
// and the types of their example values.
func templateKeys(text string, cls []clause) (int, []string, map[string]string) {
	for i, c := range cls {
		open := strings.IndexByte(c.text, '{')
		if open < 0 {
			continue
		}
		if describesInput(c.text[:open]) || (i > 0 && strings.TrimSpace(c.text[:open]) == "" && describesInput(cls[i-1].text)) || (i > 0 && inputRe.MatchString(cls[i-1].text) && !outputWordRe.MatchString(c.text[:open]) && !endsWithColon(cls[i-1].text)) || negated(c.text) {
			continue
		}
		if before := strings.TrimRight(c.text[:open], " \t\r\n"); strings.HasSuffix(before, "[") {
			continue // an array of objects: not an object schema
		}
		if i > 0 && strings.TrimSpace(c.text[:open]) == "" && strings.HasSuffix(strings.TrimSpace(cls[i-1].text), "[") {
			continue
		}
		if ks, ts := objectKeys(c.text[open:]); len(ks) > 0 {
			return i, ks, ts
		}
	}
	return 0, nil, nil
}

// describesInput reports whether the text before an example object says
// it is input. Only the last part of a sentence introduces the object:
// "对用户输入做意图识别，输出 JSON，格式为 {…}" and "For each clause the user
// pastes, classify it and reply with JSON only: {…}" show the answer.
func describesInput(before string) bool {
	if !inputRe.MatchString(before) {
		return false
	}
	seg := strings.TrimRight(before, " \t\r\n:：")
	if k := strings.LastIndexAny(seg, ",，;；"); k >= 0 {
		seg = seg[k:]
	}
	return inputRe.MatchString(seg) || !outputWordRe.MatchString(seg)
}

// objectKeys reads the top-level keys of the object that starts s, and the
// JSON type of each example value (none for a placeholder like "..." or
// null). It returns nothing when a key is not key-like.
func objectKeys(s string) ([]string, map[string]string) {
	toks := lex(s)
	var ks []string
	ts := map[string]string{}
	depth := 0
	// names are the items of an object written as a set of names, "{name,
	// email}": no colon, only identifiers between commas.
	var names []string
	onlyNames := true
	for j := 0; j < len(toks); j++ {
		t := toks[j]
		switch t.kind {
		case tkOpenObj, tkOpenArr:
			depth++
			if depth > 1 {
				onlyNames = false
			}
			continue
		case tkCloseObj, tkCloseArr:
			depth--
			if depth == 0 {
				if len(ks) == 0 && onlyNames && len(names) > 1 {
					return names, ts
				}
				return ks, ts
			}
			continue
		}
		if depth == 1 {
			switch {
			case t.kind == tkComma:
			case t.kind == tkBare && identKeyRe.MatchString(s[t.start:t.end]) && (j+1 < len(toks) && (toks[j+1].kind == tkComma || toks[j+1].kind == tkCloseObj)):
				names = append(names, s[t.start:t.end])
			default:
				onlyNames = false
			}
		}
		if depth != 1 || j+1 >= len(toks) || toks[j+1].kind != tkColon || (t.kind != tkString && t.kind != tkBare) {
			continue
		}
		k := s[t.start:t.end]
		if t.kind == tkString {
			if !t.closed {
				return nil, nil
			}
			k = k[1 : len(k)-1]
		}
		if !identRe.MatchString(k) {
			return nil, nil
		}
		if !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
		if j+2 < len(toks) {
			v := toks[j+2]
			if v.kind == tkBad && s[v.start] == '<' && j+4 < len(toks) && toks[j+4].kind == tkBad && s[toks[j+4].start] == '>' {
				v = toks[j+3] // "salary": <number>
			}
			if typ := valueType(s, v); typ != "" {
				if v.kind == tkBare && j+4 < len(toks) && toks[j+3].kind == tkOpenArr && toks[j+4].kind == tkCloseArr {
					typ = "array" // "tags": string[]
				}
				ts[k] = typ
			}
		}
	}
	return nil, nil // unbalanced: not an example
}

// valueType is the JSON type of an example value token; "" for a
// placeholder.
func valueType(s string, t token) string {
	switch t.kind {
	case tkString:
		return "string"
	case tkNumber:
		if _, err := strconv.ParseFloat(s[t.start:t.end], 64); err == nil {
			return "number"
		}
	case tkLiteral:
		if v := s[t.start:t.end]; v == "true" || v == "false" {
			return "boolean"
		}
	case tkOpenArr:
		return "array"
	case tkOpenObj:
		return "object"
	case tkBare:
		// {"spam": bool, "reason": string}: the type written as the value.
		return typeNames[strings.ToLower(s[t.start:t.end])]
	}
	return ""
}

var (
	enumParen = regexp.MustCompile(`^(?i)` + enumParenRe)
	enumTail  = regexp.MustCompile(`^(?i)` + enumTailRe)
	enumZh    = regexp.MustCompile(`^(?i)` + enumZhRe)
	rangeRe   = regexp.MustCompile(`^(?i)` + numberRangeRe)
	pipeSep   = regexp.MustCompile(`\s*[|/]\s*`)
)

// constrainKey adds to p the enumeration or range clause c states for key k,
// and reports whether it found one.
func constrainKey(k, c string, p map[string]any) bool {
	for _, name := range keyVariants(k) {
		for from := 0; ; {
			i := indexFoldASCII(c[from:], name)
			if i < 0 {
				break
			}
			i += from
			from = i + len(name)
			if i > 0 && name[0] < utf8.RuneSelf && isWordByte(c[i-1]) {
				continue // part of a longer word
			}
			tail := c[from:]
			if m := enumParen.FindStringSubmatch(tail); m != nil {
				if vals := enumValues(pipeSep.Split(m[1], -1)); vals != nil {
					p["enum"] = vals
					return true
				}
			}
			if m := enumTail.FindStringSubmatch(tail); m != nil {
				if vals := enumValues(listItems(m[1], false)); vals != nil {
					p["enum"] = vals
					return true
				}
			}
			if m := enumZh.FindStringSubmatch(tail); m != nil {
				if vals := enumValues(listItems(m[1], true)); vals != nil {
					p["enum"] = vals
					return true
				}
			}
			if m := rangeRe.FindStringSubmatch(tail); m != nil {
				lo, _ := strconv.Atoi(m[1])
				hi, _ := strconv.Atoi(m[2])
				if lo < hi {
					if p["type"] != "integer" {
						p["type"] = "number"
					}
					p["minimum"] = lo
					p["maximum"] = hi
					return true
				}
			}
		}
	}
	return false
}

// keyVariants returns the spellings under which a prompt may name key k:
// risk_level is also "risk level" and "risk-level".
func keyVariants(k string) []string {
	vs := []string{k}
	if strings.ContainsAny(k, "_-") {
		vs = append(vs, strings.NewReplacer("_", " ", "-", " ").Replace(k))
	}
	return vs
}

// enumValues types enumeration values: all integers become numbers,
// otherwise strings.
func enumValues(items []string) []any {
	if len(items) < 2 {
		return nil
	}
	out := make([]any, 0, len(items))
	nums := true
	for _, it := range items {
		if _, err := strconv.Atoi(it); err != nil {
			nums = false
		}
	}
	for _, it := range items {
		if nums {
			n, _ := strconv.Atoi(it)
			out = append(out, n)
		} else {
			out = append(out, it)
		}
	}
	return out
}

func dedupe(ss []string) []string {
	var out []string
	for _, s := range ss {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// containsFoldASCII reports whether s contains w, ASCII letters compared
// without case, without allocating.
func containsFoldASCII(s, w string) bool { return indexFoldASCII(s, w) >= 0 }

// indexFoldASCII is strings.Index with ASCII letters compared without case;
// other bytes (UTF-8 sequences included) must match exactly.
func indexFoldASCII(s, w string) int {
	for i := 0; i+len(w) <= len(s); i++ {
		j := 0
		for j < len(w) && lowerASCII(s[i+j]) == lowerASCII(w[j]) {
			j++
		}
		if j == len(w) {
			return i
		}
	}
	return -1
}

func lowerASCII(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
