package jsonx

import (
	"encoding/json"
	"math/bits"
	"strings"
	"testing"
)

var validSeeds = []string{
	``, ` `, `{}`, `[]`, ` {} `, `{`, `}`, `[`, `]`, `{]`, `[}`, `{"a":1}`, `{"a":1,}`, `{"a" 1}`, `{"a":}`,
	`{,"a":1}`, `{"a":1 "b":2}`, `[1,2,3]`, `[1,]`, `[,1]`, `[1 2]`, `"x"`, `"\u00e9"`, `"\u00g9"`, `"\x"`,
	`"\"\\\/\b\f\n\r\t"`, "\"a\x01\"", "\"\xff\xfe\"", `"abc`, `"abc\`, `true`, `false`, `null`, `tru`, `nul`,
	`truex`, `nullnull`, `0`, `-0`, `01`, `-`, `1.`, `1.5`, `.5`, `1e5`, `1E+5`, `1e-5`, `1e`, `1e+`, `-1.5e10`,
	`1.5.5`, `+1`, `0x1`, `{"a":[1,{"b":null}],"c":"d"}`, `{"a":{"b":{"c":[[[]]]}}}`, `[1] [2]`, `1 2`,
	"\t\n\r {\"a\" : [ true , false ] } \n", `{"a":1}}`, `[[]]]`, `{"":""}`, `"\ud800"`, `{"a":-}`,
	strings.Repeat("[", 64) + strings.Repeat("]", 64), strings.Repeat("[", 65) + strings.Repeat("]", 65),
	strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat("}", 70), strings.Repeat("[", 10001) + strings.Repeat("]", 10001),
	strings.Repeat("[", 64) + strings.Repeat("]", 63),
}

func TestValidJSON(t *testing.T) {
	for _, s := range validSeeds {
		want := json.Valid([]byte(s))
		if got := Valid([]byte(s)); got != want {
			t.Errorf("Valid(%.40q) = %v, want %v", s, got, want)
		}
		if fastValid([]byte(s)) && !want {
			t.Errorf("fastValid(%.40q) accepts what json.Valid rejects", s)
		}
		// Shallow input is decided by the fast path alone.
		if len(s) < 1000 && !strings.Contains(s, strings.Repeat("[", 65)) && !strings.Contains(s, strings.Repeat(`{"a":`, 65)) {
			if got := fastValid([]byte(s)); got != want {
				t.Errorf("fastValid(%.40q) = %v, json.Valid %v", s, got, want)
			}
		}
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		want := json.Valid(b)
		if fastValid(b) && !want {
			t.Fatalf("fastValid(%q) accepts what json.Valid rejects", b)
		}
		if got := Valid(b); got != want {
			t.Fatalf("Valid(%q) = %v, want %v", b, got, want)
		}
	})
}

// FuzzPlain8 checks the eight-byte test against the byte-by-byte rule:
// special8 is 0 exactly when no byte is special, and otherwise its lowest
// set bit is in the first special byte.
func FuzzPlain8(f *testing.F) {
	f.Add(uint64(0x4142434445464748))
	f.Add(uint64(0x22005c1f7f80ff20))
	f.Add(uint64(0x2121212121212223)) // a borrow from the first byte
	f.Add(uint64(0x1f2020202020205c))
	f.Fuzz(func(t *testing.T, x uint64) {
		first := 8
		for k := range 8 {
			c := byte(x >> (8 * k))
			if c == '"' || c == '\\' || c < 0x20 {
				first = k
				break
			}
		}
		m := special8(x)
		if got := bits.TrailingZeros64(m) / 8; (m == 0) != (first == 8) || m != 0 && got != first {
			t.Fatalf("special8(%#x) = %#x: first special byte %d, want %d", x, m, got, first)
		}
	})
}
