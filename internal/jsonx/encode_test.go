package jsonx

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ name, in string }{
		{name: "plain", in: "hello"},
		{name: "quote and backslash", in: `a"b\c`},
		{name: "controls", in: "\n\r\t\x00\x1f"},
		{name: "line separators", in: "a\u2028b\u2029c"},
		{name: "invalid UTF-8", in: "a\xffb\xc3"},
		{name: "html left alone", in: "<a href='x'>&</a>"},
		{name: "non-ASCII", in: "héllo 世界 😀"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(tc.in)
			want = []byte(strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want)))
			if got := AppendString(nil, tc.in); string(got) != string(want) {
				t.Errorf("AppendString(%q) (-got +want):\n-%s\n+%s", tc.in, got, want)
			}
		})
	}
}

// TestAppendStringBackspaceFormFeed pins where AppendString differs from
// encoding/json (since Go 1.22 it writes \b and \f): both decode the same;
// the codecs have always written the \u form.
func TestAppendStringBackspaceFormFeed(t *testing.T) {
	if got, want := string(AppendString(nil, "\b\f")), `"\u0008\u000c"`; got != want {
		t.Errorf("AppendString (-got +want):\n-%s\n+%s", got, want)
	}
}

func TestAppendKey(t *testing.T) {
	for _, tc := range []struct{ name, b, key, want string }{
		{name: "first in object", b: `{`, key: "a", want: `{"a":`},
		{name: "after a member", b: `{"a":1`, key: "b", want: `{"a":1,"b":`},
		{name: "after an array start", b: `[`, key: "a", want: `["a":`},
		{name: "escaped", b: `{`, key: `q"`, want: `{"q\"":`},
		{name: "empty buffer", b: ``, key: "a", want: `"a":`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := AppendKey([]byte(tc.b), tc.key); string(got) != tc.want {
				t.Errorf("AppendKey(%s, %q) (-got +want):\n-%s\n+%s", tc.b, tc.key, got, tc.want)
			}
			if tc.key == "a" || tc.key == "b" {
				if got := AppendPlainKey([]byte(tc.b), tc.key); string(got) != tc.want {
					t.Errorf("AppendPlainKey(%s, %q) (-got +want):\n-%s\n+%s", tc.b, tc.key, got, tc.want)
				}
			}
		})
	}
}

func TestAppendFloat(t *testing.T) {
	for _, f := range []float64{0, 1, -1, 0.1, 0.7, 1e-6, 1e-7, 9.99e-7, 1.5e-9, 1e20, 1e21, 1.7976931348623157e308, 5e-324, -2.5e-10, 123456789.125, math.Copysign(0, -1)} {
		want, _ := json.Marshal(f)
		got, ok := AppendFloat([]byte("x"), f)
		if !ok || string(got) != "x"+string(want) {
			t.Errorf("AppendFloat(%v) = %s, %v; want x%s", f, got, ok, want)
		}
	}
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if got, ok := AppendFloat([]byte("x"), f); ok || string(got) != "x" {
			t.Errorf("AppendFloat(%v) = %s, %v; want x, false", f, got, ok)
		}
	}
}

func TestAppendIntBool(t *testing.T) {
	if got := string(AppendInt([]byte("["), -42)); got != "[-42" {
		t.Errorf("AppendInt = %s, want [-42", got)
	}
	if got := string(AppendBool(AppendBool(nil, true), false)); got != "truefalse" {
		t.Errorf("AppendBool = %s, want truefalse", got)
	}
}

func TestSortedKeys(t *testing.T) {
	m := map[string]json.RawMessage{"b": nil, "a": nil, "c": nil, "": nil}
	for _, tc := range []struct {
		name string
		keys []string
		skip func(string) bool
		want []string
	}{
		{name: "all", want: []string{"", "a", "b", "c"}},
		{name: "skip", skip: func(k string) bool { return k == "b" }, want: []string{"", "a", "c"}},
		{name: "with a key already there", keys: []string{"bb"}, skip: func(k string) bool { return k == "" }, want: []string{"a", "b", "bb", "c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SortedKeys(tc.keys, m, tc.skip); !slices.Equal(got, tc.want) {
				t.Errorf("SortedKeys (-got +want):\n-%q\n+%q", got, tc.want)
			}
		})
	}
}

func BenchmarkAppendString(b *testing.B) {
	for _, tc := range []struct{ name, s string }{
		{"key", "max_tokens"},
		{"prompt", strings.Repeat("The quarterly report shows revenue of $152.37M, up 12 % year on year.\n", 40)},
		{"chinese", strings.Repeat("季度报告显示收入同比增长百分之十二，利润率保持稳定。", 40)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			buf := make([]byte, 0, 2*len(tc.s)+2)
			b.SetBytes(int64(len(tc.s)))
			b.ReportAllocs()
			for b.Loop() {
				buf = AppendString(buf[:0], tc.s)
			}
		})
	}
}

// FuzzAppendString: the output is one valid JSON string, with no control
// character, U+2028 or U+2029 left raw, that decodes to the input with each
// byte of invalid UTF-8 made U+FFFD (what encoding/json reads and writes).
// appendStringBodySlow is AppendStringBody byte at a time, as it was
// before its word-at-a-time scan: the fuzz target's oracle for the bytes.
func appendStringBodySlow(b []byte, s string) []byte {
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
	return append(b, s[start:]...)
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `a"b\c`, "\n\r\t\x00\x1f\b\f", "a\u2028b\u2029", "a\xffb\xc3", "héllo 世界 😀", "\xed\xa0\x80"} {
		f.Add(s)
	}
	f.Add("0123456789abcdef\"0123456\\789é€😀\x01abcdefgh\xff12345678\u2028")
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendStringBody(nil, s), appendStringBodySlow(nil, s); string(got) != string(want) {
			t.Fatalf("AppendStringBody(%q) = %s, byte at a time %s", s, got, want)
		}
		out := AppendString([]byte("x"), s)[1:]
		if !json.Valid(out) {
			t.Fatalf("AppendString(%q) = %s, not valid JSON", s, out)
		}
		for _, r := range string(out) {
			if r < 0x20 || r == '\u2028' || r == '\u2029' {
				t.Fatalf("AppendString(%q) = %s holds %U raw", s, out, r)
			}
		}
		var want strings.Builder
		for _, r := range s { // ranging a string yields U+FFFD for each bad byte
			want.WriteRune(r)
		}
		var got string
		if err := json.Unmarshal(out, &got); err != nil || got != want.String() {
			t.Fatalf("AppendString(%q) = %s, decodes to %q, %v; want %q", s, out, got, err, want.String())
		}
	})
}
