package responses

import (
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// Anthropic's opaque thinking state rides in a reasoning item's
// encrypted_content when a Responses client is served by an Anthropic
// endpoint: the client stores the item and sends it back as it does
// OpenAI's own, and ParseRequest turns it into the thinking block it was,
// signature byte for byte, so that it reaches Anthropic endpoints only
// (translation drops thinking for every other family). The prefixes keep
// the two kinds apart; OpenAI's own encrypted_content never starts so.
const (
	thinkingPrefix = "keel.anthropic.thinking."
	redactedPrefix = "keel.anthropic.redacted."
)

// opaque is the encrypted_content a reasoning, thinking or redacted
// thinking block is written with.
func opaque(bl *llm.Block) string {
	switch bl.Type {
	case llm.BlockReasoning:
		return bl.Data
	case llm.BlockThinking:
		if bl.Signature != "" {
			return thinkingPrefix + bl.Signature
		}
	case llm.BlockRedactedThinking:
		return redactedPrefix + bl.Data
	}
	return ""
}

// unwrapOpaque turns a reasoning block that carries Anthropic state back
// into the thinking or redacted thinking block it was.
func unwrapOpaque(b llm.Block) llm.Block {
	if sig, ok := strings.CutPrefix(b.Data, thinkingPrefix); ok {
		return llm.Block{Type: llm.BlockThinking, Thinking: b.Thinking, Signature: sig}
	}
	if data, ok := strings.CutPrefix(b.Data, redactedPrefix); ok {
		return llm.Block{Type: llm.BlockRedactedThinking, Data: data}
	}
	return b
}
