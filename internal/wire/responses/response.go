package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

func protocolError(format string, args ...any) *llm.APIError {
	return &llm.APIError{Status: 502, Type: llm.ErrAPI, MeshCode: llm.MeshUpstreamProtocolFailed,
		Message: "upstream answer: " + fmt.Sprintf(format, args...)}
}

// ParseResponse decodes a Responses API answer (a response object) into
// the canonical model. A response whose status is failed is returned as
// its error (an *llm.APIError). The result does not alias body.
func ParseResponse(body []byte) (*llm.Response, error) { return parseResponse(body, false) }

// ParseResponseOwned is ParseResponse for a body its caller hands over: the
// result may alias body (raw values such as Extra are slices of it), so
// body must not be modified afterwards. It spares the copy of the whole
// answer that ParseResponse makes.
func ParseResponseOwned(body []byte) (*llm.Response, error) { return parseResponse(body, true) }

// parseResponse parses body; the result aliases body when owned is set, a
// copy of it otherwise.
func parseResponse(body []byte, owned bool) (*llm.Response, error) {
	if !jsonx.Valid(body) {
		return nil, protocolError("not valid JSON")
	}
	if i := jsonx.SkipWS(body, 0); i >= len(body) || body[i] != '{' {
		return nil, protocolError("not a JSON object")
	}
	if !owned {
		body = bytes.Clone(body)
	}
	return parseResponseObject(body)
}

func parseResponseObject(body []byte) (*llm.Response, error) {
	r := &llm.Response{}
	var status, reason string
	var failure []byte
	err := jsonx.EachMember(body, func(kb, v []byte) error {
		switch string(kb) {
		case `"id"`:
			r.ID, _ = jsonx.Unquote(v)
		case `"model"`:
			r.Model, _ = jsonx.Unquote(v)
		case `"created_at"`:
			f, _ := strconv.ParseFloat(string(v), 64)
			r.Created = int64(f)
		case `"status"`:
			status = statusName(v)
		case `"incomplete_details"`:
			if len(v) > 0 && v[0] == '{' {
				reason, _ = jsonx.Unquote(members(v)["reason"])
			}
		case `"error"`:
			if len(v) > 0 && v[0] == '{' {
				failure = v
			}
		case `"output"`:
			if len(v) == 0 || v[0] != '[' {
				return protocolError("output is not an array")
			}
			return jsonx.EachElement(v, func(_ int, el []byte) error { return outputItem(el, r) })
		case `"usage"`:
			if len(v) > 0 && v[0] == '{' {
				parseUsage(v, &r.Usage)
			}
		case `"object"`:
			if string(v) != `"response"` {
				setExtra(&r.Extra, "object", v)
			}
		default:
			if r.Extra == nil {
				r.Extra = make(llm.Extra, len(echoDefaults)+4)
			}
			r.Extra[echoKey(kb)] = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if status == "failed" {
		return nil, failureError(failure)
	}
	r.StopReason = stopReason(status, reason, r.Content)
	return r, nil
}

func statusName(v []byte) string {
	switch string(v) {
	case `"completed"`:
		return "completed"
	case `"incomplete"`:
		return "incomplete"
	case `"failed"`:
		return "failed"
	case `"in_progress"`:
		return "in_progress"
	}
	s, _ := jsonx.Unquote(v)
	return s
}

// echoKey decodes a member name, without allocating for the settings a
// response echoes.
func echoKey(kb []byte) string {
	if len(kb) > 2 {
		inner := kb[1 : len(kb)-1]
		for _, d := range echoDefaults {
			if d.k == string(inner) {
				return d.k
			}
		}
	}
	return key(kb)
}

// failureError is the error of a failed response: its error object's code
// and message.
func failureError(v []byte) *llm.APIError {
	e := &llm.APIError{Status: 500, Type: llm.ErrAPI, Message: "response failed"}
	if len(v) > 0 && v[0] == '{' {
		f := members(v)
		if s, _ := jsonx.Unquote(f["message"]); s != "" {
			e.Message = s
		}
		e.Code, _ = jsonx.Unquote(f["code"])
		switch e.Code {
		case "rate_limit_exceeded":
			e.Status, e.Type = 429, llm.ErrRateLimit
		case "server_error":
		case "invalid_prompt":
			e.Status, e.Type = 400, llm.ErrInvalidRequest
		}
	}
	return e
}

// stopReason maps a response's status and incomplete reason onto the
// canonical stop reason; a completed answer that calls a function stopped
// for tool use.
func stopReason(status, reason string, content []llm.Block) llm.StopReason {
	switch status {
	case "incomplete":
		switch reason {
		case "max_output_tokens":
			return llm.StopMaxTokens
		case "content_filter":
			return llm.StopRefusal
		}
		return llm.StopMaxTokens
	}
	for i := range content {
		if content[i].Type == llm.BlockToolUse {
			return llm.StopToolUse
		}
	}
	return llm.StopEndTurn
}

func outputItem(el []byte, r *llm.Response) error {
	if len(el) == 0 || el[0] != '{' {
		return protocolError("output item is not an object")
	}
	var typ string
	var content []byte
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(k) {
		case `"type"`:
			typ = itemType(v)
		case `"content"`:
			content = v
		}
		return nil
	})
	switch typ {
	case "message":
		if len(content) == 0 || content[0] != '[' {
			return nil
		}
		return jsonx.EachElement(content, func(_ int, p []byte) error {
			if len(p) == 0 || p[0] != '{' {
				return protocolError("content part is not an object")
			}
			b, ok := outputText(p)
			if ok {
				r.Content = append(r.Content, b)
				return nil
			}
			pf := members(p)
			pt, _ := jsonx.Unquote(pf["type"])
			if pt == "refusal" {
				s, _ := jsonx.Unquote(pf["refusal"])
				r.Refusal += s
				return nil
			}
			r.Content = append(r.Content, llm.Block{Type: llm.BlockType(pt), Raw: json.RawMessage(p)})
			return nil
		})
	case "function_call", "custom_tool_call":
		m, err := parseItem(el, "output")
		if err != nil {
			return protocolError("%s", err.Error())
		}
		b := m.Content[0]
		if b.Raw == nil {
			b.Raw = json.RawMessage(el) // the call's item id and status
			if isJSONObject(string(b.Input)) {
				b.Raw = nil
			}
		}
		r.Content = append(r.Content, b)
	case "reasoning":
		m, _ := parseItem(el, "output")
		r.Content = append(r.Content, m.Content...)
	default:
		r.Content = append(r.Content, llm.Block{Type: llm.BlockType(typ), Raw: json.RawMessage(el)})
	}
	return nil
}

func itemType(v []byte) string {
	switch string(v) {
	case `"message"`:
		return "message"
	case `"function_call"`:
		return "function_call"
	case `"reasoning"`:
		return "reasoning"
	}
	s, _ := jsonx.Unquote(v)
	return s
}

// outputText reads an output_text part: its text, and its other members
// (annotations, logprobs) in Extra unless empty; ok is false for another
// kind of part.
func outputText(p []byte) (llm.Block, bool) {
	b := llm.Block{Type: llm.BlockText}
	isText, hasText := false, false
	_ = jsonx.EachMember(p, func(k, v []byte) error {
		switch string(k) {
		case `"type"`:
			isText = string(v) == `"output_text"`
		case `"text"`:
			if len(v) > 0 && v[0] == '"' {
				b.Text, _ = jsonx.Unquote(v)
				hasText = true
			}
		case `"annotations"`, `"logprobs"`:
			if string(v) != "[]" && !jsonx.IsNull(v) {
				setExtra(&b.Extra, key(k), v)
			}
		default:
			setExtra(&b.Extra, key(k), v)
		}
		return nil
	})
	return b, isText && hasText
}

// parseUsage reads a Responses usage object into u: input_tokens (cached
// included) less input_tokens_details.cached_tokens is InputTokens,
// output_tokens_details.reasoning_tokens is ReasoningTokens; the other
// members of the two details objects stay in Extra under their object's
// name (a partial object) and appendUsage writes them back, so nothing is
// lost on a re-encoding (OpenAI's prompt caching guide:
// developers.openai.com/api/docs/guides/prompt-caching, "usage.input_tokens_details.cached_tokens").
func parseUsage(v []byte, u *llm.Usage) {
	total := 0
	details := func(k string, v []byte, name string) int {
		n := 0
		var rest []byte
		_ = jsonx.EachMember(v, func(dk, dv []byte) error {
			if len(dk) == len(name)+2 && string(dk[1:len(dk)-1]) == name {
				n, _ = strconv.Atoi(string(dv))
				return nil
			}
			if rest == nil {
				rest = append(rest, '{')
			} else {
				rest = append(rest, ',')
			}
			rest = append(rest, dk...)
			rest = append(rest, ':')
			rest = append(rest, dv...)
			return nil
		})
		if rest != nil {
			setExtra(&u.Extra, k, append(rest, '}'))
		}
		return n
	}
	_ = jsonx.EachMember(v, func(kb, mv []byte) error {
		switch string(kb) {
		case `"input_tokens"`:
			total, _ = strconv.Atoi(string(mv))
		case `"output_tokens"`:
			u.OutputTokens, _ = strconv.Atoi(string(mv))
		case `"input_tokens_details"`:
			u.CacheReadTokens = details("input_tokens_details", mv, "cached_tokens")
		case `"output_tokens_details"`:
			u.ReasoningTokens = details("output_tokens_details", mv, "reasoning_tokens")
		case `"total_tokens"`:
		default:
			setExtra(&u.Extra, key(kb), mv)
		}
		return nil
	})
	u.InputTokens = max(total-u.CacheReadTokens, 0)
}

// ResponseID gives an answer's id the Responses shape (resp_…).
func ResponseID(id string) string {
	if strings.HasPrefix(id, "resp_") {
		return id
	}
	if id == "" {
		return "resp_keel"
	}
	// another API's answer id, its prefix replaced (msg_01… → resp_01…)
	for _, p := range [...]string{"msg_", "chatcmpl-"} {
		if rest, ok := strings.CutPrefix(id, p); ok && rest != "" {
			return "resp_" + rest
		}
	}
	return "resp_" + id
}

// itemID is an output item's id: prefix, the response id's tail and the
// item's place.
func itemID(prefix, respID string, i int) string {
	tail := strings.TrimPrefix(respID, "resp_")
	return prefix + tail + "_" + strconv.Itoa(i)
}

func responseKnownKey(k string) bool {
	switch k {
	case "id", "object", "created_at", "status", "error", "incomplete_details", "model", "output", "usage":
		return true
	}
	return false
}

// echoDefaults are the members a response object always has (the request's
// settings echoed back), written with these values when the answer does
// not carry its own (docs/RESPONSES.md §2).
var echoDefaults = [...]struct{ k, v string }{
	{"background", "false"},
	{"instructions", "null"},
	{"max_output_tokens", "null"},
	{"metadata", "{}"},
	{"parallel_tool_calls", "true"},
	{"previous_response_id", "null"},
	{"reasoning", `{"effort":null,"summary":null}`},
	{"store", "false"},
	{"temperature", "1"},
	{"text", `{"format":{"type":"text"}}`},
	{"tool_choice", `"auto"`},
	{"tools", "[]"},
	{"top_p", "1"},
	{"truncation", `"disabled"`},
	{"user", "null"},
}

// EncodeResponse writes r as a response object, or r.Raw when it holds the
// upstream's own bytes in this format.
func EncodeResponse(r *llm.Response) ([]byte, error) {
	if r.Raw != nil && r.RawFormat == llm.FormatResponses {
		return r.Raw, nil
	}
	return appendResponse(make([]byte, 0, 1024), r, "", nil), nil
}

// appendResponse writes the response object; status overrides the one
// the stop reason implies ("in_progress", "failed"), failure is the error
// of a failed one.
func appendResponse(b []byte, r *llm.Response, status string, failure *llm.APIError) []byte {
	id := ResponseID(r.ID)
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, id)
	b = append(b, `,"object":"response","created_at":`...)
	created := r.Created
	if created == 0 {
		created = time.Now().Unix()
	}
	b = jsonx.AppendInt(b, created)
	if status == "" {
		status = "completed"
		if r.StopReason == llm.StopMaxTokens || r.StopReason == llm.StopContextLimit || r.StopReason == llm.StopRefusal && r.Refusal == "" {
			status = "incomplete"
		}
	}
	b = append(b, `,"status":`...)
	b = jsonx.AppendString(b, status)
	b = append(b, `,"error":`...)
	if failure != nil {
		b = append(b, `{"code":`...)
		b = jsonx.AppendString(b, failureCode(failure))
		b = append(b, `,"message":`...)
		b = jsonx.AppendString(b, failure.Message)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if status == "incomplete" {
		reason := "max_output_tokens"
		if r.StopReason == llm.StopRefusal {
			reason = "content_filter"
		}
		b = append(b, `{"reason":`...)
		b = jsonx.AppendString(b, reason)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = jsonx.AppendString(b, r.Model)
	b = append(b, `,"output":[`...)
	n := 0
	for i := range r.Content {
		bl := &r.Content[i]
		if bl.Type == llm.BlockThinking && bl.Signature == "" && bl.Thinking == "" {
			continue
		}
		if n > 0 {
			b = append(b, ',')
		}
		b = appendOutputItem(b, bl, id, n, "completed")
		n++
	}
	if r.Refusal != "" {
		if n > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"id":`...)
		b = jsonx.AppendString(b, itemID("msg_", id, n))
		b = append(b, `,"type":"message","status":"completed","role":"assistant","content":[{"type":"refusal","refusal":`...)
		b = jsonx.AppendString(b, r.Refusal)
		b = append(b, `}]}`...)
	}
	b = append(b, ']')
	if status != "in_progress" {
		b = append(b, `,"usage":`...)
		b = appendUsage(b, &r.Usage)
	} else {
		b = append(b, `,"usage":null`...)
	}
	for _, d := range echoDefaults {
		if _, ok := r.Extra[d.k]; !ok {
			b = jsonx.AppendKey(b, d.k)
			b = append(b, d.v...)
		}
	}
	b = appendExtra(b, r.Extra, responseKnownKey)
	return append(b, '}')
}

func failureCode(e *llm.APIError) string {
	switch e.Type {
	case llm.ErrRateLimit:
		return "rate_limit_exceeded"
	case llm.ErrInvalidRequest:
		return "invalid_prompt"
	}
	return "server_error"
}

// appendOutputItem writes one canonical block as an output item.
func appendOutputItem(b []byte, bl *llm.Block, respID string, i int, status string) []byte {
	switch bl.Type {
	case llm.BlockText:
		b = append(b, `{"id":`...)
		b = jsonx.AppendString(b, itemID("msg_", respID, i))
		b = append(b, `,"type":"message","status":`...)
		b = jsonx.AppendString(b, status)
		b = append(b, `,"role":"assistant","content":[`...)
		b = appendPart(b, bl, true)
		return append(b, "]}"...)
	case llm.BlockToolUse:
		if string(bl.Raw) == CustomCallMarker {
			// marked by translation: the item is built from the call
			return append(b, customCall(itemID("ctc_", respID, i), bl.ID, bl.Name, bl.Input)...)
		}
		if bl.Raw != nil {
			return append(b, bl.Raw...)
		}
		b = append(b, `{"id":`...)
		b = jsonx.AppendString(b, itemID("fc_", respID, i))
		b = append(b, `,"type":"function_call","status":`...)
		b = jsonx.AppendString(b, status)
		b = append(b, `,"call_id":`...)
		b = jsonx.AppendString(b, bl.ID)
		b = append(b, `,"name":`...)
		b = jsonx.AppendString(b, bl.Name)
		b = append(b, `,"arguments":`...)
		args := string(bl.Input)
		if args == "" {
			args = "{}"
		}
		return append(jsonx.AppendString(b, args), '}')
	case llm.BlockReasoning, llm.BlockThinking, llm.BlockRedactedThinking:
		if bl.Raw != nil && bl.Type == llm.BlockReasoning {
			return append(b, bl.Raw...)
		}
		id := bl.ID
		if id == "" {
			id = itemID("rs_", respID, i)
		}
		b = append(b, `{"id":`...)
		b = jsonx.AppendString(b, id)
		b = append(b, `,"type":"reasoning","summary":[`...)
		text := bl.Thinking
		if text != "" {
			b = append(b, `{"type":"summary_text","text":`...)
			b = jsonx.AppendString(b, text)
			b = append(b, '}')
		}
		b = append(b, ']')
		if enc := opaque(bl); enc != "" {
			b = append(b, `,"encrypted_content":`...)
			b = jsonx.AppendString(b, enc)
		}
		return append(b, '}')
	}
	if bl.Raw != nil && !isPartType(string(bl.Type)) {
		return append(b, bl.Raw...)
	}
	// a block no output item expresses: an empty message keeps the
	// output's places
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, itemID("msg_", respID, i))
	b = append(b, `,"type":"message","status":"completed","role":"assistant","content":[]}`...)
	return b
}

// appendMembers appends the members of the partial object obj (kept by
// parseUsage) into the object open in b, which has a member already; a
// value that is not an object appends nothing.
func appendMembers(b []byte, obj json.RawMessage) []byte {
	if t := jsonx.TrimSpace(obj); len(t) == 0 || t[0] != '{' {
		return b
	}
	_ = jsonx.EachMember(obj, func(k, v []byte) error {
		b = append(b, ',')
		b = append(b, k...)
		b = append(b, ':')
		b = append(b, v...)
		return nil
	})
	return b
}

func appendUsage(b []byte, u *llm.Usage) []byte {
	in := u.PromptTokens()
	b = append(b, `{"input_tokens":`...)
	b = jsonx.AppendInt(b, int64(in))
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.CacheReadTokens))
	b = appendMembers(b, u.Extra["input_tokens_details"])
	b = append(b, `},"output_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.OutputTokens))
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = jsonx.AppendInt(b, int64(u.ReasoningTokens))
	b = appendMembers(b, u.Extra["output_tokens_details"])
	b = append(b, `},"total_tokens":`...)
	b = jsonx.AppendInt(b, int64(in+u.OutputTokens))
	b = appendExtra(b, u.Extra, func(k string) bool {
		return strings.Contains(" input_tokens input_tokens_details output_tokens output_tokens_details total_tokens ", " "+k+" ")
	})
	return append(b, '}')
}
