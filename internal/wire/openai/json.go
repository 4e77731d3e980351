package openai

import (
	"encoding/json"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// This file holds what of the JSON toolkit is the codec's own: its table of
// known keys, the raw-key helpers the member walkers' callers switch on, and
// the Extra writer's rule (values verbatim, null for an unset one). The
// walkers and encoders are jsonx's; inputs are checked with jsonx.Valid
// once, and the walkers bounds-check every index so that no input can make
// them panic.

// unquote decodes a raw JSON string token: knownKeys' without allocating,
// the rest with jsonx.Unquote (invalid UTF-8 becomes U+FFFD exactly as
// encoding/json makes it).
func unquote(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		if k, ok := knownKeys.Lookup(raw[1 : len(raw)-1]); ok {
			return k, true
		}
	}
	s, err := jsonx.Unquote(raw)
	return s, err == nil
}

// knownKeys holds the member names and enumerated values the codec looks
// for or commonly sees, in byte order: knownKeys.Lookup returns raw (the
// bytes between the quotes of a string without escapes) as the table's
// constant string, so that decoding it allocates nothing; ok is false otherwise.
var knownKeys = jsonx.NewNames(
	"accepted_prediction_tokens", "annotations", "arguments", "assistant",
	"audio", "audio_tokens", "auto", "cache_write_tokens", "cached_tokens",
	"chat.completion", "chat.completion.chunk", "choices", "code",
	"completion_tokens", "completion_tokens_details", "content",
	"content_filter", "created", "default", "delta", "description", "detail",
	"developer", "error", "finish_reason", "frequency_penalty", "function",
	"function_call", "high", "id", "image_url", "include_usage", "index",
	"invalid_request_error", "json_object", "json_schema", "length",
	"logit_bias", "logprobs", "low", "max_completion_tokens", "max_tokens",
	"mesh_behavior", "mesh_error_code", "message", "messages", "metadata",
	"model", "n", "name", "none", "object", "parallel_tool_calls", "param",
	"parameters", "presence_penalty", "prompt_tokens", "prompt_tokens_details",
	"reasoning", "reasoning_content", "reasoning_tokens", "refusal",
	"rejected_prediction_tokens", "required", "response_format", "role",
	"schema", "seed", "server_error", "service_tier", "stop", "store",
	"stream", "stream_options", "strict", "system", "system_fingerprint",
	"temperature", "text", "tool", "tool_call_id", "tool_calls", "tool_choice",
	"tools", "top_logprobs", "top_p", "total_tokens", "type", "url", "usage",
	"user",
)

// keyName decodes a raw object key.
func keyName(raw []byte) string {
	s, _ := unquote(raw)
	return s
}

// bareKey returns the key's bytes when they need no decoding, else the
// decoded key as bytes; callers switch on string(bareKey(k)).
func bareKey(raw []byte) []byte {
	if len(raw) >= 2 {
		inner := raw[1 : len(raw)-1]
		if jsonx.Plain(inner) {
			return inner
		}
	}
	return []byte(keyName(raw))
}

// setExtra stores a member verbatim in *e, creating the map on first use.
func setExtra(e *llm.Extra, key []byte, val []byte) {
	jsonx.SetMember(e, keyName(key), val)
}

// --- encoding ---

// appendRaw appends a verbatim JSON value, or null when it is empty.
func appendRaw(b []byte, v json.RawMessage) []byte {
	if len(v) == 0 {
		return append(b, "null"...)
	}
	return append(b, v...)
}

// appendExtra appends the members of e sorted by key, skipping keys for which
// known reports true (members the encoder already wrote).
func appendExtra(b []byte, e llm.Extra, known func(string) bool) []byte {
	if len(e) == 0 {
		return b
	}
	var stack [16]string
	for _, k := range jsonx.SortedKeys(stack[:0], e, known) {
		b = jsonx.AppendKey(b, k)
		b = appendRaw(b, e[k])
	}
	return b
}

// appendObjectMembers appends the members of the raw JSON object obj (the
// partial objects this codec keeps for nested unknown members) into the
// object being written in b.
func appendObjectMembers(b []byte, obj json.RawMessage) []byte {
	_ = jsonx.EachMember(obj, func(k, v []byte) error {
		if n := len(b); n > 0 && b[n-1] != '{' {
			b = append(b, ',')
		}
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
		return nil
	})
	return b
}
