package jsonx

import (
	"strconv"
	"strings"
	"testing"
)

func TestBadText(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		off  int
		what string
	}{
		{name: "clean", in: `{"a":"héllo \ud83d\ude00 \u00e9"}`, off: -1},
		{name: "escaped backslash before ud", in: `{"a":"\\ud800"}`, off: -1},
		{name: "korean escapes", in: `"\ud55c\uad6d"`, off: -1},
		{name: "invalid UTF-8", in: "{\"a\":\"x\xffy\"}", off: 7, what: "invalid UTF-8 encoding in string"},
		{name: "lone high", in: `{"a":"\ud83d"}`, off: 6, what: "no low surrogate in string"},
		{name: "high then other escape", in: `{"a":"\ud83d\u0041"}`, off: 6, what: "invalid low surrogate in string"},
		{name: "lone low", in: `{"a":"\ude00"}`, off: 6, what: "invalid high surrogate in string"},
		{name: "upper-case hex", in: `{"a":"\uD83D"}`, off: 6, what: "no low surrogate in string"},
		{name: "first of two wins", in: "{\"a\":\"\\ud83d\",\"b\":\"\xff\"}", off: 6, what: "no low surrogate in string"},
		{name: "UTF-8 before escape", in: "{\"b\":\"\xff\",\"a\":\"\\ud83d\"}", off: 6, what: "invalid UTF-8 encoding in string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			off, what := BadText([]byte(tc.in))
			if off != tc.off || what != tc.what {
				t.Errorf("BadText(%q) = %d, %q (-got +want): want %d, %q", tc.in, off, what, tc.off, tc.what)
			}
		})
	}
}

func TestPosition(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		off  int
		want string
	}{
		{name: "start", in: `{}`, off: 0, want: "line 1 column 1 (char 0)"},
		{name: "first line", in: `{"a":"b"}`, off: 5, want: "line 1 column 6 (char 5)"},
		{name: "third line", in: "{\n\"a\":\n\"b\"}", off: 8, want: "line 3 column 2 (char 8)"},
		{name: "runes not bytes", in: `{"é":"ü"}`, off: 7, want: "line 1 column 7 (char 6)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Position([]byte(tc.in), tc.off); got != tc.want {
				t.Errorf("Position(%q, %d) (-got +want):\n-%s\n+%s", tc.in, tc.off, got, tc.want)
			}
		})
	}
}

// BenchmarkBadText is the check on 32 KiB prompts: English (ASCII, the
// fast path of utf8.Valid), Chinese (three bytes a rune), escape-heavy
// code and Korean as Python's json.dumps sends it (every syllable a \ud…
// escape, the worst case for the surrogate search). The codecs'
// BenchmarkBrokenText runs it through their wrappers.
func BenchmarkBadText(b *testing.B) {
	for _, tc := range []struct{ name, quoted string }{
		{"english", strconv.Quote(strings.Repeat("The quarterly report shows revenue of $152.37M, up 12 % year on year; margins held. ", 400))},
		{"chinese", strconv.Quote(strings.Repeat("季度报告显示收入同比增长百分之十二，利润率保持稳定。", 440))},
		{"escapes", strconv.Quote(strings.Repeat("func f() {\n\tif x {\n\t\treturn \"a\\\\b\"\n\t}\n}\n", 800))},
		{"korean_escaped", `"` + strings.Repeat(`\ud55c\uad6d\uc5b4 \ubcf4\uace0\uc11c. `, 800) + `"`},
	} {
		in := []byte(`{"messages":[{"role":"user","content":` + tc.quoted + `}]}`)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if off, what := BadText(in); off >= 0 {
					b.Fatal(what)
				}
			}
		})
	}
}
