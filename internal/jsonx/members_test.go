package jsonx

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestEachMember(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string // key, value, key, value ...
		err  error
	}{
		{name: "empty", in: `{}`},
		{name: "spaced empty", in: " { \n } "},
		{name: "members", in: `{"a":1,"b":"x","c":{"d":[1,2]},"e":null}`, want: []string{`"a"`, `1`, `"b"`, `"x"`, `"c"`, `{"d":[1,2]}`, `"e"`, `null`}},
		{name: "white space", in: " {\n \"a\" : [ 1 ] ,\t\"b\":true } ", want: []string{`"a"`, `[ 1 ]`, `"b"`, `true`}},
		{name: "escaped key", in: `{"a\"b":"}"}`, want: []string{`"a\"b"`, `"}"`}},
		{name: "array", in: `[1]`, err: ErrNotObject},
		{name: "string", in: `"{"`, err: ErrNotObject},
		{name: "nothing", in: ``, err: ErrNotObject},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := EachMember([]byte(tc.in), func(k, v []byte) error {
				got = append(got, string(k), string(v))
				return nil
			})
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("EachMember(%s) = %q, %v (-got +want): want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
		})
	}
}

func TestEachElement(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []string
		err  error
	}{
		{name: "empty", in: `[]`},
		{name: "spaced empty", in: " [ \n ] "},
		{name: "elements", in: `[1,"a]",{"b":[2]},[],null]`, want: []string{`1`, `"a]"`, `{"b":[2]}`, `[]`, `null`}},
		{name: "white space", in: "[ 1 ,\n2\t]", want: []string{`1`, `2`}},
		{name: "object", in: `{}`, err: ErrNotArray},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			err := EachElement([]byte(tc.in), func(i int, v []byte) error {
				if i != len(got) {
					t.Errorf("index %d, want %d", i, len(got))
				}
				got = append(got, string(v))
				return nil
			})
			if !errors.Is(err, tc.err) || !slices.Equal(got, tc.want) {
				t.Errorf("EachElement(%s) = %q, %v (-got +want): want %q, %v", tc.in, got, err, tc.want, tc.err)
			}
			if n := CountElements([]byte(tc.in)); n != len(tc.want) {
				t.Errorf("CountElements(%s) = %d, want %d", tc.in, n, len(tc.want))
			}
		})
	}
}

func TestEachMemberStopsOnError(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := EachMember([]byte(`{"a":1,"b":2}`), func(k, v []byte) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("EachMember = %v after %d calls, want stop after 1", err, n)
	}
}

func TestTrimSpace(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{name: "none", in: `{}`, want: `{}`},
		{name: "both", in: " \t\n{} \r\n", want: `{}`},
		{name: "all space", in: "  ", want: ``},
		{name: "empty", in: ``, want: ``},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(TrimSpace([]byte(tc.in))); got != tc.want {
				t.Errorf("TrimSpace(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestSetMember(t *testing.T) {
	type extra map[string]json.RawMessage
	var x extra
	SetMember(&x, "a", []byte(`1`))
	SetMember(&x, "b", []byte(`"x"`))
	if len(x) != 2 || string(x["a"]) != `1` || string(x["b"]) != `"x"` {
		t.Errorf("SetMember made %v", x)
	}
}

// FuzzMembers: on any input the walkers neither panic nor loop, and on
// valid JSON they see exactly the members and elements encoding/json sees.
func FuzzMembers(f *testing.F) {
	for _, s := range []string{`{}`, `[]`, `{"a":1,"b":[1,{"c":"}"}]}`, ` [ 1 , "x" , null ] `, `{"a"`, `[1,`, `{"a":}`, `{,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var keys, vals []string
		_ = EachMember(in, func(k, v []byte) error {
			keys, vals = append(keys, string(k)), append(vals, string(v))
			return nil
		})
		var elems []string
		_ = EachElement(in, func(_ int, v []byte) error {
			elems = append(elems, string(v))
			return nil
		})
		if n := CountElements(in); n != len(elems) {
			t.Fatalf("CountElements = %d, EachElement saw %d", n, len(elems))
		}
		// The walkers never panic or loop either, with any callback result.
		_, _ = WalkMembers(in, func(k, v []byte) (int, error) { return len(v), nil })
		_, _ = WalkElements(in, func(_ int, v []byte) (int, error) { return len(v), nil })
		if !json.Valid(in) {
			return
		}
		checkWalk(t, in, keys, vals, elems)
		var obj map[string]json.RawMessage
		if json.Unmarshal(in, &obj) == nil {
			seen := map[string]bool{}
			for i, k := range keys {
				name, err := Unquote([]byte(k))
				if err != nil {
					t.Fatalf("key %s: %v", k, err)
				}
				if !json.Valid([]byte(vals[i])) {
					t.Fatalf("value %q of %s is not valid JSON", vals[i], k)
				}
				seen[name] = true
			}
			if len(seen) != len(obj) {
				t.Fatalf("EachMember saw keys %q, encoding/json %d keys", keys, len(obj))
			}
			vals := map[string][]byte{}
			for name := range seen {
				vals[name] = []byte(`null`)
				break
			}
			var rep map[string]json.RawMessage
			if out := ReplaceMembers(in, vals); json.Unmarshal(out, &rep) != nil || len(rep) != len(obj) {
				t.Fatalf("ReplaceMembers(%q) = %q, want an object of %d keys", in, out, len(obj))
			}
		}
		var arr []json.RawMessage
		if json.Unmarshal(in, &arr) == nil {
			if len(elems) != len(arr) || CountElements(in) != len(arr) {
				t.Fatalf("EachElement saw %d elements, CountElements %d, encoding/json %d", len(elems), CountElements(in), len(arr))
			}
			for i, e := range elems {
				if string(TrimSpace(arr[i])) != e {
					t.Fatalf("element %d: %q, encoding/json %q", i, e, arr[i])
				}
			}
		}
	})
}

func TestReplaceMembers(t *testing.T) {
	cases := []struct {
		name, obj string
		vals      map[string][]byte
		want      string
	}{
		{name: "one replaced", obj: `{"a":1,"b":[2],"c":"x"}`, vals: map[string][]byte{"b": []byte(`[3]`)}, want: `{"a":1,"b":[3],"c":"x"}`},
		{name: "absent not added", obj: `{ "a" : 1 }`, vals: map[string][]byte{"z": []byte(`0`)}, want: `{"a":1}`},
		{name: "escaped key", obj: `{"\u0061":1}`, vals: map[string][]byte{"a": []byte(`2`)}, want: `{"\u0061":2}`},
		{name: "empty", obj: `{}`, vals: nil, want: `{}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(ReplaceMembers([]byte(tc.obj), tc.vals)); got != tc.want {
				t.Errorf("(-got +want):\n-%s\n+%s", got, tc.want)
			}
		})
	}
}

// checkWalk checks that WalkMembers and WalkElements see in (valid JSON)
// as EachMember and EachElement do, the nested values consumed by
// recursive walks, and report in's length without its trailing space, with
// more bytes after it or not.
func checkWalk(t *testing.T, in []byte, keys, vals, elems []string) {
	t.Helper()
	want := len(TrimSpace(in)) + SkipWS(in, 0)
	for _, tail := range []string{"", `,"x":[1]}]`} {
		b := append(append([]byte{}, in...), tail...)
		var wk, wv []string
		n, err := WalkMembers(b, func(k, v []byte) (int, error) {
			m := walkAll(v)
			wk, wv = append(wk, string(k)), append(wv, string(v[:m]))
			return m, nil
		})
		if err == nil {
			if n != want || !slices.Equal(wk, keys) || !slices.Equal(wv, vals) {
				t.Fatalf("WalkMembers(%q) = %d, %q %q; want %d, EachMember's %q %q", b, n, wk, wv, want, keys, vals)
			}
		} else if err != ErrNotObject || keys != nil {
			t.Fatalf("WalkMembers(%q): %v", b, err)
		}
		var we []string
		n, err = WalkElements(b, func(_ int, v []byte) (int, error) {
			m := walkAll(v)
			we = append(we, string(v[:m]))
			return m, nil
		})
		if err == nil {
			if n != want || !slices.Equal(we, elems) {
				t.Fatalf("WalkElements(%q) = %d, %q; want %d, EachElement's %q", b, n, we, want, elems)
			}
		} else if err != ErrNotArray || elems != nil {
			t.Fatalf("WalkElements(%q): %v", b, err)
		}
	}
}

// walkAll consumes the value v starts with by walking every nested
// container, and checks the result against Len.
func walkAll(v []byte) int {
	var n int
	switch {
	case len(v) > 0 && v[0] == '{':
		n, _ = WalkMembers(v, func(_, v []byte) (int, error) { return walkAll(v), nil })
	case len(v) > 0 && v[0] == '[':
		n, _ = WalkElements(v, func(_ int, v []byte) (int, error) { return walkAll(v), nil })
	default:
		return len(v)
	}
	if n != Len(v) {
		panic(fmt.Sprintf("walked %d bytes of %q, Len %d", n, v, Len(v)))
	}
	return n
}

func TestWalk(t *testing.T) {
	for _, in := range []string{`{}`, `[]`, ` { } `, `{"a":1,"b":[1,{"c":"}"}],"d":{"e":[]}}`, ` [ 1 , "x" , null, [ ] , {"a" : [2]} ] `, `"s"`, `12`, `{"\"":"]"}`} {
		var keys, vals, elems []string
		_ = EachMember([]byte(in), func(k, v []byte) error {
			keys, vals = append(keys, string(k)), append(vals, string(v))
			return nil
		})
		_ = EachElement([]byte(in), func(_ int, v []byte) error {
			elems = append(elems, string(v))
			return nil
		})
		checkWalk(t, []byte(in), keys, vals, elems)
	}
	if _, err := WalkMembers([]byte(`{"a":1}`), func(k, v []byte) (int, error) { return 0, ErrNotString }); err != ErrNotString {
		t.Errorf("WalkMembers returned %v, want fn's error", err)
	}
}
