package provider

import (
	"net/url"
	"strings"
	"testing"
)

// TestValidKeyTable: the token table accepts exactly the bytes the
// delimiter search accepted (RFC 9110 §5.6.2 token characters).
func TestValidKeyTable(t *testing.T) {
	for c := 0; c < 256; c++ {
		want := c > ' ' && c < 0x7f && !strings.ContainsRune("\"(),/:;<=>?@[\\]{}", rune(c))
		if got := validKey(string([]byte{byte(c)})); got != want {
			t.Errorf("validKey(%q) = %v, want %v", byte(c), got, want)
		}
	}
	for _, tc := range []struct {
		name, key string
		want      bool
	}{
		{"empty", "", false},
		{"plain", "Content-Type", true},
		{"token punctuation", "X-A!#$%&'*+.^_`|~9", true},
		{"space", "X Key", false},
		{"colon", "X:Key", false},
		{"non-ASCII", "X-é", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := validKey(tc.key); got != tc.want {
				t.Errorf("validKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

// TestIsAnthropicAPI: the text pre-check answers as url.Parse's hostname
// did alone.
func TestIsAnthropicAPI(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		want       bool
	}{
		{"the API", "https://api.anthropic.com", true},
		{"with a path", "https://api.anthropic.com/v1", true},
		{"upper case", "HTTPS://API.Anthropic.COM/v1", true},
		{"with a port", "https://api.anthropic.com:443", true},
		{"userinfo", "https://u:p@api.anthropic.com/", true},
		{"in the path only", "https://proxy.example/api.anthropic.com", false},
		{"a sub-domain", "https://eu.api.anthropic.com", false},
		{"a look-alike", "https://api.anthropic.com.evil.example", false},
		{"another host", "http://127.0.0.1:7879/r/us-east", false},
		{"escaped dot", "https://api%2Eanthropic.com", false},
		{"unparsable", "https://api.anthropic.com/%zz", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.base)
			old := err == nil && strings.EqualFold(u.Hostname(), "api.anthropic.com")
			if got := isAnthropicAPI(tc.base); got != tc.want || got != old {
				t.Errorf("isAnthropicAPI(%q) = %v, want %v (url.Parse alone: %v)", tc.base, got, tc.want, old)
			}
		})
	}
}
