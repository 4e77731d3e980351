package structured

import (
	"regexp"
	"slices"
	"strings"
)

// parenKeys reads a list of keys in parentheses right after the word JSON
// in a demand: "return JSON (name, email, company)", "a JSON object (city,
// temperature_c)", "返回 JSON（from、to、date、cabin）". Every item must be a
// key (an identifier or a short Chinese noun phrase) and there must be two.
func parenKeys(c string) []string {
	m := jsonParenRe.FindStringSubmatch(c)
	if m == nil {
		return nil
	}
	items := listSplitRe.Split(strings.TrimSpace(m[1]), -1)
	if len(items) < 2 {
		return nil
	}
	var ks []string
	for _, it := range items {
		it = strings.Trim(it, " `\"“”'")
		if !identKeyRe.MatchString(it) && !(hasHan(it) && !hanProse(it) && len([]rune(it)) <= 6 && !strings.ContainsAny(it, " ")) {
			return nil
		}
		if !slices.Contains(ks, it) {
			ks = append(ks, it)
		}
	}
	return ks
}

// nounKeys reads keys a demand names each followed by its noun: "with a
// headline field and a summary field", "a reason string and an approved
// boolean", "an answer field and a citations field", "sql 字段写查询语句，
// tables 字段写用到的表名". Two keys at least, or one after "a … field".
func nounKeys(c string) []string {
	var ks []string
	for _, m := range keyNounAfterRe.FindAllStringSubmatch(c, -1) {
		k := m[1] + m[2]
		if typeWord(k) || !notKeyWord(k) || strings.EqualFold(k, "json") || slices.Contains(ks, k) {
			continue
		}
		ks = append(ks, k)
	}
	if len(ks) < 2 {
		return nil
	}
	return ks
}

var (
	jsonParenRe    = regexp.MustCompile(`(?i)\bjson(?:\s+(?:object|document|payload))?\s*[(（]([^()（）]{1,200})[)）]`)
	listSplitRe    = regexp.MustCompile(`\s*(?:[,，、;；]\s*(?:and\s+)?|\s+and\s+|和|及|与)\s*`)
	keyNounAfterRe = regexp.MustCompile(`\b(?:an?|the)\s+([a-z][a-z0-9]*(?:_[a-z0-9]+)*)\s+(?:field|key|property|string|boolean|integer|number|array|list|object|flag)\b|(?:^|[，,：:；;。\s])([A-Za-z_][A-Za-z0-9_]*)\s*字段`)
)

// notedKeys reads a list of keys each with a note in parentheses: "含
// name（商品名）、price（价格）、stock（库存）", "stem（题干）、choices（四个
// 选项）". The items must follow each other, and there must be two.
func notedKeys(c string) []string {
	locs := notedKeyRe.FindAllStringSubmatchIndex(c, -1)
	var ks []string
	for j, l := range locs {
		if j > 0 && !itemGapRe.MatchString(c[locs[j-1][1]:l[0]]) {
			if len(ks) > 1 {
				break
			}
			ks = ks[:0]
		}
		if k := c[l[2]:l[3]]; !slices.Contains(ks, k) {
			ks = append(ks, k)
		}
	}
	if len(ks) < 2 {
		return nil
	}
	return ks
}

var (
	notedKeyRe = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\s*[（(][^（）()]{1,20}[)）]`)
	itemGapRe  = regexp.MustCompile(`^\s*(?:[、，,;；]|和|及|与|以及|and)?\s*$`)
)
