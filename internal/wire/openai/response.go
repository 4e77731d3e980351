package openai

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// protocolError is what parsing an upstream's malformed answer returns.
func protocolError(format string, args ...any) *llm.APIError {
	return &llm.APIError{
		Status:   502,
		Type:     llm.ErrAPI,
		MeshCode: llm.MeshUpstreamProtocolFailed,
		Message:  "openai upstream: " + fmt.Sprintf(format, args...),
	}
}

// finishReason maps a canonical stop reason to an OpenAI finish_reason
// (PROTOCOLS §5.2). Reasons OpenAI has no word for map to the nearest one;
// an unknown reason is passed through; "" gives "" (null on the wire).
func finishReason(s llm.StopReason) string {
	switch s {
	case llm.StopEndTurn, llm.StopSequence, llm.StopPauseTurn:
		return "stop"
	case llm.StopMaxTokens, llm.StopContextLimit, "compaction":
		return "length"
	case llm.StopToolUse:
		return "tool_calls"
	case llm.StopRefusal:
		return "content_filter"
	}
	return string(s)
}

// stopReason maps an OpenAI finish_reason to a canonical stop reason;
// unknown values pass through unchanged.
func stopReason(finish string) llm.StopReason {
	switch finish {
	case "stop":
		return llm.StopEndTurn
	case "length":
		return llm.StopMaxTokens
	case "tool_calls", "function_call":
		return llm.StopToolUse
	case "content_filter":
		return llm.StopRefusal
	}
	return llm.StopReason(finish)
}

// ParseResponse decodes an OpenAI chat.completion body. Only choices[0] is
// kept (Keel serves n=1). Unknown members go to Response.Extra (top level),
// ChoiceExtra and MessageExtra; unknown members of usage and of its details
// objects go to Usage.Extra (the details ones as a partial object under
// "prompt_tokens_details" / "completion_tokens_details"). Errors are
// *llm.APIError with status 502 and MeshCode MESH_UPSTREAM_PROTOCOL.
func ParseResponse(body []byte) (*llm.Response, error) {
	if !jsonx.Valid(body) {
		return nil, protocolError("response body is not valid JSON")
	}
	if i := jsonx.SkipWS(body, 0); i >= len(body) || body[i] != '{' {
		return nil, protocolError("response body is not a JSON object")
	}
	r := &llm.Response{}
	var perr error
	err := jsonx.EachMember(body, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "id":
			r.ID, perr = optString(v, "id")
		case "object":
			if string(v) != `"chat.completion"` {
				setExtra(&r.Extra, k, v)
			}
		case "created":
			if !jsonx.IsNull(v) {
				var n int64
				n, perr = strconv.ParseInt(string(v), 10, 64)
				if perr != nil {
					perr = fmt.Errorf("created: %s", v)
				}
				r.Created = n
			}
		case "model":
			r.Model, perr = optString(v, "model")
		case "system_fingerprint":
			r.SystemFingerprint, perr = optString(v, "system_fingerprint")
		case "choices":
			perr = parseChoices(v, r)
		case "usage":
			if !jsonx.IsNull(v) {
				perr = parseUsage(v, &r.Usage)
			}
		default:
			setExtra(&r.Extra, k, v)
		}
		return perr
	})
	if err != nil {
		return nil, protocolError("%v", err)
	}
	return r, nil
}

// optString decodes a string that may be null.
func optString(v []byte, name string) (string, error) {
	if jsonx.IsNull(v) {
		return "", nil
	}
	s, ok := unquote(v)
	if !ok {
		return "", fmt.Errorf("%s: expected a string, got %s", name, jsonx.KindName(v))
	}
	return s, nil
}

// appendBlocksText appends llm.BlocksText(bs) as a JSON string without
// building the joined string when no text is invalid UTF-8 (then escaping
// piece by piece equals escaping the whole: no character spans two pieces).
func appendBlocksText(b []byte, bs []llm.Block) []byte {
	for i := range bs {
		if bs[i].Type == llm.BlockText && !utf8.ValidString(bs[i].Text) {
			return jsonx.AppendString(b, llm.BlocksText(bs))
		}
	}
	b = append(b, '"')
	for i := range bs {
		if bs[i].Type == llm.BlockText {
			b = jsonx.AppendStringBody(b, bs[i].Text)
		}
	}
	return append(b, '"')
}

// lenientString is optString for callers that ignore its error: the string,
// or "" for null or anything that is not a string, without building an error.
func lenientString(v []byte) string {
	if jsonx.IsNull(v) {
		return ""
	}
	s, _ := unquote(v)
	return s
}

func optInt(v []byte, name string) (int, error) {
	if jsonx.IsNull(v) {
		return 0, nil
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: expected an integer, got %s", name, v)
	}
	return int(n), nil
}

func parseChoices(v []byte, r *llm.Response) error {
	if v[0] != '[' {
		return fmt.Errorf("choices: expected an array, got %s", jsonx.KindName(v))
	}
	return jsonx.EachElement(v, func(i int, el []byte) error {
		if i > 0 {
			return nil
		}
		if el[0] != '{' {
			return fmt.Errorf("choices[0]: expected an object, got %s", jsonx.KindName(el))
		}
		return jsonx.EachMember(el, func(k, cv []byte) error {
			switch string(bareKey(k)) {
			case "index":
			case "finish_reason":
				s, err := optString(cv, "finish_reason")
				r.StopReason = stopReason(s)
				return err
			case "logprobs":
				if !jsonx.IsNull(cv) {
					setExtra(&r.ChoiceExtra, k, cv)
				}
			case "message":
				return parseResponseMessage(cv, r)
			default:
				setExtra(&r.ChoiceExtra, k, cv)
			}
			return nil
		})
	})
}

func parseResponseMessage(v []byte, r *llm.Response) error {
	if v[0] != '{' {
		return fmt.Errorf("message: expected an object, got %s", jsonx.KindName(v))
	}
	var toolCalls []byte
	err := jsonx.EachMember(v, func(k, mv []byte) error {
		switch string(bareKey(k)) {
		case "role":
			if string(mv) != `"assistant"` {
				setExtra(&r.MessageExtra, k, mv)
			}
		case "content":
			switch {
			case jsonx.IsNull(mv):
			case mv[0] == '"':
				s, _ := unquote(mv)
				r.Content = append(r.Content, llm.Block{Type: llm.BlockText, Text: s})
			default:
				return fmt.Errorf("message.content: expected a string or null, got %s", jsonx.KindName(mv))
			}
		case "refusal":
			s, err := optString(mv, "message.refusal")
			r.Refusal = s
			return err
		case "tool_calls":
			toolCalls = mv
		default:
			setExtra(&r.MessageExtra, k, mv)
		}
		return nil
	})
	if err != nil || toolCalls == nil || jsonx.IsNull(toolCalls) {
		return err
	}
	if toolCalls[0] != '[' {
		return fmt.Errorf("message.tool_calls: expected an array, got %s", jsonx.KindName(toolCalls))
	}
	return jsonx.EachElement(toolCalls, func(j int, el []byte) error {
		b, err := parseToolCall(el, index(root("message.tool_calls"), j))
		if err != nil {
			return err
		}
		r.Content = append(r.Content, b)
		return nil
	})
}

func parseUsage(v []byte, u *llm.Usage) error {
	if v[0] != '{' {
		return fmt.Errorf("usage: expected an object, got %s", jsonx.KindName(v))
	}
	var prompt int
	err := jsonx.EachMember(v, func(k, uv []byte) error {
		var err error
		switch name := keyName(k); name {
		case "prompt_tokens":
			prompt, err = optInt(uv, name)
		case "completion_tokens":
			u.OutputTokens, err = optInt(uv, name)
		case "total_tokens":
			// derived: prompt + completion
		case "prompt_tokens_details", "completion_tokens_details":
			if jsonx.IsNull(uv) {
				return nil
			}
			if uv[0] != '{' {
				return fmt.Errorf("usage.%s: expected an object, got %s", name, jsonx.KindName(uv))
			}
			var rest []byte
			err = jsonx.EachMember(uv, func(dk, dv []byte) error {
				var err error
				switch dn := keyName(dk); {
				case name == "prompt_tokens_details" && dn == "cached_tokens":
					u.CacheReadTokens, err = optInt(dv, dn)
				case name == "prompt_tokens_details" && dn == "cache_write_tokens":
					u.CacheWriteTokens, err = optInt(dv, dn)
				case name == "completion_tokens_details" && dn == "reasoning_tokens":
					u.ReasoningTokens, err = optInt(dv, dn)
				default:
					if rest == nil {
						rest = append(rest, '{')
					} else {
						rest = append(rest, ',')
					}
					rest = append(rest, dk...)
					rest = append(rest, ':')
					rest = append(rest, dv...)
				}
				return err
			})
			if rest != nil {
				rest = append(rest, '}')
				setExtra(&u.Extra, k, rest)
			}
		default:
			setExtra(&u.Extra, k, uv)
		}
		return err
	})
	u.InputTokens = max(prompt-u.CacheReadTokens-u.CacheWriteTokens, 0)
	return err
}

// EncodeResponse writes r as an OpenAI chat.completion body (one choice).
// Text blocks join into message.content (null when there are none),
// tool_use blocks become tool_calls, thinking and other blocks are left out.
// created is written as r.Created (0 when unknown: the caller sets it).
func EncodeResponse(r *llm.Response) ([]byte, error) {
	n := 512
	for i := range r.Content {
		n += 64 + len(r.Content[i].Text) + len(r.Content[i].Input) + len(r.Content[i].Raw)
	}
	b := make([]byte, 0, n)
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, r.ID)
	b = append(b, `,"object":"chat.completion","created":`...)
	b = jsonx.AppendInt(b, r.Created)
	b = append(b, `,"model":`...)
	b = jsonx.AppendString(b, r.Model)
	if r.SystemFingerprint != "" {
		b = append(b, `,"system_fingerprint":`...)
		b = jsonx.AppendString(b, r.SystemFingerprint)
	}
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
	text, tools := 0, 0
	for i := range r.Content {
		switch {
		case r.Content[i].Type == llm.BlockText && r.Content[i].Raw == nil:
			text++
		case r.Content[i].Type == llm.BlockToolUse:
			tools++
		}
	}
	if text == 0 {
		b = append(b, "null"...)
	} else {
		b = appendBlocksText(b, r.Content)
	}
	b = append(b, `,"refusal":`...)
	if r.Refusal == "" {
		b = append(b, "null"...)
	} else {
		b = jsonx.AppendString(b, r.Refusal)
	}
	if tools > 0 {
		b = append(b, `,"tool_calls":[`...)
		first := true
		for i := range r.Content {
			if r.Content[i].Type != llm.BlockToolUse {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendToolCall(b, &r.Content[i])
		}
		b = append(b, ']')
	}
	b = appendExtra(b, r.MessageExtra, func(k string) bool {
		return k == "role" || k == "content" || k == "refusal" || k == "tool_calls"
	})
	b = append(b, `},"finish_reason":`...)
	if fr := finishReason(r.StopReason); fr == "" {
		b = append(b, "null"...)
	} else {
		b = jsonx.AppendString(b, fr)
	}
	if _, ok := r.ChoiceExtra["logprobs"]; !ok {
		b = append(b, `,"logprobs":null`...)
	}
	b = appendExtra(b, r.ChoiceExtra, func(k string) bool {
		return k == "index" || k == "message" || k == "finish_reason"
	})
	b = append(b, `}],"usage":`...)
	b = appendUsage(b, &r.Usage)
	b = appendExtra(b, r.Extra, func(k string) bool {
		switch k {
		case "id", "object", "created", "model", "system_fingerprint", "choices", "usage":
			return true
		}
		return false
	})
	return append(b, '}'), nil
}

// appendUsage writes OpenAI usage (PROTOCOLS §5.3): prompt_tokens counts
// cached reads and writes; cache_write_tokens appears only when non-zero.
func appendUsage(b []byte, u *llm.Usage) []byte {
	prompt := u.PromptTokens()
	b = append(b, `{"prompt_tokens":`...)
	b = jsonx.AppendInt(b, int64(prompt))
	b = append(b, `,"completion_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.OutputTokens))
	b = append(b, `,"total_tokens":`...)
	b = jsonx.AppendInt(b, int64(prompt+u.OutputTokens))
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.CacheReadTokens))
	if u.CacheWriteTokens != 0 {
		b = append(b, `,"cache_write_tokens":`...)
		b = jsonx.AppendInt(b, int64(u.CacheWriteTokens))
	}
	b = appendObjectMembers(b, u.Extra["prompt_tokens_details"])
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.ReasoningTokens))
	b = appendObjectMembers(b, u.Extra["completion_tokens_details"])
	b = append(b, '}')
	b = appendExtra(b, u.Extra, func(k string) bool {
		switch k {
		case "prompt_tokens", "completion_tokens", "total_tokens", "prompt_tokens_details", "completion_tokens_details":
			return true
		}
		return false
	})
	return append(b, '}')
}
