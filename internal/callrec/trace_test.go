package callrec

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// UpstreamRequest redacts the endpoint's key and every key- or
// token-shaped string, and cuts a long body at 4 KiB on a character
// boundary.
func TestUpstreamRequest(t *testing.T) {
	for _, tc := range []struct {
		name, body, key, want string
	}{
		{"endpoint key", `{"k":"my-own-key-1"}`, "my-own-key-1", `{"k":"[REDACTED]"}`},
		{"anthropic key", `x sk-ant-api03-abcdefghijklmnop y`, "", `x [REDACTED] y`},
		{"aws key id", `AKIAABCDEFGHIJKLMNOP`, "", `[REDACTED]`},
		{"google key", `AIza` + strings.Repeat("a", 35), "", `[REDACTED]`},
		{"bearer", `Authorization: Bearer abcdefghijklmnop123`, "", `Authorization: [REDACTED]`},
		{"short is kept", `sk-short bearer abc`, "", `sk-short bearer abc`},
		{"plain", `{"model":"m"}`, "", `{"model":"m"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := UpstreamRequest([]byte(tc.body), tc.key); got != tc.want {
				t.Errorf("UpstreamRequest(%q) = %q, want %q", tc.body, got, tc.want)
			}
		})
	}
	long := strings.Repeat("é", 3000) // 6000 bytes
	got := UpstreamRequest([]byte(long), "")
	if len(got) > 4096 || len(got) < 4094 || !utf8.ValidString(got) {
		t.Errorf("long body kept %d bytes (valid UTF-8 %t), want at most 4096 on a character boundary", len(got), utf8.ValidString(got))
	}
}
