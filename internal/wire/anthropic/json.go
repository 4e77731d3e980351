package anthropic

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// This file holds what of the JSON toolkit is the codec's own: field paths
// for errors, a member and element walk over JSON that has already passed
// jsonx.Valid that decodes keys through this codec's knownKey table and
// reports type mismatches at the field path, typed value readers, and the
// Extra writer's rule (each value checked, an invalid one an error at its
// path). The scanning and encoding underneath are jsonx's.

// fieldError is a decoding failure at a field path such as "messages.0.role".
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string {
	if e.path == "" {
		return e.msg
	}
	return e.path + ": " + e.msg
}

// fpath is a field path built lazily: a chain of nodes from the leaf to the
// root, rendered by String only when an error is reported, so the hot path
// builds no strings. The nil *fpath is the empty path. Nodes live on the
// stack of the functions that create them (join and joinIndex inline); no
// function may keep one after it returns.
type fpath struct {
	parent  *fpath
	key     string
	index   int
	isIndex bool
}

// String renders the path as the old eager join/joinIndex did: keys joined
// with "." (a key at the root stands alone), an index always preceded by ".".
func (p *fpath) String() string {
	var buf [64]byte
	return string(p.appendTo(buf[:0]))
}

// appendTo renders the path into b, which must be empty on the outermost
// call. It copies the keys' bytes, so no node escapes through the result.
func (p *fpath) appendTo(b []byte) []byte {
	if p == nil {
		return b
	}
	b = p.parent.appendTo(b)
	if p.isIndex {
		b = append(b, '.')
		return strconv.AppendInt(b, int64(p.index), 10)
	}
	if len(b) > 0 {
		b = append(b, '.')
	}
	return append(b, p.key...)
}

func errAt(path *fpath, format string, args ...any) error {
	return &fieldError{path: path.String(), msg: fmt.Sprintf(format, args...)}
}

func join(path *fpath, key string) *fpath {
	return &fpath{parent: path, key: key}
}

func joinIndex(path *fpath, i int) *fpath {
	return &fpath{parent: path, index: i, isIndex: true}
}

// detach returns a one-node copy of p (a root key that renders as p does)
// that shares nothing with p's chain. The codec passes it where it recurses
// (array content of a tool_result block, parsed or encoded): a node reachable
// from its own recursive callee would otherwise make the escape analysis move
// every path node to the heap. Check with go build -gcflags=-m that no
// &fpath{...} escapes outside join, joinIndex and root themselves.
func detach(p *fpath) fpath {
	return fpath{key: p.String()}
}

// root is the path of a top-level member.
func root(key string) *fpath { return join(nil, key) }

// eachMember calls fn for every member of the object v (valid JSON, trimmed)
// with its key decoded (allocation-free for knownKey's). It reports a type
// error at path when v is not an object.
func eachMember(path *fpath, v []byte, fn func(key string, val []byte) error) error {
	if len(v) == 0 || v[0] != '{' {
		return errAt(path, "expected an object, got %s", jsonx.KindName(v))
	}
	return jsonx.EachMember(v, func(k, val []byte) error {
		key, err := unquote(path, k)
		if err != nil {
			return err
		}
		return fn(key, val)
	})
}

// knownKey returns raw (the bytes between the quotes of a string without
// escapes) as a constant string when it is a member name or an enumerated
// value the codec looks for or commonly sees, so that reading it allocates
// nothing; ok is false otherwise.
func knownKey(raw []byte) (key string, ok bool) {
	switch string(raw) {
	case "any":
		return "any", true
	case "api_error":
		return "api_error", true
	case "assistant":
		return "assistant", true
	case "authentication_error":
		return "authentication_error", true
	case "auto":
		return "auto", true
	case "base64":
		return "base64", true
	case "budget_tokens":
		return "budget_tokens", true
	case "cache_control":
		return "cache_control", true
	case "cache_creation":
		return "cache_creation", true
	case "cache_creation_input_tokens":
		return "cache_creation_input_tokens", true
	case "cache_read_input_tokens":
		return "cache_read_input_tokens", true
	case "citations":
		return "citations", true
	case "container":
		return "container", true
	case "content":
		return "content", true
	case "content_block":
		return "content_block", true
	case "content_block_delta":
		return "content_block_delta", true
	case "content_block_start":
		return "content_block_start", true
	case "content_block_stop":
		return "content_block_stop", true
	case "context":
		return "context", true
	case "custom":
		return "custom", true
	case "data":
		return "data", true
	case "delta":
		return "delta", true
	case "description":
		return "description", true
	case "details":
		return "details", true
	case "disable_parallel_tool_use":
		return "disable_parallel_tool_use", true
	case "end_turn":
		return "end_turn", true
	case "ephemeral":
		return "ephemeral", true
	case "ephemeral_1h_input_tokens":
		return "ephemeral_1h_input_tokens", true
	case "ephemeral_5m_input_tokens":
		return "ephemeral_5m_input_tokens", true
	case "error":
		return "error", true
	case "error_code":
		return "error_code", true
	case "file_id":
		return "file_id", true
	case "id":
		return "id", true
	case "image":
		return "image", true
	case "index":
		return "index", true
	case "input":
		return "input", true
	case "input_json_delta":
		return "input_json_delta", true
	case "input_schema":
		return "input_schema", true
	case "input_tokens":
		return "input_tokens", true
	case "invalid_request_error":
		return "invalid_request_error", true
	case "is_error":
		return "is_error", true
	case "max_tokens":
		return "max_tokens", true
	case "media_type":
		return "media_type", true
	case "mesh_behavior":
		return "mesh_behavior", true
	case "mesh_error_code":
		return "mesh_error_code", true
	case "message":
		return "message", true
	case "message_delta":
		return "message_delta", true
	case "message_start":
		return "message_start", true
	case "message_stop":
		return "message_stop", true
	case "messages":
		return "messages", true
	case "metadata":
		return "metadata", true
	case "model":
		return "model", true
	case "model_context_window_exceeded":
		return "model_context_window_exceeded", true
	case "name":
		return "name", true
	case "none":
		return "none", true
	case "not_found_error":
		return "not_found_error", true
	case "output_tokens":
		return "output_tokens", true
	case "output_tokens_details":
		return "output_tokens_details", true
	case "overloaded_error":
		return "overloaded_error", true
	case "partial_json":
		return "partial_json", true
	case "pause_turn":
		return "pause_turn", true
	case "permission_error":
		return "permission_error", true
	case "ping":
		return "ping", true
	case "rate_limit_error":
		return "rate_limit_error", true
	case "redacted_thinking":
		return "redacted_thinking", true
	case "refusal":
		return "refusal", true
	case "request_id":
		return "request_id", true
	case "role":
		return "role", true
	case "server_tool_use":
		return "server_tool_use", true
	case "service_tier":
		return "service_tier", true
	case "signature":
		return "signature", true
	case "signature_delta":
		return "signature_delta", true
	case "source":
		return "source", true
	case "stop_reason":
		return "stop_reason", true
	case "stop_sequence":
		return "stop_sequence", true
	case "stop_sequences":
		return "stop_sequences", true
	case "stream":
		return "stream", true
	case "strict":
		return "strict", true
	case "system":
		return "system", true
	case "temperature":
		return "temperature", true
	case "text":
		return "text", true
	case "text_delta":
		return "text_delta", true
	case "thinking":
		return "thinking", true
	case "thinking_delta":
		return "thinking_delta", true
	case "thinking_tokens":
		return "thinking_tokens", true
	case "title":
		return "title", true
	case "tool":
		return "tool", true
	case "tool_choice":
		return "tool_choice", true
	case "tool_result":
		return "tool_result", true
	case "tool_use":
		return "tool_use", true
	case "tool_use_id":
		return "tool_use_id", true
	case "tools":
		return "tools", true
	case "top_k":
		return "top_k", true
	case "top_p":
		return "top_p", true
	case "type":
		return "type", true
	case "url":
		return "url", true
	case "user":
		return "user", true
	case "user_id":
		return "user_id", true
	case "web_search_20250305":
		return "web_search_20250305", true
	}
	return "", false
}

// eachElem calls fn for every element of the array v (valid JSON, trimmed).
func eachElem(path *fpath, v []byte, fn func(i int, val []byte) error) error {
	if len(v) == 0 || v[0] != '[' {
		return errAt(path, "expected an array, got %s", jsonx.KindName(v))
	}
	return jsonx.EachElement(v, fn)
}

// unquote decodes a JSON string token: knownKey's without allocating, the
// rest with jsonx.Unquote.
func unquote(path *fpath, v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", errAt(path, "expected a string, got %s", jsonx.KindName(v))
	}
	if k, ok := knownKey(v[1 : len(v)-1]); ok {
		return k, nil
	}
	s, err := jsonx.Unquote(v)
	if err != nil {
		return "", errAt(path, "invalid string: %v", err)
	}
	return s, nil
}

// str reads a string; null reads as "".
func str(path *fpath, v []byte) (string, error) {
	if jsonx.IsNull(v) {
		return "", nil
	}
	return unquote(path, v)
}

// boolean reads true or false; null reads as false.
func boolean(path *fpath, v []byte) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false", "null":
		return false, nil
	}
	return false, errAt(path, "expected a boolean, got %s", jsonx.KindName(v))
}

func number(path *fpath, v []byte) (float64, error) {
	if len(v) == 0 || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return 0, errAt(path, "expected a number, got %s", jsonx.KindName(v))
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil {
		return 0, errAt(path, "number %s out of range", v)
	}
	return f, nil
}

// integer reads an integral JSON number (1.0 and 1e3 are accepted); null reads as 0.
func integer(path *fpath, v []byte) (int, error) {
	if jsonx.IsNull(v) {
		return 0, nil
	}
	if len(v) == 0 || !(v[0] == '-' || (v[0] >= '0' && v[0] <= '9')) {
		return 0, errAt(path, "expected an integer, got %s", jsonx.KindName(v))
	}
	if n, err := strconv.ParseInt(string(v), 10, 0); err == nil {
		return int(n), nil
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, errAt(path, "expected an integer, got %s", v)
	}
	return int(f), nil
}

// ---- encoding ----

// appendRaw appends a raw JSON value after checking it is valid.
func appendRaw(b []byte, what *fpath, v json.RawMessage) ([]byte, error) {
	if !jsonx.Valid(v) {
		return b, fmt.Errorf("%s is not valid JSON", what.String())
	}
	return append(b, v...), nil
}

// appendExtra appends the members of x sorted by key.
func appendExtra(b []byte, path *fpath, x llm.Extra) ([]byte, error) {
	return appendExtraWith(b, path, x, "", nil)
}

// appendExtraWith appends the members of x sorted by key as appendExtra
// does, as if x's member named key (when key is not empty) were deleted and,
// when val is not nil, key: val set in its place; x itself is not changed.
func appendExtraWith(b []byte, path *fpath, x llm.Extra, key string, val json.RawMessage) ([]byte, error) {
	if len(x) == 0 && val == nil {
		return b, nil
	}
	var stack [16]string
	keys := stack[:0]
	if val != nil {
		keys = append(keys, key)
	}
	var skip func(string) bool
	if key != "" {
		skip = func(k string) bool { return k == key }
	}
	keys = jsonx.SortedKeys(keys, x, skip)
	var err error
	for _, k := range keys {
		v := x[k]
		if val != nil && k == key {
			v = val
		}
		b = jsonx.AppendKey(b, k)
		if b, err = appendRaw(b, join(path, k), v); err != nil {
			return b, err
		}
	}
	return b, nil
}
