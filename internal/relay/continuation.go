package relay

import (
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// ContinueRequest is the request that continues the answer to req whose
// text the client has (delivered) on an endpoint of continuation kind
// kind; splice is set when that endpoint cannot continue an answer and is
// re-asked for the whole of it (req itself). A continuation asks only for
// the tokens the client has left: out is the output already delivered
// (content deltas, one token each on the servers that send a token per
// chunk; a lower bound where a delta holds several). req is not modified.
func ContinueRequest(req *llm.Request, kind provider.Continuation, delivered string, out int) (r *llm.Request, splice bool) {
	switch kind {
	case provider.ContinueNone:
		// OpenAI starts a new answer after a trailing assistant message:
		// ask again and keep only what follows the text already sent.
		return req, true
	case provider.ContinueFinalMessage:
		// vLLM / SGLang continue the final message only when told to.
		r := continuation(req, delivered, out)
		r.ContinueFinalMessage = true
		return r, false
	case provider.ContinuePrefix:
		// DeepSeek / Mistral continue a final assistant message marked
		// "prefix": true.
		r := continuation(req, delivered, out)
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == llm.RoleAssistant {
			r.Messages[n-1].Prefix = true
		}
		return r, false
	}
	return continuation(req, delivered, out), false // Anthropic prefill
}

// continuation is req with the text the client already has as an assistant
// prefill (appended to the client's own prefill if it sent one), asking
// for the client's max_tokens less the out tokens it has (at least one).
func continuation(req *llm.Request, prefill string, had int) *llm.Request {
	out := *req
	if out.HasMaxTokens {
		out.MaxTokens = max(1, req.MaxTokens-had)
	}
	trimmed := strings.TrimRight(prefill, " \t\r\n")
	msgs := make([]llm.Message, len(req.Messages), len(req.Messages)+1)
	copy(msgs, req.Messages)
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
		last := msgs[n-1]
		text := strings.TrimRight(last.Text()+trimmed, " \t\r\n")
		msgs[n-1] = llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}
	} else if trimmed != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: trimmed}}})
	}
	out.Messages = msgs
	return &out
}
