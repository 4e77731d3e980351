package anthropic

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// brokenText returns the Messages API's message for a body (valid JSON)
// holding invalid UTF-8 or an unpaired UTF-16 surrogate escape, or "" when
// it holds neither. The API rejects such a body with 400 "The request body
// is not valid JSON: no low surrogate in string: line 1 column N (char N-1)"
// (its parser's words; anthropics/claude-code issues 6508, 8272, 9586 quote
// them): passing the text on would either change it (encoding/json turns
// each bad byte or escape into U+FFFD) or forward it unchanged in an unknown
// member, to be rejected upstream after routing and retries.
//
// The check costs one utf8.Valid pass and a substring search for surrogate
// escapes (see surrogateProblem); positions are computed only on failure.
func brokenText(body []byte) string {
	utfAt := -1
	if !utf8.Valid(body) {
		for i := 0; i < len(body); {
			r, size := utf8.DecodeRune(body[i:])
			if r == utf8.RuneError && size == 1 {
				utfAt = i
				break
			}
			i += size
		}
	}
	escAt, what := surrogateProblem(body)
	switch {
	case utfAt < 0 && escAt < 0:
		return ""
	case utfAt >= 0 && (escAt < 0 || utfAt < escAt):
		escAt, what = utfAt, "invalid UTF-8 encoding in string"
	}
	return "The request body is not valid JSON: " + what + ": " + position(body, escAt)
}

// surrogateProblem finds the first unpaired surrogate escape in body (valid
// JSON) and returns its offset with the Messages API parser's words for it,
// or -1. A high surrogate needs a low one right after it, a low one a high
// one right before it. It looks only at `\ud` and `\uD` (every surrogate
// escape starts so), found with bytes.Index, which turns to a vectorised
// search when candidates are rare; Korean text escaped as \ud55c… is the one
// common source of candidates that are not surrogates.
func surrogateProblem(body []byte) (int, string) {
	lower, upper := -2, -2 // next `\ud` and `\uD` at or after i; -1 when none is left
	for i := 0; ; {
		if lower != -1 && lower < i {
			lower = indexFrom(body, i, `\ud`)
		}
		if upper != -1 && upper < i {
			upper = indexFrom(body, i, `\uD`)
		}
		switch {
		case lower < 0 && upper < 0:
			return -1, ""
		case lower < 0 || upper >= 0 && upper < lower:
			i = upper
		default:
			i = lower
		}
		if !escapeStart(body, i) { // the second half of `\\`
			i++
			continue
		}
		switch r := hex4(body[i:]); {
		case r < 0xD800:
			i += 6
		case r >= 0xDC00:
			return i, "invalid high surrogate in string"
		case i+6 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u':
			return i, "no low surrogate in string"
		default:
			if lo := hex4(body[i+6:]); lo < 0xDC00 || lo > 0xDFFF {
				return i, "invalid low surrogate in string"
			}
			i += 12
		}
	}
}

// indexFrom is the index of sep in body at or after i, or -1.
func indexFrom(body []byte, i int, sep string) int {
	if j := bytes.Index(body[i:], []byte(sep)); j >= 0 {
		return i + j
	}
	return -1
}

// escapeStart reports whether the backslash at body[i] (inside a string of
// valid JSON) starts an escape: a run of backslashes pairs up from its left
// end, so it does when an even number of backslashes come right before it.
func escapeStart(body []byte, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && body[j] == '\\'; j-- {
		n++
	}
	return n%2 == 0
}

// hex4 reads the four hex digits of the \uXXXX escape at the start of s
// (valid JSON, so they are there).
func hex4(s []byte) rune {
	var r rune
	for _, c := range s[2:6] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// position renders offset off of body as the API's parser does: "line L
// column C (char P)", lines and columns from 1, characters counted from 0.
func position(body []byte, off int) string {
	before := body[:off]
	line := 1 + bytes.Count(before, []byte{'\n'})
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col := 1 + utf8.RuneCount(before[lineStart:])
	return "line " + strconv.Itoa(line) + " column " + strconv.Itoa(col) + " (char " + strconv.Itoa(utf8.RuneCount(before)) + ")"
}
