package jsonx

import "testing"

func TestStringEnd(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`"abc" rest`, 5},
		{`"a\"b"`, 6},
		{`"a\\"b"`, 5},
		{`"a\\\"b"`, 8},
		{`"unterminated`, 13},
		{`"ends in backslash\`, 19},
		{`""`, 2},
		{`"\\\\"`, 6},
	} {
		if got := StringEnd([]byte(tc.in), 0); got != tc.want {
			t.Errorf("StringEnd(%s) = %d, want %d", tc.in, got, tc.want)
		}
		if got := stringEndSlow([]byte(tc.in), 0); got != tc.want {
			t.Errorf("stringEndSlow(%s) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// FuzzStringEnd: the vectorised scan agrees with the byte-at-a-time one
// on any input and any starting quote.
func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{`"abc"`, `"a\"b\\" x`, `x"\\\"`, `""""`, `"\`} {
		f.Add([]byte(s), 0)
	}
	f.Fuzz(func(t *testing.T, b []byte, i int) {
		if len(b) == 0 {
			return
		}
		i = int(uint(i) % uint(len(b)))
		if got, want := StringEnd(b, i), stringEndSlow(b, i); got != want {
			t.Fatalf("StringEnd(%q, %d) = %d, byte-at-a-time %d", b, i, got, want)
		}
	})
}

// stringEndSlow is StringEnd one byte at a time: the definition the fast
// version is tested against.
func stringEndSlow(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}
