package jsonx

import (
	"encoding/json"
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

// checkDecodeString compares decodeString with json.Unmarshal on a token.
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
