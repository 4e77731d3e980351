package structured

import (
	"regexp"
	"slices"
	"strings"
)

// complete reports positive evidence that keys are the whole of what the
// prompt asks the answer to hold, the last condition for a sure reading
// (one sent upstream: STYLE 23 forbids a sent schema that leaves out a key).
// Where closedSpan and accounted look for a sign that something was left
// out of the clauses used, complete looks at the whole prompt and asks for
// the reading to close:
//
//   - no later clause adds to the answer ("Also add a severity", "Include
//     a confidence number as well", "另外加上 city 字段");
//   - no used clause's list goes on past a semicolon or comma into the next
//     clause ("Keys: original; corrected; changes (…)");
//   - every markdown table that gives one of the keys gives only keys of
//     the reading, each of its rows read ("a table read in part");
//   - an example object read is the answer's, shown as the answer, not the
//     shape of an item ("Each item looks like {…}", "每项形如 {…}");
//
// and at least one sign of an end is there: the stated count matches; the
// keys are an example object's shown as the answer; a list of lines under a
// colon read to its end; or the last key's clause ends right after it
// (its note, then the sentence's end), not with "plus …" or another item.
func complete(prompt string, cls []clause, demand []bool, used []int, keys []string, exampleAt, count int) bool {
	if len(used) == 0 {
		return false
	}
	first := slices.Min(used)
	for j := first + 1; j < len(cls); j++ {
		if slices.Contains(used, j) {
			continue
		}
		if c := cls[j].text; addsMoreRe.MatchString(c) && !refuseRe.MatchString(c) {
			return false
		}
	}
	for _, i := range used {
		if !closedAtEnd(prompt, cls, i, keys) || !notesRead(cls[i].text, keys) || !bulletsRead(prompt, cls[i], keys) {
			return false
		}
	}
	if !tablesRead(prompt, keys) {
		return false
	}
	if exampleAt >= 0 {
		if !answerExample(cls, demand, exampleAt) {
			return false
		}
		return true // the answer's example object, read whole by objectKeys
	}
	if count == len(keys) {
		return true
	}
	for _, i := range used {
		if linesReadWhole(cls, i, keys) || listEndsClause(cls[i].text, keys) {
			return true
		}
	}
	return false
}

// closedAtEnd reports whether used clause i does not run on into the next
// one: when it ends with a semicolon or a comma, the next clause must not
// start with one more key ("original; corrected; changes (…)").
func closedAtEnd(prompt string, cls []clause, i int, keys []string) bool {
	raw := strings.TrimRight(prompt[cls[i].start:cls[i].end], " \t")
	if !strings.HasSuffix(raw, ";") && !strings.HasSuffix(raw, "；") && !strings.HasSuffix(raw, ",") && !strings.HasSuffix(raw, "，") {
		return true
	}
	if i+1 >= len(cls) {
		return true
	}
	m := nextItemRe.FindStringSubmatch(cls[i+1].text)
	if m == nil {
		return true
	}
	k := m[1] + m[2]
	return slices.Contains(keys, k) || !notKeyWord(k) || typeWord(k)
}

// notesRead reports whether every identifier clause c writes with a note
// in parentheses ("store（门店名称）", "severity (integer)") is a key of the
// reading: a key written so is one of the answer's.
func notesRead(c string, keys []string) bool {
	if !strings.ContainsAny(c, "(（") {
		return true // the cheap common case
	}
	for _, m := range noteKeyRe.FindAllStringSubmatch(c, -1) {
		if k := m[1]; !slices.Contains(keys, k) && notKeyWord(k) && !typeWord(k) {
			return false
		}
	}
	return true
}

// bulletsRead reports whether, when clause c ends in a colon, every line of
// the bulleted or numbered list right under it in the prompt starts with a
// key of the reading. It reads the prompt's lines, not its clauses: a
// line's note may hold a sentence's end ("e.g. …").
func bulletsRead(prompt string, c clause, keys []string) bool {
	if !endsWithColon(c.text) || c.end >= len(prompt) {
		return true
	}
	indent := -1
	for ln := range strings.Lines(prompt[c.end:]) {
		if strings.TrimSpace(ln) == "" {
			if indent < 0 {
				continue
			}
			break
		}
		in := len(ln) - len(strings.TrimLeft(ln, " \t"))
		if !leadBulletRe.MatchString(ln) {
			break
		}
		if indent < 0 {
			indent = in
		}
		if in > indent {
			continue // a nested value's lines
		}
		m := candTokenRe.FindStringSubmatch(leadBulletRe.ReplaceAllString(ln, ""))
		if m == nil || !slices.Contains(keys, m[1]) {
			return false
		}
	}
	return true
}

// tablesRead reports whether every markdown table of the prompt that holds
// one of keys in its key column (the column under a key header, else the
// first) holds nothing but keys, every row read. It reads the prompt's
// lines, not its clauses: a cell may hold a sentence's end ("e.g. …").
func tablesRead(prompt string, keys []string) bool {
	if !strings.Contains(prompt, "|") {
		return true // the cheap common case
	}
	lines := strings.Split(prompt, "\n")
	for i := 0; i+1 < len(lines); i++ {
		head, sep := strings.TrimSpace(lines[i]), strings.TrimSpace(lines[i+1])
		if !tableRowRe.MatchString(head) || !tableSepRe.MatchString(strings.ReplaceAll(sep, " ", "")) {
			continue
		}
		header := cells(head)
		kc := 0
		for j, h := range header {
			if slices.Contains(keyHeaders, strings.ToLower(strings.Trim(h, "*` "))) {
				kc = j
				break
			}
		}
		var col []string
		j := i + 2
		for ; j < len(lines) && tableRowRe.MatchString(strings.TrimSpace(lines[j])); j++ {
			if row := cells(lines[j]); kc < len(row) {
				col = append(col, tableKey(row[kc]))
			}
		}
		if slices.ContainsFunc(col, func(k string) bool { return slices.Contains(keys, k) }) &&
			slices.ContainsFunc(col, func(k string) bool { return !slices.Contains(keys, k) }) {
			return false
		}
		i = j - 1
	}
	return true
}

// tableKey is the key a table cell names: "`route` (oral/iv)" is route.
func tableKey(cell string) string {
	cell = strings.Trim(cell, "*`\"' ")
	if k := strings.IndexAny(cell, " (（`*"); k > 0 {
		cell = cell[:k]
	}
	return cell
}

// answerExample reports whether the example object at clause i is shown as
// the answer — its clause or the label before it is a JSON demand or an
// example label ("Respond like {…}", "Output format:" + object) — and not as
// the shape of one item or value ("Each item looks like {…}", "items is an
// array of objects like {…}", "每项形如 {…}").
func answerExample(cls []clause, demand []bool, i int) bool {
	c := cls[i].text
	open := strings.IndexByte(c, '{')
	if open < 0 {
		return false
	}
	before := c[:open]
	if k := strings.LastIndexAny(before, "\n"); k >= 0 {
		before = before[k+1:]
	}
	if itemShapeRe.MatchString(before) {
		return false
	}
	if demand[i] || exampleDemand(cls, i) {
		return true
	}
	j := i - 1
	if j >= 0 && fenceRe.MatchString(cls[j].text) {
		j--
	}
	return j >= 0 && strings.TrimSpace(before) == "" && (demand[j] || endsWithColon(cls[j].text) && outputWordRe.MatchString(cls[j].text)) && !itemShapeRe.MatchString(cls[j].text)
}

// linesReadWhole reports whether used clause i ends in a colon and every
// line of the list under it (bullets, key lines or a table's rows) names a
// key of the reading, up to the list's end.
func linesReadWhole(cls []clause, i int, keys []string) bool {
	if !endsWithColon(cls[i].text) && !belowRe.MatchString(cls[i].text) {
		return false
	}
	n := 0
	for j := i + 1; j < len(cls); j++ {
		c := cls[j].text
		if tableSepRe.MatchString(strings.ReplaceAll(c, " ", "")) {
			continue
		}
		if !listLine(c) && !tableRowRe.MatchString(c) && !keyLineRe.MatchString(c) {
			break
		}
		if !slices.ContainsFunc(keys, func(k string) bool { return lastKeyEnd(c, []string{k}) >= 0 }) {
			if n == 0 && tableRowRe.MatchString(c) {
				continue // the table's header row
			}
			return false
		}
		n++
	}
	return n > 0
}

// listEndsClause reports whether the last key written in clause c ends the
// clause's list: after it come at most a note in parentheses, a type or a
// short description, then the clause's end — no further item.
func listEndsClause(c string, keys []string) bool {
	c = stripObjects(c)
	end := lastKeyEnd(c, keys)
	if end < 0 {
		return false
	}
	rest := strings.TrimSpace(parenRe.ReplaceAllString(c[end:], ""))
	return !moreAfterRe.MatchString(rest)
}

var (
	// addsMoreRe is a clause that adds to what the answer holds: "Also
	// add a severity", "Include a confidence as well", "另外加上 city 字段".
	addsMoreRe = regexp.MustCompile(`(?i)\b(?:also|additionally|in\s+addition|as\s+well|too|plus)\b[^.;]*\b(?:add|adds|include|includes|give|provide|return|output|report|put|list|attach|append|need|want|field|key)\b|\b(?:add|include|give|provide|return|report|put|attach|append)\b[^.;]*\b(?:also|as\s+well|too)\b|^(?:please\s+)?(?:add|append|attach)\s+(?:an?|the|one|another)\b|另外|此外|还要|还需|还应|再加|加上|并附|附上|同时(?:给出|返回|输出|提供|包含)`)
	// refuseRe is a clause that forbids rather than adds: "Do not add
	// commentary", "不要添加解释".
	refuseRe = regexp.MustCompile(`(?i)\b(?:not|never|don't|no|nothing|without)\b|不要|不得|不能|不可|不需要|不用|无需|禁止|切勿|勿|别(?:加|输出|添加|写|带)`)
	// nextItemRe is a clause that starts with one more key of a list cut
	// at a semicolon: "changes (a list …)", "` + "`score`" + `: …".
	nextItemRe = regexp.MustCompile("^(?:[-*•]\\s*)?(?:\"([A-Za-z_][A-Za-z0-9_]*)\"|`?([A-Za-z_][A-Za-z0-9_]*)`?)\\s*(?:$|[(（:：,，—–]|\\s-\\s|\\s+(?:is|are|holds?|gives?|for)\\b)")
	// itemShapeRe is text before an example object that makes it the
	// shape of an item or a value, not of the answer.
	itemShapeRe = regexp.MustCompile(`(?i)\b(?:each|every|per|one\s+item|items?\s+(?:is|are|looks?)|array\s+of|list\s+of|objects?\s+like|elements?)\b|形如|每项|每个|每条|每一|数组|列表|元素`)
	// moreAfterRe is the rest of a clause after its last key that goes on
	// with the list: ", plus helpfulness", "and notes", "、remark".
	moreAfterRe = regexp.MustCompile(`(?i)^(?:,\s*)?(?:plus|as\s+well\s+as|along\s+with|together\s+with)\s+\S` +
		"|^(?:,\\s*)?(?:and|&)\\s+(?:an?\\s+|the\\s+)?[\"`]?[A-Za-z_][A-Za-z0-9_]*[\"`]?\\s*(?:$|[(（,，:：—–.;]|\\b(?:fields?|keys?|arrays?|lists?|strings?|numbers?|scores?|flags?|booleans?|objects?|values?)\\b)" +
		"|^[,，]\\s*[\"`]?[A-Za-z_][A-Za-z0-9_]*[\"`]?\\s*(?:$|[(（,，:：.;—–)）]|\\s-\\s|\\band\\b)|^、\\s*\\S|^(?:和|及|以及|与|还有)")
	// noteKeyRe is an identifier written with a note in parentheses.
	noteKeyRe = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\s*[（(][^（）()]{1,160}[)）]`)
	// candTokenRe is the first key-like token of a line.
	candTokenRe = regexp.MustCompile("^[\\s*\"'`“]*([A-Za-z_][A-Za-z0-9_]*|\\p{Han}+)")
	// keepKeysRe is a clause about the input's keys kept as they are:
	// "Keep every key unchanged", "保持所有键名不变".
	keepKeysRe = regexp.MustCompile(`(?i)\b(?:keep|preserve|retain|leave)\b[^.;]{0,40}\b(?:keys?|field\s+names?|property\s+names?|fields|structure)\b[^.;]{0,30}\b(?:unchanged|as\s+(?:they\s+are|is)|intact|untouched|exactly|the\s+same)\b|\b(?:keep|preserve|retain)\s+(?:all\s+|every\s+|the\s+)*(?:original\s+)?(?:keys?|field\s+names?|property\s+names?)\b|\b(?:do\s+not|don't|never)\s+(?:rename|change|translate|alter|modify)\s+(?:any\s+|the\s+)?(?:keys?|field\s+names?|fields|property\s+names?)\b|(?:保持|保留|不要?(?:修改|改变|翻译|改动))[^，。；]{0,10}(?:键名|键|字段名?|结构)|(?:键名|键|字段名?)[^，。；]{0,10}(?:不变|原样)`)
)

// sameSet reports whether a and b hold the same strings.
func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(k string) bool { return !slices.Contains(b, k) })
}
