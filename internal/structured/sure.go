package structured

import (
	"regexp"
	"slices"
	"strings"
)

// closedSpan reports whether the keys read from the clauses used are the
// whole of what those clauses ask for, so that a partial read is never sent
// upstream (STYLE 23: a sure schema with keys missing corrupts the answer).
// It is false when a used clause
//
//   - names a key the reading left out: after "key:" / "field:" ("a list of
//     pros (key: pros)"), or an identifier holding a digit ("level3");
//   - goes on past the last key with one more item of the list ("facts and
//     preferences arrays", "level1, level2 and level3 categories");
//   - leaves the list open ("etc.", "and so on", "…", "...", "等");
//   - reads what the task is given ("receives a dict with name and age",
//     "接收包含 … 字段的字典");
//
// when the prompt asks for code (a function, a script: its fields are the
// code's, not the answer's), and when the keys come from an example object
// that is the example of one value ("filters  object  e.g. {…}").
func closedSpan(prompt string, cls []clause, used []int, keys []string, exampleAt int) bool {
	if asksForCode(prompt) {
		return false
	}
	if exampleAt >= 0 {
		c := cls[exampleAt].text
		before := c[:max(strings.IndexByte(c, '{'), 0)]
		if strings.TrimSpace(before) == "" && exampleAt > 0 {
			before = cls[exampleAt-1].text // "filters  object  e.g" | "{…}"
		}
		if k := strings.LastIndexByte(before, '\n'); k >= 0 {
			before = before[k+1:]
		}
		if valueExampleRe.MatchString(before) {
			return false
		}
	}
	for _, i := range used {
		c := stripObjects(cls[i].text)
		if openListRe.MatchString(c) || inputOwnerRe.MatchString(c) {
			return false
		}
		for _, m := range markedKeyRe.FindAllStringSubmatch(c, -1) {
			k := m[1] + m[2]
			if !slices.Contains(keys, k) && notKeyWord(k) && !typeWord(k) {
				return false
			}
		}
		if !lastKeyEndsList(c, keys) {
			return false
		}
	}
	return true
}

// missedKeys returns the keys a used clause names that the reading left
// out: marked after "key:" ("a list of pros (key: pros)"), or one more item
// of the list after the last key ("facts and preferences arrays"). They are
// added to a reading that is then never sure.
func missedKeys(cls []clause, used []int, keys []string) []string {
	var more []string
	add := func(k string) {
		if identKeyRe.MatchString(k) && notKeyWord(k) && !typeWord(k) && !slices.Contains(keys, k) && !slices.Contains(more, k) {
			more = append(more, k)
		}
	}
	for _, i := range used {
		c := stripObjects(cls[i].text)
		for _, m := range markedKeyRe.FindAllStringSubmatch(c, -1) {
			if m[1] != "" {
				add(m[1])
			}
		}
		if end := lastKeyEnd(c, keys); end >= 0 {
			if m := moreItemRe.FindStringSubmatch(c[end:]); m != nil {
				add(m[1])
			}
		}
	}
	return more
}

// asksForCode reports whether s asks for code ("Write a Python function",
// "用 Python 写一个函数"); the regexp runs only when a word for code is there.
func asksForCode(s string) bool {
	for _, w := range codeWords {
		if containsFoldASCII(s, w) {
			return codeDemandRe.MatchString(s)
		}
	}
	return false
}

var codeWords = []string{"function", "script", "program", "class", "method", "test", "函数", "脚本", "程序", "类", "方法", "测试"}

// lastKeyEndsList reports whether the clause's list of keys ends at the last
// key it holds: no ", x" / "and x" / "和x" follows it as one more item.
func lastKeyEndsList(c string, keys []string) bool {
	end := lastKeyEnd(c, keys)
	if end < 0 {
		return true
	}
	m := moreItemRe.FindStringSubmatch(c[end:])
	return m == nil || slices.Contains(keys, m[1]) || !notKeyWord(m[1]) || typeWord(m[1])
}

// lastKeyEnd returns the end of the last key written as a word in c, -1
// when c writes none.
func lastKeyEnd(c string, keys []string) int {
	end := -1
	for _, k := range keys {
		for from := 0; ; {
			j := strings.Index(c[from:], k)
			if j < 0 {
				break
			}
			j += from
			from = j + len(k)
			if wordAt(c, j, len(k)) && j+len(k) > end {
				end = j + len(k)
			}
		}
	}
	return end
}

// wordAt reports whether c[j:j+n] is a word of its own.
func wordAt(c string, j, n int) bool {
	isWord := func(b byte) bool {
		return b == '_' || b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
	}
	return (j == 0 || !isWord(c[j-1])) && (j+n == len(c) || !isWord(c[j+n]))
}

// typeWord reports whether w names a JSON type or a shape, never an item of
// a key list ("an integer", "strings").
func typeWord(w string) bool {
	switch strings.ToLower(w) {
	case "string", "strings", "integer", "integers", "int", "number", "numbers", "float", "boolean", "booleans", "bool",
		"array", "arrays", "list", "lists", "object", "objects", "null", "value", "values", "text", "date":
		return true
	}
	return false
}

var (
	// codeDemandRe is a prompt asking for code: the fields it names are
	// the code's.
	codeDemandRe = regexp.MustCompile(`(?i)\b(?:write|implement|code)\s+(?:me\s+)?(?:a|an|the)?\s*(?:\w+\s+){0,2}(?:function|script|program|class|method|unit tests?)\b|(?:用|使用)\s*(?:Python|Java|JavaScript|TypeScript|Go|Golang|C\+\+|C#|Rust|PHP|Ruby|Shell)\s*(?:语言)?\s*(?:写|编写|实现)|(?:写|编写|实现)(?:一个|一段|个)?\s*\S{0,8}?(?:函数|脚本|程序|类|方法|单元测试)`)
	// valueExampleRe is the text before an example object on its line
	// that makes it the example of one value.
	valueExampleRe = regexp.MustCompile(`(?i)\be\.g\b|\bfor (?:example|instance)\b|\bsuch as\b|例如|比如|^\s*(?:[-*•]\s*)?[A-Za-z_][A-Za-z0-9_]*\s*(?:[:：]|\s{2,}|\t)`)
	// openListRe is a list left open.
	openListRe = regexp.MustCompile(`(?i)\betc\b|\band so on\b|\band so forth\b|\bamong others\b|…|\.\.\.|等等|等(?:[，。、；;,.)）\s]|$|字段|键|信息|内容|属性|项)`)
	// inputOwnerRe is a clause about what the task receives.
	inputOwnerRe = regexp.MustCompile(`(?i)\b(?:receives?|accepts?|takes as input)\b|接收|传入`)
	// markedKeyRe is a key the prompt marks as one: after "key:" or
	// "field:", or an identifier holding a digit.
	markedKeyRe = regexp.MustCompile(`(?i:\b(?:key|field|property)\s*[:=]\s*)([A-Za-z_][A-Za-z0-9_]*)|\b([A-Za-z]+[0-9]+[A-Za-z0-9_]*)\b`)
	// moreItemRe is one more item of a list after a key: a separator, a
	// word and the list's end or a note.
	moreItemRe = regexp.MustCompile(`^\s*(?:[)）]\s*)?(?:,\s*(?:and\s+|or\s+|plus\s+)?|\s+(?:and|or|plus|&)\s+|[、，]\s*|\s*(?:和|及|与|以及)\s*)(?:the\s+|an?\s+)?([A-Za-z_][A-Za-z0-9_-]+)\s*(?:[(（]|\b(?:arrays?|lists?|fields?|keys?|categories|strings?|objects?|values?|properties|columns|scores?)\b|[.。;；,，]|$)`)
)
