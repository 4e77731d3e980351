package jsonx

import "testing"

func TestCount(t *testing.T) {
	for _, c := range []struct {
		v     string
		n     int64
		fault CountFault
	}{
		{"1024", 1024, CountOK}, {"1024.0", 1024, CountOK}, {"1e3", 1000, CountOK}, {"0", 0, CountOK},
		{"2147483647", 2147483647, CountOK}, {"2147483648", 0, CountTooLarge}, {"1e400", 0, CountTooLarge},
		{"99999999999999999999999", 0, CountTooLarge}, {"-1", 0, CountNegative}, {"-1e400", 0, CountNegative},
		{"1.5", 0, CountNotInteger}, {`"5"`, 0, CountNotNumber}, {"null", 0, CountNotNumber}, {"", 0, CountNotNumber},
	} {
		if n, f := Count([]byte(c.v), 2147483647); n != c.n || f != c.fault {
			t.Errorf("Count(%s) = %d, %d; want %d, %d", c.v, n, f, c.n, c.fault)
		}
	}
	if got := NumberText([]byte("123456789012345678901234567890123456")); got != "12345678901234567890123456789012…" {
		t.Errorf("NumberText = %q", got)
	}
}
