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

// unquote decodes a raw JSON string token: knownKey's without allocating,
// the rest with jsonx.Unquote (invalid UTF-8 becomes U+FFFD exactly as
// encoding/json makes it).
func unquote(raw []byte) (string, bool) {
	if len(raw) >= 2 && raw[0] == '"' {
		if k, ok := knownKey(raw[1 : len(raw)-1]); ok {
			return k, true
		}
	}
	s, err := jsonx.Unquote(raw)
	return s, err == nil
}

// knownKey returns raw (the bytes between the quotes of a string without
// escapes) as a constant string when it is a member name or an enumerated
// value the codec looks for or commonly sees, so that decoding it allocates
// nothing; ok is false otherwise.
func knownKey(raw []byte) (string, bool) {
	switch string(raw) {
	case "accepted_prediction_tokens":
		return "accepted_prediction_tokens", true
	case "annotations":
		return "annotations", true
	case "arguments":
		return "arguments", true
	case "assistant":
		return "assistant", true
	case "audio":
		return "audio", true
	case "audio_tokens":
		return "audio_tokens", true
	case "auto":
		return "auto", true
	case "cache_write_tokens":
		return "cache_write_tokens", true
	case "cached_tokens":
		return "cached_tokens", true
	case "chat.completion":
		return "chat.completion", true
	case "chat.completion.chunk":
		return "chat.completion.chunk", true
	case "choices":
		return "choices", true
	case "code":
		return "code", true
	case "completion_tokens":
		return "completion_tokens", true
	case "completion_tokens_details":
		return "completion_tokens_details", true
	case "content":
		return "content", true
	case "content_filter":
		return "content_filter", true
	case "created":
		return "created", true
	case "default":
		return "default", true
	case "delta":
		return "delta", true
	case "description":
		return "description", true
	case "detail":
		return "detail", true
	case "developer":
		return "developer", true
	case "error":
		return "error", true
	case "finish_reason":
		return "finish_reason", true
	case "frequency_penalty":
		return "frequency_penalty", true
	case "function":
		return "function", true
	case "function_call":
		return "function_call", true
	case "high":
		return "high", true
	case "id":
		return "id", true
	case "image_url":
		return "image_url", true
	case "include_usage":
		return "include_usage", true
	case "index":
		return "index", true
	case "invalid_request_error":
		return "invalid_request_error", true
	case "json_object":
		return "json_object", true
	case "json_schema":
		return "json_schema", true
	case "length":
		return "length", true
	case "logit_bias":
		return "logit_bias", true
	case "logprobs":
		return "logprobs", true
	case "low":
		return "low", true
	case "max_completion_tokens":
		return "max_completion_tokens", true
	case "max_tokens":
		return "max_tokens", true
	case "mesh_behavior":
		return "mesh_behavior", true
	case "mesh_error_code":
		return "mesh_error_code", true
	case "message":
		return "message", true
	case "messages":
		return "messages", true
	case "metadata":
		return "metadata", true
	case "model":
		return "model", true
	case "n":
		return "n", true
	case "name":
		return "name", true
	case "none":
		return "none", true
	case "object":
		return "object", true
	case "parallel_tool_calls":
		return "parallel_tool_calls", true
	case "param":
		return "param", true
	case "parameters":
		return "parameters", true
	case "presence_penalty":
		return "presence_penalty", true
	case "prompt_tokens":
		return "prompt_tokens", true
	case "prompt_tokens_details":
		return "prompt_tokens_details", true
	case "reasoning":
		return "reasoning", true
	case "reasoning_content":
		return "reasoning_content", true
	case "reasoning_tokens":
		return "reasoning_tokens", true
	case "refusal":
		return "refusal", true
	case "rejected_prediction_tokens":
		return "rejected_prediction_tokens", true
	case "required":
		return "required", true
	case "response_format":
		return "response_format", true
	case "role":
		return "role", true
	case "schema":
		return "schema", true
	case "seed":
		return "seed", true
	case "server_error":
		return "server_error", true
	case "service_tier":
		return "service_tier", true
	case "stop":
		return "stop", true
	case "store":
		return "store", true
	case "stream":
		return "stream", true
	case "stream_options":
		return "stream_options", true
	case "strict":
		return "strict", true
	case "system":
		return "system", true
	case "system_fingerprint":
		return "system_fingerprint", true
	case "temperature":
		return "temperature", true
	case "text":
		return "text", true
	case "tool":
		return "tool", true
	case "tool_call_id":
		return "tool_call_id", true
	case "tool_calls":
		return "tool_calls", true
	case "tool_choice":
		return "tool_choice", true
	case "tools":
		return "tools", true
	case "top_logprobs":
		return "top_logprobs", true
	case "top_p":
		return "top_p", true
	case "total_tokens":
		return "total_tokens", true
	case "type":
		return "type", true
	case "url":
		return "url", true
	case "usage":
		return "usage", true
	case "user":
		return "user", true
	}
	return "", false
}

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
