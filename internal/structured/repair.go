package structured

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// Step names, as recorded in Result.Steps, X-Mesh-Repaired and Metrics.
const (
	StepExtract        = "extract"         // code fences and surrounding prose removed
	StepCloseTruncated = "close_truncated" // a cut answer closed at a value boundary
	StepTrailingCommas = "trailing_commas" // commas before } or ] removed
	StepQuotes         = "quotes"          // single quotes and bare keys turned into JSON strings
	StepCoerce         = "coerce"          // an exact string turned into the schema's number or boolean
	StepDerive         = "derive_field"    // a missing required field filled by a declared rule
	StepGuardViolation = "guard_violation" // the repair lost a guarded span and was rejected
)

// Step records one repair that changed the answer.
type Step struct {
	Name   string `json:"name"`
	Detail string `json:"detail"`
}

// Derivation declares how a missing required field may be filled from a
// sibling field: when the object at At lacks Field and its member From holds
// a value listed in Table, Field is set to the table's value. It is the only
// way Repair adds data, and only because the operator declared the rule.
//
// Example: {At: "", Field: "confidence_score", From: "risk_level",
// Table: {"low": 0.9, "medium": 0.6, "high": 0.3}}.
type Derivation struct {
	// At is the JSON pointer of the object holding both fields; "" is the
	// document root and a "*" token matches any member or index.
	At    string
	Field string
	From  string
	// Table maps From's value (a string, or the JSON text of a number or
	// boolean) to Field's value, which must marshal to JSON.
	Table map[string]any
}

// Options are per-request repair inputs. The zero value is valid.
type Options struct {
	// Input is the request's input text (system prompt and messages). Its
	// guarded spans that also occur in the answer are protected like the
	// answer's own.
	Input string
	// Derive lists the declared derivation rules for missing fields.
	Derive []Derivation
}

// Result is the outcome of Repair.
type Result struct {
	// Output is the answer to deliver: the repaired document when Valid and
	// Changed, otherwise the answer exactly as given.
	Output []byte
	// Valid reports that Output satisfies the schema.
	Valid bool
	// Steps lists the repairs applied, in order. When Valid is false they
	// are the steps that were tried (for the debug trace) and Output does not
	// contain them.
	Steps []Step
	// Violations explains why the answer could not be made valid; empty
	// when Valid.
	Violations []Violation
	// Changed reports that Output differs from the answer.
	Changed bool
}

// Repair makes answer valid against s using lossless steps only, in this
// order, each recorded in Result.Steps when it changed something:
//
//  1. extract: keep the one JSON value of the answer and drop code fences
//     and prose around it; refused when there are several candidate values.
//  2. close_truncated: append the missing closing quote and brackets of an
//     answer that was cut off (see below for which cuts are closable).
//  3. trailing_commas: remove a comma that directly precedes } or ].
//  4. quotes: turn single-quoted strings and bare object keys into JSON
//     strings (outside strings only; the decoded text is unchanged).
//  5. coerce: where the schema wants a number or boolean and the answer has
//     a string whose text is exactly such a JSON literal ("42", "-0.5",
//     "true"), drop the quotes. "$42", "42 units", " 42", "042" stay strings.
//  6. derive_field: fill a missing required field by a rule of opt.Derive.
//
// Closable cuts. A cut right after '{', '[', ',' or a complete value
// (a closed string, a literal, a nested container, or a number followed by
// whitespace) is closed by appending the brackets still open; the dangling
// comma then goes in step 3. A cut inside a number or at a number ending the
// text (it may have had more digits), inside a literal ("tru"), inside or
// right after an object key, after a colon, or inside an escape sequence is
// not closed. A cut inside a string value is closed only when all of these
// hold: the schema describes the location unambiguously as type "string"
// with no enum, const, pattern, format or content keyword (for such a value
// a prefix is different data); the cut falls at the end of a sentence — the
// text ends in '.', '!', '?', '。', '！' or '？' right after a letter, then
// optional whitespace — so a cut inside a word, between words, inside a number
// or inside a multi-byte character is refused; and the result still
// satisfies the rest of the schema (minLength …). The step's detail then says
// the value may be incomplete.
//
// After the steps, the output must be valid and must contain every guarded
// span (GuardedSpans) of the answer's JSON value, and every guarded span of
// opt.Input found in it, at least as many times as the answer did; otherwise
// the repair is rejected with a guard_violation step. Prose dropped by step 1
// is discarded whole, not rewritten, and is not guarded.
//
// A valid answer (surrounding whitespace included) is returned byte for byte
// with no steps, after one parse and one validation. A nil s accepts any
// well-formed JSON. Repair is safe for concurrent use.
func Repair(answer string, s *Schema, opt Options) Result {
	return repairWith(answer, s, opt, repairSteps)
}

// stepFunc is one repair step; it edits r.text and records what it did.
type stepFunc func(r *repairer)

var repairSteps = []stepFunc{
	(*repairer).extract,
	(*repairer).closeTruncated,
	(*repairer).trailingCommas,
	(*repairer).fixQuotes,
	(*repairer).coerce,
	(*repairer).derive,
}

type repairer struct {
	s       *Schema
	opt     Options
	text    string      // working text
	region  string      // the answer's JSON value, as extracted
	steps   []Step      // applied steps
	refused []Violation // why a step declined to act
}

func (r *repairer) record(name, format string, args ...any) {
	r.steps = append(r.steps, Step{Name: name, Detail: fmt.Sprintf(format, args...)})
}

func (r *repairer) refuse(keyword, format string, args ...any) {
	r.refused = append(r.refused, Violation{Keyword: keyword, Message: fmt.Sprintf(format, args...)})
}

func repairWith(answer string, s *Schema, opt Options, steps []stepFunc) Result {
	if _, vs := s.validate([]byte(answer)); len(vs) == 0 {
		return Result{Output: []byte(answer), Valid: true}
	}
	r := &repairer{s: s, opt: opt, text: answer, region: answer}
	for _, st := range steps {
		st(r)
	}
	fail := func(vs []Violation) Result {
		return Result{Output: []byte(answer), Steps: r.steps, Violations: vs}
	}
	if _, vs := s.validate([]byte(r.text)); len(vs) > 0 {
		return fail(append(r.refused, vs...))
	}
	if lost, ok := guardCheck(r.region, r.text, opt.Input); !ok {
		r.record(StepGuardViolation, "guarded span %q would not survive the repair", lost)
		return fail([]Violation{{Keyword: "guard", Message: fmt.Sprintf("repair would rewrite guarded span %q", lost)}})
	}
	return Result{Output: []byte(r.text), Valid: true, Steps: r.steps, Changed: r.text != answer}
}

// --- step 1: extract ---

func (r *repairer) extract() {
	t := r.text
	lo, hi, fences := fenceBody(t)
	if fences > 1 {
		r.refuse("extract", "the answer has %d fenced blocks that could hold the JSON value", fences)
		return
	}
	open := r.valueStart(t[lo:hi])
	if open < 0 {
		return
	}
	open += lo
	end := matchEnd(t, open, hi)
	after := t[end:]
	if fences == 1 {
		after = t[end:hi]
	}
	if strings.ContainsAny(after, "{[") {
		r.refuse("extract", "the answer holds more than one candidate JSON value")
		return
	}
	before, rest := t[:open], t[end:]
	if strings.TrimSpace(before) == "" && strings.TrimSpace(rest) == "" {
		return // only whitespace around the value: JSON allows it
	}
	r.text = t[open:end]
	r.region = r.text
	what := "surrounding prose"
	if fences == 1 {
		what = "code fence"
		if strings.TrimSpace(t[:strings.Index(t, "```")]) != "" || strings.TrimSpace(t[min(hi+3, len(t)):]) != "" {
			what = "code fence and surrounding prose"
		}
	}
	r.record(StepExtract, "removed %s (%d bytes before the value, %d after)", what, open, len(t)-end)
}

// fenceBody finds the Markdown code fences of t that contain a '{' or '['.
// It returns the body of the first one (to the end of t when its closing
// fence is missing, as in a cut answer) and how many there are; with none it
// returns all of t.
func fenceBody(t string) (lo, hi, n int) {
	lo, hi = 0, len(t)
	for i := 0; ; {
		j := strings.Index(t[i:], "```")
		if j < 0 {
			return lo, hi, n
		}
		start := i + j + 3
		// The info string ("json") runs to the end of the line.
		if nl := strings.IndexByte(t[start:], '\n'); nl >= 0 && !strings.ContainsAny(t[start:start+nl], "{[") {
			start += nl + 1
		} else {
			for start < len(t) && isWordByte(t[start]) {
				start++
			}
		}
		end := len(t)
		next := len(t)
		if k := strings.Index(t[start:], "```"); k >= 0 {
			end = start + k
			next = end + 3
		}
		if strings.ContainsAny(t[start:end], "{[") {
			if n == 0 {
				lo, hi = start, end
			}
			n++
		}
		if next >= len(t) {
			return lo, hi, n
		}
		i = next
	}
}

// valueStart returns the offset of the first '{' or '[' that can open the
// schema's root value, or -1.
func (r *repairer) valueStart(t string) int {
	root := rootAny
	if r.s != nil {
		root = r.s.root
	}
	switch root {
	case rootObject:
		return strings.IndexByte(t, '{')
	case rootArray:
		return strings.IndexByte(t, '[')
	}
	return strings.IndexAny(t, "{[")
}

// matchEnd returns the offset just past the bracket closing the one at
// t[open], or hi when the value is not closed before hi.
func matchEnd(t string, open, hi int) int {
	depth := 0
	for _, tok := range lex(t[open:hi]) {
		switch tok.kind {
		case tkOpenObj, tkOpenArr:
			depth++
		case tkCloseObj, tkCloseArr:
			depth--
			if depth == 0 {
				return open + tok.end
			}
		}
	}
	return hi
}

// --- step 2: close a truncated answer ---

type walkState uint8

const (
	stOpen  walkState = iota // after '{' or '['
	stComma                  // after ','
	stKey                    // object: after a key
	stColon                  // object: after ':'
	stAfter                  // after a value
)

type frame struct {
	obj   bool
	state walkState
	key   string // object: the current member's key
	n     int    // array: the current item's index
}

func (f *frame) valuePos() bool {
	if f.obj {
		return f.state == stColon
	}
	return f.state == stOpen || f.state == stComma
}

func (r *repairer) closeTruncated() {
	text := r.text
	toks := lex(text)
	var stack []frame
	top := false // a complete top-level value was seen
	for _, t := range toks {
		if top {
			return // something follows a complete value: not a truncation
		}
		if len(stack) == 0 {
			switch t.kind {
			case tkOpenObj, tkOpenArr:
				stack = append(stack, frame{obj: t.kind == tkOpenObj})
			default:
				return // a scalar document is never closed
			}
			continue
		}
		f := &stack[len(stack)-1]
		switch t.kind {
		case tkOpenObj, tkOpenArr:
			if !f.valuePos() {
				return
			}
			stack = append(stack, frame{obj: t.kind == tkOpenObj})
		case tkCloseObj, tkCloseArr:
			if f.obj != (t.kind == tkCloseObj) || f.state == stKey || f.state == stColon {
				return
			}
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				top = true
			} else {
				stack[len(stack)-1].afterValue()
			}
		case tkColon:
			if !f.obj || f.state != stKey {
				return
			}
			f.state = stColon
		case tkComma:
			if f.state != stAfter {
				return
			}
			f.state = stComma
		case tkString, tkBare:
			if f.obj && (f.state == stOpen || f.state == stComma) {
				f.key = keyText(text, t)
				f.state = stKey
				continue
			}
			if !f.valuePos() || (t.kind == tkBare && t.end < len(text)) {
				return
			}
			f.afterValue()
		case tkNumber, tkLiteral:
			if !f.valuePos() {
				return
			}
			f.afterValue()
		default:
			return
		}
	}
	if len(stack) == 0 {
		return
	}
	last := toks[len(toks)-1]
	f := &stack[len(stack)-1]
	closers := ""
	var cut string
	switch {
	case last.kind == tkString && !last.closed && f.state == stKey:
		r.refuse("truncated", "the answer was cut inside an object key")
		return
	case last.kind == tkString && !last.closed:
		// The walk counted the partial string as a value of f.
		path := pathOf(stack)
		if reason, ok := r.canCloseString(path, text[last.start+1:], last.cutEscape); !ok {
			r.refuse("truncated", "the answer was cut inside the string at %s: %s", pointer(path), reason)
			return
		}
		closers = string(last.quote)
		cut = fmt.Sprintf("inside the string at %s, at the end of a sentence (the value may be incomplete)", pointer(path))
	case last.kind == tkBare && f.state == stAfter:
		r.refuse("truncated", "the answer was cut inside a literal (%q)", text[last.start:last.end])
		return
	case last.kind == tkNumber && last.end == len(text) && f.state == stAfter:
		r.refuse("truncated", "the answer was cut at a number that may have had more digits (%q)", text[last.start:last.end])
		return
	case f.state == stKey:
		r.refuse("truncated", "the answer was cut inside or right after an object key")
		return
	case f.state == stColon:
		r.refuse("truncated", "the answer was cut after a key, before its value")
		return
	case f.state == stComma:
		cut = "after a comma"
	case f.state == stOpen:
		cut = "after an opening bracket"
	default:
		cut = "after a complete value"
	}
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i].obj {
			closers += "}"
		} else {
			closers += "]"
		}
	}
	r.text = text + closers
	r.record(StepCloseTruncated, "appended %q: the answer was cut %s", closers, cut)
}

func (f *frame) afterValue() {
	if !f.obj && f.state != stAfter {
		f.n++
	}
	f.state = stAfter
}

// pathOf returns the reference tokens of the value the innermost frame of
// stack last received.
func pathOf(stack []frame) []string {
	path := make([]string, 0, len(stack))
	for i, f := range stack {
		switch {
		case f.obj:
			path = append(path, f.key)
		case i == len(stack)-1:
			path = append(path, strconv.Itoa(f.n-1))
		default:
			path = append(path, strconv.Itoa(f.n))
		}
	}
	return path
}

// keyText decodes an object key token: a JSON string, a single-quoted
// string or a bare word.
func keyText(text string, t token) string {
	raw := text[t.start:t.end]
	if t.kind == tkBare {
		return raw
	}
	if t.quote == '"' {
		var k string
		if json.Unmarshal([]byte(raw), &k) == nil {
			return k
		}
	}
	return strings.Trim(raw, string(t.quote))
}

// canCloseString decides whether the partial string content raw at path may
// be closed; see Repair.
func (r *repairer) canCloseString(path []string, raw string, cutEscape bool) (string, bool) {
	if cutEscape {
		return "the cut falls inside an escape sequence", false
	}
	schemas, ok := r.s.schemasAt(path)
	if !ok {
		return "the schema does not describe this location unambiguously", false
	}
	isString := false
	for _, sch := range schemas {
		if sch.Types != nil && !sch.Types.IsEmpty() {
			ts := sch.Types.ToStrings()
			if len(ts) != 1 || ts[0] != "string" {
				return "the schema does not declare it a plain string", false
			}
			isString = true
		}
		if sch.Enum != nil || sch.Const != nil || sch.Pattern != nil || sch.Format != nil || sch.ContentEncoding != nil || sch.ContentMediaType != nil {
			return "the schema constrains its form, so a prefix would be different data", false
		}
	}
	if !isString {
		return "the schema does not declare it a string", false
	}
	if !sentenceBoundary(raw) {
		return "the cut does not fall at the end of a sentence", false
	}
	return "", true
}

// sentenceBoundary reports that s ends a sentence: after optional trailing
// whitespace comes one of . ! ? 。 ！ ？ directly after a letter. "Rotate the
// keys. " qualifies; "Rotate the ke", "Audit ", "costs $152." (the cut may
// be inside a number), "INV-2024-" and a split UTF-8 sequence do not.
func sentenceBoundary(s string) bool {
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	c, n := utf8.DecodeLastRuneInString(s)
	if n == 0 || !strings.ContainsRune(".!?。！？", c) {
		return false
	}
	c, n = utf8.DecodeLastRuneInString(s[:len(s)-n])
	return n > 0 && c != utf8.RuneError && unicode.IsLetter(c)
}

// --- step 3: trailing commas ---

func (r *repairer) trailingCommas() {
	toks := lex(r.text)
	var cut []int
	for i := 0; i+1 < len(toks); i++ {
		if toks[i].kind == tkComma && (toks[i+1].kind == tkCloseObj || toks[i+1].kind == tkCloseArr) {
			cut = append(cut, toks[i].start)
		}
	}
	if len(cut) == 0 {
		return
	}
	var sb strings.Builder
	prev := 0
	for _, c := range cut {
		sb.WriteString(r.text[prev:c])
		prev = c + 1
	}
	sb.WriteString(r.text[prev:])
	r.text = sb.String()
	r.record(StepTrailingCommas, "removed %d trailing comma(s)", len(cut))
}

// --- step 4: quotes ---

func (r *repairer) fixQuotes() {
	toks := lex(r.text)
	var sb strings.Builder
	prev, single, bare := 0, 0, 0
	for i, t := range toks {
		switch {
		case t.kind == tkString && t.quote == '\'' && t.closed:
			sb.WriteString(r.text[prev:t.start])
			sb.WriteString(requote(r.text[t.start+1 : t.end-1]))
			prev = t.end
			single++
		case t.kind == tkBare && i+1 < len(toks) && toks[i+1].kind == tkColon && i > 0 && (toks[i-1].kind == tkOpenObj || toks[i-1].kind == tkComma):
			sb.WriteString(r.text[prev:t.start])
			sb.WriteByte('"')
			sb.WriteString(r.text[t.start:t.end])
			sb.WriteByte('"')
			prev = t.end
			bare++
		}
	}
	if single+bare == 0 {
		return
	}
	sb.WriteString(r.text[prev:])
	r.text = sb.String()
	r.record(StepQuotes, "converted %d single-quoted string(s), quoted %d bare key(s)", single, bare)
}

// requote turns the content of a single-quoted string into a double-quoted
// JSON string with the same decoded text: \' becomes ', " becomes \".
func requote(in string) string {
	var sb strings.Builder
	sb.Grow(len(in) + 2)
	sb.WriteByte('"')
	for i := 0; i < len(in); i++ {
		c := in[i]
		switch {
		case c == '\\' && i+1 < len(in) && in[i+1] == '\'':
			sb.WriteByte('\'')
			i++
		case c == '\\' && i+1 < len(in):
			sb.WriteByte('\\')
			sb.WriteByte(in[i+1])
			i++
		case c == '"':
			sb.WriteString(`\"`)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// --- step 5: coerce ---

var (
	jsonNumber  = regexp.MustCompile(`^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$`)
	jsonInteger = regexp.MustCompile(`^-?(?:0|[1-9]\d*)$`)
)

type edit struct {
	at, end int // replace text[at:end]
	with    string
}

func applyEdits(text string, edits []edit) string {
	slices.SortStableFunc(edits, func(a, b edit) int { return a.at - b.at })
	var sb strings.Builder
	prev := 0
	for _, e := range edits {
		sb.WriteString(text[prev:e.at])
		sb.WriteString(e.with)
		prev = e.end
	}
	sb.WriteString(text[prev:])
	return sb.String()
}

func (r *repairer) coerce() {
	if r.s == nil {
		return
	}
	doc, vs := r.s.validate([]byte(r.text))
	if doc == nil {
		return
	}
	var idx map[string]span
	var edits []edit
	var done []string
	seen := make(map[string]bool)
	for _, v := range vs {
		k, ok := v.kind.(*kind.Type)
		if !ok || k.Got != "string" || seen[v.Pointer] {
			continue
		}
		if idx == nil {
			idx = indexValues(r.text, lex(r.text))
		}
		sp, ok := idx[v.Pointer]
		if !ok {
			continue
		}
		raw := r.text[sp.start:sp.end]
		inner := raw[1 : len(raw)-1]
		if strings.IndexByte(inner, '\\') >= 0 {
			continue
		}
		num := slices.Contains(k.Want, "number") && jsonNumber.MatchString(inner)
		integer := slices.Contains(k.Want, "integer") && jsonInteger.MatchString(inner)
		boolean := slices.Contains(k.Want, "boolean") && (inner == "true" || inner == "false")
		if num || integer || boolean {
			seen[v.Pointer] = true
			edits = append(edits, edit{sp.start, sp.end, inner})
			done = append(done, fmt.Sprintf("%s: %s → %s", orRoot(v.Pointer), raw, inner))
		}
	}
	if len(edits) == 0 {
		return
	}
	r.text = applyEdits(r.text, edits)
	r.record(StepCoerce, "%s", strings.Join(done, "; "))
}

func orRoot(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// --- step 6: derive ---

func (r *repairer) derive() {
	if r.s == nil || len(r.opt.Derive) == 0 {
		return
	}
	doc, vs := r.s.validate([]byte(r.text))
	if doc == nil {
		return
	}
	var idx map[string]span
	var edits []edit
	var done []string
	for _, v := range vs {
		k, ok := v.kind.(*kind.Required)
		if !ok {
			continue
		}
		obj, ok := lookup(doc, v.path).(map[string]any)
		if !ok {
			continue
		}
		for _, missing := range k.Missing {
			for _, d := range r.opt.Derive {
				if d.Field != missing || !pointerMatches(d.At, v.Pointer) {
					continue
				}
				key, ok := scalarKey(obj[d.From])
				if !ok {
					continue
				}
				val, ok := d.Table[key]
				if !ok {
					continue
				}
				enc, err := json.Marshal(val)
				if err != nil {
					continue
				}
				name, _ := json.Marshal(d.Field)
				if idx == nil {
					idx = indexValues(r.text, lex(r.text))
				}
				sp, ok := idx[v.Pointer]
				if !ok {
					continue
				}
				closeAt := sp.end - 1
				last := strings.TrimRight(r.text[sp.start:closeAt], " \t\r\n")
				at := sp.start + len(last)
				sep := ","
				if last == "{" {
					sep = ""
				}
				// Members added to one object are all inserted at the same offset.
				edits = append(edits, edit{at, at, sep + string(name) + ":" + string(enc)})
				done = append(done, fmt.Sprintf("%s/%s = %s, derived from %s %s by the declared rule", v.Pointer, escapeToken(d.Field), enc, d.From, quoteKey(obj[d.From])))
				break
			}
		}
	}
	if len(edits) == 0 {
		return
	}
	// Two members inserted into the same empty object need a separator.
	slices.SortStableFunc(edits, func(a, b edit) int { return a.at - b.at })
	for i := 1; i < len(edits); i++ {
		if edits[i].at == edits[i-1].at && !strings.HasPrefix(edits[i].with, ",") {
			edits[i].with = "," + edits[i].with
		}
	}
	r.text = applyEdits(r.text, edits)
	r.record(StepDerive, "%s", strings.Join(done, "; "))
}

func quoteKey(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// scalarKey renders a string, number or boolean as a Derivation table key.
func scalarKey(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case json.Number:
		return v.String(), true
	case bool:
		if v {
			return "true", true
		}
		return "false", true
	}
	return "", false
}

// lookup returns the value at path in a document decoded by
// the validator (json.Number for numbers), or nil.
func lookup(doc any, path []string) any {
	for _, tok := range path {
		switch d := doc.(type) {
		case map[string]any:
			doc = d[tok]
		case []any:
			i := -1
			fmt.Sscanf(tok, "%d", &i)
			if i < 0 || i >= len(d) {
				return nil
			}
			doc = d[i]
		default:
			return nil
		}
	}
	return doc
}

// pointerMatches reports whether pattern (a JSON pointer whose "*" tokens
// match any token) matches ptr.
func pointerMatches(pattern, ptr string) bool {
	if pattern == ptr {
		return true
	}
	p, q := strings.Split(pattern, "/"), strings.Split(ptr, "/")
	if len(p) != len(q) {
		return false
	}
	for i := range p {
		if p[i] != "*" && p[i] != q[i] {
			return false
		}
	}
	return true
}
