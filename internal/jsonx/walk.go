package jsonx

// WalkMembers and WalkElements consume a nested value once: EachMember and
// EachElement must find the end of each object or array member (ValueEnd,
// a scan of all of it) before their callback walks it again, so a value n
// levels deep was scanned n+1 times. Here the callback gets an object or
// array value open-ended, as the rest of the input from its first byte, and
// returns its length: what it consumed (a nested WalkMembers' or
// WalkElements' result), or Len(val) to take it whole. Strings, numbers and
// literals still come exactly (and their length is len(val)).

// Len returns the length of the value val starts with: len(val) for a
// string, number or literal as the walkers pass them, the scanned length of
// an open-ended object or array.
func Len(val []byte) int {
	if len(val) > 0 && (val[0] == '{' || val[0] == '[') {
		return ValueEnd(val, 0)
	}
	return len(val)
}

// Bound returns the value val starts with, exactly: val[:Len(val)].
func Bound(val []byte) []byte { return val[:Len(val)] }

// walkValue returns the value at b[j] for a walker's callback: exact for a
// string, number or literal, open-ended for an object or array.
func walkValue(b []byte, j int) []byte {
	switch b[j] {
	case '{', '[':
		return b[j:]
	case '"':
		return b[j:StringEnd(b, j)]
	}
	return b[j:ValueEnd(b, j)]
}

// afterItem returns, for the value ending at i inside a container closed by
// end, the index of the next item (more true) or the index past the closing
// byte (more false); len(b) when neither follows (malformed input).
func afterItem(b []byte, i int, end byte) (next int, more bool) {
	i = SkipWS(b, i)
	switch {
	case i >= len(b):
		return len(b), false
	case b[i] == ',':
		return SkipWS(b, i+1), true
	case b[i] == end:
		return i + 1, false
	}
	return len(b), false
}

// WalkMembers calls fn with the raw key (quotes included) and the value of
// every member of the object b starts with (valid JSON up to the object's
// end; b may run on past it), in order: an object or array value
// open-ended, the rest exactly (see Len). fn returns the value's length.
// WalkMembers returns the object's length in b and the first error fn
// returns; ErrNotObject when b does not start with an object. On malformed
// input it stops early rather than panic, with an unspecified length.
func WalkMembers(b []byte, fn func(key, val []byte) (int, error)) (int, error) {
	i := SkipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return 0, ErrNotObject
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, nil
	}
	for i < len(b) && b[i] == '"' {
		kEnd := StringEnd(b, i)
		j := SkipWS(b, kEnd)
		if j >= len(b) || b[j] != ':' {
			return len(b), nil
		}
		if j = SkipWS(b, j+1); j >= len(b) {
			return len(b), nil
		}
		n, err := fn(b[i:kEnd], walkValue(b, j))
		if err != nil {
			return 0, err
		}
		if n <= 0 {
			return len(b), nil
		}
		var more bool
		if i, more = afterItem(b, j+n, '}'); !more {
			return i, nil
		}
	}
	return len(b), nil
}

// WalkElements is WalkMembers for the array b starts with: fn gets each
// element's index and value; ErrNotArray when b does not start with an
// array.
func WalkElements(b []byte, fn func(i int, val []byte) (int, error)) (int, error) {
	i := SkipWS(b, 0)
	if i >= len(b) || b[i] != '[' {
		return 0, ErrNotArray
	}
	i = SkipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, nil
	}
	for k := 0; i < len(b); k++ {
		n, err := fn(k, walkValue(b, i))
		if err != nil {
			return 0, err
		}
		if n <= 0 {
			return len(b), nil
		}
		var more bool
		if i, more = afterItem(b, i+n, ']'); !more {
			return i, nil
		}
	}
	return len(b), nil
}
