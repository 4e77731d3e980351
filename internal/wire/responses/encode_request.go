package responses

import (
	"errors"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

var errNaN = errors.New("responses: temperature or top_p is not a finite number")

func requestKnownKey(k string) bool {
	switch k {
	case "model", "instructions", "input", "max_output_tokens", "temperature", "top_p", "stream",
		"parallel_tool_calls", "tools", "tool_choice", "user", "text":
		return true
	}
	return false
}

// EncodeRequest writes r as a Responses API request body. Members are
// written in a fixed order, Extra sorted by key after them, so the output
// is deterministic. The canonical model's Anthropic-style top-level system
// prompt becomes instructions (its text blocks joined by blank lines).
func EncodeRequest(r *llm.Request) ([]byte, error) {
	b := make([]byte, 0, 512)
	b = append(b, `{"model":`...)
	b = jsonx.AppendString(b, r.Model)
	if len(r.System) > 0 {
		b = append(b, `,"instructions":`...)
		b = jsonx.AppendString(b, llm.BlocksText(r.System))
	}
	b = append(b, `,"input":`...)
	b = appendInput(b, r.Messages)
	if r.HasMaxTokens {
		b = append(b, `,"max_output_tokens":`...)
		b = jsonx.AppendInt(b, int64(r.MaxTokens))
	}
	var ok bool
	if r.Temperature != nil {
		b = append(b, `,"temperature":`...)
		if b, ok = jsonx.AppendFloat(b, *r.Temperature); !ok {
			return nil, errNaN
		}
	}
	if r.TopP != nil {
		b = append(b, `,"top_p":`...)
		if b, ok = jsonx.AppendFloat(b, *r.TopP); !ok {
			return nil, errNaN
		}
	}
	if r.ParallelToolCalls != nil {
		b = append(b, `,"parallel_tool_calls":`...)
		b = jsonx.AppendBool(b, *r.ParallelToolCalls)
	}
	if r.Tools != nil {
		b = append(b, `,"tools":[`...)
		for i := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTool(b, &r.Tools[i])
		}
		b = append(b, ']')
	}
	if tc := r.ToolChoice; tc != nil {
		b = append(b, `,"tool_choice":`...)
		b = appendToolChoice(b, tc)
	}
	if rf := r.ResponseFormat; rf != nil || r.Extra["text"] != nil {
		b = append(b, `,"text":{`...)
		if rf != nil {
			b = append(b, `"format":`...)
			b = appendFormat(b, rf)
		}
		if t := r.Extra["text"]; len(t) > 0 && t[0] == '{' {
			f := members(t)
			if rf != nil {
				delete(f, "format")
			}
			b = appendExtra(b, toExtra(f), nil)
		}
		b = append(b, '}')
	}
	if r.UserID != "" {
		b = append(b, `,"user":`...)
		b = jsonx.AppendString(b, r.UserID)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	b = appendExtra(b, r.Extra, requestKnownKey)
	return append(b, '}'), nil
}

func toExtra(m map[string][]byte) llm.Extra {
	e := make(llm.Extra, len(m))
	for k, v := range m {
		e[k] = v
	}
	return e
}

// appendInput writes the messages as input items; a lone user message
// given as a string is written as the string.
func appendInput(b []byte, ms []llm.Message) []byte {
	if len(ms) == 1 && ms[0].Role == llm.RoleUser && ms[0].ContentIsString && len(ms[0].Extra) == 0 &&
		len(ms[0].Content) == 1 && ms[0].Content[0].Type == llm.BlockText && ms[0].Content[0].Raw == nil && len(ms[0].Content[0].Extra) == 0 {
		return jsonx.AppendString(b, ms[0].Content[0].Text)
	}
	b = append(b, '[')
	for i := range ms {
		b = appendItems(b, &ms[i])
	}
	return append(b, ']')
}

// itemCount is how many input items m becomes.
func itemCount(m *llm.Message) int {
	n, inMsg := 0, false
	for i := range m.Content {
		if isItemBlock(&m.Content[i]) {
			n++
			inMsg = false
		} else if !inMsg {
			n++
			inMsg = true
		}
	}
	return n
}

// isItemBlock reports whether a block is an input item of its own rather
// than a part of a message item.
func isItemBlock(bl *llm.Block) bool {
	switch bl.Type {
	case llm.BlockToolUse, llm.BlockToolResult, llm.BlockReasoning:
		return true
	case llm.BlockText, llm.BlockImage:
		return false
	}
	return bl.Raw != nil && !isPartType(string(bl.Type))
}

func sep(b []byte) []byte {
	if n := len(b); n > 0 && b[n-1] != '[' {
		b = append(b, ',')
	}
	return b
}

// appendItems writes m as one or more input items: runs of text and image
// blocks form a message item, every other block an item of its own. The
// message's Extra goes into its item when it makes exactly one.
func appendItems(b []byte, m *llm.Message) []byte {
	extra := m.Extra
	if itemCount(m) != 1 {
		extra = nil
	}
	for i := 0; i < len(m.Content); {
		bl := &m.Content[i]
		if isItemBlock(bl) {
			b = sep(b)
			b = appendItem(b, bl, extra)
			i++
			continue
		}
		j := i
		for j < len(m.Content) && !isItemBlock(&m.Content[j]) {
			j++
		}
		b = sep(b)
		b = append(b, `{"type":"message","role":`...)
		b = jsonx.AppendString(b, string(m.Role))
		b = append(b, `,"content":`...)
		parts := m.Content[i:j]
		if m.ContentIsString && len(parts) == 1 && parts[0].Type == llm.BlockText && parts[0].Raw == nil && len(parts[0].Extra) == 0 {
			b = jsonx.AppendString(b, parts[0].Text)
		} else {
			b = appendParts(b, parts, m.Role == llm.RoleAssistant)
		}
		b = appendExtra(b, extra, func(k string) bool { return k == "type" || k == "role" || k == "content" })
		b = append(b, '}')
		i = j
	}
	return b
}

func appendParts(b []byte, parts []llm.Block, output bool) []byte {
	b = append(b, '[')
	for i := range parts {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPart(b, &parts[i], output)
	}
	return append(b, ']')
}

func appendPart(b []byte, p *llm.Block, output bool) []byte {
	if p.Raw != nil {
		return append(b, p.Raw...)
	}
	switch p.Type {
	case llm.BlockText:
		if output {
			b = append(b, `{"type":"output_text","text":`...)
			b = jsonx.AppendString(b, p.Text)
			if p.Extra["annotations"] == nil {
				b = append(b, `,"annotations":[]`...)
			}
		} else {
			b = append(b, `{"type":"input_text","text":`...)
			b = jsonx.AppendString(b, p.Text)
		}
		b = appendExtra(b, p.Extra, func(k string) bool { return k == "type" || k == "text" })
		return append(b, '}')
	case llm.BlockImage:
		b = append(b, `{"type":"input_image","image_url":`...)
		img := p.Image
		if img == nil {
			img = &llm.ImageSource{}
		}
		if img.Kind == "base64" {
			b = jsonx.AppendString(b, "data:"+img.MediaType+";base64,"+img.Data)
		} else {
			b = jsonx.AppendString(b, img.URL)
		}
		if img.Detail != "" {
			b = append(b, `,"detail":`...)
			b = jsonx.AppendString(b, img.Detail)
		}
		return append(b, '}')
	}
	// a block no Responses part expresses (translation drops these first)
	b = append(b, `{"type":"input_text","text":`...)
	b = jsonx.AppendString(b, p.Text)
	return append(b, '}')
}

func appendItem(b []byte, bl *llm.Block, extra llm.Extra) []byte {
	if bl.Raw != nil {
		return append(b, bl.Raw...)
	}
	switch bl.Type {
	case llm.BlockToolUse:
		b = append(b, `{"type":"function_call","call_id":`...)
		b = jsonx.AppendString(b, bl.ID)
		b = append(b, `,"name":`...)
		b = jsonx.AppendString(b, bl.Name)
		b = append(b, `,"arguments":`...)
		args := string(bl.Input)
		if args == "" {
			args = "{}"
		}
		b = jsonx.AppendString(b, args)
		b = appendExtra(b, extra, func(k string) bool { return k == "type" || k == "call_id" || k == "name" || k == "arguments" })
	case llm.BlockToolResult:
		b = append(b, `{"type":"function_call_output","call_id":`...)
		b = jsonx.AppendString(b, bl.ToolUseID)
		b = append(b, `,"output":`...)
		if bl.ContentIsString || len(bl.Content) == 0 || onlyText(bl.Content) {
			b = jsonx.AppendString(b, llm.BlocksText(bl.Content))
		} else {
			b = appendParts(b, bl.Content, false)
		}
		b = appendExtra(b, extra, func(k string) bool { return k == "type" || k == "call_id" || k == "output" })
	case llm.BlockReasoning:
		b = append(b, `{"type":"reasoning","id":`...)
		b = jsonx.AppendString(b, bl.ID)
		b = append(b, `,"summary":[`...)
		if bl.Thinking != "" {
			b = append(b, `{"type":"summary_text","text":`...)
			b = jsonx.AppendString(b, bl.Thinking)
			b = append(b, '}')
		}
		b = append(b, ']')
		if bl.Data != "" {
			b = append(b, `,"encrypted_content":`...)
			b = jsonx.AppendString(b, bl.Data)
		}
	}
	return append(b, '}')
}

func onlyText(bs []llm.Block) bool {
	for i := range bs {
		if bs[i].Type != llm.BlockText || bs[i].Raw != nil || len(bs[i].Extra) > 0 {
			return false
		}
	}
	return true
}

func appendTool(b []byte, t *llm.Tool) []byte {
	if t.Raw != nil {
		return append(b, t.Raw...)
	}
	b = append(b, `{"type":"function","name":`...)
	b = jsonx.AppendString(b, t.Name)
	if t.Description != "" {
		b = append(b, `,"description":`...)
		b = jsonx.AppendString(b, t.Description)
	}
	if t.InputSchema != nil {
		b = append(b, `,"parameters":`...)
		b = append(b, t.InputSchema...)
	}
	if t.Strict != nil {
		b = append(b, `,"strict":`...)
		b = jsonx.AppendBool(b, *t.Strict)
	}
	b = appendExtra(b, t.Extra, func(k string) bool {
		return k == "type" || k == "name" || (k == "description" && t.Description != "") ||
			(k == "parameters" && t.InputSchema != nil) || (k == "strict" && t.Strict != nil)
	})
	return append(b, '}')
}

func appendToolChoice(b []byte, tc *llm.ToolChoice) []byte {
	if tc.Raw != nil {
		return append(b, tc.Raw...)
	}
	switch tc.Type {
	case llm.ToolChoiceNone:
		return append(b, `"none"`...)
	case llm.ToolChoiceAny:
		return append(b, `"required"`...)
	case llm.ToolChoiceTool:
		b = append(b, `{"type":"function","name":`...)
		b = jsonx.AppendString(b, tc.Name)
		return append(b, '}')
	}
	return append(b, `"auto"`...)
}

func appendFormat(b []byte, rf *llm.ResponseFormat) []byte {
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, rf.Type)
	if rf.Type == "json_schema" {
		b = append(b, `,"name":`...)
		name := rf.Name
		if name == "" {
			name = "output" // required by the API; Anthropic's output_config has none
		}
		b = jsonx.AppendString(b, name)
		if rf.Description != "" {
			b = append(b, `,"description":`...)
			b = jsonx.AppendString(b, rf.Description)
		}
		if rf.Schema != nil {
			b = append(b, `,"schema":`...)
			b = append(b, rf.Schema...)
		}
		if rf.Strict != nil {
			b = append(b, `,"strict":`...)
			b = jsonx.AppendBool(b, *rf.Strict)
		}
	}
	b = appendExtra(b, rf.Extra, func(k string) bool {
		return strings.Contains(" type name description schema strict ", " "+k+" ")
	})
	return append(b, '}')
}
