package jsonx

import "encoding/json"

// The member and element walkers read JSON that has passed Valid, without
// decoding what the caller does not ask for: keys and values come back as
// raw slices of the input (a key with its quotes). On malformed input they
// stop early rather than panic, but what they return then is unspecified.

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

// MemberIter walks the members of an object; see Members.
type MemberIter struct {
	b []byte
	i int
}

// Members returns an iterator over the members of obj (valid JSON, white
// space around it allowed); ok is false when obj is not an object.
func Members(obj []byte) (it MemberIter, ok bool) {
	i := SkipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return MemberIter{}, false
	}
	return MemberIter{b: obj, i: SkipWS(obj, i+1)}, true
}

// Next returns the next member's raw key (quotes included) and raw value;
// ok is false after the last one.
func (it *MemberIter) Next() (key, val []byte, ok bool) {
	b, i := it.b, it.i
	if i >= len(b) || b[i] != '"' {
		return nil, nil, false
	}
	kEnd := StringEnd(b, i)
	j := SkipWS(b, kEnd)
	if j >= len(b) || b[j] != ':' {
		it.i = len(b)
		return nil, nil, false
	}
	j = SkipWS(b, j+1)
	vEnd := ValueEnd(b, j)
	if vEnd <= j {
		it.i = len(b)
		return nil, nil, false
	}
	it.i = nextItem(b, vEnd)
	return b[i:kEnd], b[j:vEnd], true
}

// ElementIter walks the elements of an array; see Elements.
type ElementIter struct {
	b []byte
	i int
}

// Elements returns an iterator over the elements of arr (valid JSON, white
// space around it allowed); ok is false when arr is not an array.
func Elements(arr []byte) (it ElementIter, ok bool) {
	i := SkipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return ElementIter{}, false
	}
	return ElementIter{b: arr, i: SkipWS(arr, i+1)}, true
}

// Next returns the next element's raw value; ok is false after the last.
func (it *ElementIter) Next() (val []byte, ok bool) {
	b, i := it.b, it.i
	if i >= len(b) || b[i] == ']' {
		return nil, false
	}
	vEnd := ValueEnd(b, i)
	if vEnd <= i {
		it.i = len(b)
		return nil, false
	}
	it.i = nextItem(b, vEnd)
	return b[i:vEnd], true
}

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
	it, ok := Members(obj)
	if !ok {
		return ErrNotObject
	}
	for k, v, ok := it.Next(); ok; k, v, ok = it.Next() {
		if err := fn(k, v); err != nil {
			return err
		}
	}
	return nil
}

// EachElement calls fn with the index and raw value of every element of
// the array arr (valid JSON), in order, and returns the first error fn
// returns; ErrNotArray when arr is not an array.
func EachElement(arr []byte, fn func(i int, val []byte) error) error {
	it, ok := Elements(arr)
	if !ok {
		return ErrNotArray
	}
	n := 0
	for v, ok := it.Next(); ok; v, ok = it.Next() {
		if err := fn(n, v); err != nil {
			return err
		}
		n++
	}
	return nil
}

// CountElements returns the number of elements of the array arr (valid
// JSON), 0 when it is not an array: slices are made at their final size.
func CountElements(arr []byte) int {
	it, ok := Elements(arr)
	if !ok {
		return 0
	}
	n := 0
	for _, ok := it.Next(); ok; _, ok = it.Next() {
		n++
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
