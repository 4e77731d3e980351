package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
)

// This file holds a small JSON toolkit: a member iterator over JSON that has
// already passed json.Valid (so the scanners never see malformed input), typed
// value readers that report the field path on a type mismatch, and an
// append-style encoder that writes members in a fixed order.

// fieldError is a decoding failure at a field path such as "messages.0.role".
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// fpath is a field path built lazily: a chain of nodes from the leaf to the
// root, rendered by String only when an error is reported, so the hot path
// builds no strings. The nil *fpath is the empty path. Nodes live on the
// stack of the functions that create them (join and joinIndex inline); no
// function may keep one after it returns.
type fpath struct {
	parent  *fpath
	key     string
	index   int
	isIndex bool
}

// String renders the path as the old eager join/joinIndex did: keys joined
// with "." (a key at the root stands alone), an index always preceded by ".".
func (p *fpath) String() string {
	if p == nil {
		return ""
	}
	parent := p.parent.String()
	if p.isIndex {
		return parent + "." + strconv.Itoa(p.index)
	}
	if parent == "" {
		return p.key
	}
	return parent + "." + p.key
}

func errAt(path *fpath, format string, args ...any) error {
	return &fieldError{path: path.String(), msg: fmt.Sprintf(format, args...)}
}

func join(path *fpath, key string) *fpath {
	return &fpath{parent: path, key: key}
}

func joinIndex(path *fpath, i int) *fpath {
	return &fpath{parent: path, index: i, isIndex: true}
}

// root is the path of a top-level member.
func root(key string) *fpath { return join(nil, key) }

// kindName names the JSON kind of a valid value for error messages.
func kindName(v []byte) string {
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

func isNull(v []byte) bool { return len(v) == 4 && v[0] == 'n' }

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

// skipString returns the index after the string whose opening quote is at i.
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at i (no leading space).
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return len(b)
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// trimValue strips surrounding white space from a valid JSON value.
func trimValue(v []byte) []byte {
	return bytes.TrimFunc(v, func(r rune) bool { return r < utf8.RuneSelf && isWS(byte(r)) })
}

// eachMember calls fn for every member of the object v (valid JSON, trimmed).
// It reports a type error at path when v is not an object.
func eachMember(path *fpath, v []byte, fn func(key string, val []byte) error) error {
	if len(v) == 0 || v[0] != '{' {
		return errAt(path, "expected an object, got %s", kindName(v))
	}
	i := 1
	for {
		i = skipWS(v, i)
		if i >= len(v) || v[i] == '}' {
			return nil
		}
		if v[i] == ',' {
			i = skipWS(v, i+1)
		}
		if i >= len(v) || v[i] != '"' {
			return errAt(path, "malformed object")
		}
		end := skipString(v, i)
		key, err := unquote(path, v[i:end])
		if err != nil {
			return err
		}
		i = skipWS(v, end)
		if i >= len(v) || v[i] != ':' {
			return errAt(path, "malformed object")
		}
		i = skipWS(v, i+1)
		vend := skipValue(v, i)
		if vend <= i {
			return errAt(path, "malformed object")
		}
		if err := fn(key, v[i:vend]); err != nil {
			return err
		}
		i = vend
	}
}

// eachElem calls fn for every element of the array v (valid JSON, trimmed).
func eachElem(path *fpath, v []byte, fn func(i int, val []byte) error) error {
	if len(v) == 0 || v[0] != '[' {
		return errAt(path, "expected an array, got %s", kindName(v))
	}
	i, n := 1, 0
	for {
		i = skipWS(v, i)
		if i >= len(v) || v[i] == ']' {
			return nil
		}
		if v[i] == ',' {
			i = skipWS(v, i+1)
		}
		end := skipValue(v, i)
		if end <= i {
			return errAt(path, "malformed array")
		}
		if err := fn(n, v[i:end]); err != nil {
			return err
		}
		n++
		i = end
	}
}

// unquote decodes a JSON string token.
func unquote(path *fpath, v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", errAt(path, "expected a string, got %s", kindName(v))
	}
	inner := v[1 : len(v)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return "", errAt(path, "invalid string: %v", err)
	}
	return s, nil
}

// str reads a string; null reads as "".
func str(path *fpath, v []byte) (string, error) {
	if isNull(v) {
		return "", nil
	}
	return unquote(path, v)
}

// boolean reads true or false; null reads as false.
func boolean(path *fpath, v []byte) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, errAt(path, "expected a boolean, got %s", kindName(v))
}

func number(path *fpath, v []byte) (float64, error) {
	if len(v) == 0 || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return 0, errAt(path, "expected a number, got %s", kindName(v))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, errAt(path, "number %s out of range", v)
	}
	return f, nil
}

// integer reads an integral JSON number (1.0 and 1e3 are accepted); null reads as 0.
func integer(path *fpath, v []byte) (int, error) {
	if isNull(v) {
		return 0, nil
	}
	if len(v) == 0 || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return 0, errAt(path, "expected an integer, got %s", kindName(v))
	}
	if n, err := strconv.ParseInt(string(v), 10, 0); err == nil {
		return int(n), nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, errAt(path, "expected an integer, got %s", v)
	}
	return int(f), nil
}

// ---- encoding ----

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD, as
// encoding/json does; HTML characters are not escaped.
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
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendFloat appends f formatted as encoding/json formats a float64.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return b, fmt.Errorf("unsupported number %v", f)
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
	return b, nil
}

// appendRaw appends a raw JSON value after checking it is valid.
func appendRaw(b []byte, what *fpath, v json.RawMessage) ([]byte, error) {
	if !json.Valid(v) {
		return b, fmt.Errorf("%s is not valid JSON", what)
	}
	return append(b, v...), nil
}

// appendKey appends `,"key":` (without the comma for the first member, which
// the caller marks by the preceding '{').
func appendKey(b []byte, key string) []byte {
	if n := len(b); n > 0 && b[n-1] != '{' && b[n-1] != '[' {
		b = append(b, ',')
	}
	b = appendString(b, key)
	return append(b, ':')
}

// appendExtra appends the members of x sorted by key, skipping keys in skip.
func appendExtra(b []byte, path *fpath, x llm.Extra) ([]byte, error) {
	if len(x) == 0 {
		return b, nil
	}
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for _, k := range keys {
		b = appendKey(b, k)
		if b, err = appendRaw(b, join(path, k), x[k]); err != nil {
			return b, err
		}
	}
	return b, nil
}

// setExtra records an unknown member in *x.
func setExtra(x *llm.Extra, key string, val []byte) {
	if *x == nil {
		*x = make(llm.Extra, 2)
	}
	(*x)[key] = json.RawMessage(val)
}

func appendInt(b []byte, n int) []byte { return strconv.AppendInt(b, int64(n), 10) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}
