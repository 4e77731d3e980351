package openai

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
)

// This file holds the small JSON toolkit the codec is built on: a walker over
// already-validated JSON (members of an object, elements of an array, without
// decoding what is not needed) and append-based encoders. Inputs are checked
// with json.Valid once, so the walker can rely on well-formed input; it still
// bounds-checks every index so that no input can make it panic.

// skipWS returns the index of the first non-whitespace byte at or after i.
func skipWS(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// stringEnd returns the index just past the JSON string starting at d[i].
func stringEnd(d []byte, i int) int {
	for j := i + 1; j < len(d); j++ {
		switch d[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(d)
}

// valueEnd returns the index just past the JSON value starting at d[i].
func valueEnd(d []byte, i int) int {
	if i >= len(d) {
		return len(d)
	}
	switch d[i] {
	case '"':
		return stringEnd(d, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(d); j++ {
			switch d[j] {
			case '"':
				j = stringEnd(d, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(d)
	}
	for j := i; j < len(d); j++ {
		switch d[j] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return j
		}
	}
	return len(d)
}

// eachMember calls fn with the raw (still quoted) key and the raw value of
// every member of the JSON object obj, in order. obj must be valid JSON.
func eachMember(obj []byte, fn func(key, val []byte) error) error {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipWS(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd := stringEnd(obj, i)
		key := obj[i:kEnd]
		i = skipWS(obj, kEnd)
		i = skipWS(obj, i+1) // ':'
		vEnd := valueEnd(obj, i)
		if vEnd <= i {
			return errNotObject
		}
		if err := fn(key, obj[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			break
		}
		i = skipWS(obj, i+1)
	}
	return nil
}

// eachElement calls fn with the index and raw value of every element of the
// JSON array arr. arr must be valid JSON.
func eachElement(arr []byte, fn func(i int, val []byte) error) error {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errNotArray
	}
	i = skipWS(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		vEnd := valueEnd(arr, i)
		if vEnd <= i {
			return errNotArray
		}
		if err := fn(n, arr[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(arr, vEnd)
		if i >= len(arr) || arr[i] != ',' {
			break
		}
		i = skipWS(arr, i+1)
	}
	return nil
}

type jsonError string

func (e jsonError) Error() string { return string(e) }

const (
	errNotObject jsonError = "expected a JSON object"
	errNotArray  jsonError = "expected a JSON array"
)

// kind names the JSON type of a raw value for error messages.
func kind(v []byte) string {
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

func isNull(v []byte) bool { return len(v) == 4 && string(v) == "null" }

// unquote decodes a raw JSON string. Strings without escapes and with valid
// UTF-8 are sliced directly; the rest go through encoding/json, so that
// invalid UTF-8 becomes U+FFFD exactly as encoding/json does.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if !hasEscapeOrInvalid(inner) {
		return string(inner), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func hasEscapeOrInvalid(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c == '\\' {
			return true
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return !ascii && !utf8.Valid(b)
}

// keyName decodes a raw object key.
func keyName(raw []byte) string {
	s, _ := unquote(raw)
	return s
}

// bareKey returns the key's bytes when they need no decoding, else the
// decoded key as bytes; callers switch on string(bareKey(k)).
func bareKey(raw []byte) []byte {
	if len(raw) >= 2 {
		inner := raw[1 : len(raw)-1]
		if !hasEscapeOrInvalid(inner) {
			return inner
		}
	}
	return []byte(keyName(raw))
}

// setExtra stores a member verbatim in *e, creating the map on first use.
func setExtra(e *llm.Extra, key []byte, val []byte) {
	if *e == nil {
		*e = make(llm.Extra, 4)
	}
	(*e)[keyName(key)] = json.RawMessage(val)
}

// --- encoding ---

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Control characters, quotes and
// backslashes are escaped, U+2028/U+2029 too, and invalid UTF-8 becomes
// U+FFFD, as encoding/json does (HTML characters are left alone).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
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
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendKey appends `"key":` (key must need no escaping) preceded by a comma
// unless the previous byte opens an object.
func appendKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

func appendInt(b []byte, n int64) []byte { return strconv.AppendInt(b, n, 10) }

// appendFloat formats f as encoding/json does; NaN and infinities are an error.
func appendFloat(b []byte, f float64) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, false
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, true
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// appendRaw appends a verbatim JSON value, or null when it is empty.
func appendRaw(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// appendExtra appends the members of e sorted by key, skipping keys for which
// known reports true (members the encoder already wrote).
func appendExtra(b []byte, e llm.Extra, known func(string) bool) []byte {
	if len(e) == 0 {
		return b
	}
	var stack [16]string
	keys := stack[:0]
	for k := range e {
		if known == nil || !known(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if n := len(b); n > 0 && b[n-1] != '{' {
			b = append(b, ',')
		}
		b = appendString(b, k)
		b = append(b, ':')
		b = appendRaw(b, e[k])
	}
	return b
}

// appendObjectMembers appends the members of the raw JSON object obj (the
// partial objects this codec keeps for nested unknown members) into the
// object being written in b.
func appendObjectMembers(b []byte, obj json.RawMessage) []byte {
	_ = eachMember(obj, func(k, v []byte) error {
		if n := len(b); n > 0 && b[n-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
		return nil
	})
	return b
}
