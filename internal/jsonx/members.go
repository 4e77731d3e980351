package jsonx

import "encoding/json"

// The member and element walkers read JSON that has passed Valid, without
// decoding what the caller does not ask for: keys and values come back as
// raw slices of the input (a key with its quotes). On malformed input they
// stop early rather than panic, but what they return then is unspecified.
// They take a callback rather than returning an iterator: a call to a Next
// method per member cost the codecs' parsers 1% more instructions.

// ErrNotObject, ErrNotArray and ErrNotString are EachMember's,
// EachElement's and Unquote's errors for a value of another kind. The
// codecs check the kind first where it matters, to name the field in their
// own words.
var (
	ErrNotObject error = jsonError("expected a JSON object")
	ErrNotArray  error = jsonError("expected a JSON array")
	ErrNotString error = jsonError("expected a JSON string")
)

type jsonError string

func (e jsonError) Error() string { return string(e) }

// nextItem returns the index of the item after the value ending at i: past
// the comma and white space, or len(b) at the container's end.
func nextItem(b []byte, i int) int {
	i = SkipWS(b, i)
	if i >= len(b) || b[i] != ',' {
		return len(b)
	}
	return SkipWS(b, i+1)
}

// EachMember calls fn with the raw key (quotes included) and raw value of
// every member of the object obj (valid JSON), in order, and returns the
// first error fn returns; ErrNotObject when obj is not an object.
func EachMember(obj []byte, fn func(key, val []byte) error) error {
	i := SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return ErrNotObject
	}
	for i = SkipWS(obj, i+1); i < len(obj) && obj[i] == '"'; {
		kEnd := StringEnd(obj, i)
		j := SkipWS(obj, kEnd)
		if j >= len(obj) || obj[j] != ':' {
			return nil
		}
		j = SkipWS(obj, j+1)
		var vEnd int
		if j < len(obj) && obj[j] == '"' { // most values: one call, not two
			vEnd = StringEnd(obj, j)
		} else {
			vEnd = ValueEnd(obj, j)
		}
		if vEnd <= j {
			return nil
		}
		if err := fn(obj[i:kEnd], obj[j:vEnd]); err != nil {
			return err
		}
		i = nextItem(obj, vEnd)
	}
	return nil
}

// EachElement calls fn with the index and raw value of every element of
// the array arr (valid JSON), in order, and returns the first error fn
// returns; ErrNotArray when arr is not an array.
func EachElement(arr []byte, fn func(i int, val []byte) error) error {
	i := SkipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return ErrNotArray
	}
	i = SkipWS(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		var vEnd int
		if arr[i] == '"' {
			vEnd = StringEnd(arr, i)
		} else {
			vEnd = ValueEnd(arr, i)
		}
		if vEnd <= i {
			return nil
		}
		if err := fn(n, arr[i:vEnd]); err != nil {
			return err
		}
		i = nextItem(arr, vEnd)
	}
	return nil
}

// CountElements returns the number of elements of the array arr (valid
// JSON), 0 when it is not an array: slices are made at their final size.
func CountElements(arr []byte) int {
	i := SkipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return 0
	}
	i = SkipWS(arr, i+1)
	n := 0
	for i < len(arr) && arr[i] != ']' {
		vEnd := ValueEnd(arr, i)
		if vEnd <= i {
			break
		}
		n++
		i = nextItem(arr, vEnd)
	}
	return n
}

// TrimSpace strips JSON white space from both ends of v.
func TrimSpace(v []byte) []byte {
	i, j := SkipWS(v, 0), len(v)
	for j > i && isSpace(v[j-1]) {
		j--
	}
	return v[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SetMember records the member key: val in *m (an llm.Extra: the members a
// codec does not model, kept verbatim), making the map on first use.
func SetMember[M ~map[string]json.RawMessage](m *M, key string, val []byte) {
	if *m == nil {
		*m = make(M, 2)
	}
	(*m)[key] = json.RawMessage(val)
}

// ReplaceMembers returns the JSON object obj (valid JSON) with the value
// of each member whose key vals names replaced by vals[key] (raw JSON),
// every other member as it was, in order; a key of vals obj lacks is not
// added. Keys compare unescaped.
func ReplaceMembers(obj []byte, vals map[string][]byte) []byte {
	out := make([]byte, 0, len(obj))
	out = append(out, '{')
	EachMember(obj, func(k, v []byte) error {
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, k...)
		out = append(out, ':')
		if key, err := Unquote(k); err == nil {
			if nv, ok := vals[key]; ok {
				v = nv
			}
		}
		out = append(out, v...)
		return nil
	})
	return append(out, '}')
}
