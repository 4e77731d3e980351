package jsonx

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Unquote decodes the JSON string token tok (quotes included) as
// encoding/json does; ErrNotString, without a look inside, when tok is not
// quoted (readers that take "anything but a string" as absent call it on
// every kind of value). A string without escapes and with valid UTF-8 is
// copied as it is (Plain); the rest go through DecodeString, and what that
// rejects through json.Unmarshal, whose error is returned. Callers that
// must not allocate for their common keys look those up first (the codecs'
// knownKey tables).
func Unquote(tok []byte) (string, error) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", ErrNotString
	}
	inner := tok[1 : len(tok)-1]
	if Plain(inner) {
		return string(inner), nil
	}
	if s, ok := DecodeString(inner); ok {
		return s, nil
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", err
	}
	return s, nil
}

// Plain reports whether the inside of a string token reads as itself: no
// escape and valid UTF-8. A key is short: one loop over it costs half what
// the two calls do; a text is long: bytes.IndexByte and utf8.Valid, which
// run eight or more bytes at a time, take a tenth of the loop's time on a
// prompt (BenchmarkPlain).
func Plain(inner []byte) bool {
	if len(inner) < 32 {
		ascii := true
		for _, c := range inner {
			if c == '\\' {
				return false
			}
			if c >= utf8.RuneSelf {
				ascii = false
			}
		}
		return ascii || utf8.Valid(inner)
	}
	return bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
}

// DecodeString decodes the inside of a JSON string token (without its
// quotes) exactly as encoding/json decodes a string: escapes resolved, an
// unpaired surrogate escape and every byte of invalid UTF-8 replaced by
// U+FFFD. It allocates once (the result) where json.Unmarshal allocates
// three times. ok is false for what json.Unmarshal would reject (a control
// character, an unescaped quote, a bad escape); callers then fall back to
// json.Unmarshal for its error.
func DecodeString(s []byte) (string, bool) {
	var b strings.Builder
	b.Grow(len(s))
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			r++
			if r >= len(s) {
				return "", false
			}
			switch s[r] {
			case '"', '\\', '/':
				b.WriteByte(s[r])
			case 'b':
				b.WriteByte('\b')
			case 'f':
				b.WriteByte('\f')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'u':
				rr := hex4(s[r-1:])
				if rr < 0 {
					return "", false
				}
				r += 5
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, hex4(s[r:])); dec != utf8.RuneError {
						r += 6
						b.WriteRune(dec)
						continue
					}
					rr = utf8.RuneError
				}
				b.WriteRune(rr)
				continue
			default:
				return "", false
			}
			r++
		case c == '"', c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			b.WriteByte(c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b.WriteRune(rr) // RuneError for a byte of invalid UTF-8
		}
	}
	return b.String(), true
}

// hex4 reads a `\uXXXX` escape at the start of s; -1 when there is none.
func hex4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
