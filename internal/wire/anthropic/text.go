package anthropic

import "github.com/keelmesh/keel/internal/jsonx"

// brokenText returns the Messages API's message for a body (valid JSON)
// holding invalid UTF-8 or an unpaired UTF-16 surrogate escape, or "" when
// it holds neither. The API rejects such a body with 400 "The request body
// is not valid JSON: no low surrogate in string: line 1 column N (char N-1)"
// (its parser's words; anthropics/claude-code issues 6508, 8272, 9586 quote
// them): passing the text on would either change it (encoding/json turns
// each bad byte or escape into U+FFFD) or forward it unchanged in an unknown
// member, to be rejected upstream after routing and retries. The check is
// jsonx.BadText.
func brokenText(body []byte) string {
	off, what := jsonx.BadText(body)
	if off < 0 {
		return ""
	}
	return "The request body is not valid JSON: " + what + ": " + jsonx.Position(body, off)
}
