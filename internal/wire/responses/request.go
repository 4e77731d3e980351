package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
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
	return &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: param, Message: msg}
}

func wrongType(param, want string, got []byte) *llm.APIError {
	return badRequest(param, "expected %s, got %s", want, jsonx.KindName(got))
}

func str(v []byte, param string) (string, error) {
	if len(v) == 0 || v[0] != '"' {
		return "", wrongType(param, "a string", v)
	}
	s, err := jsonx.Unquote(v)
	if err != nil {
		return "", badRequest(param, "invalid string")
	}
	return s, nil
}

func boolean(v []byte, param string) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, wrongType(param, "a boolean", v)
}

func integer(v []byte, param string) (int, error) {
	n, err := strconv.ParseInt(string(v), 10, 32)
	if err != nil {
		return 0, wrongType(param, "an integer", v)
	}
	return int(n), nil
}

func number(v []byte, param string) (*float64, error) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || math.IsInf(f, 0) || len(v) == 0 || !(v[0] == '-' || v[0] >= '0' && v[0] <= '9') {
		return nil, wrongType(param, "a number", v)
	}
	return &f, nil
}

func key(k []byte) string {
	s, _ := jsonx.Unquote(k)
	return s
}

func setExtra(e *llm.Extra, k string, v []byte) { jsonx.SetMember(e, k, v) }

// PreviousResponseID returns the request's previous_response_id, "" when
// it has none.
func PreviousResponseID(r *llm.Request) string {
	v, ok := r.Extra["previous_response_id"]
	if !ok || len(v) == 0 || v[0] != '"' {
		return ""
	}
	s, _ := jsonx.Unquote(v)
	return s
}

// NoInput reports a request the Responses API refuses for want of input:
// no input items, no previous_response_id to continue and no prompt (a
// stored prompt template, whose variables may supply the input);
// instructions alone are not input. OpenAI rejects such a request "even
// if there are instructions" (pydantic/pydantic-ai#3470, whose
// maintainers send a blank user message to avoid it).
func NoInput(r *llm.Request) bool {
	if len(r.Messages) > 0 || PreviousResponseID(r) != "" {
		return false
	}
	p, ok := r.Extra["prompt"]
	return !ok || jsonx.IsNull(p)
}

// MinMaxOutputTokens is the smallest max_output_tokens the Responses API
// accepts (docs/RESPONSES.md §1).
const MinMaxOutputTokens = 16

// ParseRequest decodes a Responses API request body into the canonical
// model (see the package doc for the mapping). Every error is an
// *llm.APIError with status 400 naming the offending field.
func ParseRequest(body []byte) (*llm.Request, error) { return parseRequest(body, false) }

// ParseRequestOwned is ParseRequest for a body its caller hands over: the
// result may alias body (raw values such as Extra are slices of it), so
// body must not be modified afterwards. It spares the copy of the whole
// body that ParseRequest makes, one allocation as big as the input.
func ParseRequestOwned(body []byte) (*llm.Request, error) { return parseRequest(body, true) }

// parseRequest parses body; the result aliases body when owned is set, a
// copy of it otherwise.
func parseRequest(body []byte, owned bool) (*llm.Request, error) {
	if !jsonx.Valid(body) {
		return nil, badRequest("", "request body is not valid JSON")
	}
	if !owned {
		body = bytes.Clone(body)
	}
	if i := jsonx.SkipWS(body, 0); i >= len(body) || body[i] != '{' {
		return nil, badRequest("", "request body must be a JSON object")
	}
	r := &llm.Request{Format: llm.FormatResponses}
	sawModel := false
	err := jsonx.EachMember(body, func(kb, v []byte) error {
		k := key(kb)
		null := jsonx.IsNull(v)
		var err error
		switch k {
		case "model":
			sawModel = true
			r.Model, err = str(v, "model")
		case "input":
			err = parseInput(v, r)
		case "instructions":
			if null {
				break
			}
			if v[0] != '"' {
				setExtra(&r.Extra, k, v)
				break
			}
			var s string
			if s, err = str(v, k); err == nil {
				r.System, r.SystemIsString = []llm.Block{{Type: llm.BlockText, Text: s}}, true
			}
		case "max_output_tokens":
			if !null {
				r.MaxTokens, err = integer(v, k)
				r.HasMaxTokens = err == nil
				if err == nil && r.MaxTokens < 0 {
					err = badRequest(k, "must not be negative")
				}
			}
		case "temperature":
			if !null {
				r.Temperature, err = number(v, k)
			}
		case "top_p":
			if !null {
				r.TopP, err = number(v, k)
			}
		case "stream":
			if !null {
				r.Stream, err = boolean(v, k)
			}
		case "parallel_tool_calls":
			if !null {
				var b bool
				if b, err = boolean(v, k); err == nil {
					r.ParallelToolCalls = &b
				}
			}
		case "tools":
			if !null {
				err = parseTools(v, r)
			}
		case "tool_choice":
			if !null {
				r.ToolChoice, err = parseToolChoice(v)
			}
		case "user":
			if !null {
				r.UserID, err = str(v, k)
			}
		case "text":
			if !null {
				err = parseText(v, r)
			}
		default:
			setExtra(&r.Extra, k, v)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !sawModel {
		return nil, badRequest("model", "required")
	}
	return r, nil
}

func parseInput(v []byte, r *llm.Request) error {
	switch {
	case v[0] == '"':
		s, err := str(v, "input")
		if err != nil {
			return err
		}
		r.Messages = []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: s}}, ContentIsString: true}}
		return nil
	case v[0] != '[':
		return wrongType("input", "a string or an array", v)
	}
	r.Messages = make([]llm.Message, 0, jsonx.CountElements(v))
	return jsonx.EachElement(v, func(i int, el []byte) error {
		m, err := parseItem(el, "input["+strconv.Itoa(i)+"]")
		if err != nil {
			return err
		}
		r.Messages = append(r.Messages, m)
		return nil
	})
}

// members collects an object's members by name; unknown ones are not
// decoded.
func members(obj []byte) map[string][]byte {
	m := make(map[string][]byte, 8)
	_ = jsonx.EachMember(obj, func(k, v []byte) error {
		m[key(k)] = v
		return nil
	})
	return m
}

// extraExcept keeps the members of m not in known, verbatim.
func extraExcept(m map[string][]byte, known ...string) llm.Extra {
	var e llm.Extra
outer:
	for k, v := range m {
		for _, kn := range known {
			if k == kn {
				continue outer
			}
		}
		setExtra(&e, k, v)
	}
	return e
}

func optString(m map[string][]byte, k, param string) (string, error) {
	v, ok := m[k]
	if !ok || jsonx.IsNull(v) {
		return "", nil
	}
	return str(v, param+"."+k)
}

// partTypes are the content part types a message item holds (the rest are
// item types).
func isPartType(t string) bool {
	switch t {
	case "input_text", "output_text", "input_image", "input_file", "input_audio", "refusal", "summary_text", "reasoning_text":
		return true
	}
	return false
}

func parseItem(el []byte, param string) (llm.Message, error) {
	var m llm.Message
	if len(el) == 0 || el[0] != '{' {
		return m, wrongType(param, "an object", el)
	}
	f := members(el)
	typ, err := optString(f, "type", param)
	if err != nil {
		return m, err
	}
	switch typ {
	case "", "message":
		role, err := optString(f, "role", param)
		if err != nil {
			return m, err
		}
		switch llm.Role(role) {
		case llm.RoleUser, llm.RoleAssistant, llm.RoleSystem, llm.RoleDeveloper:
		case "":
			return m, badRequest(param+".role", "required")
		default:
			return m, badRequest(param+".role", "unknown role %q", role)
		}
		m.Role = llm.Role(role)
		c, ok := f["content"]
		if !ok {
			return m, badRequest(param+".content", "required")
		}
		switch {
		case c[0] == '"':
			s, err := str(c, param+".content")
			if err != nil {
				return m, err
			}
			m.Content, m.ContentIsString = []llm.Block{{Type: llm.BlockText, Text: s}}, true
		case c[0] == '[':
			m.Content = make([]llm.Block, 0, jsonx.CountElements(c))
			err := jsonx.EachElement(c, func(j int, p []byte) error {
				b, err := parsePart(p, param+".content["+strconv.Itoa(j)+"]")
				m.Content = append(m.Content, b)
				return err
			})
			if err != nil {
				return m, err
			}
		default:
			return m, wrongType(param+".content", "a string or an array", c)
		}
		m.Extra = extraExcept(f, "type", "role", "content")
		return m, nil
	case "function_call":
		b := llm.Block{Type: llm.BlockToolUse}
		if b.ID, err = optString(f, "call_id", param); err != nil {
			return m, err
		}
		if b.Name, err = optString(f, "name", param); err != nil {
			return m, err
		}
		args, err := optString(f, "arguments", param)
		if err != nil {
			return m, err
		}
		if b.ID == "" || b.Name == "" {
			return m, badRequest(param, "function_call needs call_id and name")
		}
		if isJSONObject(args) {
			b.Input = json.RawMessage(args)
			m.Extra = extraExcept(f, "type", "call_id", "name", "arguments")
		} else {
			// Arguments that are not one JSON object: kept verbatim, the
			// block still names the call for other formats.
			b.Input, b.Raw = json.RawMessage("{}"), json.RawMessage(el)
		}
		m.Role, m.Content = llm.RoleAssistant, []llm.Block{b}
		return m, nil
	case "function_call_output":
		b := llm.Block{Type: llm.BlockToolResult}
		if b.ToolUseID, err = optString(f, "call_id", param); err != nil {
			return m, err
		}
		if b.ToolUseID == "" {
			return m, badRequest(param+".call_id", "required")
		}
		out, ok := f["output"]
		switch {
		case !ok:
			return m, badRequest(param+".output", "required")
		case out[0] == '"':
			s, err := str(out, param+".output")
			if err != nil {
				return m, err
			}
			b.Content, b.ContentIsString = []llm.Block{{Type: llm.BlockText, Text: s}}, true
		case out[0] == '[':
			err := jsonx.EachElement(out, func(j int, p []byte) error {
				pb, err := parsePart(p, param+".output["+strconv.Itoa(j)+"]")
				b.Content = append(b.Content, pb)
				return err
			})
			if err != nil {
				return m, err
			}
			if b.Content == nil {
				b.Content = []llm.Block{}
			}
		default:
			return m, wrongType(param+".output", "a string or an array", out)
		}
		m.Role, m.Content = llm.RoleUser, []llm.Block{b}
		m.Extra = extraExcept(f, "type", "call_id", "output")
		return m, nil
	case "custom_tool_call":
		// A freeform tool's call: its input is text. Kept verbatim; the
		// block carries it as {"input": text} for formats whose tools take
		// JSON (translation maps custom tools onto such tools).
		b := llm.Block{Type: llm.BlockToolUse, Raw: json.RawMessage(el)}
		if b.ID, err = optString(f, "call_id", param); err != nil {
			return m, err
		}
		if b.Name, err = optString(f, "name", param); err != nil {
			return m, err
		}
		in, err := optString(f, "input", param)
		if err != nil {
			return m, err
		}
		b.Input = customInput(in)
		m.Role, m.Content = llm.RoleAssistant, []llm.Block{b}
		return m, nil
	case "custom_tool_call_output":
		b := llm.Block{Type: llm.BlockToolResult, Raw: json.RawMessage(el)}
		if b.ToolUseID, err = optString(f, "call_id", param); err != nil {
			return m, err
		}
		if out, ok := f["output"]; ok && len(out) > 0 && out[0] == '"' {
			s, _ := jsonx.Unquote(out)
			b.Content, b.ContentIsString = []llm.Block{{Type: llm.BlockText, Text: s}}, true
		}
		m.Role, m.Content = llm.RoleUser, []llm.Block{b}
		return m, nil
	case "reasoning":
		b := llm.Block{Type: llm.BlockReasoning, Raw: json.RawMessage(el)}
		b.ID, _ = optString(f, "id", param)
		b.Data, _ = optString(f, "encrypted_content", param)
		b.Thinking = summaryText(f["summary"])
		m.Role, m.Content = llm.RoleAssistant, []llm.Block{unwrapOpaque(b)}
		return m, nil
	}
	m.Role = llm.RoleAssistant
	if strings.HasSuffix(typ, "_output") {
		m.Role = llm.RoleUser
	}
	m.Content = []llm.Block{{Type: llm.BlockType(typ), Raw: json.RawMessage(el)}}
	return m, nil
}

// summaryText joins a reasoning item's summary_text parts with blank lines.
func summaryText(v []byte) string {
	if len(v) == 0 || v[0] != '[' {
		return ""
	}
	var parts []string
	_ = jsonx.EachElement(v, func(_ int, p []byte) error {
		if len(p) > 0 && p[0] == '{' {
			if t, ok := members(p)["text"]; ok && len(t) > 0 && t[0] == '"' {
				s, _ := jsonx.Unquote(t)
				parts = append(parts, s)
			}
		}
		return nil
	})
	return strings.Join(parts, "\n\n")
}

func parsePart(p []byte, param string) (llm.Block, error) {
	if len(p) == 0 || p[0] != '{' {
		return llm.Block{}, wrongType(param, "an object", p)
	}
	f := members(p)
	typ, err := optString(f, "type", param)
	if err != nil {
		return llm.Block{}, err
	}
	switch typ {
	case "input_text", "output_text":
		t, ok := f["text"]
		if !ok {
			return llm.Block{}, badRequest(param+".text", "required")
		}
		s, err := str(t, param+".text")
		if err != nil {
			return llm.Block{}, err
		}
		b := llm.Block{Type: llm.BlockText, Text: s, Extra: extraExcept(f, "type", "text")}
		if typ == "output_text" {
			// annotations and logprobs are output provenance; empty ones say nothing
			for _, k := range []string{"annotations", "logprobs"} {
				if v, ok := b.Extra[k]; ok && (string(v) == "[]" || jsonx.IsNull(v)) {
					delete(b.Extra, k)
				}
			}
			if len(b.Extra) == 0 {
				b.Extra = nil
			}
		}
		return b, nil
	case "input_image":
		u, ok := f["image_url"]
		if !ok || len(u) == 0 || u[0] != '"' || len(extraExcept(f, "type", "image_url", "detail")) > 0 {
			return llm.Block{Type: llm.BlockImage, Raw: json.RawMessage(p)}, nil
		}
		url, err := str(u, param+".image_url")
		if err != nil {
			return llm.Block{}, err
		}
		src := &llm.ImageSource{Kind: "url", URL: url}
		if d, ok := f["detail"]; ok {
			if len(d) == 0 || d[0] != '"' {
				return llm.Block{Type: llm.BlockImage, Raw: json.RawMessage(p)}, nil
			}
			src.Detail, _ = jsonx.Unquote(d)
		}
		if rest, ok := strings.CutPrefix(url, "data:"); ok {
			if media, data, ok := strings.Cut(rest, ";base64,"); ok {
				src.Kind, src.URL, src.MediaType, src.Data = "base64", "", media, data
			}
		}
		return llm.Block{Type: llm.BlockImage, Image: src}, nil
	case "":
		return llm.Block{}, badRequest(param+".type", "required")
	}
	return llm.Block{Type: llm.BlockType(typ), Raw: json.RawMessage(p)}, nil
}

// isJSONObject reports whether s is one valid JSON object.
func isJSONObject(s string) bool {
	t := strings.TrimLeft(s, " \t\r\n")
	return t != "" && t[0] == '{' && jsonx.Valid([]byte(s))
}

func parseTools(v []byte, r *llm.Request) error {
	if v[0] != '[' {
		return wrongType("tools", "an array", v)
	}
	r.Tools = make([]llm.Tool, 0, jsonx.CountElements(v))
	return jsonx.EachElement(v, func(i int, el []byte) error {
		param := "tools[" + strconv.Itoa(i) + "]"
		if len(el) == 0 || el[0] != '{' {
			return wrongType(param, "an object", el)
		}
		f := members(el)
		typ, err := optString(f, "type", param)
		if err != nil {
			return err
		}
		name, _ := optString(f, "name", param)
		if typ != "function" {
			if typ == "" {
				return badRequest(param+".type", "required")
			}
			r.Tools = append(r.Tools, llm.Tool{Type: typ, Name: name, Raw: json.RawMessage(el)})
			return nil
		}
		if name == "" {
			return badRequest(param+".name", "required")
		}
		t := llm.Tool{Name: name}
		if t.Description, err = optString(f, "description", param); err != nil {
			return err
		}
		if p, ok := f["parameters"]; ok && !jsonx.IsNull(p) {
			if p[0] != '{' {
				return wrongType(param+".parameters", "an object", p)
			}
			t.InputSchema = json.RawMessage(p)
		}
		if s, ok := f["strict"]; ok && !jsonx.IsNull(s) {
			b, err := boolean(s, param+".strict")
			if err != nil {
				return err
			}
			t.Strict = &b
		}
		if _, ok := f["description"]; ok && t.Description == "" {
			// an explicit null or "" description: keep it as sent
			t.Extra = llm.Extra{}
			setExtra(&t.Extra, "description", f["description"])
		}
		for k, v := range extraExcept(f, "type", "name", "description", "parameters", "strict") {
			setExtra(&t.Extra, k, v)
		}
		if _, ok := f["parameters"]; ok && t.InputSchema == nil {
			setExtra(&t.Extra, "parameters", f["parameters"])
		}
		r.Tools = append(r.Tools, t)
		return nil
	})
}

func parseToolChoice(v []byte) (*llm.ToolChoice, error) {
	if v[0] == '"' {
		s, err := str(v, "tool_choice")
		if err != nil {
			return nil, err
		}
		switch s {
		case "auto":
			return &llm.ToolChoice{Type: llm.ToolChoiceAuto}, nil
		case "none":
			return &llm.ToolChoice{Type: llm.ToolChoiceNone}, nil
		case "required":
			return &llm.ToolChoice{Type: llm.ToolChoiceAny}, nil
		}
		return nil, badRequest("tool_choice", "unknown value %q", s)
	}
	if v[0] != '{' {
		return nil, wrongType("tool_choice", "a string or an object", v)
	}
	f := members(v)
	typ, _ := optString(f, "type", "tool_choice")
	name, _ := optString(f, "name", "tool_choice")
	if typ == "function" && name != "" && len(f) == 2 {
		return &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: name}, nil
	}
	return &llm.ToolChoice{Type: llm.ToolChoiceAuto, Raw: json.RawMessage(v)}, nil
}

func parseText(v []byte, r *llm.Request) error {
	if v[0] != '{' {
		return wrongType("text", "an object", v)
	}
	f := members(v)
	if fv, ok := f["format"]; ok && !jsonx.IsNull(fv) {
		if fv[0] != '{' {
			return wrongType("text.format", "an object", fv)
		}
		ff := members(fv)
		typ, err := optString(ff, "type", "text.format")
		if err != nil {
			return err
		}
		rf := &llm.ResponseFormat{Type: typ}
		switch typ {
		case "text", "json_object":
			rf.Extra = extraExcept(ff, "type")
		case "json_schema":
			if rf.Name, err = optString(ff, "name", "text.format"); err != nil {
				return err
			}
			if rf.Description, err = optString(ff, "description", "text.format"); err != nil {
				return err
			}
			if s, ok := ff["schema"]; ok && !jsonx.IsNull(s) {
				rf.Schema = json.RawMessage(s)
			}
			if s, ok := ff["strict"]; ok && !jsonx.IsNull(s) {
				b, err := boolean(s, "text.format.strict")
				if err != nil {
					return err
				}
				rf.Strict = &b
			}
			rf.Extra = extraExcept(ff, "type", "name", "description", "schema", "strict")
		case "":
			return badRequest("text.format.type", "required")
		default:
			// a format this model does not know: the whole text object verbatim
			setExtra(&r.Extra, "text", v)
			return nil
		}
		r.ResponseFormat = rf
	}
	if rest := extraExcept(f, "format"); len(rest) > 0 {
		setExtra(&r.Extra, "text", appendObject(nil, rest))
	}
	return nil
}

// appendObject appends e as a JSON object, members sorted by key.
func appendObject(b []byte, e llm.Extra) []byte {
	b = append(b, '{')
	b = appendExtra(b, e, nil)
	return append(b, '}')
}

// appendExtra appends the members of e sorted by key, skipping those known
// reports true for.
func appendExtra(b []byte, e llm.Extra, known func(string) bool) []byte {
	if len(e) == 0 {
		return b
	}
	var stack [16]string
	for _, k := range jsonx.SortedKeys(stack[:0], e, known) {
		b = jsonx.AppendKey(b, k)
		if len(e[k]) == 0 {
			b = append(b, "null"...)
		} else {
			b = append(b, e[k]...)
		}
	}
	return b
}
