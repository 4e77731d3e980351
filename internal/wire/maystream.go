package wire

import "github.com/keelmesh/keel/internal/jsonx"

// MayStream reports whether a request body might ask for a stream: a
// top-level "stream" member whose value is not false or null. Anything it
// cannot read counts as a stream (the caller then takes the streaming path,
// which serves every answer); a body that is not an object does not.
func MayStream(b []byte) bool {
	i := jsonx.SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i++
	for {
		i = jsonx.SkipWS(b, i)
		if i >= len(b) || b[i] == '}' {
			return false
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return true
		}
		end := jsonx.StringEnd(b, i)
		key := b[i+1 : max(end-1, i+1)]
		i = jsonx.SkipWS(b, end)
		if i >= len(b) || b[i] != ':' {
			return true
		}
		i = jsonx.SkipWS(b, i+1)
		vend := jsonx.ValueEnd(b, i)
		if string(key) == "stream" {
			if v := string(b[i:vend]); v != "false" && v != "null" {
				return true
			}
		}
		if vend <= i {
			return true
		}
		i = vend
	}
}
