package structured

import (
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// This file reads the answer's keys from the span of a prompt that the
// prompt itself marks as the answer's keys, by general means rather than
// one rule per phrasing:
//
//   - the rest of a JSON demand after the words that introduce what the
//     answer holds ("a JSON object with: a (string), b", "a JSON object —
//     a, b", "three arrays: a, b, c", "以 JSON 输出：a、b", "以 JSON 格式给出
//     a（整数）和 b"), its items parsed generically as `key [note]`, the note
//     in parentheses or after a colon or dash, and its type read from the
//     note;
//   - the lines under a clause ending in a colon, bulleted or not, each
//     `key [: — – -] note`;
//   - a markdown table whose header names a key column ("field", "key",
//     "字段" …): the keys are that column's cells, never the header's;
//   - a list in the sentence before "Return them as JSON".
//
// Every candidate is cross-checked: an identifier the prompt writes, not a
// word of the sentence's grammar, as many as a stated count ("three
// arrays", "两个字段"). A reading is sure only when the keys are written as
// keys (a type note, snake_case, camelCase, quotes) or introduced by a noun
// for keys; a list of plain words read from prose is a guess that serves to
// validate and repair, never sent upstream.

var (
	// spanIntroRe ends where a demand starts listing the answer's keys:
	// after JSON (and the noun it goes with) and "with", "containing",
	// "that has", a count and a noun, a colon or a dash.
	spanIntroRe = regexp.MustCompile(`(?i)(?:\bjson\b(?:\s+(?:object|format|document|payload|response|reply|answer|output|only|record|entry|dict|dictionary|map|structure|blob))*` +
		`(?:\s*[(（][^()（）]{0,30}[)）])?` +
		`(?:\s+(?:with|containing|including|holding|having|that\s+(?:has|have|holds|contains|includes)|which\s+(?:has|holds|contains|includes)|of|made\s+(?:up\s+)?of|consisting\s+of|composed\s+of|keyed\s+by)\b)?` +
		// "The object has two members: a and b".
		`|\b(?:object|output|response|answer|reply|result)\s+(?:has|have|holds|contains|includes|(?:should|must|will)\s+(?:have|hold|contain|include))\b)` +
		`(?:\s+(?:only|exactly|just|the|these|following|both))*` +
		`(?:\s+(\d{1,2}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve))?` +
		`(?:\s+(?:top-level|separate|distinct|required))?` +
		`(?:\s+(keys?|fields?|properties|attributes|members|entries|items|values|arrays?|lists?|strings?|numbers?|booleans?|parts|sections|elements))?` +
		`\s*([:：]|—+|–|\s-\s|$|\s)`)
	// zhSpanIntroRe is the Chinese counterpart: "JSON 对象：", "以 JSON 输出：",
	// "以 JSON 格式给出 a 和 b", "JSON 对象——a、b".
	zhSpanIntroRe = regexp.MustCompile(`(?i)json\s*(?:对象|格式|数组|结构)?\s*(?:的形式|形式)?\s*(?:来)?\s*(?:返回|输出|给出|提供|回答|回复|生成)?\s*(?:一个)?\s*(?:(?:\d+|[一二两三四五六七八九十]+)\s*个?\s*(?:字段|键名|键|属性|项)\s*)?(?:[:：]|——|—)?\s*`)
	// anaphoraRe is a demand whose object points back at a list: "Return
	// them as JSON".
	anaphoraRe = regexp.MustCompile(`(?i)^(?:please\s+|then\s+)*(?:return|output|give|provide|send|put|format|list|report|present|package)\s+(?:them|these|those|it\s+all|all\s+of\s+(?:them|these)|these\s+(?:fields|values|items|details|facts))\s+(?:all\s+)?(?:back\s+)?(?:as|in)\s+` + jsonAdj + `json\b`)
	// proseListRe is a list of at least two identifiers in a sentence,
	// each with an optional article: "the case_number, the filing_deadline
	// and the court".
	proseListRe = regexp.MustCompile(`(?i)(?:(?:the|its|their|a|an)\s+)?[A-Za-z_][A-Za-z0-9_]*(?:\s*,\s*(?:(?:the|its|their|a|an)\s+)?[A-Za-z_][A-Za-z0-9_]*)*\s*,?\s+and\s+(?:(?:the|its|their|a|an)\s+)?[A-Za-z_][A-Za-z0-9_]*`)
	// keyLineRe is one line of a key list: an optional bullet, the key
	// (optionally quoted or bold), then a note after a separator.
	keyLineRe = regexp.MustCompile("^(?:[-*•·+]\\s*|\\d{1,2}[.)、．]\\s*)?(?:\\*\\*)?[\"'`“]?([A-Za-z_][A-Za-z0-9_]*)[\"'`”]?(?:\\*\\*)?\\s*(?:[:：=]\\s*|\\s+[—–-]+\\s+|\\s*[—–]+\\s*|\\s*(?:[(（]))(.*)$")
	// bulletOnlyRe is a bulleted line holding a key alone: "- street".
	bulletOnlyRe = regexp.MustCompile("^(?:[-*•·+]|\\d{1,2}[.)、．])\\s*(?:\\*\\*)?[\"'`“]?([A-Za-z_][A-Za-z0-9_]*)[\"'`”]?(?:\\*\\*)?\\s*$")
	// leadBulletRe is a bullet or step number at the start of a line.
	leadBulletRe = regexp.MustCompile(`^\s*(?:[-*•·+]|\d{1,2}[.)、．]|[（(]\d{1,2}[)）]|#{1,6})\s+|^\s*\d{1,2}[、．]\s*`)
	// spanItemRe is one item of a key list: an optional article and up to
	// two words before the key ("a one-sentence summary"), the key,
	// optionally quoted and followed by a noun for keys (`a "reply" key`),
	// then an optional note.
	spanItemRe = regexp.MustCompile("^(?i:((?:an?|the|its|their|your)\\s+(?:[A-Za-z][A-Za-z-]*\\s+){0,2})?)(?:\"([A-Za-z_][A-Za-z0-9_]*)\"|`([A-Za-z_][A-Za-z0-9_]*)`|“([A-Za-z_][A-Za-z0-9_]*)”|'([A-Za-z_][A-Za-z0-9_]*)'|([A-Za-z_][A-Za-z0-9_]*))(?i:\\s+(key|field|property|attribute|string|array|list|number|integer|boolean|bool|object)\\b)?\\s*(.*)$")
	// enTypeRe and zhTypeRe read a JSON type from the start of a note:
	// "(an integer)", "(bool)", "(array of 4 strings)", "（布尔值，…）".
	enTypeRe = regexp.MustCompile(`(?i)^(?:an?\s+|the\s+)?(?:(string|str|text)|(integer|int|whole\s+number)|(number|float|decimal|double|numeric)|(boolean|bool|true\s*/\s*false|true\s+or\s+false)|(array|list)|(object|dict|map))\b`)
	zhTypeRe = regexp.MustCompile(`^(?:(字符串|文本)|(整数|整型)|(数字|数值|浮点数|小数)|(布尔值|布尔)|(数组|列表)|(对象))`)
	// tableRowRe is a row of a markdown table.
	tableRowRe = regexp.MustCompile(`^\|.*\|$`)
	tableSepRe = regexp.MustCompile(`^\|(?:\s*:?-{2,}:?\s*\|)+$`)
	// keyHeaders name a table column holding keys; typeHeaders one
	// holding their types.
	keyHeaders = []string{"key", "keys", "field", "fields", "field name", "name", "property", "attribute", "column", "字段", "字段名", "键", "键名", "属性", "参数", "参数名"}
	// keyOnlyHeaders name a column that can hold nothing but keys.
	keyOnlyHeaders = []string{"key", "keys", "field", "fields", "field name"}
	typeHeaders    = []string{"type", "data type", "json type", "类型", "数据类型"}
	// hanFalseKeyWords are Chinese words that hold 键 without meaning a
	// key: 关键 (crucial), 键盘 (keyboard), 按键 (button).
	hanFalseKeyWords = strings.NewReplacer("关键", "关要", "键盘", "盘盘", "按键", "按按")
)

// stripBullet returns c without a leading bullet, step number or heading
// mark, so "4. Return a JSON object …" and "- Respond only with JSON" read
// as the directives they are.
func stripBullet(c string) string {
	r, _ := utf8.DecodeRuneInString(strings.TrimLeft(c, " \t"))
	if !strings.ContainsRune("-*•·+#（(0123456789", r) {
		return c // the cheap common case: no bullet
	}
	if loc := leadBulletRe.FindStringIndex(c); loc != nil {
		return c[loc[1]:]
	}
	return c
}

// spanKeys reads the keys a JSON demand lists after the words that
// introduce them. written reports that the keys are written as keys (a
// type note, quotes, snake_case or camelCase, or a noun for keys before
// them); loose that an item was read out of a noun phrase.
//
// lastColon lets the list stand after the clause's last colon when no
// introducing words are found (for a demand: "输出 JSON，键名用英文：a、b").
func spanKeys(c string, lastColon bool) (keys []string, types map[string]string, written, loose bool) {
	c = stripBullet(c)
	span, count, noun, found := "", 0, "", false
	if m := spanIntroRe.FindStringSubmatchIndex(c); m != nil {
		sep := c[m[6]:m[7]]
		if m[4] >= 0 {
			noun = strings.ToLower(c[m[4]:m[5]])
		}
		// "Reply in JSON and keep it short" lists nothing: a list needs a
		// colon, a dash, a noun for what it lists, or "with"/"containing".
		if strings.TrimSpace(sep) != "" || noun != "" || introWordRe.MatchString(c[m[0]:m[1]]) {
			found, span = true, c[m[1]:]
			if m[2] >= 0 {
				count = countValue(c[m[2]:m[3]])
			}
			if strings.HasPrefix(sep, "—") || strings.HasPrefix(sep, "–") || sep == " - " {
				// "a JSON object — front, back — and nothing else": the
				// span ends at the closing dash.
				if e := strings.IndexAny(span, "—–"); e >= 0 {
					span = span[:e]
				}
			}
		}
	}
	if !found && hasHan(c) {
		if m := zhSpanIntroRe.FindStringIndex(c); m != nil && m[1] > m[0]+4 {
			found, span = true, c[m[1]:]
		}
	}
	if ks, ts, w, l := spanItems(span); (!found || len(ks) == 0) && !lastColon {
		return nil, nil, false, false
	} else if !found || len(ks) == 0 {
		// "输出 JSON，键名用英文：title、content", "Respond in JSON, using
		// snake_case keys: a, b": the list is after the demand's last colon.
		k := strings.LastIndexAny(c, ":：")
		if k < 0 || strings.ContainsAny(c[k:], "{}") {
			return nil, nil, false, false
		}
		_, n := utf8.DecodeRuneInString(c[k:])
		span = c[k+n:]
	} else {
		keys, types, written, loose = ks, ts, w, l
	}
	if count == 0 {
		if m := countRe.FindStringSubmatch(c); m != nil {
			count = countValue(m[1] + m[2])
		}
	}
	if len(keys) == 0 {
		keys, types, written, loose = spanItems(span)
	}
	if len(keys) == 0 || count != 0 && count != len(keys) || count == 0 && len(keys) < 2 {
		return nil, nil, false, false
	}
	switch noun {
	case "key", "keys", "field", "fields", "properties", "attributes":
		written = true
	}
	return keys, types, written, loose
}

// introWordRe is an introducing word inside a span intro without a colon:
// "a JSON object with a, b", "JSON containing a and b".
var introWordRe = regexp.MustCompile(`(?i)\b(?:with|containing|including|holding|having|has|have|holds|contains|includes|keyed\s+by|of)\s*$`)

// spanItems parses a key list item by item: `key [note]`, separated by
// commas, 、, ， or "and"/和, notes in parentheses or after a colon or
// dash. The list ends at the first item that is not one, after two keys
// at least; before that, the span is no key list.
func spanItems(span string) (keys []string, types map[string]string, written, loose bool) {
	types = map[string]string{}
	for _, it := range splitTop(span) {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		k, note, art, quoted, ok := spanItem(it)
		if !ok || slices.Contains(grammarWords, strings.ToLower(k)) || slices.Contains(keys, k) {
			if len(keys) < 2 {
				return nil, nil, false, false
			}
			if m := itemWordRe.FindStringSubmatch(it); m != nil && keyLike(m[1]) && notKeyWord(m[1]) && !slices.Contains(keys, m[1]) {
				// "fields id, name, price in EUR": price ends the list,
				// and the reading is a guess.
				keys, loose = append(keys, m[1]), true
			}
			break
		}
		keys = append(keys, k)
		if art {
			loose = true
		}
		if t := noteType(note); t != "" {
			types[k] = t
			written = true
		}
		if quoted || writtenKey(k) {
			written = true
		}
	}
	return keys, types, written, loose
}

// spanItem parses one item of a key list.
func spanItem(it string) (key, note string, article, quoted, ok bool) {
	it = strings.TrimRight(strings.TrimSpace(it), ".。!！")
	if m := hanLabelKeyRe.FindStringSubmatch(it); m != nil {
		return m[1], "", false, true, true // "摘要（summary）": the key written out
	}
	m := spanItemRe.FindStringSubmatch(it)
	if m == nil {
		return "", "", false, false, false
	}
	for _, g := range m[2:7] {
		if g != "" {
			key = g
		}
	}
	quoted = m[6] == ""
	rest := strings.TrimSpace(m[8])
	if t := noteType(m[7]); t != "" {
		if !quoted {
			return "", "", false, false, false // "a summary string": prose
		}
		note = m[7] // "a `tags` array"
	}
	switch {
	case rest == "":
	case strings.HasPrefix(rest, "(") || strings.HasPrefix(rest, "（"):
		note = strings.Trim(rest, "()（） ")
	case strings.HasPrefix(rest, ":") || strings.HasPrefix(rest, "：") || strings.HasPrefix(rest, "—") || strings.HasPrefix(rest, "–") || strings.HasPrefix(rest, "- "):
		note = strings.TrimLeft(rest, ":：—–- ")
	default:
		return "", "", false, false, false
	}
	article = m[1] != ""
	if article && quoted {
		article = false // `a "reply" key`: written as a key
	}
	return key, note, article, quoted, true
}

// splitTop splits a list at its separators outside parentheses and quotes.
func splitTop(s string) []string {
	var out []string
	depth, start := 0, 0
	inQuote := false
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		sep := 0
		switch {
		case r == '"' && depth == 0:
			inQuote = !inQuote
		case inQuote:
		case r == '(' || r == '（' || r == '[':
			depth++
		case r == ')' || r == '）' || r == ']':
			depth = max(depth-1, 0)
		case depth > 0:
		case r == ',' || r == '，' || r == '、' || r == ';' || r == '；':
			sep = n
		case r == '和' || r == '及' || r == '与':
			sep = n
		case r == ' ' && hasPrefixFold(s[i:], " and "):
			sep = len(" and ")
		case r == '以' && strings.HasPrefix(s[i:], "以及"):
			sep = len("以及")
		}
		if sep > 0 {
			out = append(out, s[start:i])
			start = i + sep
			i += sep
			continue
		}
		i += n
	}
	return append(out, s[start:])
}

// noteType reads the JSON type a note states first: "(an integer)",
// "(bool)", "(list of strings)", "（整数）", "布尔值，…"; "" for none.
func noteType(note string) string {
	note = strings.TrimLeft(strings.TrimSpace(note), "<")
	names := []string{"string", "integer", "number", "boolean", "array", "object"}
	if m := enTypeRe.FindStringSubmatch(note); m != nil {
		for i, g := range m[1:] {
			if g != "" {
				return names[i]
			}
		}
	}
	if k := strings.LastIndex(note, "的"); k >= 0 && zhTypeRe.MatchString(note[k+len("的"):]) {
		note = note[k+len("的"):] // "0-100 的整数"
	}
	if m := zhTypeRe.FindStringSubmatch(note); m != nil {
		for i, g := range m[1:] {
			if g != "" {
				return names[i]
			}
		}
	}
	return ""
}

// keyLines reads the keys of the lines under a clause ending in a colon:
// bulleted or not, each `key: note`, `key — note`, `key (note)`, or a
// bulleted key alone. It stops at the first other line and needs two keys.
// written reports that the keys are written as keys: a type in a note, a
// bullet, quotes, snake_case or camelCase.
//
// With bare, a line may hold a key alone, without a bullet ("键如下：" over
// "city" and "district").
func keyLines(rest []clause, bare bool) (ks []string, types map[string]string, written bool) {
	types = map[string]string{}
	for _, c := range rest {
		k, note := "", ""
		if m := keyLineRe.FindStringSubmatch(c.text); m != nil {
			k, note = m[1], strings.Trim(m[2], "()（） ")
		} else if m := bulletOnlyRe.FindStringSubmatch(c.text); m != nil {
			k = m[1]
		} else if bare && identKeyRe.MatchString(c.text) {
			k = c.text
		} else {
			break
		}
		if slices.Contains(grammarWords, strings.ToLower(k)) || slices.Contains(ks, k) {
			break
		}
		ks = append(ks, k)
		if t := noteType(note); t != "" {
			types[k] = t
			written = true
		}
		if bulletRe.MatchString(c.text) || writtenKey(k) || strings.Contains(c.text, "`"+k+"`") || strings.Contains(c.text, `"`+k+`"`) {
			written = true
		}
	}
	if len(ks) < 2 {
		return nil, nil, false
	}
	return ks, types, written
}

// listLine reports whether line is a line of a key list: a bullet, a
// `key: note` line or a table row.
func listLine(line string) bool {
	return bulletRe.MatchString(line) || keyLineRe.MatchString(line) || bulletOnlyRe.MatchString(line) || tableRowRe.MatchString(line)
}

// tableKeys reads the keys of a markdown table that starts at rest[0]:
// the cells of the column whose header names keys ("field", "key", "字段"
// …), and their types from a "type" column. The header row is never a key;
// a table without a key column, or a key cell that is not an identifier,
// gives nothing.
func tableKeys(rest []clause) ([]string, map[string]string) {
	if len(rest) < 3 || !tableRowRe.MatchString(rest[0].text) || !tableSepRe.MatchString(strings.ReplaceAll(rest[1].text, " ", "")) {
		return nil, nil
	}
	header := cells(rest[0].text)
	kc, tc := -1, -1
	for i, h := range header {
		h = strings.ToLower(strings.Trim(h, "*` "))
		switch {
		case kc < 0 && slices.Contains(keyHeaders, h) && (h != "name" && h != "column" || slices.ContainsFunc(header, isTypeHeader)):
			kc = i
		case tc < 0 && slices.Contains(typeHeaders, h):
			tc = i
		}
	}
	if kc < 0 {
		return nil, nil
	}
	var ks []string
	types := map[string]string{}
	for _, c := range rest[2:] {
		if !tableRowRe.MatchString(c.text) {
			break
		}
		row := cells(c.text)
		if kc >= len(row) {
			return nil, nil
		}
		k := strings.Trim(row[kc], "*`\"' ")
		if !identKeyRe.MatchString(k) || slices.Contains(ks, k) {
			return nil, nil
		}
		ks = append(ks, k)
		if tc >= 0 && tc < len(row) {
			t := noteType(row[tc])
			if t == "" && !slices.Contains(keyOnlyHeaders, strings.ToLower(strings.Trim(header[kc], "*` "))) && !hasHan(header[kc]) {
				// Under "name", a type column of other words ("| apple |
				// fruit |") says the rows are data, not keys.
				return nil, nil
			}
			if t != "" {
				types[k] = t
			}
		}
	}
	if len(ks) == 0 {
		return nil, nil
	}
	return ks, types
}

func isTypeHeader(h string) bool {
	return slices.Contains(typeHeaders, strings.ToLower(strings.Trim(h, "*` ")))
}

// cells splits a markdown table row into its trimmed cells.
func cells(row string) []string {
	parts := strings.Split(strings.Trim(strings.TrimSpace(row), "|"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(p)
	}
	return parts
}

// proseKeys reads the list of identifiers in the sentence before "Return
// them as JSON": "Find the invoice_id, the due_date and the amount in the
// email." Articles are dropped, so the reading is loose.
func proseKeys(c string) []string {
	m := proseListRe.FindString(c)
	if m == "" {
		return nil
	}
	var ks []string
	for _, it := range splitTop(m) {
		it = strings.TrimSpace(articleRe.ReplaceAllString(strings.TrimSpace(it), ""))
		if it == "" {
			continue
		}
		if !keyLike(it) || slices.Contains(grammarWords, strings.ToLower(it)) || slices.Contains(ks, it) {
			return nil
		}
		ks = append(ks, it)
	}
	if len(ks) < 2 {
		return nil
	}
	return ks
}

// noteTypes adds to types the type a note right after a key states in
// text: "score (integer 1-6)", "`approved` (bool)", "hire（布尔值）", "`items`
// is an array of …". A key keeps the type it has.
func noteTypes(text string, keys []string, types map[string]string) {
	for _, k := range keys {
		if types[k] != "" {
			continue
		}
		for from := 0; ; {
			i := strings.Index(text[from:], k)
			if i < 0 {
				break
			}
			i += from
			from = i + len(k)
			if i > 0 && isWordByte(text[i-1]) || from < len(text) && isWordByte(text[from]) {
				continue
			}
			rest := strings.TrimLeft(text[from:], "\"'`”* ")
			if v := strings.TrimLeft(rest, ":：—–- "); len(v) < len(rest) && noteType(v) != "" && strings.IndexAny(v, ",;\n") != 0 {
				// "* `title` – string", "name: string"
				types[k] = noteType(v)
				break
			}
			if v, ok := cutAnyPrefix(strings.TrimLeft(rest, " "), "is ", "为", "是"); ok {
				// "`items` is an array of missing SKUs"
				if t := noteType(v); t != "" {
					types[k] = t
					break
				}
				continue
			}
			if !strings.HasPrefix(rest, "(") && !strings.HasPrefix(rest, "（") {
				continue
			}
			end := strings.IndexAny(rest, ")）")
			if end < 0 {
				continue
			}
			if t := noteType(strings.TrimLeft(rest[:end], "(（ ")); t != "" {
				types[k] = t
				break
			}
		}
	}
}

// cutAnyPrefix is strings.CutPrefix with the first of several prefixes s
// has.
func cutAnyPrefix(s string, prefixes ...string) (string, bool) {
	for _, p := range prefixes {
		if after, ok := strings.CutPrefix(s, p); ok {
			return after, true
		}
	}
	return s, false
}

// writtenKey reports a key spelled as only a key is: snake_case or
// camelCase.
func writtenKey(k string) bool {
	if strings.Contains(strings.Trim(k, "_"), "_") {
		return true
	}
	for i := 1; i < len(k); i++ {
		if k[i] >= 'A' && k[i] <= 'Z' && k[i-1] >= 'a' && k[i-1] <= 'z' {
			return true
		}
	}
	return false
}

func hasHan(s string) bool {
	for _, r := range s {
		if r >= 0x4e00 && r <= 0x9fff {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, p string) bool { return len(s) >= len(p) && indexFoldASCII(s[:len(p)], p) == 0 }

var (
	// slotVerbRe starts a sentence that says where each part of the answer
	// goes: "Put the result in verdict and your reasoning in explanation",
	// `The headline goes in "headline"`.
	slotVerbRe = regexp.MustCompile(`(?i)\b(?:put|puts|place|store|stores|write|goes|go|belongs?|record|save)\b|放在|放到|填在|填入|写在|写入|存入|存在`)
	// slotRe is one destination: "in verdict", `in "headline"`, "under the
	// key `body`", "放在 title 中".
	slotRe = regexp.MustCompile("(?i)(?:放在|放到|填在|填入|写在|写入|存入|存在)\\s*([A-Za-z_][A-Za-z0-9_]*)|\\b(?:in|under|into)\\s+(?:the\\s+)?(?:(?:key|field|property)\\s+)?(?:\"([A-Za-z_][A-Za-z0-9_]*)\"|`([A-Za-z_][A-Za-z0-9_]*)`|“([A-Za-z_][A-Za-z0-9_]*)”|([a-z_][a-z0-9_]*)\\s*(?:[,;.]|\\band\\b|$))")
	// slotProseWords are what "in …" names in prose, never a key.
	slotProseWords = []string{"markdown", "brackets", "order", "bullets", "quotes", "parentheses", "lowercase", "uppercase", "full", "detail", "json", "yaml", "html", "text", "prose", "caps", "italics", "bold", "mind", "general", "particular", "short", "brief", "total", "advance", "time", "turn", "sequence", "english", "chinese", "words", "sentences", "paragraphs", "it", "them", "there", "here"}
)

// slotKeys reads keys from a sentence that says where each part of the
// answer goes: "Put the result in verdict and your reasoning in
// explanation". At least two destinations; loose unless every one is
// quoted or backticked.
func slotKeys(c string) (keys []string, loose bool) {
	loc := slotVerbRe.FindStringIndex(c)
	if loc == nil {
		return nil, false
	}
	for _, m := range slotRe.FindAllStringSubmatch(c[loc[0]:], -1) {
		k := m[1] + m[2] + m[3] + m[4] // 放在 title 中, `in "headline"`
		if k == "" {
			k = m[5]
			if slices.Contains(slotProseWords, k) || slices.Contains(grammarWords, k) {
				return nil, false
			}
			loose = true
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	if len(keys) < 2 {
		return nil, false
	}
	return keys, loose
}

// describedKeyRe is a quoted or backticked key followed by what it holds:
// "`status` is \"ok\" or \"partial\"", `"items" lists the SKUs`.
var describedKeyRe = regexp.MustCompile("(?:`([A-Za-z_][A-Za-z0-9_]*)`|\"([A-Za-z_][A-Za-z0-9_]*)\"|“([A-Za-z_][A-Za-z0-9_]*)”)\\s+(?:is|are|holds?|contains?|lists?|has|gives?|should|must|will|=|means|represents|equals)\\b")

// hanLabelKeyRe is a Chinese label with its key in parentheses, alone:
// "摘要（summary）".
var hanLabelKeyRe = regexp.MustCompile(`^\p{Han}{1,12}\s*[（(]\s*([A-Za-z_][A-Za-z0-9_]*)\s*[)）]$`)

// zhDescribedKeyRe is a key written in a Chinese sentence and followed by
// what it holds: "其中 score 为分数，level 为等级".
var zhDescribedKeyRe = regexp.MustCompile(`(?:^|[，,；;：:]|其中)\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:为|是|表示|代表|指|填)`)

// describedKeys reads keys each written in quotes and followed by what it
// holds: "Return a JSON payload where `status` is \"ok\" or \"partial\" and
// `items` is an array of missing SKUs.", "其中 score 为分数，level 为等级".
// At least two.
func describedKeys(c string) []string {
	var ks []string
	if strings.ContainsAny(c, "`\"“") {
		for _, m := range describedKeyRe.FindAllStringSubmatch(stripObjects(c), -1) {
			if k := m[1] + m[2] + m[3]; !slices.Contains(ks, k) && notKeyWord(k) {
				ks = append(ks, k)
			}
		}
	}
	if len(ks) == 0 && hasHan(c) {
		for _, m := range zhDescribedKeyRe.FindAllStringSubmatch(stripObjects(c), -1) {
			if k := m[1]; !slices.Contains(ks, k) && notKeyWord(k) && !strings.EqualFold(k, "json") {
				ks = append(ks, k)
			}
		}
	}
	if len(ks) < 2 {
		return nil
	}
	return ks
}

// zhIdentRunRe is a run of identifiers in Chinese text: "字段名用英文
// answer、evidence".
var zhIdentRunRe = regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*(?:\s*(?:、|，|,|和|及|与|以及)\s*[A-Za-z_][A-Za-z0-9_]*)+`)

// writtenKeysNear reads, as a last resort, the keys a demand (clause i)
// and the sentences right after it write as keys: quoted or backticked,
// snake_case or camelCase, or a run of identifiers in Chinese text. A
// following sentence counts while it writes a key and is no demand of its
// own. At least two keys, none a grammar word.
func writtenKeysNear(cls []clause, i int, demand []bool) map[int][]string {
	out := map[int][]string{}
	var seen []string
	for j := i; j < len(cls) && j < i+4; j++ {
		if j > i && (demand[j] || otherOwnerRe.MatchString(cls[j].text)) {
			break
		}
		c := stripObjects(cls[j].text)
		var ks []string
		add := func(k string) {
			if k != "" && notKeyWord(k) && !strings.EqualFold(k, "json") && !slices.Contains(seen, k) {
				seen = append(seen, k)
				ks = append(ks, k)
			}
		}
		if mayWriteKey(c) {
			for _, m := range writtenKeyRe.FindAllStringSubmatch(c, -1) {
				add(m[1] + m[2] + m[3] + m[4] + m[5])
			}
		}
		if hasHan(c) {
			for _, run := range zhIdentRunRe.FindAllString(c, -1) {
				for _, k := range splitTop(run) {
					add(strings.TrimSpace(k))
				}
			}
		}
		if len(ks) == 0 {
			if j > i {
				break
			}
			continue
		}
		out[j] = ks
	}
	if len(seen) < 2 {
		return nil
	}
	return out
}
