package shadow

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Rule is a parsed decision rule: a boolean expression over an answer's
// JSON fields, such as
//
//	confidence_score >= 0.8
//	risk_level == "high" || (score > 0.5 && !flags.manual)
//
// The grammar:
//
//	expr    = and { ("||" | "or") and }
//	and     = unary { ("&&" | "and") unary }
//	unary   = ("!" | "not") unary | "(" expr ")" | cmp
//	cmp     = path [ op literal ]          (a bare path tests for true)
//	path    = name { "." name | "[" digits "]" }
//	op      = "==" | "!=" | "<" | "<=" | ">" | ">="
//	literal = number | "string" (JSON escapes) | 'string' | true | false | null
//
// A name is letters, digits and underscores, not starting with a digit;
// and, or and not are the operators (as people write them in Python and
// SQL), not field names. A 'single-quoted' string has no escapes but \'
// and \\.
// A Rule is immutable and safe for concurrent use.
type Rule struct {
	root node
	src  string
}

// maxRuleLen and maxRuleDepth bound what ParseRule accepts: a rule is a
// line of config, not a program.
const (
	maxRuleLen   = 4096
	maxRuleDepth = 64
)

// ParseRule parses s (see Rule for the grammar), which must be UTF-8.
func ParseRule(s string) (*Rule, error) { return parseRule(s, maxRuleLen) }

// parseRule is ParseRule with a length bound: a canonical form may be
// longer than its source (a string's quotes and control characters are
// escaped in it), so the tests parse one back with a larger bound.
func parseRule(s string, maxLen int) (*Rule, error) {
	if len(s) > maxLen {
		return nil, fmt.Errorf("rule is %d bytes, longer than %d", len(s), maxLen)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("rule is not valid UTF-8")
	}
	p := &parser{src: s}
	p.next()
	n, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.errf("unexpected %q", p.tok.text)
	}
	return &Rule{root: n, src: s}, nil
}

// String is the rule in canonical form: single spaces around binary
// operators, parentheses only where needed, normalised literals. ParseRule(r.String()) gives an equal rule.
func (r *Rule) String() string {
	var b strings.Builder
	r.root.write(&b)
	return b.String()
}

// Source is the text the rule was parsed from.
func (r *Rule) Source() string { return r.src }

// Verdict is a rule's outcome on one answer.
type Verdict int8

// The verdicts. Undefined: the answer is not JSON, a path is missing, or a
// comparison's types do not order (a string < a number).
const (
	Undefined Verdict = -1
	False     Verdict = 0
	True      Verdict = 1
)

func (v Verdict) String() string {
	switch v {
	case True:
		return "true"
	case False:
		return "false"
	}
	return "undefined"
}

// Eval evaluates r on a decoded JSON value (as encoding/json decodes into
// any, numbers as float64 or json.Number). An undefined operand makes the
// comparison undefined; ! keeps undefined; && and || are Kleene's
// three-valued logic (false && undefined is false, true || undefined true).
func (r *Rule) Eval(v any) Verdict { return r.root.eval(v) }

type node interface {
	eval(v any) Verdict
	write(b *strings.Builder)
}

type (
	orNode  struct{ l, r node }
	andNode struct{ l, r node }
	notNode struct{ x node }
	cmpNode struct {
		path Path
		op   string // "" tests the path for true
		lit  any    // float64, string, bool or nil
	}
)

func (n orNode) eval(v any) Verdict {
	a, b := n.l.eval(v), n.r.eval(v)
	switch {
	case a == True || b == True:
		return True
	case a == False && b == False:
		return False
	}
	return Undefined
}

func (n andNode) eval(v any) Verdict {
	a, b := n.l.eval(v), n.r.eval(v)
	switch {
	case a == False || b == False:
		return False
	case a == True && b == True:
		return True
	}
	return Undefined
}

func (n notNode) eval(v any) Verdict {
	switch n.x.eval(v) {
	case True:
		return False
	case False:
		return True
	}
	return Undefined
}

func (n cmpNode) eval(v any) Verdict {
	x, ok := n.path.Lookup(v)
	if !ok {
		return Undefined
	}
	if n.op == "" {
		b, ok := x.(bool)
		if !ok {
			return Undefined
		}
		return verdict(b)
	}
	if f, ok := number(x); ok {
		lf, ok := n.lit.(float64)
		if !ok {
			if n.op == "!=" {
				return True
			}
			if n.op == "==" {
				return False
			}
			return Undefined
		}
		switch n.op {
		case "==":
			return verdict(f == lf)
		case "!=":
			return verdict(f != lf)
		case "<":
			return verdict(f < lf)
		case "<=":
			return verdict(f <= lf)
		case ">":
			return verdict(f > lf)
		case ">=":
			return verdict(f >= lf)
		}
	}
	if s, ok := x.(string); ok {
		if ls, ok := n.lit.(string); ok {
			switch n.op {
			case "==":
				return verdict(s == ls)
			case "!=":
				return verdict(s != ls)
			case "<":
				return verdict(s < ls)
			case "<=":
				return verdict(s <= ls)
			case ">":
				return verdict(s > ls)
			case ">=":
				return verdict(s >= ls)
			}
		}
	}
	switch n.op {
	case "==":
		return verdict(sameScalar(x, n.lit))
	case "!=":
		return verdict(!sameScalar(x, n.lit))
	}
	return Undefined
}

// sameScalar reports whether x (a decoded JSON value) equals a literal of
// another kind than number or string: a bool or null. Objects and arrays
// equal no literal.
func sameScalar(x, lit any) bool {
	switch l := lit.(type) {
	case bool:
		b, ok := x.(bool)
		return ok && b == l
	case nil:
		return x == nil
	}
	return false
}

func verdict(b bool) Verdict {
	if b {
		return True
	}
	return False
}

// number returns x as a float64 when it is a JSON number.
func number(x any) (float64, bool) {
	switch n := x.(type) {
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// Precedences, for writing: a child is parenthesised only where the tree
// needs it, so the canonical form nests no deeper than the source did.
const (
	precOr = 1 + iota
	precAnd
	precUnary
)

func prec(n node) int {
	switch n.(type) {
	case orNode:
		return precOr
	case andNode:
		return precAnd
	}
	return precUnary
}

// writeIn writes n where an operand of precedence at least min is
// expected.
func writeIn(b *strings.Builder, n node, min int) {
	if prec(n) < min {
		b.WriteByte('(')
		n.write(b)
		b.WriteByte(')')
		return
	}
	n.write(b)
}

func (n orNode) write(b *strings.Builder) {
	writeIn(b, n.l, precOr)
	b.WriteString(" || ")
	writeIn(b, n.r, precOr+1)
}

func (n andNode) write(b *strings.Builder) {
	writeIn(b, n.l, precAnd)
	b.WriteString(" && ")
	writeIn(b, n.r, precAnd+1)
}

func (n notNode) write(b *strings.Builder) {
	b.WriteByte('!')
	writeIn(b, n.x, precUnary)
}

func (n cmpNode) write(b *strings.Builder) {
	b.WriteString(n.path.String())
	if n.op == "" {
		return
	}
	b.WriteByte(' ')
	b.WriteString(n.op)
	b.WriteByte(' ')
	switch l := n.lit.(type) {
	case float64:
		b.WriteString(strconv.FormatFloat(l, 'g', -1, 64))
	case string:
		q, _ := json.Marshal(l)
		b.Write(q)
	case bool:
		b.WriteString(strconv.FormatBool(l))
	default:
		b.WriteString("null")
	}
}

type tokKind int

const (
	tEOF tokKind = iota
	tName
	tNum
	tStr
	tOp // == != < <= > >= && || ! ( ) . [ ]
	tBad
)

type token struct {
	kind tokKind
	text string
	pos  int
}

type parser struct {
	src string
	pos int
	tok token
}

func (p *parser) errf(format string, a ...any) error {
	return fmt.Errorf("decision rule at byte %d: %s", p.tok.pos, fmt.Sprintf(format, a...))
}

// next reads the next token into p.tok.
func (p *parser) next() {
	for p.pos < len(p.src) && (p.src[p.pos] == ' ' || p.src[p.pos] == '\t' || p.src[p.pos] == '\n' || p.src[p.pos] == '\r') {
		p.pos++
	}
	start := p.pos
	if p.pos >= len(p.src) {
		p.tok = token{kind: tEOF, pos: start}
		return
	}
	c := p.src[p.pos]
	switch {
	case c == '_' || c < 0x80 && unicode.IsLetter(rune(c)):
		for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
			p.pos++
		}
		p.tok = token{kind: tName, text: p.src[start:p.pos], pos: start}
	case c >= '0' && c <= '9' || c == '-' || c == '+':
		p.pos++
		for p.pos < len(p.src) && strings.IndexByte("0123456789.eE+-", p.src[p.pos]) >= 0 {
			p.pos++
		}
		p.tok = token{kind: tNum, text: p.src[start:p.pos], pos: start}
	case c == '\'':
		p.pos++
		var b strings.Builder
		for p.pos < len(p.src) && p.src[p.pos] != '\'' {
			if p.src[p.pos] == '\\' && p.pos+1 < len(p.src) && (p.src[p.pos+1] == '\'' || p.src[p.pos+1] == '\\') {
				p.pos++
			}
			b.WriteByte(p.src[p.pos])
			p.pos++
		}
		if p.pos >= len(p.src) {
			p.tok = token{kind: tBad, text: p.src[start:], pos: start}
			return
		}
		p.pos++
		q, _ := json.Marshal(b.String())
		p.tok = token{kind: tStr, text: string(q), pos: start}
	case c == '"':
		p.pos++
		for p.pos < len(p.src) && p.src[p.pos] != '"' {
			if p.src[p.pos] == '\\' {
				p.pos++
			}
			p.pos++
		}
		if p.pos >= len(p.src) {
			p.tok = token{kind: tBad, text: p.src[start:], pos: start}
			return
		}
		p.pos++
		p.tok = token{kind: tStr, text: p.src[start:p.pos], pos: start}
	default:
		for _, op := range [...]string{"==", "!=", "<=", ">=", "&&", "||", "<", ">", "!", "(", ")", ".", "[", "]"} {
			if strings.HasPrefix(p.src[p.pos:], op) {
				p.pos += len(op)
				p.tok = token{kind: tOp, text: op, pos: start}
				return
			}
		}
		p.pos++
		p.tok = token{kind: tBad, text: p.src[start:p.pos], pos: start}
	}
}

func isNameByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// words are the operators spelled as words.
var words = map[string]string{"and": "&&", "or": "||", "not": "!"}

func (p *parser) is(op string) bool {
	return p.tok.kind == tOp && p.tok.text == op || p.tok.kind == tName && words[p.tok.text] == op
}

func (p *parser) expr(depth int) (node, error) {
	if depth > maxRuleDepth {
		return nil, p.errf("nested deeper than %d", maxRuleDepth)
	}
	l, err := p.and(depth)
	if err != nil {
		return nil, err
	}
	for p.is("||") {
		p.next()
		r, err := p.and(depth)
		if err != nil {
			return nil, err
		}
		l = orNode{l, r}
	}
	return l, nil
}

func (p *parser) and(depth int) (node, error) {
	l, err := p.unary(depth)
	if err != nil {
		return nil, err
	}
	for p.is("&&") {
		p.next()
		r, err := p.unary(depth)
		if err != nil {
			return nil, err
		}
		l = andNode{l, r}
	}
	return l, nil
}

func (p *parser) unary(depth int) (node, error) {
	if depth > maxRuleDepth {
		return nil, p.errf("nested deeper than %d", maxRuleDepth)
	}
	switch {
	case p.is("!"):
		p.next()
		x, err := p.unary(depth + 1)
		if err != nil {
			return nil, err
		}
		return notNode{x}, nil
	case p.is("("):
		p.next()
		x, err := p.expr(depth + 1)
		if err != nil {
			return nil, err
		}
		if !p.is(")") {
			return nil, p.errf("want ), got %q", p.tok.text)
		}
		p.next()
		return x, nil
	}
	return p.cmp()
}

func (p *parser) cmp() (node, error) {
	if p.tok.kind != tName || words[p.tok.text] != "" {
		if p.tok.kind == tEOF {
			return nil, p.errf("want a field name, got the end")
		}
		return nil, p.errf("want a field name, got %q", p.tok.text)
	}
	var path Path
	path = append(path, Step{Key: p.tok.text, Index: -1})
	p.next()
	for {
		if p.is(".") {
			p.next()
			if p.tok.kind != tName {
				return nil, p.errf("want a field name after '.', got %q", p.tok.text)
			}
			path = append(path, Step{Key: p.tok.text, Index: -1})
			p.next()
			continue
		}
		if p.is("[") {
			p.next()
			i, err := strconv.Atoi(p.tok.text)
			if p.tok.kind != tNum || err != nil || i < 0 || strings.ContainsAny(p.tok.text, "+-") {
				return nil, p.errf("want an index, got %q", p.tok.text)
			}
			p.next()
			if !p.is("]") {
				return nil, p.errf("want ], got %q", p.tok.text)
			}
			p.next()
			path = append(path, Step{Index: i})
			continue
		}
		break
	}
	n := cmpNode{path: path}
	if p.tok.kind != tOp {
		return n, nil
	}
	switch p.tok.text {
	case "==", "!=", "<", "<=", ">", ">=":
		n.op = p.tok.text
	default:
		return n, nil
	}
	p.next()
	switch p.tok.kind {
	case tNum:
		f, err := strconv.ParseFloat(p.tok.text, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, p.errf("bad number %q", p.tok.text)
		}
		n.lit = f
	case tStr:
		var s string
		if err := json.Unmarshal([]byte(p.tok.text), &s); err != nil {
			return nil, p.errf("bad string %s", p.tok.text)
		}
		n.lit = s
	case tName:
		switch p.tok.text {
		case "true":
			n.lit = true
		case "false":
			n.lit = false
		case "null":
			n.lit = nil
		default:
			return nil, p.errf("want a literal (number, \"string\", true, false, null), got %q", p.tok.text)
		}
	default:
		return nil, p.errf("want a literal after %s, got %q", n.op, p.tok.text)
	}
	p.next()
	return n, nil
}
