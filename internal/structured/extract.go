package structured

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Implied is an output schema implied by a system prompt's format demands.
type Implied struct {
	// Schema is a draft 2020-12 JSON Schema: an object with the demanded
	// keys as required properties, enumerations and ranges on them; {} or
	// {"type":"object"} / {"type":"array"} for a demand that names no keys.
	Schema json.RawMessage
	// Keys are the demanded keys in order of first mention.
	Keys []string
	// Sources are the phrases of the prompt the schema was built from, for
	// the debug trace.
	Sources []string
}

// ExtractConstraints finds hard output-format requirements in a system
// prompt, in English and Chinese, and turns them into an implied schema:
//
//   - a demand for JSON — a directive verb with JSON in one clause ("Respond
//     in JSON", "Return a JSON object", "Output JSON:", "以JSON格式返回",
//     "请用JSON输出") — optionally naming keys: "with keys [a, b, c]",
//     "with fields a, b and c", a template {"a": ..., "b": ...}, "包含字段：
//     风险等级、缓解措施", "键为 a, b", or a bullet list after a colon;
//   - enumerations and ranges on those keys: "risk_level must be one of low,
//     medium, high", "risk level 1–5", "风险等级为1到5", "风险等级必须是低、中、高之一";
//   - required fields: every demanded key, plus "required fields: a, b" /
//     "必填字段：a、b".
//
// Precision comes before recall: a clause that only mentions JSON ("I like
// JSON", "the JSON spec says", "parse the JSON below"), a negated or
// conditional clause ("do not answer in JSON", "if asked, return JSON") and a
// key list with anything but identifier-like names yield nothing. ok is false
// when the prompt demands no JSON. ExtractConstraints is safe for concurrent
// use.
func ExtractConstraints(systemPrompt string) (*Implied, bool) {
	if !containsFoldASCII(systemPrompt, "json") {
		return nil, false // the cheap common case
	}
	cls := clauses(systemPrompt)
	var (
		keys     []string
		sources  []string
		demanded bool
		kind     string // "", "object" or "array" for a demand without keys
	)
	addKeys := func(ks []string) {
		for _, k := range ks {
			if !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
	}
	for i, c := range cls {
		if !demandRe.MatchString(c) || negatedRe.MatchString(c) || conditionalRe.MatchString(c) || topicRe.MatchString(c) {
			continue
		}
		demanded = true
		sources = append(sources, strings.TrimSpace(c))
		ks := keysIn(c)
		if len(ks) == 0 && endsWithColon(c) {
			ks = bulletKeys(cls[i+1:])
		}
		addKeys(ks)
		if kind == "" {
			switch {
			case jsonObjectRe.MatchString(c):
				kind = "object"
			case jsonArrayRe.MatchString(c):
				kind = "array"
			}
		}
	}
	if !demanded {
		return nil, false
	}
	for _, c := range cls {
		if m := requiredRe.FindStringSubmatch(c); m != nil {
			if ks := listItems(m[1]+m[2], true); len(ks) > 0 {
				addKeys(ks)
				sources = append(sources, strings.TrimSpace(c))
			}
		}
	}
	if len(keys) == 0 {
		schema := `{}`
		if kind != "" {
			schema = `{"type":"` + kind + `"}`
		}
		return &Implied{Schema: json.RawMessage(schema), Sources: sources}, true
	}
	props := make(map[string]map[string]any, len(keys))
	for _, k := range keys {
		p := map[string]any{}
		for _, c := range cls {
			if constrainKey(k, c, p) {
				sources = append(sources, strings.TrimSpace(c))
			}
		}
		props[k] = p
	}
	b, err := json.Marshal(map[string]any{"type": "object", "properties": props, "required": keys})
	if err != nil {
		return nil, false
	}
	return &Implied{Schema: b, Keys: keys, Sources: dedupe(sources)}, true
}

var (
	demandRe = regexp.MustCompile(`(?i)` +
		// English: a clause that opens with a directive verb ("Respond …",
		// "Please always return …", "As an analyst, output …") and names JSON.
		`^(?:[^,，]{0,40}[,，]\s*)?(?:(?:please|always|only|kindly|then|and|you\s+(?:must|should|shall|will|need\s+to|have\s+to)|make\s+sure\s+(?:to|you)|be\s+sure\s+to)\s+)*` +
		`(?:respond|reply|answer|return|output|format|produce|emit|give|provide|write|generate|structure)\b[^.\n]{0,60}?\bjson\b` +
		`|\b(?:response|answer|output|reply|result)s?\b[^.\n]{0,20}?\b(?:must|should|shall|will)\s+(?:always\s+|only\s+)?be\b[^.\n]{0,20}?\bjson\b` +
		`|^\s*json\s*(?:only|object|output|format|response)?\s*[:：]` +
		// Chinese: 以/用/按 JSON (格式) 返回/输出…, 返回/输出 JSON, JSON格式返回.
		`|(?:以|用|按|使用|采用|按照)\s*json\s*(?:格式|对象|结构)?\s*(?:的形式|形式)?\s*(?:返回|输出|回答|回复|响应|给出|作答|提供)` +
		`|(?:^|请|务必|必须|只|仅)\s*(?:返回|输出|回答|回复|给出|生成|提供)\s*(?:一个|一段)?\s*(?:合法的|有效的|标准的)?\s*json` +
		`|json\s*格式\s*(?:返回|输出|回答|回复)`)
	// topicRe marks a clause where JSON is the subject matter, not the
	// answer's format: "write a JSON parser", "convert this JSON to YAML".
	topicRe = regexp.MustCompile(`(?i)\bjson[\s-]+(?:parsers?|parsing|schemas?|files?|specs?|specification|librar(?:y|ies)|encoders?|decoders?|seriali[sz]\w*|deseriali[sz]\w*|validators?|tools?|modules?|packages?|standard|syntax|rfc)\b` +
		`|^(?:[^,，]{0,40}[,，]\s*)?(?:please\s+)?(?:parse|read|convert|validate|analy[sz]e|summari[sz]e|explain|translate|debug|fix|load|decode|compare|review)\b[^.\n]{0,30}\bjson\b` +
		`|(?:解析|读取|转换|校验|验证|分析|解释|翻译|调试|修复|比较)[^。\n]{0,10}json`)
	negatedRe     = regexp.MustCompile(`(?i)\b(?:don'?t|do not|never|not|no)\b[^.\n]{0,30}\bjson\b|(?:不要|不用|别|勿|无需|不需要|不必|禁止)[^。\n]{0,10}json`)
	conditionalRe = regexp.MustCompile(`(?i)^\s*(?:if|when|whenever|unless|whether|in case)\b|\bif\b[^.\n]{0,40}\b(?:asks?|wants?|requests?|needs?)\b|^\s*(?:如果|若|假如|当)`)
	jsonObjectRe  = regexp.MustCompile(`(?i)\bjson\s+object\b|json\s*对象`)
	jsonArrayRe   = regexp.MustCompile(`(?i)\bjson\s+(?:array|list)\b|json\s*数组`)

	// keysRe finds where a key list starts: "keys", "fields", "字段" …
	keysRe = regexp.MustCompile(`(?i)\b(?:keys?|fields?|properties|attributes)\b(?:\s+(?:named|called))?\s*[:：]?|(?:字段|键名|键|属性)(?:名)?\s*(?:为|是|包括|包含|有)?\s*[:：]?`)
	// templateRe finds a JSON-like template object.
	templateRe    = regexp.MustCompile(`\{[^{}]*\}`)
	templateKeyRe = regexp.MustCompile(`["']([^"'{}:,]{1,64})["']\s*:`)
	requiredRe    = regexp.MustCompile(`(?i)\brequired\s+(?:fields?|keys?|properties)\s*(?:are|is)?\s*[:：]?\s*(.+)$|(?:必填字段|必需字段|必填项|必须包含的字段)\s*(?:为|是|包括)?\s*[:：]?\s*(.+)$`)
	bulletRe      = regexp.MustCompile(`^\s*(?:[-*•·]|\d{1,2}[.)、])\s*["'` + "`" + `]?([A-Za-z_][A-Za-z0-9_]*|\p{Han}{1,16})["'` + "`" + `]?`)
	identRe       = regexp.MustCompile(`^(?:[A-Za-z_][A-Za-z0-9_.-]{0,63}|[\p{Han}A-Za-z0-9_]{1,32})$`)
	listSepRe     = regexp.MustCompile(`\s*(?:,|，|、|;|；|/|\||\band\b|\bor\b|以及|和|及|与|或)\s*`)
	numberRangeRe = `\s*(?:\(|（)?\s*(?:is|are|must be|should be|of|from|between|on a scale of|scale of|ranges? from|为|是|取值为|范围为|在|:|：)?\s*(?:from|between)?\s*(-?\d+)\s*(?:-|–|—|~|～|to|and|through|到|至)\s*(-?\d+)`
	enumTailRe    = `\s*(?:must be|should be|is|can be|may be|has to be|:|：)?\s*(?:one of|either)\s*[:：]?\s*(.+)$`
	enumZhRe      = `\s*(?:必须是|只能是|应为|应该是|取值为|可以是|为|是)\s*[:：]?\s*(.+?)(?:之一|中的一个|其中之一)`
	enumParenRe   = `\s*[(（]\s*([A-Za-z0-9_]+(?:\s*[|/]\s*[A-Za-z0-9_]+)+)\s*[)）]`
)

// clauses splits text at line breaks and sentence ends (". ", "; ", "。",
// "；" …), but never inside braces, so a template object stays whole.
func clauses(text string) []string {
	var out []string
	depth, start := 0, 0
	cut := func(end, next int) {
		if s := strings.TrimSpace(text[start:end]); s != "" {
			out = append(out, s)
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
			if depth == 0 && atEnd && !afterDigit {
				cut(i, i+n)
			}
		}
		i += n
	}
	cut(len(text), len(text))
	return out
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
	c = strings.TrimSpace(c)
	return strings.HasSuffix(c, ":") || strings.HasSuffix(c, "：")
}

// keysIn returns the keys a demand clause names: a template object, a
// bracketed list or a list after "keys"/"fields"/"字段".
func keysIn(c string) []string {
	if m := templateRe.FindString(c); m != "" {
		var ks []string
		for _, km := range templateKeyRe.FindAllStringSubmatch(m, -1) {
			k := strings.TrimSpace(km[1])
			if !identRe.MatchString(k) {
				return nil
			}
			if !slices.Contains(ks, k) {
				ks = append(ks, k)
			}
		}
		if len(ks) > 0 {
			return ks
		}
	}
	loc := keysRe.FindStringIndex(c)
	if loc == nil {
		return nil
	}
	rest := strings.TrimSpace(c[loc[1]:])
	if strings.HasPrefix(rest, "[") {
		if end := strings.IndexByte(rest, ']'); end > 0 {
			return listItems(rest[1:end], true)
		}
		return nil
	}
	return listItems(rest, false)
}

// listItems splits a list of key names or values. With strict, every item
// must be identifier-like or the whole list is rejected; otherwise the
// leading run of identifier-like items is kept, so "fields a, b and c,
// sorted by date" gives a, b, c.
func listItems(s string, strict bool) []string {
	s = strings.TrimSpace(strings.TrimRight(strings.TrimSpace(s), ".。:："))
	var out []string
	for _, it := range listSepRe.Split(s, -1) {
		it = strings.Trim(strings.TrimSpace(it), "\"'`“”‘’「」")
		if it == "" {
			continue
		}
		if !identRe.MatchString(it) {
			if strict {
				return nil
			}
			break
		}
		if !slices.Contains(out, it) {
			out = append(out, it)
		}
	}
	return out
}

// bulletKeys reads the key names of a bullet list that follows a demand
// ending in a colon: one key per "- key …" line, stopping at the first line
// that is not a bullet.
func bulletKeys(rest []string) []string {
	var ks []string
	for _, c := range rest {
		m := bulletRe.FindStringSubmatch(c)
		if m == nil {
			break
		}
		if !slices.Contains(ks, m[1]) {
			ks = append(ks, m[1])
		}
	}
	return ks
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
					p["type"] = "number"
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
