package anthropic

import (
	"bytes"
	"encoding/json"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// protocolError is the error for an upstream answer this codec cannot read.
func protocolError(msg string) *llm.APIError {
	return &llm.APIError{
		Status:   502,
		Type:     llm.ErrAPI,
		MeshCode: llm.MeshUpstreamProtocolFailed,
		Message:  "anthropic upstream: " + msg,
	}
}

// ParseResponse parses a non-streaming Messages API response. Unknown
// members go to Response.Extra and Usage.Extra; unknown stop reasons are
// kept as they are. A body that is not a message is an *llm.APIError with
// status 502 and MeshCode MESH_UPSTREAM_PROTOCOL. The result does not alias
// body.
func ParseResponse(body []byte) (*llm.Response, error) { return parseResponse(body, false) }

// ParseResponseOwned is ParseResponse for a body its caller hands over: the
// result may alias body (raw members such as Extra and tool inputs are
// slices of it), so body must not be modified afterwards. It spares the
// copy of the whole answer that ParseResponse makes.
func ParseResponseOwned(body []byte) (*llm.Response, error) { return parseResponse(body, true) }

// parseResponse parses body; the result aliases body when owned is set, a
// copy of it otherwise.
func parseResponse(body []byte, owned bool) (*llm.Response, error) {
	body = jsonx.TrimSpace(body)
	if !jsonx.Valid(body) {
		return nil, protocolError(invalidJSON(body))
	}
	if body[0] != '{' {
		return nil, protocolError("response body: expected a JSON object, got " + jsonx.KindName(body))
	}
	if !owned {
		body = bytes.Clone(body)
	}
	r, err := parseMessage(nil, body)
	if err != nil {
		return nil, protocolError(err.Error())
	}
	return r, nil
}

// parseMessage reads a message object (a response, or the message of a
// message_start event).
func parseMessage(path *fpath, v []byte) (*llm.Response, error) {
	r := &llm.Response{}
	// content and usage are read where they are, the rest bounded first
	// (see walkMembers).
	_, err := walkMembers(path, v, func(k string, mv []byte) (int, error) {
		p := join(path, k)
		var err error
		switch k {
		case "content":
			if jsonx.IsNull(mv) {
				return len(mv), nil
			}
			var n int
			r.Content, _, n, err = parseContentN(p, mv)
			if err == nil && mv[0] == '"' {
				err = errAt(p, "expected an array, got a string")
			}
			return n, err
		case "usage":
			if jsonx.IsNull(mv) {
				return len(mv), nil
			}
			return parseUsage(p, mv, &r.Usage)
		}
		mv = jsonx.Bound(mv)
		switch k {
		case "id":
			r.ID, err = str(p, mv)
		case "type":
			var typ string
			if typ, err = str(p, mv); err == nil && typ != "message" {
				err = errAt(p, `expected "message", got %q`, typ)
			}
		case "role":
			var role string
			if role, err = str(p, mv); err == nil && role != "assistant" {
				err = errAt(p, `expected "assistant", got %q`, role)
			}
		case "model":
			r.Model, err = str(p, mv)
		case "stop_reason":
			var s string
			s, err = str(p, mv)
			r.StopReason = llm.StopReason(s)
		case "stop_sequence":
			r.StopSequence, err = str(p, mv)
		default:
			jsonx.SetMember(&r.Extra, k, mv)
		}
		return len(mv), err
	})
	if err != nil {
		return nil, err
	}
	if r.Content == nil {
		r.Content = []llm.Block{} // content is always written, as []
	}
	return r, nil
}

// parseUsage reads a usage object into u, overwriting the counts it carries,
// and returns its length (v may run on past it: see walkMembers).
// output_tokens_details.thinking_tokens becomes ReasoningTokens; other members
// of output_tokens_details stay in Extra["output_tokens_details"] and are
// merged back by appendUsage.
//
// Not inlined, so that join inlines in its closure and the path nodes stay
// on the stack (see fpath).
//
//go:noinline
func parseUsage(path *fpath, v []byte, u *llm.Usage) (int, error) {
	return walkMembers(path, v, func(k string, uv []byte) (int, error) {
		uv = jsonx.Bound(uv)
		p := join(path, k)
		var err error
		switch k {
		case "input_tokens":
			u.InputTokens, err = integer(p, uv)
		case "output_tokens":
			u.OutputTokens, err = integer(p, uv)
		case "cache_creation_input_tokens":
			u.CacheWriteTokens, err = integer(p, uv)
		case "cache_read_input_tokens":
			u.CacheReadTokens, err = integer(p, uv)
		case "cache_creation":
			// The split of the cache writes by TTL (platform.claude.com/docs/en/build-with-claude/prompt-caching,
			// "1-hour cache duration"): typed, the other members kept in
			// Extra, an object of nothing else as {} so that it is written back.
			if len(uv) == 0 || uv[0] != '{' {
				jsonx.SetMember(&u.Extra, k, uv)
				return len(uv), nil
			}
			rest := []byte{'{'}
			err = eachMember(p, uv, func(dk string, dv []byte) error {
				var err error
				switch {
				case dk == "ephemeral_5m_input_tokens" && !jsonx.IsNull(dv):
					u.CacheWrite5mTokens, err = integer(join(p, dk), dv)
				case dk == "ephemeral_1h_input_tokens" && !jsonx.IsNull(dv):
					u.CacheWrite1hTokens, err = integer(join(p, dk), dv)
				default:
					rest = jsonx.AppendKey(rest, dk)
					rest = append(rest, dv...)
				}
				return err
			})
			jsonx.SetMember(&u.Extra, k, append(rest, '}'))
		case "output_tokens_details":
			if len(uv) == 0 || uv[0] != '{' {
				jsonx.SetMember(&u.Extra, k, uv)
				return len(uv), nil
			}
			var rest []byte
			err = eachMember(p, uv, func(dk string, dv []byte) error {
				if dk == "thinking_tokens" && !jsonx.IsNull(dv) {
					var err error
					u.ReasoningTokens, err = integer(join(p, dk), dv)
					return err
				}
				if rest == nil {
					rest = append(rest, '{')
				}
				rest = jsonx.AppendKey(rest, dk)
				rest = append(rest, dv...)
				return nil
			})
			if rest != nil {
				jsonx.SetMember(&u.Extra, k, append(rest, '}'))
			}
		default:
			jsonx.SetMember(&u.Extra, k, uv)
		}
		return len(uv), err
	})
}

// usageFields selects the optional counts appendUsage writes.
type usageFields uint8

const (
	usageAll       usageFields = iota // every count, as in a message
	usageDeltaOnly                    // output_tokens, plus the others when non-zero (message_delta)
)

// appendUsage appends a usage object: the counts in a fixed order, then Extra
// sorted by key, with ReasoningTokens merged into output_tokens_details.
func appendUsage(b []byte, path *fpath, u *llm.Usage, which usageFields) ([]byte, error) {
	b = append(b, '{')
	if which == usageAll || u.InputTokens != 0 {
		b = append(b, `"input_tokens":`...)
		b = jsonx.AppendInt(b, int64(u.InputTokens))
	}
	b = jsonx.AppendPlainKey(b, "output_tokens")
	b = jsonx.AppendInt(b, int64(u.OutputTokens))
	if which == usageAll || u.CacheWriteTokens != 0 {
		b = append(b, `,"cache_creation_input_tokens":`...)
		b = jsonx.AppendInt(b, int64(u.CacheWriteTokens))
	}
	if which == usageAll || u.CacheReadTokens != 0 {
		b = append(b, `,"cache_read_input_tokens":`...)
		b = jsonx.AppendInt(b, int64(u.CacheReadTokens))
	}
	var details []byte
	if u.ReasoningTokens != 0 {
		var buf [128]byte
		details = append(buf[:0], `{"thinking_tokens":`...)
		details = jsonx.AppendInt(details, int64(u.ReasoningTokens))
		if prev, ok := u.Extra["output_tokens_details"]; ok {
			var err error
			details, err = mergeMembers(details, join(path, "output_tokens_details"), prev)
			if err != nil {
				return b, err
			}
		}
		details = append(details, '}')
	}
	// With details, they are written as output_tokens_details in place of
	// (or in addition to) the member of Extra.
	detailsKey := ""
	if details != nil {
		detailsKey = "output_tokens_details"
	}
	extra := u.Extra
	if creation, err := appendCacheCreation(nil, join(path, "cache_creation"), u); err != nil {
		return b, err
	} else if creation != nil {
		extra = make(llm.Extra, len(u.Extra)+1)
		for k, v := range u.Extra {
			extra[k] = v
		}
		extra["cache_creation"] = creation
	}
	b, err := appendExtraWith(b, path, extra, detailsKey, details)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendCacheCreation appends the usage's cache_creation object — the
// typed TTL split, then the other members kept in Extra — when the split
// is non-zero or the object was present; it appends nothing otherwise, and
// Extra's value as it is when that is not an object and the split is 0.
func appendCacheCreation(b []byte, path *fpath, u *llm.Usage) ([]byte, error) {
	prev, had := u.Extra["cache_creation"]
	if u.CacheWrite5mTokens == 0 && u.CacheWrite1hTokens == 0 {
		if !had || len(jsonx.TrimSpace(prev)) == 0 || jsonx.TrimSpace(prev)[0] != '{' {
			return nil, nil
		}
	}
	b = append(b, `{"ephemeral_5m_input_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.CacheWrite5mTokens))
	b = append(b, `,"ephemeral_1h_input_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.CacheWrite1hTokens))
	if t := jsonx.TrimSpace(prev); len(t) > 0 && t[0] == '{' {
		if !jsonx.Valid(t) {
			return b, errAt(path, "not valid JSON")
		}
		err := eachMember(path, t, func(k string, v []byte) error {
			if k == "ephemeral_5m_input_tokens" || k == "ephemeral_1h_input_tokens" {
				return nil
			}
			b = jsonx.AppendKey(b, k)
			b = append(b, v...)
			return nil
		})
		if err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

// mergeMembers appends the members of object obj (without braces) to b, which
// holds an open object with at least one member.
func mergeMembers(b []byte, path *fpath, obj json.RawMessage) ([]byte, error) {
	if !jsonx.Valid(obj) {
		return b, errAt(path, "not valid JSON")
	}
	return b, eachMember(path, jsonx.TrimSpace(obj), func(k string, v []byte) error {
		if k == "thinking_tokens" {
			return nil
		}
		b = jsonx.AppendKey(b, k)
		b = append(b, v...)
		return nil
	})
}

// EncodeResponse writes a non-streaming Messages API response:
// id, type, role, model, content, stop_reason, stop_sequence, usage, then
// Extra sorted by key. Empty stop fields are written as null.
func EncodeResponse(r *llm.Response) ([]byte, error) {
	n := 256
	for i := range r.Content {
		n += estimateBlock(&r.Content[i])
	}
	return appendMessage(make([]byte, 0, n), r, r.Content)
}

func appendMessage(b []byte, r *llm.Response, content []llm.Block) ([]byte, error) {
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, r.ID)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = jsonx.AppendString(b, r.Model)
	b = append(b, `,"content":`...)
	if content == nil {
		content = []llm.Block{}
	}
	var err error
	if b, err = appendContent(b, root("content"), content, false); err != nil {
		return nil, err
	}
	b = append(b, `,"stop_reason":`...)
	b = appendStringOrNull(b, string(r.StopReason))
	b = append(b, `,"stop_sequence":`...)
	b = appendStringOrNull(b, r.StopSequence)
	b = append(b, `,"usage":`...)
	if b, err = appendUsage(b, root("usage"), &r.Usage, usageAll); err != nil {
		return nil, err
	}
	if b, err = appendExtra(b, nil, r.Extra); err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

func appendStringOrNull(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonx.AppendString(b, s)
}
