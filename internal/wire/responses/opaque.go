package responses

import (
	"encoding/json"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
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

// customInput is a custom (freeform) tool call's text input as the JSON
// object the canonical model's tool calls take: {"input": text}.
func customInput(text string) json.RawMessage {
	b := append([]byte(`{"input":`), jsonx.AppendString(nil, text)...)
	return append(b, '}')
}

// CustomCallMarker is the Raw of a tool call block that translation marks
// as a custom tool's call for a client that offered the tool as one: the
// item is built from the block's id, name and {"input": text}.
const CustomCallMarker = `{"type":"custom_tool_call"}`

// isCustomCall reports whether a tool call block is a custom tool's: kept
// from a custom_tool_call item, or marked so by translation (Raw
// {"type":"custom_tool_call"}) for a client that offered the tool as one.
func isCustomCall(bl *llm.Block) bool {
	return bl.Type == llm.BlockToolUse && bl.Raw != nil && itemTypeOf(bl.Raw) == "custom_tool_call"
}

// customCall returns the custom_tool_call output item of a tool call whose
// input is {"input": text} (or any JSON: then its text).
func customCall(id, callID, name string, input json.RawMessage) json.RawMessage {
	text := customText(string(input))
	b := []byte(`{"id":`)
	b = jsonx.AppendString(b, id)
	b = append(b, `,"type":"custom_tool_call","status":"completed","call_id":`...)
	b = jsonx.AppendString(b, callID)
	b = append(b, `,"name":`...)
	b = jsonx.AppendString(b, name)
	b = append(b, `,"input":`...)
	b = jsonx.AppendString(b, text)
	return append(b, '}')
}

// itemTypeOf is the type member of a raw item, "" when it has none.
func itemTypeOf(raw []byte) string {
	typ := ""
	_ = jsonx.EachMember(raw, func(k, v []byte) error {
		if string(k) == `"type"` {
			typ, _ = jsonx.Unquote(v)
		}
		return nil
	})
	return typ
}

// customText is the text of a custom tool call's {"input": text}; other
// JSON is its own text.
func customText(input string) string {
	var in struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(input), &in) == nil && in.Input != nil {
		return *in.Input
	}
	return input
}
