package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// badRequest is the error every request-parsing failure returns.
func badRequest(param, format string, args ...any) *llm.APIError {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &llm.APIError{
		Status:   400,
		Type:     llm.ErrInvalidRequest,
		MeshCode: llm.MeshBadRequest,
		Param:    param,
		Message:  msg,
	}
}

func wrongType(param, want string, got []byte) *llm.APIError {
	return badRequest(param, "expected %s, got %s", want, jsonx.KindName(got))
}

func getString(v []byte, param string) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", wrongType(param, "a string", v)
	}
	s, ok := unquote(v)
	if !ok {
		return "", badRequest(param, "invalid string")
	}
	return s, nil
}

func getBool(v []byte, param string) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(param, "a boolean", v)
}

func getInt(v []byte, param string) (int, error) {
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return 0, wrongType(param, "an integer", v)
	}
	n, err := strconv.ParseInt(string(v), 10, 32)
	if err != nil {
		return 0, badRequest(param, "expected an integer, got %s", v)
	}
	return int(n), nil
}

func getFloat(v []byte, param string) (*float64, error) {
	if len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return nil, wrongType(param, "a number", v)
	}
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, badRequest(param, "number out of range")
	}
	return &f, nil
}

// getStringAt is getString with a lazily rendered param (see fpath).
func getStringAt(v []byte, param *fpath) (string, error) {
	if len(v) > 0 && v[0] == '"' {
		if s, ok := unquote(v); ok {
			return s, nil
		}
	}
	return getString(v, param.String())
}

// getBoolAt is getBool with a lazily rendered param (see fpath).
func getBoolAt(v []byte, param *fpath) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return getBool(v, param.String())
}

func indexParam(prefix string, i int, field string) string {
	s := prefix + "[" + strconv.Itoa(i) + "]"
	if field != "" {
		s += "." + field
	}
	return s
}

// ParseRequest decodes an OpenAI Chat Completions request body into the
// canonical model. It keeps every member it does not understand (Request.Extra,
// Message.Extra, Block.Extra, Block.Raw, Tool.Raw, ToolChoice.Raw,
// StreamOptionsExtra) so that EncodeRequest reproduces an equivalent body.
//
// Conventions beyond the canonical model's documentation:
//   - consecutive role "tool" messages become one user message of tool_result
//     blocks; a tool message's members other than role, tool_call_id and
//     content go to that block's Extra;
//   - an assistant tool call whose arguments are not a JSON object (empty,
//     truncated, an array …), whose type is not "function", or whose function
//     object has unknown members is kept verbatim in Block.Raw; the block still
//     has Type tool_use, ID, Name and Input "{}" for other formats to use;
//   - content parts other than text and image_url, and image_url parts with
//     members beyond url and detail, are kept verbatim in Block.Raw;
//   - tools other than plain function tools (or with unknown function members)
//     are kept in Tool.Raw with Tool.Type set;
//   - a response_format this model cannot represent exactly (unknown type,
//     unknown json_schema members) is kept in Extra["response_format"];
//   - when both max_completion_tokens and max_tokens are present, max_tokens
//     stays in Extra.
//
// Every error is an *llm.APIError with status 400 naming the offending field.
// Role "function" (deprecated) is rejected. n above 1 is rejected.
// max_completion_tokens and max_tokens must be integers from 0 to
// MaxTokensLimit. A body with invalid UTF-8 or an unpaired surrogate escape
// is rejected as Chat Completions rejects it (see brokenText).
func ParseRequest(body []byte) (*llm.Request, error) { return parseRequest(body, false) }

// ParseRequestOwned is ParseRequest for a body its caller hands over: the
// result may alias body (raw values such as Extra and tool parameters are
// slices of it), so body must not be modified afterwards. It spares the
// copy of the whole body that ParseRequest makes, one allocation as big as
// the prompt.
func ParseRequestOwned(body []byte) (*llm.Request, error) { return parseRequest(body, true) }

// parseRequest parses body; the result aliases body when owned is set, a
// copy of it otherwise.
func parseRequest(body []byte, owned bool) (*llm.Request, error) {
	if !jsonx.Valid(body) {
		return nil, badRequest("", "request body is not valid JSON")
	}
	if msg := brokenText(body); msg != "" {
		return nil, badRequest("", "%s", msg)
	}
	if !owned {
		body = bytes.Clone(body) // raw values below alias this copy, not the caller's buffer
	}
	if i := jsonx.SkipWS(body, 0); i >= len(body) || body[i] != '{' {
		return nil, badRequest("", "request body must be a JSON object")
	}
	r := &llm.Request{Format: llm.FormatOpenAI}
	var (
		maxCompletion, maxLegacy []byte
		maxLegacyKey             []byte
		responseFormat           []byte
		responseFormatKey        []byte
		sawModel, sawMessages    bool
	)
	err := jsonx.EachMember(body, func(k, v []byte) error {
		var err error
		switch string(bareKey(k)) {
		case "model":
			sawModel = true
			r.Model, err = getString(v, "model")
		case "messages":
			sawMessages = true
			r.Messages = r.Messages[:0]
			if n := jsonx.CountElements(v); n > 0 && r.Messages == nil {
				r.Messages = make([]llm.Message, 0, n) // tool messages merge: n is an upper bound
			}
			err = parseMessages(v, r)
		case "max_completion_tokens":
			maxCompletion = v
		case "max_tokens":
			maxLegacy, maxLegacyKey = v, k
		case "temperature":
			if !jsonx.IsNull(v) {
				r.Temperature, err = getFloat(v, "temperature")
			}
		case "top_p":
			if !jsonx.IsNull(v) {
				r.TopP, err = getFloat(v, "top_p")
			}
		case "n":
			if !jsonx.IsNull(v) {
				r.N, err = getInt(v, "n")
				if err == nil && r.N > 1 {
					err = badRequest("n", "only 1 is supported")
				} else if err == nil && r.N < 1 {
					err = badRequest("n", "must be 1")
				}
			}
		case "stop":
			err = parseStop(v, r)
		case "stream":
			if !jsonx.IsNull(v) {
				r.Stream, err = getBool(v, "stream")
			}
		case "stream_options":
			err = parseStreamOptions(v, r)
		case "tools":
			err = parseTools(v, r)
		case "tool_choice":
			r.ToolChoice, err = parseToolChoice(v)
		case "parallel_tool_calls":
			if !jsonx.IsNull(v) {
				var b bool
				b, err = getBool(v, "parallel_tool_calls")
				r.ParallelToolCalls = &b
			}
		case "response_format":
			responseFormat, responseFormatKey = v, k
		case "user":
			if !jsonx.IsNull(v) {
				r.UserID, err = getString(v, "user")
			}
		case "mesh_behavior":
			if !jsonx.IsNull(v) {
				r.MeshBehavior = json.RawMessage(v)
			}
		default:
			setExtra(&r.Extra, k, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !sawModel || r.Model == "" {
		return nil, badRequest("model", "required")
	}
	if !sawMessages {
		return nil, badRequest("messages", "required")
	}
	if len(r.Messages) == 0 {
		return nil, badRequest("messages", "must contain at least one message")
	}
	switch {
	case maxCompletion != nil && !jsonx.IsNull(maxCompletion):
		if err := setMaxTokens(r, maxCompletion, "max_completion_tokens"); err != nil {
			return nil, err
		}
		if maxLegacy != nil {
			setExtra(&r.Extra, maxLegacyKey, maxLegacy)
		}
	case maxLegacy != nil && !jsonx.IsNull(maxLegacy):
		if err := setMaxTokens(r, maxLegacy, "max_tokens"); err != nil {
			return nil, err
		}
		r.MaxTokensLegacy = true
	}
	if responseFormat != nil && !jsonx.IsNull(responseFormat) {
		rf, err := parseResponseFormat(responseFormat)
		if err != nil {
			return nil, err
		}
		if rf == nil {
			setExtra(&r.Extra, responseFormatKey, responseFormat)
		}
		r.ResponseFormat = rf
	}
	return r, nil
}

// MaxTokensLimit is the largest max_completion_tokens (or max_tokens)
// ParseRequest accepts: the int32 bound of every integer field of the Chat
// Completions and Messages APIs. A model's own output limit is far lower and
// only the upstream knows it (Chat Completions answers 400 "max_tokens is
// too large: N. This model supports at most M completion tokens"); Keel
// cannot apply it before routing. The anthropic package has the same bound.
const MaxTokensLimit = math.MaxInt32

// setMaxTokens reads max_completion_tokens or max_tokens: an integral JSON
// number (1024, 1024.0, 1e3) from 0 to MaxTokensLimit, read as the
// anthropic package reads max_tokens. An integer too large for int64 or
// float64 is reported as too large, not as a non-integer.
func setMaxTokens(r *llm.Request, v []byte, param string) error {
	n, fault := jsonx.Count(v, MaxTokensLimit)
	switch fault {
	case jsonx.CountNotNumber:
		return wrongType(param, "an integer", v)
	case jsonx.CountNotInteger:
		return badRequest(param, "expected an integer, got %s", jsonx.NumberText(v))
	case jsonx.CountNegative:
		return badRequest(param, "must not be negative")
	case jsonx.CountTooLarge:
		return badRequest(param, "%s > %d, which is the maximum allowed number of output tokens", jsonx.NumberText(v), MaxTokensLimit)
	}
	r.MaxTokens, r.HasMaxTokens = int(n), true
	return nil
}

func parseStop(v []byte, r *llm.Request) error {
	r.StopSequences, r.StopIsString = nil, false
	switch {
	case jsonx.IsNull(v):
		return nil
	case v[0] == '"':
		s, err := getString(v, "stop")
		r.StopSequences, r.StopIsString = []string{s}, true
		return err
	case v[0] == '[':
		return jsonx.EachElement(v, func(i int, el []byte) error {
			s, err := getStringAt(el, index(root("stop"), i))
			r.StopSequences = append(r.StopSequences, s)
			return err
		})
	}
	return wrongType("stop", "a string or an array of strings", v)
}

func parseStreamOptions(v []byte, r *llm.Request) error {
	r.IncludeUsage, r.StreamOptionsExtra = false, nil
	if jsonx.IsNull(v) {
		return nil
	}
	if v[0] != '{' {
		return wrongType("stream_options", "an object", v)
	}
	return jsonx.EachMember(v, func(k, mv []byte) error {
		if string(bareKey(k)) == "include_usage" {
			if jsonx.IsNull(mv) {
				return nil
			}
			var err error
			r.IncludeUsage, err = getBool(mv, "stream_options.include_usage")
			return err
		}
		setExtra(&r.StreamOptionsExtra, k, mv)
		return nil
	})
}

// rawMessage is one wire message before its role is known.
type rawMessage struct {
	role, content, name, toolCalls, toolCallID []byte
	// keys of the members above, for putting them in Extra when the role
	// does not use them
	nameKey, toolCallsKey, toolCallIDKey []byte
	extra                                llm.Extra
}

func parseMessages(v []byte, r *llm.Request) error {
	if v[0] != '[' {
		return wrongType("messages", "an array", v)
	}
	lastWasTool := false
	return jsonx.EachElement(v, func(i int, el []byte) error {
		if el[0] != '{' {
			return wrongType(indexParam("messages", i, ""), "an object", el)
		}
		var m rawMessage
		err := jsonx.EachMember(el, func(k, mv []byte) error {
			switch string(bareKey(k)) {
			case "role":
				m.role = mv
			case "content":
				m.content = mv
			case "name":
				m.name, m.nameKey = mv, k
			case "tool_calls":
				m.toolCalls, m.toolCallsKey = mv, k
			case "tool_call_id":
				m.toolCallID, m.toolCallIDKey = mv, k
			default:
				setExtra(&m.extra, k, mv)
			}
			return nil
		})
		if err != nil {
			return err
		}
		if m.role == nil {
			return badRequest(indexParam("messages", i, "role"), "required")
		}
		role, err := getStringAt(m.role, join(index(root("messages"), i), "role"))
		if err != nil {
			return err
		}
		if role == "tool" {
			b, err := parseToolMessage(&m, i)
			if err != nil {
				return err
			}
			if !lastWasTool {
				r.Messages = append(r.Messages, llm.Message{Role: llm.RoleUser})
			}
			last := &r.Messages[len(r.Messages)-1]
			last.Content = append(last.Content, b)
			lastWasTool = true
			return nil
		}
		lastWasTool = false
		msg, err := parseMessage(&m, llm.Role(role), i)
		if err != nil {
			return err
		}
		r.Messages = append(r.Messages, msg)
		return nil
	})
}

func parseMessage(m *rawMessage, role llm.Role, i int) (llm.Message, error) {
	msg := llm.Message{Role: role, Extra: m.extra}
	switch role {
	case llm.RoleSystem, llm.RoleDeveloper, llm.RoleUser, llm.RoleAssistant:
	default:
		return msg, badRequest(indexParam("messages", i, "role"), "unsupported role %q", string(role))
	}
	if m.name != nil {
		var err error
		if msg.Name, err = getStringAt(m.name, join(index(root("messages"), i), "name")); err != nil {
			return msg, err
		}
	}
	if m.toolCallID != nil {
		setExtra(&msg.Extra, m.toolCallIDKey, m.toolCallID)
	}
	if role != llm.RoleAssistant && m.toolCalls != nil {
		setExtra(&msg.Extra, m.toolCallsKey, m.toolCalls)
	}
	param := join(index(root("messages"), i), "content")
	switch {
	case m.content == nil:
		if role != llm.RoleAssistant {
			return msg, badRequest(param.String(), "required")
		}
	case jsonx.IsNull(m.content):
		msg.ContentIsNull = true
	case m.content[0] == '"':
		s, err := getStringAt(m.content, param)
		if err != nil {
			return msg, err
		}
		msg.ContentIsString = true
		msg.Content = []llm.Block{{Type: llm.BlockText, Text: s}}
	case m.content[0] == '[':
		var err error
		if msg.Content, err = parseParts(m.content, param, nil); err != nil {
			return msg, err
		}
		if len(msg.Content) == 0 && role == llm.RoleAssistant {
			msg.Content = nil // an assistant's [] and an absent content mean the same
		}
	default:
		return msg, wrongType(param.String(), "a string or an array of content parts", m.content)
	}
	if role == llm.RoleAssistant && m.toolCalls != nil && !jsonx.IsNull(m.toolCalls) {
		param := join(index(root("messages"), i), "tool_calls")
		if m.toolCalls[0] != '[' {
			return msg, wrongType(param.String(), "an array", m.toolCalls)
		}
		msg.Content = slices.Grow(msg.Content, jsonx.CountElements(m.toolCalls))
		err := jsonx.EachElement(m.toolCalls, func(j int, el []byte) error {
			b, err := parseToolCall(el, index(param, j))
			msg.Content = append(msg.Content, b)
			return err
		})
		if err != nil {
			return msg, err
		}
	}
	return msg, nil
}

func parseToolMessage(m *rawMessage, i int) (llm.Block, error) {
	b := llm.Block{Type: llm.BlockToolResult, Extra: m.extra}
	if m.toolCallID == nil {
		return b, badRequest(indexParam("messages", i, "tool_call_id"), "required")
	}
	var err error
	if b.ToolUseID, err = getStringAt(m.toolCallID, join(index(root("messages"), i), "tool_call_id")); err != nil {
		return b, err
	}
	if m.name != nil {
		setExtra(&b.Extra, m.nameKey, m.name)
	}
	if m.toolCalls != nil {
		setExtra(&b.Extra, m.toolCallsKey, m.toolCalls)
	}
	param := join(index(root("messages"), i), "content")
	switch {
	case m.content == nil:
		return b, badRequest(param.String(), "required")
	case m.content[0] == '"':
		s, err := getStringAt(m.content, param)
		if err != nil {
			return b, err
		}
		b.ContentIsString = true
		b.Content = []llm.Block{{Type: llm.BlockText, Text: s}}
	case m.content[0] == '[':
		if b.Content, err = parseParts(m.content, param, nil); err != nil {
			return b, err
		}
	default:
		return b, wrongType(param.String(), "a string or an array of content parts", m.content)
	}
	return b, nil
}

// parseParts decodes an array of content parts.
// An empty array gives an empty, non-nil slice.
func parseParts(v []byte, param *fpath, dst []llm.Block) ([]llm.Block, error) {
	if dst == nil {
		dst = make([]llm.Block, 0, jsonx.CountElements(v))
	}
	err := jsonx.EachElement(v, func(j int, el []byte) error {
		b, err := parsePart(el, index(param, j))
		dst = append(dst, b)
		return err
	})
	return dst, err
}

func parsePart(el []byte, param *fpath) (llm.Block, error) {
	var b llm.Block
	if el[0] != '{' {
		return b, wrongType(param.String(), "an object", el)
	}
	var typ, text, image []byte
	var extra llm.Extra
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "type":
			typ = v
		case "text":
			text = v
		case "image_url":
			image = v
		default:
			setExtra(&extra, k, v)
		}
		return nil
	})
	if typ == nil {
		return b, badRequest(join(param, "type").String(), "required")
	}
	t, err := getStringAt(typ, join(param, "type"))
	if err != nil {
		return b, err
	}
	switch {
	case t == "text" && image == nil:
		if text == nil {
			return b, badRequest(join(param, "text").String(), "required")
		}
		s, err := getStringAt(text, join(param, "text"))
		return llm.Block{Type: llm.BlockText, Text: s, Extra: extra}, err
	case t == "image_url" && text == nil:
		if image == nil {
			return b, badRequest(join(param, "image_url").String(), "required")
		}
		src, err := parseImageURL(image, join(param, "image_url"))
		if err != nil {
			return b, err
		}
		if src != nil {
			return llm.Block{Type: llm.BlockImage, Image: src, Extra: extra}, nil
		}
		return llm.Block{Type: llm.BlockImage, Raw: json.RawMessage(el)}, nil
	}
	return llm.Block{Type: llm.BlockType(t), Raw: json.RawMessage(el)}, nil
}

// parseImageURL decodes {url, detail}; nil (no error) means "keep the part raw".
func parseImageURL(v []byte, param *fpath) (*llm.ImageSource, error) {
	if v[0] != '{' {
		return nil, wrongType(param.String(), "an object", v)
	}
	var url, detail []byte
	unknown := false
	_ = jsonx.EachMember(v, func(k, mv []byte) error {
		switch string(bareKey(k)) {
		case "url":
			url = mv
		case "detail":
			detail = mv
		default:
			unknown = true
		}
		return nil
	})
	if url == nil {
		return nil, badRequest(join(param, "url").String(), "required")
	}
	u, err := getStringAt(url, join(param, "url"))
	if err != nil {
		return nil, err
	}
	src := &llm.ImageSource{Kind: "url", URL: u}
	if detail != nil {
		if len(detail) < 3 || detail[0] != '"' {
			unknown = true // null, "" or another type: not representable
		} else if src.Detail, err = getStringAt(detail, join(param, "detail")); err != nil {
			return nil, err
		}
	}
	if unknown {
		return nil, nil
	}
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		if media, data, ok := strings.Cut(rest, ";base64,"); ok {
			src.Kind, src.URL, src.MediaType, src.Data = "base64", "", media, data
		}
	}
	return src, nil
}

func parseToolCall(el []byte, param *fpath) (llm.Block, error) {
	b := llm.Block{Type: llm.BlockToolUse}
	if el[0] != '{' {
		return b, wrongType(param.String(), "an object", el)
	}
	var id, typ, fn []byte
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "id":
			id = v
		case "type":
			typ = v
		case "function":
			fn = v
		default:
			setExtra(&b.Extra, k, v)
		}
		return nil
	})
	var err error
	if id == nil {
		return b, badRequest(join(param, "id").String(), "required")
	}
	if b.ID, err = getStringAt(id, join(param, "id")); err != nil {
		return b, err
	}
	keepRaw := func() (llm.Block, error) {
		b.Raw, b.Extra, b.Input = json.RawMessage(el), nil, json.RawMessage("{}")
		return b, nil
	}
	if typ != nil && string(typ) != `"function"` {
		return keepRaw()
	}
	if fn == nil || fn[0] != '{' {
		return keepRaw()
	}
	var name, args []byte
	unknown := false
	_ = jsonx.EachMember(fn, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "name":
			name = v
		case "arguments":
			args = v
		default:
			unknown = true
		}
		return nil
	})
	if name == nil {
		return b, badRequest(join(param, "function.name").String(), "required")
	}
	if b.Name, err = getStringAt(name, join(param, "function.name")); err != nil {
		return b, err
	}
	if unknown || args == nil || args[0] != '"' {
		return keepRaw()
	}
	s, err := getStringAt(args, join(param, "function.arguments"))
	if err != nil {
		return b, err
	}
	if !isJSONObject(s) {
		return keepRaw()
	}
	b.Input = json.RawMessage(s)
	return b, nil
}

// isJSONObject reports whether s is one valid JSON object.
func isJSONObject(s string) bool {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i < len(s) && s[i] == '{' && jsonx.Valid([]byte(s))
}

func parseTools(v []byte, r *llm.Request) error {
	r.Tools = nil
	if jsonx.IsNull(v) {
		return nil
	}
	if v[0] != '[' {
		return wrongType("tools", "an array", v)
	}
	return jsonx.EachElement(v, func(i int, el []byte) error {
		t, err := parseTool(el, index(root("tools"), i))
		r.Tools = append(r.Tools, t)
		return err
	})
}

func parseTool(el []byte, param *fpath) (llm.Tool, error) {
	var t llm.Tool
	if el[0] != '{' {
		return t, wrongType(param.String(), "an object", el)
	}
	var typ, fn []byte
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "type":
			typ = v
		case "function":
			fn = v
		default:
			setExtra(&t.Extra, k, v)
		}
		return nil
	})
	if typ == nil {
		return t, badRequest(join(param, "type").String(), "required")
	}
	tt, err := getStringAt(typ, join(param, "type"))
	if err != nil {
		return t, err
	}
	keepRaw := func() (llm.Tool, error) {
		return llm.Tool{Type: tt, Name: t.Name, Raw: json.RawMessage(el)}, nil
	}
	if tt != "function" || fn == nil || fn[0] != '{' {
		return keepRaw()
	}
	var name, desc, params, strict []byte
	unknown := false
	_ = jsonx.EachMember(fn, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "name":
			name = v
		case "description":
			desc = v
		case "parameters":
			params = v
		case "strict":
			strict = v
		default:
			unknown = true
		}
		return nil
	})
	if name == nil {
		return t, badRequest(join(param, "function.name").String(), "required")
	}
	if t.Name, err = getStringAt(name, join(param, "function.name")); err != nil {
		return t, err
	}
	if unknown {
		return keepRaw()
	}
	if desc != nil && !jsonx.IsNull(desc) {
		if t.Description, err = getStringAt(desc, join(param, "function.description")); err != nil {
			return t, err
		}
	}
	if params != nil && !jsonx.IsNull(params) {
		t.InputSchema = json.RawMessage(params)
	}
	if strict != nil && !jsonx.IsNull(strict) {
		s, err := getBoolAt(strict, join(param, "function.strict"))
		if err != nil {
			return t, err
		}
		t.Strict = &s
	}
	return t, nil
}

func parseToolChoice(v []byte) (*llm.ToolChoice, error) {
	switch {
	case jsonx.IsNull(v):
		return nil, nil
	case v[0] == '"':
		s, err := getString(v, "tool_choice")
		if err != nil {
			return nil, err
		}
		switch s {
		case "none":
			return &llm.ToolChoice{Type: llm.ToolChoiceNone}, nil
		case "auto":
			return &llm.ToolChoice{Type: llm.ToolChoiceAuto}, nil
		case "required":
			return &llm.ToolChoice{Type: llm.ToolChoiceAny}, nil
		}
		return &llm.ToolChoice{Raw: json.RawMessage(v)}, nil
	case v[0] != '{':
		return nil, wrongType("tool_choice", "a string or an object", v)
	}
	tc := &llm.ToolChoice{}
	var typ, fn []byte
	_ = jsonx.EachMember(v, func(k, mv []byte) error {
		switch string(bareKey(k)) {
		case "type":
			typ = mv
		case "function":
			fn = mv
		default:
			setExtra(&tc.Extra, k, mv)
		}
		return nil
	})
	raw := &llm.ToolChoice{Raw: json.RawMessage(v)}
	if string(typ) != `"function"` || fn == nil || fn[0] != '{' {
		return raw, nil
	}
	var name []byte
	unknown := false
	_ = jsonx.EachMember(fn, func(k, mv []byte) error {
		if string(bareKey(k)) == "name" {
			name = mv
		} else {
			unknown = true
		}
		return nil
	})
	if unknown || name == nil || name[0] != '"' {
		return raw, nil
	}
	var err error
	tc.Type = llm.ToolChoiceTool
	tc.Name, err = getString(name, "tool_choice.function.name")
	return tc, err
}

// parseResponseFormat returns nil (no error) for a form kept verbatim in Extra.
func parseResponseFormat(v []byte) (*llm.ResponseFormat, error) {
	if v[0] != '{' {
		return nil, wrongType("response_format", "an object", v)
	}
	rf := &llm.ResponseFormat{}
	var typ, schema []byte
	_ = jsonx.EachMember(v, func(k, mv []byte) error {
		switch string(bareKey(k)) {
		case "type":
			typ = mv
		case "json_schema":
			schema = mv
		default:
			setExtra(&rf.Extra, k, mv)
		}
		return nil
	})
	if typ == nil {
		return nil, badRequest("response_format.type", "required")
	}
	t, err := getString(typ, "response_format.type")
	if err != nil {
		return nil, err
	}
	rf.Type = t
	switch t {
	case "text", "json_object":
		if schema != nil {
			return nil, nil
		}
		return rf, nil
	case "json_schema":
	default:
		return nil, nil
	}
	if schema == nil || schema[0] != '{' {
		return nil, nil
	}
	var name, desc, sch, strict []byte
	unknown := false
	_ = jsonx.EachMember(schema, func(k, mv []byte) error {
		switch string(bareKey(k)) {
		case "name":
			name = mv
		case "description":
			desc = mv
		case "schema":
			sch = mv
		case "strict":
			strict = mv
		default:
			unknown = true
		}
		return nil
	})
	if unknown || name == nil || name[0] != '"' ||
		desc != nil && desc[0] != '"' ||
		strict != nil && strict[0] != 't' && strict[0] != 'f' ||
		sch != nil && jsonx.IsNull(sch) {
		return nil, nil
	}
	if rf.Name, err = getString(name, "response_format.json_schema.name"); err != nil {
		return nil, err
	}
	if desc != nil {
		if rf.Description, err = getString(desc, "response_format.json_schema.description"); err != nil {
			return nil, err
		}
	}
	if sch != nil {
		rf.Schema = json.RawMessage(sch)
	}
	if strict != nil {
		s := strict[0] == 't'
		rf.Strict = &s
	}
	return rf, nil
}
