package openai

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// This file holds the small JSON toolkit the codec is built on: a walker over
// already-validated JSON (members of an object, elements of an array, without
// decoding what is not needed) and append-based encoders. Inputs are checked
// with json.Valid once, so the walker can rely on well-formed input; it still
// bounds-checks every index so that no input can make it panic.

func skipWS(d []byte, i int) int    { return jsonx.SkipWS(d, i) }
func stringEnd(d []byte, i int) int { return jsonx.StringEnd(d, i) }
func valueEnd(d []byte, i int) int  { return jsonx.ValueEnd(d, i) }

// eachMember calls fn with the raw (still quoted) key and the raw value of
// every member of the JSON object obj, in order. obj must be valid JSON.
func eachMember(obj []byte, fn func(key, val []byte) error) error {
	i := skipWS(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return errNotObject
	}
	i = skipWS(obj, i+1)
	for i < len(obj) && obj[i] == '"' {
		kEnd := stringEnd(obj, i)
		key := obj[i:kEnd]
		i = skipWS(obj, kEnd)
		i = skipWS(obj, i+1) // ':'
		vEnd := valueEnd(obj, i)
		if vEnd <= i {
			return errNotObject
		}
		if err := fn(key, obj[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(obj, vEnd)
		if i >= len(obj) || obj[i] != ',' {
			break
		}
		i = skipWS(obj, i+1)
	}
	return nil
}

// eachElement calls fn with the index and raw value of every element of the
// JSON array arr. arr must be valid JSON.
func eachElement(arr []byte, fn func(i int, val []byte) error) error {
	i := skipWS(arr, 0)
	if i >= len(arr) || arr[i] != '[' {
		return errNotArray
	}
	i = skipWS(arr, i+1)
	for n := 0; i < len(arr) && arr[i] != ']'; n++ {
		vEnd := valueEnd(arr, i)
		if vEnd <= i {
			return errNotArray
		}
		if err := fn(n, arr[i:vEnd]); err != nil {
			return err
		}
		i = skipWS(arr, vEnd)
		if i >= len(arr) || arr[i] != ',' {
			break
		}
		i = skipWS(arr, i+1)
	}
	return nil
}

// countElements returns the number of elements of the JSON array arr (valid
// JSON), so that slices can be allocated at their final size.
func countElements(arr []byte) int {
	n := 0
	_ = eachElement(arr, func(int, []byte) error {
		n++
		return nil
	})
	return n
}

type jsonError string

func (e jsonError) Error() string { return string(e) }

const (
	errNotObject jsonError = "expected a JSON object"
	errNotArray  jsonError = "expected a JSON array"
)

// kind and isNull are the shared helpers (internal/jsonx).
func kind(v []byte) string { return jsonx.KindName(v) }

func isNull(v []byte) bool { return jsonx.IsNull(v) }

// unquote decodes a raw JSON string. Strings without escapes and with valid
// UTF-8 are sliced directly; the rest go through encoding/json, so that
// invalid UTF-8 becomes U+FFFD exactly as encoding/json does.
func unquote(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", false
	}
	inner := raw[1 : len(raw)-1]
	if k, ok := knownKey(inner); ok {
		return k, true
	}
	if !hasEscapeOrInvalid(inner) {
		return string(inner), true
	}
	if raw[len(raw)-1] == '"' {
		if s, ok := decodeString(inner); ok {
			return s, true
		}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
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

func hasEscapeOrInvalid(b []byte) bool {
	ascii := true
	for _, c := range b {
		if c == '\\' {
			return true
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	return !ascii && !utf8.Valid(b)
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
		if !hasEscapeOrInvalid(inner) {
			return inner
		}
	}
	return []byte(keyName(raw))
}

// setExtra stores a member verbatim in *e, creating the map on first use.
func setExtra(e *llm.Extra, key []byte, val []byte) {
	if *e == nil {
		*e = make(llm.Extra, 4)
	}
	(*e)[keyName(key)] = json.RawMessage(val)
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
	_ = eachMember(obj, func(k, v []byte) error {
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
