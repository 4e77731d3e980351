// Package fragment splits a long input into fragments at semantic boundaries
// and fuses the answers that replicas give for each fragment back into one.
//
// Split cuts only at block and sentence boundaries (markdown headings first,
// then paragraphs and table or code blocks, then list items, then sentences
// and table rows), never inside a guarded span, and honours context-boundary
// hints (see Split for their syntax). Each fragment may carry a little of the
// previous fragment's tail as context, within an overall overlap budget.
//
// Fuse combines per-fragment replica answers: structured (JSON object)
// answers field by field (vote, weighted median, list union, recursion into
// objects), free text by concatenation with overlap removal. Conflicts and
// lost input ranges are reported, never hidden.
//
// Both functions are pure: they do no I/O, never block, keep no state and are
// safe for concurrent use.
//
// NewStage is the call pipeline's fragmentation stage: it splits a call's
// long document, fans the fragments out to distinct endpoints through the
// attempt path it is given (a consumer-side Replicas), and answers with the
// fused answer; it never imports the engine.
package fragment

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Defaults applied to zero Options fields.
const (
	DefaultTargetTokens  = 1500
	DefaultOverlapBudget = 0.15
)

var (
	// ErrInvalidOptions reports unusable Options.
	ErrInvalidOptions = errors.New("fragment: invalid options")
	// ErrMalformedHint reports a mesh hint that cannot be parsed.
	ErrMalformedHint = errors.New("fragment: malformed mesh hint")
)

// Range is a half-open byte range [Start, End) of the original input.
type Range struct{ Start, End int }

// Options controls Split. The zero value is the documented default.
type Options struct {
	// TargetTokens is the size a fragment should not exceed, in
	// EstimateTokens units; 0 means DefaultTargetTokens. A fragment is larger
	// only when a single unit (sentence, table row, guarded span) is.
	TargetTokens int
	// OverlapBudget bounds the context carried between fragments: the
	// fragments' OverlapTokens sum to at most OverlapBudget × the input's
	// tokens. 0 means DefaultOverlapBudget (15 %); a negative value disables
	// overlap; values above 1 are invalid.
	OverlapBudget float64
	// GuardedSpans are byte ranges no cut may fall strictly inside (numbers,
	// identifiers, quoted clauses the caller protects). Hints are markup, not
	// content: the bytes of a span that fall inside a hint guard nothing.
	GuardedSpans []Range
}

// Fragment is one piece of the input.
type Fragment struct {
	// Index is the fragment's position, from 0.
	Index int
	// Text is the original bytes [OverlapStart, End) with hint tags removed.
	Text string
	// Start and End delimit the fragment's own bytes in the original input.
	// Fragments' own ranges are contiguous and cover the input exactly (hint
	// tags included), so a lost fragment names exactly what was not read.
	Start, End int
	// OverlapStart ≤ Start is where Text begins: [OverlapStart, Start) is
	// context repeated from the previous fragment's tail, whole sentences or
	// lines only.
	OverlapStart int
	// OverlapTokens estimates the tokens of the repeated context.
	OverlapTokens int
}

// EstimateTokens is the cheap token estimate used throughout the package:
// one token per CJK character (Han, kana, Hangul) plus one per 4 bytes
// (rounded up) of everything else. It is within about 25 % of real
// tokenisers on English prose and Chinese text, which is enough for sizing.
func EstimateTokens(s string) int {
	var c cost
	c.add(s)
	return c.tokens()
}

type cost struct{ cjk, other int }

func (c *cost) add(s string) {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			c.other++
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if isCJK(r) {
			c.cjk++
		} else {
			c.other += n
		}
		i += n
	}
}

func (c cost) tokens() int       { return c.cjk + (c.other+3)/4 }
func (c cost) plus(d cost) cost  { return cost{c.cjk + d.cjk, c.other + d.other} }
func (c cost) minus(d cost) cost { return cost{c.cjk - d.cjk, c.other - d.other} }
func isCJK(r rune) bool {
	return (r >= 0x3040 && r <= 0x30ff) || (r >= 0x3400 && r <= 0x4dbf) ||
		(r >= 0x4e00 && r <= 0x9fff) || (r >= 0xac00 && r <= 0xd7af) || (r >= 0xf900 && r <= 0xfaff)
}

// Cut strengths: lower is a better place to cut.
const (
	cutHard      = 0 // a context-boundary hint; always cut, no overlap across
	cutHeading   = 1 // + heading level - 1 (h1 = 1 … h6 = 6)
	cutBlock     = 7 // paragraph start, table or code block start or end
	cutListItem  = 8
	cutSentence  = 9 // sentence, table row, code line
	weakestLevel = cutSentence
)

type point struct {
	off      int
	strength int
}

// Split cuts text into fragments of about opt.TargetTokens.
//
// Context-boundary hints. A hint is
//
//	<mesh-hint> context_boundary: ["Income Statement", "Cash Flow"] </mesh-hint>
//
// (or the same with the tag name anthropic-mesh-hint). The list holds
// section titles; items may be double-, single- or un-quoted and are
// separated by commas. Every line after the hint whose text, with markdown
// heading marks, emphasis and a trailing colon removed, equals a title
// (case-insensitively) starts a new fragment, as does the hint's own
// position; no overlap is carried across these boundaries. Titles that match
// nothing are ignored. The hint itself, and its whole line when it stands on
// a line of its own, is removed from every fragment's Text. An unclosed tag
// or a body other than "context_boundary: [...]" is ErrMalformedHint.
//
// Split returns no fragments for an empty text.
func Split(text string, opt Options) ([]Fragment, error) {
	target := opt.TargetTokens
	switch {
	case target < 0:
		return nil, fmt.Errorf("%w: TargetTokens %d < 0", ErrInvalidOptions, target)
	case target == 0:
		target = DefaultTargetTokens
	}
	budget := opt.OverlapBudget
	switch {
	case budget != budget || budget > 1:
		return nil, fmt.Errorf("%w: OverlapBudget %v outside [0, 1]", ErrInvalidOptions, budget)
	case budget == 0:
		budget = DefaultOverlapBudget
	case budget < 0:
		budget = 0
	}
	for _, g := range opt.GuardedSpans {
		if g.Start < 0 || g.End < g.Start || g.End > len(text) {
			return nil, fmt.Errorf("%w: guarded span [%d, %d) outside [0, %d)", ErrInvalidOptions, g.Start, g.End, len(text))
		}
	}
	if text == "" {
		return nil, nil
	}
	hints, err := parseHints(text)
	if err != nil {
		return nil, err
	}
	s := &splitter{text: text, hints: hints, guarded: outsideHints(opt.GuardedSpans, hints), target: target}
	s.findPoints()
	s.buildCosts()
	ranges := s.cut()
	ranges = s.mergeBlank(ranges)
	return s.fragments(ranges, budget), nil
}

// outsideHints clips guarded spans to the bytes outside every hint: a hint
// is markup, removed before any model reads the text, so a number in a
// hinted title ("Section 4") guards nothing and never blocks the cut the
// hint asks for. A span holding a whole hint becomes its two sides.
func outsideHints(gs []Range, hs []hint) []Range {
	if len(hs) == 0 {
		return gs
	}
	out := make([]Range, 0, len(gs))
	for _, g := range gs {
		rest := []Range{g}
		for _, h := range hs {
			var next []Range
			for _, r := range rest {
				if r.End <= h.span.Start || h.span.End <= r.Start {
					next = append(next, r)
					continue
				}
				if r.Start < h.span.Start {
					next = append(next, Range{r.Start, h.span.Start})
				}
				if h.span.End < r.End {
					next = append(next, Range{h.span.End, r.End})
				}
			}
			rest = next
		}
		out = append(out, rest...)
	}
	return out
}

type hint struct {
	span   Range // removed bytes
	titles []string
}

type splitter struct {
	text    string
	hints   []hint
	guarded []Range
	target  int
	pts     []point // sorted by offset; pts[0].off == 0, last == len(text)
	prefix  []cost  // prefix[i] = cost of text[0:pts[i].off] minus hints
}

// findPoints lists candidate cut points with their strengths.
func (s *splitter) findPoints() {
	text := s.text
	var titles []struct {
		after int
		title string
	}
	for _, h := range s.hints {
		for _, t := range h.titles {
			titles = append(titles, struct {
				after int
				title string
			}{h.span.End, normTitle(t)})
		}
	}
	var pts []point
	add := func(off, strength int) {
		if off <= 0 || off >= len(text) {
			return
		}
		pts = append(pts, point{off, strength})
	}
	for _, h := range s.hints {
		add(h.span.End, cutHard)
	}
	const (
		kBlank = iota
		kProse
		kHeading
		kTable
		kList
		kFence
	)
	prev := kBlank
	prevEndsSentence := false
	inFence := false
	for off := 0; off < len(text); {
		end := strings.IndexByte(text[off:], '\n')
		next := len(text)
		if end >= 0 {
			end += off
			next = end + 1
		} else {
			end = len(text)
		}
		line := text[off:end]
		trim := strings.TrimSpace(line)
		if inHint(s.hints, off) && inHint(s.hints, max(off, end-1)) && end > off {
			// A line wholly inside a removed hint plays no part.
			off = next
			continue
		}
		if inFence {
			if isFence(trim) {
				inFence = false
				add(next, cutBlock)
				prev = kBlank
			} else {
				add(off, cutSentence)
			}
			off = next
			continue
		}
		kind := kProse
		strength := -1
		switch {
		case trim == "":
			kind = kBlank
		case isFence(trim):
			kind = kFence
			inFence = true
			strength = cutBlock
		case headingLevel(trim) > 0:
			kind = kHeading
			strength = cutHeading + headingLevel(trim) - 1
		case strings.HasPrefix(trim, "|"):
			kind = kTable
			if prev == kTable {
				strength = cutSentence
			} else {
				strength = cutBlock
			}
		case isListItem(trim):
			kind = kList
			strength = cutListItem
		default:
			switch prev {
			case kProse, kList:
				if prevEndsSentence {
					strength = cutSentence
				}
			default:
				strength = cutBlock
			}
		}
		if kind != kBlank && prev == kBlank && strength > cutBlock {
			strength = cutBlock
		}
		if kind != kTable && kind != kBlank && prev == kTable {
			strength = min(strength, cutBlock)
			if strength < 0 {
				strength = cutBlock
			}
		}
		if kind != kBlank && len(titles) > 0 {
			n := normTitle(trim)
			for _, t := range titles {
				if off >= t.after && n == t.title {
					strength = cutHard
				}
			}
		}
		if strength >= 0 {
			add(off, strength)
		}
		if kind == kProse || kind == kList {
			s.sentencePoints(off, end, add)
			prevEndsSentence = endsSentence(trim)
		}
		prev = kind
		off = next
	}
	pts = append(pts, point{0, cutHard}, point{len(text), cutHard})
	// Sort, keep the strongest strength per offset, drop points inside
	// hints and guarded spans.
	slices.SortFunc(pts, func(a, b point) int {
		if a.off != b.off {
			return a.off - b.off
		}
		return a.strength - b.strength
	})
	out := pts[:0]
	for _, p := range pts {
		if len(out) > 0 && out[len(out)-1].off == p.off {
			continue
		}
		if p.off != 0 && p.off != len(text) && (strictlyInside(s.guarded, p.off) || strictlyInsideHint(s.hints, p.off)) {
			continue
		}
		out = append(out, p)
	}
	s.pts = out
}

func inHint(hs []hint, off int) bool {
	for _, h := range hs {
		if off >= h.span.Start && off < h.span.End {
			return true
		}
	}
	return false
}

func strictlyInsideHint(hs []hint, off int) bool {
	for _, h := range hs {
		if off > h.span.Start && off < h.span.End {
			return true
		}
	}
	return false
}

func strictlyInside(rs []Range, off int) bool {
	for _, r := range rs {
		if off > r.Start && off < r.End {
			return true
		}
	}
	return false
}

func isFence(trim string) bool {
	return strings.HasPrefix(trim, "```") || strings.HasPrefix(trim, "~~~")
}

func headingLevel(trim string) int {
	n := 0
	for n < len(trim) && trim[n] == '#' {
		n++
	}
	if n == 0 || n > 6 || (n < len(trim) && trim[n] != ' ' && trim[n] != '\t') {
		return 0
	}
	return n
}

func isListItem(trim string) bool {
	if len(trim) >= 2 && (trim[0] == '-' || trim[0] == '*' || trim[0] == '+') && (trim[1] == ' ' || trim[1] == '\t') {
		return true
	}
	i := 0
	for i < len(trim) && i < 4 && trim[i] >= '0' && trim[i] <= '9' {
		i++
	}
	return i > 0 && i+1 < len(trim) && (trim[i] == '.' || trim[i] == ')') && trim[i+1] == ' '
}

// normTitle reduces a heading line or a hint title to its comparable form.
func normTitle(s string) string {
	s = strings.TrimSpace(s)
	s = strings.TrimLeft(s, "#")
	s = strings.Trim(s, " \t*_")
	s = strings.TrimRight(s, ":：")
	s = strings.Trim(s, " \t*_")
	return strings.ToLower(s)
}

var abbreviations = map[string]bool{
	"e.g": true, "i.e": true, "mr": true, "mrs": true, "ms": true, "dr": true, "vs": true, "etc": true,
	"inc": true, "ltd": true, "no": true, "fig": true, "st": true, "co": true, "corp": true, "approx": true,
}

// sentencePoints adds a point at the start of every sentence but the first
// in text[start:end] (one line of prose).
func (s *splitter) sentencePoints(start, end int, add func(int, int)) {
	line := s.text[start:end]
	for i := 0; i < len(line); {
		r, n := utf8.DecodeRuneInString(line[i:])
		j := i + n
		switch r {
		case '。', '！', '？':
			for j < len(line) && strings.ContainsRune("”」』）)\"'", firstRune(line[j:])) {
				_, m := utf8.DecodeRuneInString(line[j:])
				j += m
			}
			k := j
			for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
				k++
			}
			if k < len(line) {
				add(start+k, cutSentence)
			}
		case '.', '!', '?':
			for j < len(line) && (line[j] == '"' || line[j] == '\'' || line[j] == ')') {
				j++
			}
			k := j
			for k < len(line) && (line[k] == ' ' || line[k] == '\t') {
				k++
			}
			if k == j || k >= len(line) {
				break // no space after: "3.5", "e.g.x", end of line
			}
			if r == '.' && isAbbrev(line[:i]) {
				break
			}
			c, _ := utf8.DecodeRuneInString(line[k:])
			if c >= 'a' && c <= 'z' {
				break // "approx. three", a lower-case continuation
			}
			add(start+k, cutSentence)
		}
		i += n
	}
}

func firstRune(s string) rune { r, _ := utf8.DecodeRuneInString(s); return r }

func isAbbrev(before string) bool {
	i := len(before)
	for i > 0 && (before[i-1] >= 'a' && before[i-1] <= 'z' || before[i-1] >= 'A' && before[i-1] <= 'Z' || before[i-1] == '.') {
		i--
	}
	w := strings.ToLower(before[i:])
	return len(w) == 1 || abbreviations[w]
}

func endsSentence(trim string) bool {
	trim = strings.TrimRight(trim, "\"')”」』）")
	r, _ := utf8.DecodeLastRuneInString(trim)
	return strings.ContainsRune(".!?。！？", r)
}

// buildCosts fills prefix sums of cost between consecutive points, skipping
// hint bytes.
func (s *splitter) buildCosts() {
	s.prefix = make([]cost, len(s.pts))
	for i := 1; i < len(s.pts); i++ {
		s.prefix[i] = s.prefix[i-1].plus(s.costBetween(s.pts[i-1].off, s.pts[i].off))
	}
}

func (s *splitter) costBetween(a, b int) cost {
	var c cost
	for _, h := range s.hints {
		if h.span.End <= a || h.span.Start >= b {
			continue
		}
		if h.span.Start > a {
			c.add(s.text[a:h.span.Start])
		}
		a = max(a, h.span.End)
	}
	if a < b {
		c.add(s.text[a:b])
	}
	return c
}

func (s *splitter) tok(i, j int) int { return s.prefix[j].minus(s.prefix[i]).tokens() }

// cut returns fragments as pairs of point indices.
func (s *splitter) cut() [][2]int {
	var out [][2]int
	emit := func(i, j int) { out = append(out, [2]int{i, j}) }
	var rec func(i, j, level int)
	rec = func(i, j, level int) {
		if s.tok(i, j) <= s.target || level > weakestLevel {
			emit(i, j)
			return
		}
		var ks []int
		for k := i + 1; k < j; k++ {
			if s.pts[k].strength == level {
				ks = append(ks, k)
			}
		}
		if len(ks) == 0 {
			rec(i, j, level+1)
			return
		}
		ks = append(ks, j)
		flush := func(a, b int) {
			if s.tok(a, b) > s.target {
				rec(a, b, level+1)
			} else {
				emit(a, b)
			}
		}
		a, b := i, ks[0]
		for _, c := range ks[1:] {
			if s.tok(a, c) <= s.target {
				b = c
				continue
			}
			flush(a, b)
			a, b = b, c
		}
		flush(a, b)
	}
	start := 0
	for k := 1; k < len(s.pts); k++ {
		if s.pts[k].strength == cutHard {
			rec(start, k, cutHeading)
			start = k
		}
	}
	return out
}

// mergeBlank folds fragments whose text (minus hints) is only white space
// into the next fragment, or the previous one at the end.
func (s *splitter) mergeBlank(rs [][2]int) [][2]int {
	blank := func(r [2]int) bool {
		return strings.TrimSpace(stripHints(s.text, s.hints, s.pts[r[0]].off, s.pts[r[1]].off)) == ""
	}
	var out [][2]int
	carry := -1
	for _, r := range rs {
		if carry >= 0 {
			r[0] = carry
			carry = -1
		}
		if blank(r) {
			carry = r[0]
			continue
		}
		out = append(out, r)
	}
	if carry >= 0 {
		if len(out) == 0 {
			out = append(out, [2]int{carry, len(s.pts) - 1})
		} else {
			out[len(out)-1][1] = len(s.pts) - 1
		}
	}
	return out
}

func (s *splitter) fragments(rs [][2]int, budget float64) []Fragment {
	remaining := int(budget * float64(s.tok(0, len(s.pts)-1)))
	eligible := 0
	for n, r := range rs {
		if n > 0 && s.pts[r[0]].strength != cutHard {
			eligible++
		}
	}
	frags := make([]Fragment, len(rs))
	for n, r := range rs {
		ov := r[0]
		if n > 0 && s.pts[r[0]].strength != cutHard && remaining > 0 {
			capTok := remaining / eligible
			// The earliest point in the previous fragment whose tail fits.
			for k := rs[n-1][0]; k < r[0]; k++ {
				if s.tok(k, r[0]) <= capTok {
					ov = k
					break
				}
			}
		}
		if n > 0 && s.pts[r[0]].strength != cutHard {
			eligible--
		}
		ot := s.tok(ov, r[0])
		remaining -= ot
		start, end := s.pts[r[0]].off, s.pts[r[1]].off
		frags[n] = Fragment{
			Index:         n,
			Text:          stripHints(s.text, s.hints, s.pts[ov].off, end),
			Start:         start,
			End:           end,
			OverlapStart:  s.pts[ov].off,
			OverlapTokens: ot,
		}
	}
	return frags
}

// stripHints returns text[a:b] without the hint spans inside it.
func stripHints(text string, hs []hint, a, b int) string {
	var sb strings.Builder
	for _, h := range hs {
		if h.span.End <= a || h.span.Start >= b {
			continue
		}
		if sb.Cap() == 0 {
			sb.Grow(b - a)
		}
		if h.span.Start > a {
			sb.WriteString(text[a:h.span.Start])
		}
		a = max(a, h.span.End)
	}
	if sb.Cap() == 0 {
		return text[a:b]
	}
	if a < b {
		sb.WriteString(text[a:b])
	}
	return sb.String()
}

var hintTags = []string{"mesh-hint", "anthropic-mesh-hint"}

// parseHints finds every hint, in order.
func parseHints(text string) ([]hint, error) {
	var hs []hint
	for off := 0; ; {
		open, name := -1, ""
		for _, t := range hintTags {
			if j := strings.Index(text[off:], "<"+t+">"); j >= 0 && (open < 0 || off+j < open) {
				open, name = off+j, t
			}
		}
		for _, t := range hintTags {
			if j := strings.Index(text[off:], "</"+t+">"); j >= 0 && (open < 0 || off+j < open) {
				return nil, fmt.Errorf("%w: </%s> at byte %d without an opening tag", ErrMalformedHint, t, off+j)
			}
		}
		if open < 0 {
			return hs, nil
		}
		bodyStart := open + len(name) + 2
		closeTag := "</" + name + ">"
		c := strings.Index(text[bodyStart:], closeTag)
		if c < 0 {
			return nil, fmt.Errorf("%w: <%s> at byte %d is not closed", ErrMalformedHint, name, open)
		}
		body := text[bodyStart : bodyStart+c]
		end := bodyStart + c + len(closeTag)
		titles, err := parseHintBody(body)
		if err != nil {
			return nil, fmt.Errorf("%w: %q at byte %d: %v", ErrMalformedHint, quoteHint(text[open:end]), open, err)
		}
		// Remove the whole line when the hint stands alone on it.
		ls := strings.LastIndexByte(text[:open], '\n') + 1
		le := strings.IndexByte(text[end:], '\n')
		if le < 0 {
			le = len(text)
		} else {
			le += end + 1
		}
		span := Range{open, end}
		if strings.TrimSpace(text[ls:open]) == "" && strings.TrimSpace(text[end:le]) == "" {
			span = Range{ls, le}
		}
		if len(hs) > 0 && span.Start < hs[len(hs)-1].span.End {
			span.Start = hs[len(hs)-1].span.End
		}
		hs = append(hs, hint{span: span, titles: titles})
		off = end
	}
}

// quoteHint is a hint as an error names it, cut at 120 bytes.
func quoteHint(h string) string {
	const limit = 120
	if len(h) <= limit {
		return h
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(h[cut]) {
		cut--
	}
	return h[:cut] + "…"
}

func parseHintBody(body string) ([]string, error) {
	b := strings.TrimSpace(body)
	key, rest, ok := strings.Cut(b, ":")
	if !ok || strings.TrimSpace(key) != "context_boundary" {
		return nil, errors.New(`body must be "context_boundary: [...]"`)
	}
	rest = strings.TrimSpace(rest)
	if !strings.HasPrefix(rest, "[") || !strings.HasSuffix(rest, "]") {
		return nil, errors.New("context_boundary needs a [...] list")
	}
	var titles []string
	for _, item := range strings.Split(rest[1:len(rest)-1], ",") {
		item = strings.TrimSpace(item)
		item = strings.Trim(item, `"'“”‘’`)
		item = strings.TrimSpace(item)
		if item != "" {
			titles = append(titles, item)
		}
	}
	return titles, nil
}
