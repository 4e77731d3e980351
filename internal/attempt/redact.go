package attempt

import (
	"bytes"
	"regexp"
	"unicode/utf8"
)

// maxUpstreamRequest bounds the upstream request a debug trace keeps.
const maxUpstreamRequest = 4 << 10

// secretPattern matches the shapes of provider API keys and bearer
// tokens: Anthropic (sk-ant-…), OpenAI and compatible (sk-…, sk-proj-…),
// AWS access key ids (AKIA…), Google API keys (AIza…) and "Bearer …".
var secretPattern = regexp.MustCompile(`sk-[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_\-]{35}|(?i:bearer)\s+[A-Za-z0-9._~+/\-]{16,}=*`)

// redactSecrets replaces the endpoint's own key and anything shaped like
// an API key or bearer token in body by [REDACTED].
func redactSecrets(body []byte, key string) string {
	if key != "" {
		body = bytes.ReplaceAll(body, []byte(key), []byte("[REDACTED]"))
	}
	return string(secretPattern.ReplaceAll(body, []byte("[REDACTED]")))
}

// cutUTF8 cuts s to at most n bytes, never inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
