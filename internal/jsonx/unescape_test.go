package jsonx

import (
	"encoding/json"
	"strings"
	"testing"
)

var decodeStringSeeds = []string{
	`"plain"`, `""`, `"a\nb\tc\"d\\e\/f\bg\fh\ri"`, `"\u00e9\u2028\u0000\uFFFF"`, `"\ud83d\ude00"`,
	`"\ud83d"`, `"\ud83dx"`, `"\ude00\ud83d"`, `"\ud83d\u0041"`, `"\ud83d\ud83d\ude00"`, "\"\xff\xfe\"",
	"\"caf\xc3\xa9 \xe2\x82\"", `"\x"`, `"\'"`, `"\u12"`, `"\u12g4"`, "\"a\x01b\"", `"a"b"`, `"\"`,
	"\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", `"18°C, \"sunny\"\nwind"`,
}

func TestDecodeString(t *testing.T) {
	for _, s := range decodeStringSeeds {
		checkDecodeString(t, []byte(s))
	}
}

func FuzzDecodeString(f *testing.F) {
	for _, s := range decodeStringSeeds {
		f.Add([]byte(s[1 : len(s)-1]))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkDecodeString(t, append(append([]byte{'"'}, b...), '"'))
	})
}

// checkDecodeString compares DecodeString with json.Unmarshal on a token.
func checkDecodeString(t *testing.T, tok []byte) {
	t.Helper()
	var want string
	werr := json.Unmarshal(tok, &want)
	got, ok := DecodeString(tok[1 : len(tok)-1])
	switch {
	case werr == nil && (!ok || got != want):
		t.Fatalf("DecodeString(%q) = %q, %v; json.Unmarshal gives %q", tok, got, ok, want)
	case werr != nil && ok:
		t.Fatalf("DecodeString(%q) = %q; json.Unmarshal rejects it: %v", tok, got, werr)
	}
}

func TestPlain(t *testing.T) {
	long := strings.Repeat("abcdefgh", 8)
	for _, tc := range []struct {
		name string
		in   string
		want bool
	}{
		{name: "empty", in: "", want: true},
		{name: "key", in: "max_tokens", want: true},
		{name: "short non-ASCII", in: "héllo", want: true},
		{name: "short escape", in: `a\nb`, want: false},
		{name: "short invalid UTF-8", in: "a\xffb", want: false},
		{name: "long", in: long, want: true},
		{name: "long escape", in: long + `\"`, want: false},
		{name: "long invalid UTF-8", in: long + "\xc3", want: false},
		{name: "long non-ASCII", in: long + "世界", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Plain([]byte(tc.in)); got != tc.want {
				t.Errorf("Plain(%q) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestUnquote(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		err            bool
	}{
		{name: "plain", in: `"abc"`, want: "abc"},
		{name: "escapes", in: `"a\n\u00e9\ud83d\ude00"`, want: "a\né😀"},
		{name: "invalid UTF-8", in: "\"a\xffb\"", want: "a\ufffdb"},
		{name: "lone surrogate", in: `"\ud83d"`, want: "\ufffd"},
		{name: "not a string", in: `12`, err: true},
		{name: "bad escape", in: `"\x"`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Unquote([]byte(tc.in))
			if (err != nil) != tc.err || got != tc.want {
				t.Errorf("Unquote(%s) = %q, %v; want %q, error %v", tc.in, got, err, tc.want, tc.err)
			}
			if tc.in[0] != '"' && err != ErrNotString {
				t.Errorf("Unquote(%s) error %v, want ErrNotString", tc.in, err)
			}
			var want string
			if jerr := json.Unmarshal([]byte(tc.in), &want); (jerr != nil) != tc.err || want != got {
				t.Errorf("json.Unmarshal(%s) = %q, %v; Unquote disagrees", tc.in, want, jerr)
			}
		})
	}
}

func BenchmarkPlain(b *testing.B) {
	keys := [][]byte{[]byte("model"), []byte("messages"), []byte("role"), []byte("content"), []byte("max_completion_tokens"), []byte("tool_calls"), []byte("id"), []byte("type")}
	prompt := []byte(strings.Repeat("The quarterly report shows revenue of $152.37M, up 12 % year on year.\n", 40))
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			for _, k := range keys {
				if !Plain(k) {
					b.Fatal(string(k))
				}
			}
		}
	})
	b.Run("prompt", func(b *testing.B) {
		b.SetBytes(int64(len(prompt)))
		for b.Loop() {
			if !Plain(prompt) {
				b.Fatal("prompt")
			}
		}
	})
}
