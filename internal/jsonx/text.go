package jsonx

import (
	"bytes"
	"strconv"
	"unicode/utf8"
)

// BadText finds the first byte of invalid UTF-8 or unpaired UTF-16
// surrogate escape in body (valid JSON) and returns its offset with the
// Messages API parser's words for it ("invalid UTF-8 encoding in string",
// "no low surrogate in string", "invalid high surrogate in string",
// "invalid low surrogate in string"); off is -1 when body holds neither.
// Both codecs reject such a body, each in its own words around these (see
// brokenText in wire/anthropic and wire/openai): encoding/json would turn
// each bad byte or escape into U+FFFD, changing the text.
//
// The check costs one utf8.Valid pass and a substring search for surrogate
// escapes (see surrogateProblem); offsets are computed only on failure.
func BadText(body []byte) (off int, what string) {
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
		return -1, ""
	case utfAt >= 0 && (escAt < 0 || utfAt < escAt):
		return utfAt, "invalid UTF-8 encoding in string"
	}
	return escAt, what
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
		case i+7 >= len(body) || body[i+6] != '\\' || body[i+7] != 'u':
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

// Position renders offset off of body as the Messages API's parser does:
// "line L column C (char P)", lines and columns from 1, characters counted
// from 0.
func Position(body []byte, off int) string {
	before := body[:off]
	line := 1 + bytes.Count(before, []byte{'\n'})
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col := 1 + utf8.RuneCount(before[lineStart:])
	return "line " + strconv.Itoa(line) + " column " + strconv.Itoa(col) + " (char " + strconv.Itoa(utf8.RuneCount(before)) + ")"
}
