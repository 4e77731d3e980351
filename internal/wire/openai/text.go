package openai

import "github.com/keelmesh/keel/internal/jsonx"

// brokenText returns the error message for a body (valid JSON) holding
// invalid UTF-8 or an unpaired UTF-16 surrogate escape, or "" when it holds
// neither. Chat Completions rejects such a body with 400
// invalid_request_error "We could not parse the JSON body of your request"
// (param and code null); Keel keeps those words and adds what and where the
// problem is, as the Messages API does (see the anthropic package). Passing
// the text on would either change it (encoding/json turns each bad byte or
// escape into U+FFFD) or forward it unchanged in an unknown member, to be
// rejected upstream after routing and retries. The check is jsonx.BadText.
func brokenText(body []byte) string {
	off, what := jsonx.BadText(body)
	if off < 0 {
		return ""
	}
	return "We could not parse the JSON body of your request: " + what + " at " + jsonx.Position(body, off)
}
