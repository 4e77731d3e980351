package anthropic

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// badRequest is the error ParseRequest returns for any input it rejects.
func badRequest(msg string) *llm.APIError {
	return &llm.APIError{
		Status:   400,
		Type:     llm.ErrInvalidRequest,
		MeshCode: llm.MeshBadRequest,
		Message:  msg,
	}
}

// invalidJSON describes why body is not JSON, with the byte offset.
func invalidJSON(body []byte) string {
	var v json.RawMessage
	if err := json.Unmarshal(body, &v); err != nil {
		return "invalid JSON: " + err.Error()
	}
	return "invalid JSON"
}

// ParseRequest parses a Messages API request body. Unknown top-level members
// go to Request.Extra, unknown block members to Block.Extra and unknown block
// types to Block.Raw, so EncodeRequest reproduces them. mesh_behavior (at the
// top level or inside the object form of system) goes to
// Request.MeshBehavior. Any error is an *llm.APIError with status 400, type
// invalid_request_error, MeshCode MESH_BAD_REQUEST and a message naming the
// field path. A body with invalid UTF-8 or an unpaired surrogate escape is
// rejected as the Messages API rejects it (see brokenText), and max_tokens
// must be an integer from 0 to MaxTokensLimit. The result does not alias
// body.
func ParseRequest(body []byte) (*llm.Request, error) { return parseRequest(body, false, false) }

// ParseRequestOwned is ParseRequest for a body its caller hands over: the
// result may alias body (raw members such as Extra, MeshBehavior and
// unknown blocks are slices of it), so body must not be modified
// afterwards. It spares the copy of the whole body that ParseRequest
// makes, one allocation as big as the prompt.
func ParseRequestOwned(body []byte) (*llm.Request, error) { return parseRequest(body, false, true) }

// ParseCountTokens parses a token-count request body (POST
// /v1/messages/count_tokens): a Messages request without max_tokens, which
// it does not require. It reads every member ParseRequest reads and is as
// lenient: it does not refuse the Messages-only members (max_tokens,
// stream, temperature …) that the Anthropic API refuses on this route, so
// that an upstream, not Keel, decides what it accepts.
func ParseCountTokens(body []byte) (*llm.Request, error) { return parseRequest(body, true, false) }

// parseRequest parses body, a token-count request when count is set; the
// result aliases body when owned is set, a copy of it otherwise.
func parseRequest(body []byte, count, owned bool) (*llm.Request, error) {
	body = jsonx.TrimSpace(body)
	if !jsonx.Valid(body) {
		return nil, badRequest(invalidJSON(body))
	}
	if msg := brokenText(body); msg != "" {
		return nil, badRequest(msg)
	}
	if body[0] != '{' {
		return nil, badRequest("request body: expected a JSON object, got " + jsonx.KindName(body))
	}
	if !owned {
		body = bytes.Clone(body)
	}
	r := &llm.Request{Format: llm.FormatAnthropic}
	var sawModel, sawMessages, sawMeshTop, sawMeshSystem bool
	// messages are read where they are, the rest bounded first (see
	// walkMembers).
	_, err := walkMembers(nil, body, func(k string, v []byte) (int, error) {
		p := root(k)
		var err error
		if k == "messages" {
			var n int
			sawMessages = true
			r.Messages, n, err = parseMessages(p, v)
			return n, err
		}
		v = jsonx.Bound(v)
		switch k {
		case "model":
			r.Model, err = unquote(p, v)
			sawModel = true
		case "max_tokens":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			r.MaxTokens, err = tokenCount(p, v)
			r.HasMaxTokens = true
		case "system":
			sawMeshSystem, err = parseSystem(r, v)
		case "tools":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			r.Tools, err = parseTools(p, v)
		case "tool_choice":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			r.ToolChoice, err = parseToolChoice(p, v)
		case "stop_sequences":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			r.StopSequences = make([]string, 0, 2)
			err = eachElem(p, v, func(i int, e []byte) error {
				s, err := unquote(joinIndex(p, i), e)
				r.StopSequences = append(r.StopSequences, s)
				return err
			})
		case "temperature":
			r.Temperature, err = optFloat(p, v)
		case "top_p":
			r.TopP, err = optFloat(p, v)
		case "top_k":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			var n int
			n, err = integer(p, v)
			r.TopK = &n
		case "metadata":
			if jsonx.IsNull(v) {
				return len(v), nil
			}
			err = eachMember(p, v, func(mk string, mv []byte) error {
				if mk == "user_id" {
					var err error
					r.UserID, err = str(join(p, mk), mv)
					return err
				}
				jsonx.SetMember(&r.MetadataExtra, mk, mv)
				return nil
			})
		case "stream":
			r.Stream, err = boolean(p, v)
		case "mesh_behavior":
			if len(v) == 0 || v[0] != '{' {
				return 0, errAt(p, "expected an object, got %s", jsonx.KindName(v))
			}
			r.MeshBehavior = json.RawMessage(v)
			sawMeshTop = true
		default:
			jsonx.SetMember(&r.Extra, k, v)
		}
		return len(v), err
	})
	if err != nil {
		return nil, badRequest(err.Error())
	}
	switch {
	case sawMeshTop && sawMeshSystem:
		return nil, badRequest("mesh_behavior: given both at the top level and in system")
	case !sawModel:
		return nil, badRequest("model: field required")
	case r.Model == "":
		return nil, badRequest("model: must not be empty")
	case !r.HasMaxTokens && !count:
		return nil, badRequest("max_tokens: field required")
	case !sawMessages:
		return nil, badRequest("messages: field required")
	case len(r.Messages) == 0:
		return nil, badRequest("messages: must contain at least one message")
	}
	return r, nil
}

// MaxTokensLimit is the largest max_tokens ParseRequest accepts: the int32
// bound of every integer field of the Messages and Chat Completions APIs. A
// model's own output limit is far lower and only the upstream knows it (the
// Messages API answers 400 "max_tokens: N > M, which is the maximum allowed
// number of output tokens for <model>"); Keel cannot apply it before routing.
const MaxTokensLimit = math.MaxInt32

// tokenCount reads max_tokens: an integral JSON number (1024, 1024.0, 1e3)
// from 0 to MaxTokensLimit. An integer too large for int64 or float64 is
// reported as too large, not as a non-integer.
func tokenCount(path *fpath, v []byte) (int, error) {
	n, fault := jsonx.Count(v, MaxTokensLimit)
	switch fault {
	case jsonx.CountNotNumber:
		return 0, errAt(path, "expected an integer, got %s", jsonx.KindName(v))
	case jsonx.CountNotInteger:
		return 0, errAt(path, "expected an integer, got %s", jsonx.NumberText(v))
	case jsonx.CountNegative:
		return 0, errAt(path, "must be greater than or equal to 0")
	case jsonx.CountTooLarge:
		return 0, errAt(path, "%s > %d, which is the maximum allowed number of output tokens", jsonx.NumberText(v), MaxTokensLimit)
	}
	return int(n), nil
}

func optFloat(path *fpath, v []byte) (*float64, error) {
	if jsonx.IsNull(v) {
		return nil, nil
	}
	f, err := number(path, v)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// parseSystem reads system as a string, an array of text blocks, or Keel's
// object form {"content": <string|blocks>, "mesh_behavior": {...}}. It
// reports whether the object form carried mesh_behavior.
func parseSystem(r *llm.Request, v []byte) (sawMesh bool, err error) {
	switch {
	case jsonx.IsNull(v):
		return false, nil
	case len(v) > 0 && v[0] == '{':
		sawContent := false
		sys := root("system")
		err = eachMember(sys, v, func(k string, mv []byte) error {
			switch k {
			case "content":
				sawContent = true
				var err error
				r.System, r.SystemIsString, err = parseContent(join(sys, "content"), mv)
				return err
			case "mesh_behavior":
				if len(mv) == 0 || mv[0] != '{' {
					return errAt(join(sys, "mesh_behavior"), "expected an object, got %s", jsonx.KindName(mv))
				}
				r.MeshBehavior = json.RawMessage(mv)
				sawMesh = true
				return nil
			}
			return errAt(join(sys, k), "unknown member of the system object (allowed: content, mesh_behavior)")
		})
		if err == nil && !sawContent {
			err = errAt(join(sys, "content"), "field required")
		}
		return sawMesh, err
	}
	r.System, r.SystemIsString, err = parseContent(root("system"), v)
	return false, err
}

// parseMessages reads the messages array, which may run on past its end (see
// walkMembers), and returns its length too. The array is walked once, not
// counted first: the slice starts at 4 messages and grows past that.
func parseMessages(path *fpath, v []byte) ([]llm.Message, int, error) {
	msgs := make([]llm.Message, 0, 4)
	n, err := walkElems(path, v, func(i int, e []byte) (int, error) {
		p := joinIndex(path, i)
		var m llm.Message
		var sawRole, sawContent bool
		n, err := walkMembers(p, e, func(k string, mv []byte) (int, error) {
			var err error
			if k == "content" {
				var n int
				m.Content, m.ContentIsString, n, err = parseContentN(join(p, k), mv)
				sawContent = true
				return n, err
			}
			mv = jsonx.Bound(mv)
			switch k {
			case "role":
				var role string
				role, err = unquote(join(p, k), mv)
				switch llm.Role(role) {
				case llm.RoleUser, llm.RoleAssistant, llm.RoleSystem:
					m.Role = llm.Role(role)
				default:
					if err == nil {
						err = errAt(join(p, k), `must be "user", "assistant" or "system", got %q`, role)
					}
				}
				sawRole = true
			default:
				jsonx.SetMember(&m.Extra, k, mv)
			}
			return len(mv), err
		})
		switch {
		case err != nil:
			return 0, err
		case !sawRole:
			return 0, errAt(join(p, "role"), "field required")
		case !sawContent:
			return 0, errAt(join(p, "content"), "field required")
		}
		msgs = append(msgs, m)
		return n, nil
	})
	return msgs, n, err
}

func parseTools(path *fpath, v []byte) ([]llm.Tool, error) {
	tools := make([]llm.Tool, 0, 4)
	err := eachElem(path, v, func(i int, e []byte) error {
		p := joinIndex(path, i)
		var t llm.Tool
		err := eachMember(p, e, func(k string, tv []byte) error {
			var err error
			switch k {
			case "type":
				t.Type, err = str(join(p, k), tv)
			case "name":
				t.Name, err = unquote(join(p, k), tv)
			case "description":
				t.Description, err = str(join(p, k), tv)
			case "input_schema":
				if len(tv) == 0 || tv[0] != '{' {
					return errAt(join(p, k), "expected an object, got %s", jsonx.KindName(tv))
				}
				t.InputSchema = json.RawMessage(tv)
			case "strict":
				if jsonx.IsNull(tv) {
					return nil
				}
				var s bool
				s, err = boolean(join(p, k), tv)
				t.Strict = &s
			default:
				jsonx.SetMember(&t.Extra, k, tv)
			}
			return err
		})
		if err != nil {
			return err
		}
		// "custom" is the explicit name of a plain client tool.
		if t.Type == "custom" {
			t.Type = ""
		}
		if t.Type != "" {
			// A server tool (web_search_20260318 …): kept verbatim; Name is informational.
			tools = append(tools, llm.Tool{Type: t.Type, Name: t.Name, Raw: json.RawMessage(e)})
			return nil
		}
		if t.Name == "" {
			return errAt(join(p, "name"), "field required")
		}
		tools = append(tools, t)
		return nil
	})
	return tools, err
}

func parseToolChoice(path *fpath, v []byte) (*llm.ToolChoice, error) {
	tc := &llm.ToolChoice{}
	err := eachMember(path, v, func(k string, cv []byte) error {
		var err error
		switch k {
		case "type":
			var s string
			s, err = unquote(join(path, k), cv)
			tc.Type = llm.ToolChoiceType(s)
		case "name":
			tc.Name, err = str(join(path, k), cv)
		case "disable_parallel_tool_use":
			if jsonx.IsNull(cv) {
				return nil
			}
			var d bool
			d, err = boolean(join(path, k), cv)
			tc.DisableParallel = &d
		default:
			jsonx.SetMember(&tc.Extra, k, cv)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	switch tc.Type {
	case "":
		return nil, errAt(join(path, "type"), "field required")
	case llm.ToolChoiceAuto, llm.ToolChoiceAny, llm.ToolChoiceNone:
	case llm.ToolChoiceTool:
		if tc.Name == "" {
			return nil, errAt(join(path, "name"), `field required when type is "tool"`)
		}
	default:
		return &llm.ToolChoice{Type: tc.Type, Raw: json.RawMessage(v)}, nil
	}
	return tc, nil
}

// EncodeRequest writes the upstream Messages API body. Known members come in
// a fixed order (model, max_tokens, system, messages, tools, tool_choice,
// stop_sequences, temperature, top_p, top_k, metadata, stream), then Extra
// sorted by key, so equal requests give equal bytes. mesh_behavior is never
// written. String-versus-blocks forms are kept as parsed.
//
// The one cross-format step it takes: developer messages, and system
// messages of a request not parsed from the Anthropic wire (OpenAI origin),
// are hoisted into the top-level system, after r.System, as text; a single
// string when every part was a string, else text blocks. A system message of
// an Anthropic-origin request is a mid-conversation system turn and stays in
// place. OpenAI-only fields (n, response_format, parallel_tool_calls,
// stream_options, message names, image detail) are not written: mapping them
// is the translation layer's job.
func EncodeRequest(r *llm.Request) ([]byte, error) {
	b := make([]byte, 0, 512+estimateRequest(r))
	var err error
	b = append(b, `{"model":`...)
	b = jsonx.AppendString(b, r.Model)
	if r.HasMaxTokens {
		b = append(b, `,"max_tokens":`...)
		b = jsonx.AppendInt(b, int64(r.MaxTokens))
	}
	system, systemIsString := hoistSystem(r)
	if system != nil {
		b = append(b, `,"system":`...)
		if b, err = appendContent(b, root("system"), system, systemIsString); err != nil {
			return nil, err
		}
	}
	b = append(b, `,"messages":[`...)
	first := true
	for i := range r.Messages {
		m := &r.Messages[i]
		if hoisted(r, m) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		p := joinIndex(root("messages"), i)
		b = append(b, `{"role":`...)
		b = jsonx.AppendString(b, string(m.Role))
		b = append(b, `,"content":`...)
		content := m.Content
		if content == nil {
			content = []llm.Block{}
		}
		if b, err = appendContent(b, join(p, "content"), content, m.ContentIsString); err != nil {
			return nil, err
		}
		if b, err = appendExtra(b, p, m.Extra); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.Tools != nil {
		b = append(b, `,"tools":[`...)
		for i := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = appendTool(b, joinIndex(root("tools"), i), &r.Tools[i]); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	if tc := r.ToolChoice; tc != nil {
		b = append(b, `,"tool_choice":`...)
		if tc.Raw != nil {
			if b, err = appendRaw(b, root("tool_choice"), tc.Raw); err != nil {
				return nil, err
			}
		} else {
			b = append(b, `{"type":`...)
			b = jsonx.AppendString(b, string(tc.Type))
			if tc.Name != "" {
				b = append(b, `,"name":`...)
				b = jsonx.AppendString(b, tc.Name)
			}
			if tc.DisableParallel != nil {
				b = append(b, `,"disable_parallel_tool_use":`...)
				b = jsonx.AppendBool(b, *tc.DisableParallel)
			}
			if b, err = appendExtra(b, root("tool_choice"), tc.Extra); err != nil {
				return nil, err
			}
			b = append(b, '}')
		}
	}
	if r.StopSequences != nil {
		b = append(b, `,"stop_sequences":[`...)
		for i, s := range r.StopSequences {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonx.AppendString(b, s)
		}
		b = append(b, ']')
	}
	for _, f := range [...]struct {
		key string
		v   *float64
	}{{"temperature", r.Temperature}, {"top_p", r.TopP}} {
		if f.v == nil {
			continue
		}
		b = jsonx.AppendKey(b, f.key)
		var ok bool
		if b, ok = jsonx.AppendFloat(b, *f.v); !ok {
			return nil, errAt(root(f.key), "unsupported number %v", *f.v)
		}
	}
	if r.TopK != nil {
		b = append(b, `,"top_k":`...)
		b = jsonx.AppendInt(b, int64(*r.TopK))
	}
	if r.UserID != "" || len(r.MetadataExtra) > 0 {
		b = append(b, `,"metadata":{`...)
		if r.UserID != "" {
			b = append(b, `"user_id":`...)
			b = jsonx.AppendString(b, r.UserID)
		}
		if b, err = appendExtra(b, root("metadata"), r.MetadataExtra); err != nil {
			return nil, err
		}
		b = append(b, '}')
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	if r.Extra != nil {
		if b, err = appendExtraWith(b, nil, r.Extra, "mesh_behavior", nil); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// hoisted reports whether message m of r is folded into the top-level system.
func hoisted(r *llm.Request, m *llm.Message) bool {
	return m.Role == llm.RoleDeveloper || (m.Role == llm.RoleSystem && r.Format != llm.FormatAnthropic)
}

// hoistSystem computes the top-level system content, with the messages
// hoisted (see hoisted) folded into it.
func hoistSystem(r *llm.Request) ([]llm.Block, bool) {
	n := 0
	allString := r.System == nil || r.SystemIsString
	for i := range r.Messages {
		if m := &r.Messages[i]; hoisted(r, m) {
			n++
			allString = allString && m.ContentIsString
		}
	}
	if n == 0 {
		return r.System, r.SystemIsString
	}
	if allString {
		var parts []string
		for _, bl := range r.System {
			if bl.Text != "" {
				parts = append(parts, bl.Text)
			}
		}
		for i := range r.Messages {
			if m := &r.Messages[i]; hoisted(r, m) {
				if t := m.Text(); t != "" {
					parts = append(parts, t)
				}
			}
		}
		return []llm.Block{{Type: llm.BlockText, Text: strings.Join(parts, "\n\n")}}, true
	}
	system := append([]llm.Block(nil), r.System...)
	for i := range r.Messages {
		if m := &r.Messages[i]; hoisted(r, m) {
			for _, bl := range m.Content {
				// The API rejects empty text blocks; non-text parts have no place in system.
				if bl.Type == llm.BlockText && bl.Raw == nil && bl.Text != "" {
					system = append(system, bl)
				}
			}
		}
	}
	return system, false
}

func appendTool(b []byte, path *fpath, t *llm.Tool) ([]byte, error) {
	if t.Raw != nil {
		return appendRaw(b, path, t.Raw)
	}
	var err error
	b = append(b, `{"name":`...)
	b = jsonx.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = jsonx.AppendString(b, t.Description)
	}
	if t.InputSchema != nil {
		b = append(b, `,"input_schema":`...)
		if b, err = appendRaw(b, join(path, "input_schema"), t.InputSchema); err != nil {
			return b, err
		}
	}
	if t.Strict != nil {
		b = append(b, `,"strict":`...)
		b = jsonx.AppendBool(b, *t.Strict)
	}
	if b, err = appendExtra(b, path, t.Extra); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// estimateRequest guesses the encoded size so the buffer rarely grows.
func estimateRequest(r *llm.Request) int {
	n := 0
	for i := range r.System {
		n += len(r.System[i].Text) + 32
	}
	for i := range r.Messages {
		for j := range r.Messages[i].Content {
			n += estimateBlock(&r.Messages[i].Content[j])
		}
		n += 32
	}
	for i := range r.Tools {
		t := &r.Tools[i]
		n += len(t.Raw) + len(t.Name) + len(t.Description) + len(t.InputSchema) + 48
	}
	for _, v := range r.Extra {
		n += len(v) + 16
	}
	return n
}

func estimateBlock(bl *llm.Block) int {
	n := len(bl.Raw) + len(bl.Text) + len(bl.Input) + len(bl.Thinking) + len(bl.Signature) + len(bl.Data) + 48
	if bl.Image != nil {
		n += len(bl.Image.Data) + len(bl.Image.URL) + 64
	}
	for i := range bl.Content {
		n += estimateBlock(&bl.Content[i])
	}
	for _, v := range bl.Extra {
		n += len(v) + 16
	}
	return n
}
