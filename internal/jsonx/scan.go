package jsonx

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// SkipWS returns the index of the first non-whitespace byte at or after i.
func SkipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// StringEnd returns the index just past the JSON string whose opening
// quote is at b[i] (len(b) when it is not closed).
func StringEnd(b []byte, i int) int {
	// Jump from quote to quote (IndexByte is vectorised: prompts are long
	// strings, and a byte-at-a-time loop over them was most of a request's
	// parse); a quote preceded by an odd run of backslashes is escaped.
	// Short strings (keys, ids, enum values) end within a few bytes: the
	// first two words are searched for a quote or backslash eight bytes at
	// a time, then a plain loop, before IndexByte's call would pay off.
	j := i + 1
	for w := 0; w < 2 && j+8 <= len(b); w++ {
		m := quoteOrBackslash8(binary.LittleEndian.Uint64(b[j:]))
		if m == 0 {
			j += 8
			continue
		}
		if j += bits.TrailingZeros64(m) / 8; b[j] == '"' {
			return j + 1
		}
		break // a backslash: the loops below skip what it escapes
	}
	for end := min(j+16, len(b)); j < end; j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	if j > len(b) {
		return len(b)
	}
	for j < len(b) {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		n := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
	return len(b)
}

// ValueEnd returns the index just past the JSON value starting at b[i]
// (no leading space). b is expected to be valid JSON.
func ValueEnd(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return StringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = StringEnd(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	for j := i; j < len(b); j++ {
		switch b[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(b)
}

// KindName names the JSON kind of a valid value for error messages ("a
// string", "an object", ...; "nothing" for no bytes).
func KindName(v []byte) string {
	if len(v) == 0 {
		return "nothing"
	}
	switch v[0] {
	case '"':
		return "a string"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a number"
}

// IsNull reports whether a valid value is null.
func IsNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }
