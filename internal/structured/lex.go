package structured

import (
	"encoding/json"
	"strconv"
	"strings"
)

// tokKind is the kind of a token of the tolerant lexer.
type tokKind uint8

const (
	tkOpenObj  tokKind = iota // {
	tkCloseObj                // }
	tkOpenArr                 // [
	tkCloseArr                // ]
	tkColon                   // :
	tkComma                   // ,
	tkString                  // "…" or '…', possibly unclosed
	tkNumber                  // -12.5e3 (any run of number characters)
	tkLiteral                 // true, false, null
	tkBare                    // an unquoted word: a bare key or a cut literal
	tkBad                     // any other byte
)

// token is one lexeme of text[start:end].
type token struct {
	kind       tokKind
	start, end int
	quote      byte // '"' or '\'' for strings
	closed     bool // strings: the closing quote is present
	cutEscape  bool // unclosed strings: the text ends inside an escape sequence
}

// lex splits text into tokens. It is tolerant: it accepts single-quoted
// strings and bare words so that the repair steps can see the structure of
// near-JSON, and it never fails. Whitespace is skipped; positions are byte
// offsets into text.
func lex(text string) []token {
	toks := make([]token, 0, len(text)/4+1)
	for i := 0; i < len(text); {
		c := text[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			i++
			continue
		case '{', '}', '[', ']', ':', ',':
			toks = append(toks, token{kind: punct(c), start: i, end: i + 1})
			i++
			continue
		case '"', '\'':
			t := lexString(text, i)
			toks = append(toks, t)
			i = t.end
			continue
		}
		switch {
		case c == '-' || c == '+' || isDigit(c):
			j := i + 1
			for j < len(text) && (isDigit(text[j]) || strings.IndexByte(".eE+-", text[j]) >= 0) {
				j++
			}
			toks = append(toks, token{kind: tkNumber, start: i, end: j})
			i = j
		case isWordStart(c):
			j := i + 1
			for j < len(text) && isWordByte(text[j]) {
				j++
			}
			k := tkBare
			switch text[i:j] {
			case "true", "false", "null":
				k = tkLiteral
			}
			toks = append(toks, token{kind: k, start: i, end: j})
			i = j
		default:
			toks = append(toks, token{kind: tkBad, start: i, end: i + 1})
			i++
		}
	}
	return toks
}

func punct(c byte) tokKind {
	switch c {
	case '{':
		return tkOpenObj
	case '}':
		return tkCloseObj
	case '[':
		return tkOpenArr
	case ']':
		return tkCloseArr
	case ':':
		return tkColon
	}
	return tkComma
}

// lexString scans the string starting at text[i] (a quote character).
func lexString(text string, i int) token {
	q := text[i]
	t := token{kind: tkString, start: i, quote: q}
	for j := i + 1; j < len(text); j++ {
		switch text[j] {
		case '\\':
			if j+1 >= len(text) {
				t.end, t.cutEscape = len(text), true
				return t
			}
			if text[j+1] == 'u' && j+6 > len(text) {
				t.end, t.cutEscape = len(text), true
				return t
			}
			j++
		case q:
			t.end, t.closed = j+1, true
			return t
		}
	}
	t.end = len(text)
	return t
}

func isDigit(c byte) bool     { return c >= '0' && c <= '9' }
func isWordStart(c byte) bool { return c == '_' || c == '$' || (c|0x20 >= 'a' && c|0x20 <= 'z') }
func isWordByte(c byte) bool  { return isWordStart(c) || isDigit(c) || c == '-' }

// span is a byte range of a value in a document.
type span struct{ start, end int }

// indexValues maps the JSON pointer of every value in a strictly valid JSON
// document to its byte range. It is used after the syntactic steps, when the
// text is JSON, to locate the values the validator reports.
func indexValues(text string, toks []token) map[string]span {
	idx := make(map[string]span)
	type frame struct {
		obj   bool
		ptr   string
		start int
		n     int
		key   string
	}
	var stack []frame
	expectKey := false
	childPtr := func() string {
		if len(stack) == 0 {
			return ""
		}
		f := &stack[len(stack)-1]
		if f.obj {
			return f.ptr + "/" + escapeToken(f.key)
		}
		return f.ptr + "/" + strconv.Itoa(f.n)
	}
	for _, t := range toks {
		switch t.kind {
		case tkOpenObj, tkOpenArr:
			stack = append(stack, frame{obj: t.kind == tkOpenObj, ptr: childPtr(), start: t.start})
			expectKey = t.kind == tkOpenObj
		case tkCloseObj, tkCloseArr:
			if len(stack) == 0 {
				return idx
			}
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			idx[f.ptr] = span{f.start, t.end}
			expectKey = false
			if len(stack) > 0 {
				stack[len(stack)-1].n++
			}
		case tkColon:
		case tkComma:
			if len(stack) > 0 && stack[len(stack)-1].obj {
				expectKey = true
			}
		default:
			if expectKey && len(stack) > 0 {
				var k string
				if json.Unmarshal([]byte(text[t.start:t.end]), &k) != nil {
					return idx
				}
				stack[len(stack)-1].key = k
				expectKey = false
				continue
			}
			idx[childPtr()] = span{t.start, t.end}
			if len(stack) > 0 {
				stack[len(stack)-1].n++
			}
		}
	}
	return idx
}
