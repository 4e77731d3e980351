// Package jsonx holds the JSON helpers both wire codecs share, so that each
// exists once: a fast validity check that never accepts what encoding/json
// rejects (Valid), scanners and member/element walkers over valid JSON
// (SkipWS, StringEnd, ValueEnd, EachMember, EachElement, ...), string
// decoding with encoding/json's rules (Unquote, DecodeString), append-style
// encoders (AppendString, AppendKey, AppendFloat, ...), and the check for
// invalid UTF-8 and unpaired surrogate escapes (BadText). What is a
// format's own (error wording, field paths, known-key tables) stays in the
// codecs. Functions are pure and safe for concurrent use. The
// package imports only the standard library.
package jsonx

import (
	"encoding/binary"
	"encoding/json"
	"math/bits"
)

// Valid reports whether b is exactly one JSON value with optional
// surrounding white space: json.Valid, with a fast path. fastValid accepts
// only input json.Valid accepts; whatever it does not accept (invalid input,
// nesting deeper than it tracks) goes to json.Valid, which has the last word.
func Valid(b []byte) bool {
	return fastValid(b) || json.Valid(b)
}

// fastValid reports whether b is valid JSON nested at most 64 deep. It never
// returns true for input json.Valid rejects (valid_test.go checks it against
// json.Valid); a false result only means "not proven valid here".
func fastValid(b []byte) bool {
	var (
		stack uint64 // bit i set: container at depth i+1 is an object
		depth int
		i     = wsEnd(b, 0)
	)
value:
	if i >= len(b) {
		return false
	}
	switch c := b[i]; c {
	case '{', '[':
		if depth == 64 {
			return false
		}
		stack <<= 1
		if c == '{' {
			stack |= 1
		}
		depth++
		i = wsEnd(b, i+1)
		if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
			i++
			stack >>= 1
			depth--
			break
		}
		if c == '{' {
			if i = memberStart(b, i); i < 0 {
				return false
			}
		}
		goto value
	case '"':
		if i = validStringEnd(b, i); i < 0 {
			return false
		}
	case 't':
		if len(b)-i < 4 || string(b[i:i+4]) != "true" {
			return false
		}
		i += 4
	case 'f':
		if len(b)-i < 5 || string(b[i:i+5]) != "false" {
			return false
		}
		i += 5
	case 'n':
		if len(b)-i < 4 || string(b[i:i+4]) != "null" {
			return false
		}
		i += 4
	default:
		if i = numberEnd(b, i); i < 0 {
			return false
		}
	}
	// After a value: close containers, or move on to the next member/element.
	for {
		i = wsEnd(b, i)
		if depth == 0 {
			return i == len(b)
		}
		if i >= len(b) {
			return false
		}
		obj := stack&1 == 1
		switch {
		case b[i] == ',':
			i = wsEnd(b, i+1)
			if obj {
				if i = memberStart(b, i); i < 0 {
					return false
				}
			}
			goto value
		case obj && b[i] == '}', !obj && b[i] == ']':
			i++
			stack >>= 1
			depth--
		default:
			return false
		}
	}
}

// wsEnd is SkipWS with one loop condition in place of the switch: fewer
// instructions in this scanner (1% of a parse), but as SkipWS it would make
// SkipWS's callers too costly to inline.
func wsEnd(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// memberStart checks `"key" :` at b[i] and returns the index of the value
// after it (past white space), or -1.
func memberStart(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	if i = validStringEnd(b, i); i < 0 {
		return -1
	}
	i = wsEnd(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return wsEnd(b, i+1)
}

// validStringEnd returns the index after the string whose quote is at b[i], or
// -1 when the string is malformed (control character, bad escape, no end).
// Bytes from 0x80 up are not checked, as json.Valid does not check them.
func validStringEnd(b []byte, i int) int {
	i++
	for i < len(b) {
		// Eight bytes at a time: a prompt is mostly one long run of plain
		// bytes (no quote, backslash or control character); in a word
		// that is not all plain, step to its first special byte at once
		// (a short string, a key, ends within one word: trying the word
		// again at every byte up to its quote cost most of this scan).
		if i+8 <= len(b) {
			m := special8(binary.LittleEndian.Uint64(b[i:]))
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := b[i]
		switch {
		case c == '"':
			return i + 1
		case c < 0x20:
			return -1
		case c == '\\':
			i++
			if i >= len(b) {
				return -1
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(b)-i < 5 || !isHex(b[i+1]) || !isHex(b[i+2]) || !isHex(b[i+3]) || !isHex(b[i+4]) {
					return -1
				}
				i += 4
			default:
				return -1
			}
		}
		i++
	}
	return -1
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// special8 returns the high bits of the bytes of x (little-endian: b[i]
// in the lowest byte) that may be a quote, a backslash or below 0x20: 0
// when none is (the classic has-zero-byte and has-byte-less-than tests,
// exact as booleans), and otherwise its lowest set bit is in the first such
// byte exactly (a borrow can mark a byte above a special one, never one
// below it).
func special8(x uint64) uint64 {
	return quoteOrBackslash8(x) | (x-ones*0x20)&^x&highs
}

// quoteOrBackslash8 is special8 for quotes and backslashes only (StringEnd's
// test: it does not check control characters).
func quoteOrBackslash8(x uint64) uint64 {
	q := x ^ (ones * '"')
	s := x ^ (ones * '\\')
	return ((q-ones)&^q | (s-ones)&^s) & highs
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// numberEnd returns the index after the number at b[i], or -1.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i >= len(b):
		return -1
	case b[i] == '0':
		i++
	case b[i] >= '1' && b[i] <= '9':
		i = digitsEnd(b, i+1)
	default:
		return -1
	}
	if i < len(b) && b[i] == '.' {
		j := digitsEnd(b, i+1)
		if j == i+1 {
			return -1
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digitsEnd(b, i)
		if j == i {
			return -1
		}
		i = j
	}
	return i
}

func digitsEnd(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}
