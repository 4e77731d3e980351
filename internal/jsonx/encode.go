package jsonx

import (
	"encoding/json"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf8"
)

// The encoders append to a byte slice, in the style of strconv.AppendInt:
// the codecs write each member in a fixed order into one buffer sized ahead.

const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped, U+2028/U+2029 too, and invalid UTF-8 becomes
// U+FFFD, as encoding/json does (HTML characters are left alone); one
// difference: backspace and form feed are written \u0008 and \u000c where
// encoding/json writes \b and \f (the same string to any JSON reader).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	b = AppendStringBody(b, s)
	return append(b, '"')
}

// load8 returns the eight bytes of s from i as a little-endian word (one
// load: the compiler combines the shifts).
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// AppendStringBody appends s escaped as AppendString does, without quotes.
func AppendStringBody(b []byte, s string) []byte {
	start := 0
	for i := 0; i < len(s); {
		// Eight plain ASCII bytes at a time; in a word that is not all
		// plain ASCII, straight to its first other byte (special8's lowest
		// set bit, or the lowest high bit).
		if i+8 <= len(s) {
			x := load8(s, i)
			m := special8(x) | x&highs
			if m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) / 8
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are escaped like encoding/json does, for JSONP safety.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(b, s[start:]...)
}

// AppendKey appends `"key":` (key escaped as AppendString escapes it),
// preceded by a comma unless b ends with the '{' or '[' that opens the
// container, so that a writer of members needs no "first" flag.
func AppendKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' && b[n-1] != '[' {
		b = append(b, ',')
	}
	b = AppendString(b, key)
	return append(b, ':')
}

// AppendPlainKey is AppendKey for a key that needs no escaping (a constant
// of the codec's: ASCII without quote, backslash or control character),
// which it copies as it is: the encoders write most member names this way,
// and escaping each one measured about 9 ns a key.
func AppendPlainKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' && b[n-1] != '[' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// AppendInt appends n in decimal.
func AppendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// AppendBool appends true or false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// AppendFloat appends f formatted as encoding/json formats a float64: the
// shortest form that reads back the same, with an exponent only below 1e-6
// or from 1e21 on, and a two-digit negative exponent as e-7, not e-07. ok is
// false (and b unchanged) for NaN and the infinities, which JSON cannot
// hold; each codec words that error itself.
func AppendFloat(b []byte, f float64) (_ []byte, ok bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(b)
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(b) - start
		if n >= 4 && b[len(b)-4] == 'e' && b[len(b)-3] == '-' && b[len(b)-2] == '0' {
			b[len(b)-2] = b[len(b)-1]
			b = b[:len(b)-1]
		}
	}
	return b, true
}

// SortedKeys appends to keys the keys of m for which skip (nil: none)
// reports false, and returns keys sorted: the order the codecs write the
// members of an llm.Extra in, so that encoding is deterministic. Pass a
// stack array's slice (var stack [16]string; SortedKeys(stack[:0], ...))
// to keep the usual handful of keys off the heap.
func SortedKeys(keys []string, m map[string]json.RawMessage, skip func(string) bool) []string {
	for k := range m {
		if skip == nil || !skip(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
