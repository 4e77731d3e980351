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
// jsonx.Valid that decodes keys through this codec's knownKeys table and
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
// with its key decoded (allocation-free for knownKeys'). It reports a type
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

// walkMembers is eachMember for an object v starts with that may run on
// past its end: fn gets an object or array value open-ended and returns the
// length of the value (see jsonx.WalkMembers), so that a nested value is
// walked once, not skipped first. It returns the object's length.
func walkMembers(path *fpath, v []byte, fn func(key string, val []byte) (int, error)) (int, error) {
	if len(v) == 0 || v[0] != '{' {
		return 0, errAt(path, "expected an object, got %s", jsonx.KindName(v))
	}
	return jsonx.WalkMembers(v, func(k, val []byte) (int, error) {
		key, err := unquote(path, k)
		if err != nil {
			return 0, err
		}
		return fn(key, val)
	})
}

// walkElems is walkMembers for an array: eachElem's counterpart.
func walkElems(path *fpath, v []byte, fn func(i int, val []byte) (int, error)) (int, error) {
	if len(v) == 0 || v[0] != '[' {
		return 0, errAt(path, "expected an array, got %s", jsonx.KindName(v))
	}
	return jsonx.WalkElements(v, fn)
}

// knownKeys holds the member names and enumerated values the codec looks
// for or commonly sees, in byte order: knownKeys.Lookup returns raw (the
// bytes between the quotes of a string without escapes) as the table's
// constant string, so that reading it allocates nothing; ok is false otherwise.
var knownKeys = jsonx.NewNames(
	"any", "api_error", "assistant", "authentication_error", "auto", "base64",
	"budget_tokens", "cache_control", "cache_creation",
	"cache_creation_input_tokens", "cache_read_input_tokens", "citations",
	"container", "content", "content_block", "content_block_delta",
	"content_block_start", "content_block_stop", "context", "custom", "data",
	"delta", "description", "details", "disable_parallel_tool_use", "end_turn",
	"ephemeral", "ephemeral_1h_input_tokens", "ephemeral_5m_input_tokens",
	"error", "error_code", "file_id", "id", "image", "index", "input",
	"input_json_delta", "input_schema", "input_tokens",
	"invalid_request_error", "is_error", "max_tokens", "media_type",
	"mesh_behavior", "mesh_error_code", "message", "message_delta",
	"message_start", "message_stop", "messages", "metadata", "model",
	"model_context_window_exceeded", "name", "none", "not_found_error",
	"output_tokens", "output_tokens_details", "overloaded_error",
	"partial_json", "pause_turn", "permission_error", "ping",
	"rate_limit_error", "redacted_thinking", "refusal", "request_id", "role",
	"server_tool_use", "service_tier", "signature", "signature_delta",
	"source", "stop_reason", "stop_sequence", "stop_sequences", "stream",
	"strict", "system", "temperature", "text", "text_delta", "thinking",
	"thinking_delta", "thinking_tokens", "title", "tool", "tool_choice",
	"tool_result", "tool_use", "tool_use_id", "tools", "top_k", "top_p",
	"type", "url", "user", "user_id", "web_search_20250305",
)

// eachElem calls fn for every element of the array v (valid JSON, trimmed).
func eachElem(path *fpath, v []byte, fn func(i int, val []byte) error) error {
	if len(v) == 0 || v[0] != '[' {
		return errAt(path, "expected an array, got %s", jsonx.KindName(v))
	}
	return jsonx.EachElement(v, fn)
}

// unquote decodes a JSON string token: knownKeys' without allocating, the
// rest with jsonx.Unquote.
func unquote(path *fpath, v []byte) (string, error) {
	if len(v) < 2 || v[0] != '"' || v[len(v)-1] != '"' {
		return "", errAt(path, "expected a string, got %s", jsonx.KindName(v))
	}
	if k, ok := knownKeys.Lookup(v[1 : len(v)-1]); ok {
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
