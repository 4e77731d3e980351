package classify

import (
	"math/bits"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Complexity is how hard a prompt is to answer well: the tier of model it
// needs. The zero value is Simple.
type Complexity int

// The complexity classes, cheapest tier first.
const (
	// Simple: one fact, a short rewrite or translation, chit-chat.
	Simple Complexity = iota
	// Medium: an explanation, a short piece of code or writing, one
	// calculation.
	Medium
	// Complex: several steps of reasoning, a design, a proof, a diagnosis
	// with trade-offs, a long or multi-part task.
	Complex
)

// String returns "simple", "medium" or "complex".
func (c Complexity) String() string {
	switch c {
	case Simple:
		return "simple"
	case Medium:
		return "medium"
	case Complex:
		return "complex"
	}
	return "complexity(" + string(rune('0'+int(c))) + ")"
}

// Complexity classifies text as Simple, Medium or Complex from cues a reader
// would use: its length (English words, Chinese characters), reasoning cues
// (prove, derive, design, trade-offs, step by step; 证明, 推导, 设计, 权衡,
// 一步一步), several requests in one (then, including, 并, 以及, 分别, more
// than one question), a code block and what is asked of it, mathematics, and
// the domain signature (a long finance, medical or legal question is
// harder). Text after the first blank line (a pasted email, file or code)
// counts a quarter toward the length. It reads at most MaxBytes of text,
// never blocks and does no I/O; about 55 µs of CPU for 2 KiB, a third of it
// the domain signature (BenchmarkComplexity). The cue lists and thresholds
// were set on testdata/complexity.txt, whose accuracy TestComplexityCorpus
// reports and asserts; TestComplexityHeldOut measures prompts written after.
func (c *Classifier) Complexity(text string) Complexity {
	s := c.complexityScore(text)
	switch {
	case s >= complexAt:
		return Complex
	case s >= mediumAt:
		return Medium
	}
	return Simple
}

// Score thresholds of Complexity.
const (
	mediumAt  = 1
	complexAt = 5
)

// cue lists, lower case. An English cue matches at the start of a word, so
// "analy" matches analyse, analyze and analysis; a Chinese cue matches
// anywhere.
var (
	// reasoning: the answer must be worked out, not recalled (+2 each, at
	// most +4).
	reasonEN = []string{"prove", "proof", "derive", "derivation", "design", "architect", "analy", "assess", "evaluate",
		"trade-off", "tradeoff", "trade off", "step by step", "step-by-step", "walk me through", "walk through",
		"root cause", "differential", "justify", "critically", "reconcile", "recontextuali", "generali",
		"model the", "investigate", "narrow it down", "migration plan", "refactor", "scenario", "what would you do", "what you'd do"}
	reasonZH = []string{"证明", "推导", "设计", "分析", "排查", "权衡", "一步一步", "详细", "架构", "推广", "说明理由", "理由", "机制", "拆分", "方案"}
	// task: something to produce or explain (+1 each, at most +2).
	taskEN = []string{"explain", "write", "how does", "how do", "why", "difference", "compare", "summarize", "summarise",
		"draft", "solve", "function", "query", "regex", "itinerary", "pros and cons", "help me", "what should", "what can",
		"example", "what are the"}
	taskZH = []string{"解释", "写", "区别", "比较", "介绍", "什么是", "怎么", "如何", "为什么", "解方程", "讲讲", "注意什么", "原理", "有没有"}
	// lookup: a fact or a one-line change (−1 each, at most −2).
	lookupEN = []string{"what's the", "what is the", "who ", "how many", "translate", "convert", "spell", "define",
		"synonym", "plural", "past tense", "which ", "what year", "what time", "is a ", "in one sentence", "in a sentence", "one line", "one-line", "briefly", "short answer",
		"give me 3", "tell me a joke", "thanks", "hi", "hello", "ok"}
	lookupZH = []string{"是哪", "翻译", "多少", "是谁", "谁", "哪个", "什么意思", "笑话", "起三个", "你好", "谢谢", "简单说", "一句话", "原名", "是不是", "吗"}
	// parts: another request joined to the first (+1 each, at most +3).
	partsEN = []string{"then ", "including", "and how", "and what", "and why", "and explain", "consider", "as well as", "while ",
		"each", "with the assumptions", "and the", "also"}
	partsZH = []string{"然后", "并", "以及", "分别", "每一", "包括", "再", "和怎么", "还是", "同时", "并且", "结合", "从"}
	// fixing code: asked of a code block (+1).
	fixCode = []string{"bug", "fix", "wrong", "deadlock", "nan", "why", "死锁", "修复", "原因", "找出"}
	// maths: a worked problem (+1).
	mathCue = []string{"expected", "probability", "closed-form", "complexity", "期望", "概率", "复杂度", "求"}
)

var (
	reasonENCues = newWordCues(reasonEN)
	taskENCues   = newWordCues(taskEN)
	lookupENCues = newWordCues(lookupEN)
	partsENCues  = newWordCues(partsEN)
	fixCodeCues  = newWordCues(fixCode)
	mathCueCues  = newWordCues(mathCue)
)

// complexityScore is the sum Complexity thresholds.
func (c *Classifier) complexityScore(text string) int {
	if len(text) > MaxBytes {
		n := MaxBytes
		for n > 0 && !utf8.RuneStart(text[n]) {
			n--
		}
		text = text[:n]
	}
	// Words and CJK characters after the first blank line are pasted
	// material (an email, a file, code): they count a quarter, since what is
	// asked, not what is attached, makes a task hard.
	words, han, questions, lines := 0, 0, 0, 1
	pastedWords, pastedHan := 0, 0
	ask := len(text)
	if i := strings.Index(text, "\n\n"); i >= 0 {
		ask = i
	}
	inWord := false
	for at, r := range text {
		if at == ask {
			pastedWords, pastedHan = words, han
		}
		switch {
		case isCJK(r):
			han++
			inWord = false
		case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '\'' || r == '_'),
			r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if !inWord {
				words++
			}
			inWord = true
		default:
			inWord = false
			switch r {
			case '?', '？':
				questions++
			case '\n':
				lines++
			}
		}
	}
	lower := strings.ToLower(cueText(text))
	// A Chinese word is about 1.7 characters; count two characters as one
	// English word.
	if ask < len(text) {
		// pasted* hold the ask's counts at the boundary.
		askWords, askHan := pastedWords, pastedHan
		words = askWords + (words-askWords)/4
		han = askHan + (han-askHan)/4
	}
	size := words + han/2
	s := 0
	switch {
	case size >= 70:
		s += 4
	case size >= 40:
		s += 3
	case size >= 22:
		s += 2
	case size >= 10:
		s++
	}
	s += min(4, 2*(reasonENCues.count(lower)+countAny(lower, reasonZH)))
	s += min(2, taskENCues.count(lower)+countAny(lower, taskZH))
	s -= min(2, lookupENCues.count(lower)+countAny(lower, lookupZH))
	s += min(3, partsENCues.count(lower)+countAny(lower, partsZH))
	if questions > 1 {
		s++
	}
	if hasCode(text, lines) {
		s += 2
		if fixCodeCues.count(lower)+countAny(lower, fixCode) > 0 {
			s++
		}
	}
	if mathCueCues.count(lower)+countAny(lower, mathCue) > 0 {
		s++
	}
	if size >= 22 {
		switch c.Domain(text) {
		case Finance, Medical, Legal:
			s++
		}
	}
	return s
}

// cueHead and cueTail bound the text the cues are looked for in: the ask is
// at the start of a prompt or, after a pasted document or code, at its end.
// A long prompt scores high on length alone.
const (
	cueHead = 1024
	cueTail = 256
)

// cueText returns text, or its first cueHead and last cueTail bytes (cut at
// rune boundaries) joined by a newline.
func cueText(text string) string {
	if len(text) <= cueHead+cueTail {
		return text
	}
	h := cueHead
	for h > 0 && !utf8.RuneStart(text[h]) {
		h--
	}
	t := len(text) - cueTail
	for t < len(text) && !utf8.RuneStart(text[t]) {
		t++
	}
	return text[:h] + "\n" + text[t:]
}

// wordCues indexes a cue list by its first two bytes, so matching visits
// each word start of a text once instead of searching the text per cue.
type wordCues struct {
	cues []string
	at   map[[2]byte][]int    // first two bytes → indexes into cues
	gate [1 << 16 / 64]uint64 // bit set of the first two bytes in at
}

func newWordCues(cues []string) *wordCues {
	if len(cues) > 64 {
		panic("classify: more than 64 cues in one list")
	}
	w := &wordCues{cues: cues, at: map[[2]byte][]int{}}
	for i, c := range cues {
		k := [2]byte{c[0], c[1]}
		w.at[k] = append(w.at[k], i)
		b := uint16(c[0])<<8 | uint16(c[1])
		w.gate[b/64] |= 1 << (b % 64)
	}
	return w
}

// count counts the cues that occur in s (lower case) at the start of a word,
// each cue once. A cue ending in a space, or a stem (see isStem), may be
// followed by anything; any other must end at a word boundary.
func (w *wordCues) count(s string) int {
	var seen uint64
	for j := 0; j+1 < len(s); j++ {
		if j > 0 && isWordByte(s[j-1]) {
			continue
		}
		if b := uint16(s[j])<<8 | uint16(s[j+1]); w.gate[b/64]&(1<<(b%64)) == 0 {
			continue
		}
		for _, i := range w.at[[2]byte{s[j], s[j+1]}] {
			cue := w.cues[i]
			if !strings.HasPrefix(s[j:], cue) {
				continue
			}
			if end := j + len(cue); cue[len(cue)-1] == ' ' || end == len(s) || !isWordByte(s[end]) || isStem(cue) {
				seen |= 1 << i
			}
		}
	}
	return bits.OnesCount64(seen)
}

// isStem reports whether cue is a word stem that matches longer words
// (analy, generali, architect).
func isStem(cue string) bool {
	switch cue {
	case "analy", "generali", "recontextuali", "architect", "derive", "prove", "design", "assess", "evaluate", "explain", "summari", "compare":
		return true
	}
	return false
}

func isWordByte(b byte) bool {
	return b == '_' || b >= '0' && b <= '9' || b >= 'a' && b <= 'z' || b >= 0x80
}

// countAny counts the cues that occur anywhere in s.
func countAny(s string, cues []string) int {
	n := 0
	for _, cue := range cues {
		if strings.Contains(s, cue) {
			n++
		}
	}
	return n
}

// hasCode reports whether text holds a code block: a fence, or at least two
// lines that look like code (indented, or ending in a brace, colon or
// semicolon after an identifier).
func hasCode(text string, lines int) bool {
	if strings.Contains(text, "```") {
		return true
	}
	if lines < 3 {
		return false
	}
	n := 0
	for line := range strings.SplitSeq(text, "\n") {
		t := strings.TrimRight(line, " \t")
		if t == "" {
			continue
		}
		indented := strings.HasPrefix(t, "    ") || strings.HasPrefix(t, "\t")
		last := t[len(t)-1]
		if indented || last == '{' || last == '}' || last == ';' || (last == ':' && strings.Contains(t, "(")) {
			n++
		}
	}
	return n >= 2
}
