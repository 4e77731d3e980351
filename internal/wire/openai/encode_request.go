package openai

import (
	"errors"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// EncodeRequest writes r as an OpenAI Chat Completions request body: known
// members in a fixed order (model, messages, max_completion_tokens or
// max_tokens, temperature, top_p, n, stop, stream, stream_options, tools,
// tool_choice, parallel_tool_calls, response_format, user), then Extra sorted
// by key, so equal requests give equal bytes. mesh_behavior is never written.
//
// EncodeRequest is the exact inverse of ParseRequest:
// ParseRequest(EncodeRequest(ParseRequest(b))) equals ParseRequest(b). It
// therefore writes stream_options.include_usage only when r.IncludeUsage is
// set; to send a request upstream use EncodeUpstreamRequest, which also asks
// for the usage chunk.
//
// The one cross-format concern handled here: a top-level System (from an
// Anthropic request) becomes a leading system message. Fields OpenAI has no
// place for (TopK, MetadataExtra, tool_result IsError, thinking blocks, a
// ToolChoice's DisableParallel) are not written.
func EncodeRequest(r *llm.Request) ([]byte, error) {
	return appendRequest(make([]byte, 0, requestSizeHint(r)), r, r.IncludeUsage)
}

// EncodeUpstreamRequest is EncodeRequest for a body sent to an OpenAI
// upstream: when r.Stream is set it always writes
// stream_options.include_usage:true, because Keel needs the usage chunk
// whether or not its own client asked for it (the client's choice stays in
// r.IncludeUsage and goes to StreamOptions for the client-facing writer).
func EncodeUpstreamRequest(r *llm.Request) ([]byte, error) {
	return appendRequest(make([]byte, 0, requestSizeHint(r)), r, r.IncludeUsage || r.Stream)
}

var errBadNumber = errors.New("openai: request has a NaN or infinite number")

func requestSizeHint(r *llm.Request) int {
	n := 256
	for i := range r.Messages {
		for j := range r.Messages[i].Content {
			b := &r.Messages[i].Content[j]
			n += 48 + len(b.Text) + len(b.Input) + len(b.Raw)
			if b.Image != nil {
				n += len(b.Image.Data) + len(b.Image.URL)
			}
			for _, c := range b.Content {
				n += 32 + len(c.Text) + len(c.Raw)
			}
		}
	}
	for i := range r.Tools {
		n += 64 + len(r.Tools[i].Description) + len(r.Tools[i].InputSchema) + len(r.Tools[i].Raw)
	}
	return n
}

func requestKnownKey(k string) bool {
	switch k {
	case "model", "messages", "max_completion_tokens", "max_tokens", "temperature", "top_p", "n",
		"stop", "stream", "stream_options", "tools", "tool_choice", "parallel_tool_calls",
		"response_format", "user", "mesh_behavior":
		return true
	}
	return false
}

func appendRequest(b []byte, r *llm.Request, includeUsage bool) ([]byte, error) {
	b = append(b, '{')
	b = jsonx.AppendPlainKey(b, "model")
	b = jsonx.AppendString(b, r.Model)
	b = jsonx.AppendPlainKey(b, "messages")
	b = append(b, '[')
	if len(r.System) > 0 {
		b = appendSystem(b, r)
	}
	for i := range r.Messages {
		b = appendMessage(b, &r.Messages[i])
	}
	if b[len(b)-1] == ',' {
		b = b[:len(b)-1]
	}
	b = append(b, ']')
	if r.HasMaxTokens {
		if r.MaxTokensLegacy {
			b = jsonx.AppendPlainKey(b, "max_tokens")
		} else {
			b = jsonx.AppendPlainKey(b, "max_completion_tokens")
		}
		b = jsonx.AppendInt(b, int64(r.MaxTokens))
	}
	var ok bool
	if r.Temperature != nil {
		b = jsonx.AppendPlainKey(b, "temperature")
		if b, ok = jsonx.AppendFloat(b, *r.Temperature); !ok {
			return nil, errBadNumber
		}
	}
	if r.TopP != nil {
		b = jsonx.AppendPlainKey(b, "top_p")
		if b, ok = jsonx.AppendFloat(b, *r.TopP); !ok {
			return nil, errBadNumber
		}
	}
	if r.N != 0 {
		b = jsonx.AppendPlainKey(b, "n")
		b = jsonx.AppendInt(b, int64(r.N))
	}
	if len(r.StopSequences) > 0 {
		b = jsonx.AppendPlainKey(b, "stop")
		if r.StopIsString && len(r.StopSequences) == 1 {
			b = jsonx.AppendString(b, r.StopSequences[0])
		} else {
			b = append(b, '[')
			for i, s := range r.StopSequences {
				if i > 0 {
					b = append(b, ',')
				}
				b = jsonx.AppendString(b, s)
			}
			b = append(b, ']')
		}
	}
	if r.Stream {
		b = jsonx.AppendPlainKey(b, "stream")
		b = append(b, "true"...)
	}
	if includeUsage || len(r.StreamOptionsExtra) > 0 {
		b = jsonx.AppendPlainKey(b, "stream_options")
		b = append(b, '{')
		if includeUsage {
			b = jsonx.AppendPlainKey(b, "include_usage")
			b = append(b, "true"...)
		}
		b = appendExtra(b, r.StreamOptionsExtra, func(k string) bool { return k == "include_usage" })
		b = append(b, '}')
	}
	if len(r.Tools) > 0 {
		b = jsonx.AppendPlainKey(b, "tools")
		b = append(b, '[')
		for i := range r.Tools {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTool(b, &r.Tools[i])
		}
		b = append(b, ']')
	}
	if r.ToolChoice != nil {
		b = appendToolChoice(b, r.ToolChoice)
	}
	if r.ParallelToolCalls != nil {
		b = jsonx.AppendPlainKey(b, "parallel_tool_calls")
		b = jsonx.AppendBool(b, *r.ParallelToolCalls)
	}
	if rf := r.ResponseFormat; rf != nil {
		b = jsonx.AppendPlainKey(b, "response_format")
		b = append(b, '{')
		b = jsonx.AppendPlainKey(b, "type")
		b = jsonx.AppendString(b, rf.Type)
		if rf.Type == "json_schema" {
			b = jsonx.AppendPlainKey(b, "json_schema")
			b = append(b, '{')
			b = jsonx.AppendPlainKey(b, "name")
			b = jsonx.AppendString(b, rf.Name)
			if rf.Description != "" {
				b = jsonx.AppendPlainKey(b, "description")
				b = jsonx.AppendString(b, rf.Description)
			}
			if rf.Schema != nil {
				b = jsonx.AppendPlainKey(b, "schema")
				b = appendRaw(b, rf.Schema)
			}
			if rf.Strict != nil {
				b = jsonx.AppendPlainKey(b, "strict")
				b = jsonx.AppendBool(b, *rf.Strict)
			}
			b = append(b, '}')
		}
		b = appendExtra(b, rf.Extra, func(k string) bool { return k == "type" || k == "json_schema" })
		b = append(b, '}')
	}
	if r.UserID != "" {
		b = jsonx.AppendPlainKey(b, "user")
		b = jsonx.AppendString(b, r.UserID)
	}
	known := requestKnownKey
	if r.ResponseFormat == nil {
		// a response_format kept verbatim lives in Extra
		known = func(k string) bool { return k != "response_format" && requestKnownKey(k) }
	}
	if r.HasMaxTokens && !r.MaxTokensLegacy {
		// a max_tokens sent next to max_completion_tokens lives in Extra
		prev := known
		known = func(k string) bool { return k != "max_tokens" && prev(k) }
	}
	if r.ContinueFinalMessage {
		// vLLM / SGLang: continue the final assistant message instead of
		// starting a new one. The typed field wins over client extras.
		b = jsonx.AppendPlainKey(b, "continue_final_message")
		b = append(b, "true"...)
		b = jsonx.AppendPlainKey(b, "add_generation_prompt")
		b = append(b, "false"...)
		prev := known
		known = func(k string) bool { return k == "continue_final_message" || k == "add_generation_prompt" || prev(k) }
	}
	b = appendExtra(b, r.Extra, known)
	return append(b, '}'), nil
}

// appendSystem writes the Anthropic top-level system prompt as one leading
// system message: a string when it was one block or a string, else text parts.
func appendSystem(b []byte, r *llm.Request) []byte {
	b = append(b, `{"role":"system","content":`...)
	if r.SystemIsString || len(r.System) == 1 {
		b = jsonx.AppendString(b, llm.BlocksText(r.System))
	} else {
		b = append(b, '[')
		first := true
		for i := range r.System {
			if r.System[i].Type != llm.BlockText {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = append(b, `{"type":"text","text":`...)
			b = jsonx.AppendString(b, r.System[i].Text)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	return appendComma(b)
}

// appendComma ends an array element; the caller's closing bracket trims it.
func appendComma(b []byte) []byte { return append(b, ',') }

// Members a wire message may have that the encoder writes itself; anything
// else in Extra (a tool_call_id on a user message, a name on a tool
// message …) is written from Extra.
func plainKnownKey(k string) bool { return k == "role" || k == "name" || k == "content" }

func assistantKnownKey(k string) bool { return plainKnownKey(k) || k == "tool_calls" }

func toolMessageKnownKey(k string) bool { return k == "role" || k == "content" || k == "tool_call_id" }

// appendMessage writes one canonical message as one or more wire messages,
// each followed by a comma that the closing bracket of messages replaces.
func appendMessage(b []byte, m *llm.Message) []byte {
	if m.Role == llm.RoleUser {
		// tool_result blocks become tool messages, written first (OpenAI wants
		// them right after the assistant turn); the rest stays a user message.
		rest := 0
		for i := range m.Content {
			if c := &m.Content[i]; c.Type == llm.BlockToolResult {
				b = appendToolMessage(b, c)
			} else {
				rest++
			}
		}
		if rest == len(m.Content) {
			return appendPlainMessage(b, m, m.Content)
		}
		if rest == 0 {
			return b
		}
		others := make([]llm.Block, 0, rest)
		for i := range m.Content {
			if m.Content[i].Type != llm.BlockToolResult {
				others = append(others, m.Content[i])
			}
		}
		return appendPlainMessage(b, m, others)
	}
	return appendPlainMessage(b, m, m.Content)
}

func appendPlainMessage(b []byte, m *llm.Message, content []llm.Block) []byte {
	b = append(b, `{"role":`...)
	b = jsonx.AppendString(b, string(m.Role))
	if m.Name != "" {
		b = jsonx.AppendPlainKey(b, "name")
		b = jsonx.AppendString(b, m.Name)
	}
	assistant := m.Role == llm.RoleAssistant
	tools := 0
	if assistant {
		for i := range content {
			if content[i].Type == llm.BlockToolUse {
				tools++
			}
		}
	}
	nonTool := len(content) - tools
	switch {
	case m.ContentIsNull && nonTool == 0:
		b = jsonx.AppendPlainKey(b, "content")
		b = append(b, "null"...)
	case m.ContentIsString && onlyPlainText(content, assistant):
		b = jsonx.AppendPlainKey(b, "content")
		b = jsonx.AppendString(b, joinText(content))
	case nonTool > 0 || !assistant:
		b = jsonx.AppendPlainKey(b, "content")
		b = appendParts(b, content, assistant)
	}
	if tools > 0 {
		b = jsonx.AppendPlainKey(b, "tool_calls")
		b = append(b, '[')
		first := true
		for i := range content {
			if content[i].Type != llm.BlockToolUse {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendToolCall(b, &content[i])
		}
		b = append(b, ']')
	}
	known := plainKnownKey
	if assistant {
		known = assistantKnownKey
	}
	if assistant && m.Prefix {
		// DeepSeek / Mistral: this final assistant message is a prefix the
		// model continues.
		b = jsonx.AppendPlainKey(b, "prefix")
		b = append(b, "true"...)
		prev := known
		known = func(k string) bool { return k == "prefix" || prev(k) }
	}
	b = appendExtra(b, m.Extra, known)
	b = append(b, '}')
	return appendComma(b)
}

// onlyPlainText reports whether the (non-tool) blocks are text blocks without
// Extra or Raw, so they can be written as one content string.
func onlyPlainText(bs []llm.Block, skipTools bool) bool {
	n := 0
	for i := range bs {
		switch {
		case skipTools && bs[i].Type == llm.BlockToolUse:
		case bs[i].Type == llm.BlockText && bs[i].Raw == nil && len(bs[i].Extra) == 0:
			n++
		case bs[i].Type == llm.BlockThinking || bs[i].Type == llm.BlockRedactedThinking:
		default:
			return false
		}
	}
	return n > 0
}

func joinText(bs []llm.Block) string {
	if len(bs) == 1 {
		return bs[0].Text
	}
	return llm.BlocksText(bs)
}

// appendParts writes blocks as an array of content parts. Blocks OpenAI has
// no part for (thinking, tool blocks in the wrong place) are left out.
func appendParts(b []byte, bs []llm.Block, skipTools bool) []byte {
	b = append(b, '[')
	first := true
	for i := range bs {
		c := &bs[i]
		if skipTools && c.Type == llm.BlockToolUse {
			continue
		}
		start := len(b)
		if !first {
			b = append(b, ',')
		}
		switch {
		case c.Raw != nil:
			b = append(b, c.Raw...)
		case c.Type == llm.BlockText:
			b = append(b, `{"type":"text","text":`...)
			b = jsonx.AppendString(b, c.Text)
			b = appendExtra(b, c.Extra, partKnownKey)
			b = append(b, '}')
		case c.Type == llm.BlockImage && c.Image != nil:
			b = append(b, `{"type":"image_url","image_url":{"url":`...)
			if c.Image.Kind == "base64" {
				b = jsonx.AppendString(b, "data:"+c.Image.MediaType+";base64,"+c.Image.Data)
			} else {
				b = jsonx.AppendString(b, c.Image.URL)
			}
			if c.Image.Detail != "" {
				b = jsonx.AppendPlainKey(b, "detail")
				b = jsonx.AppendString(b, c.Image.Detail)
			}
			b = append(b, '}')
			b = appendExtra(b, c.Extra, partKnownKey)
			b = append(b, '}')
		default:
			b = b[:start]
			continue
		}
		first = false
	}
	return append(b, ']')
}

func partKnownKey(k string) bool { return k == "type" || k == "text" || k == "image_url" }

func toolCallKnownKey(k string) bool { return k == "id" || k == "type" || k == "function" }

func appendToolCall(b []byte, c *llm.Block) []byte {
	if c.Raw != nil {
		return append(b, c.Raw...)
	}
	b = append(b, `{"id":`...)
	b = jsonx.AppendString(b, c.ID)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = jsonx.AppendString(b, c.Name)
	b = append(b, `,"arguments":`...)
	if len(c.Input) == 0 {
		b = append(b, `"{}"`...)
	} else {
		b = jsonx.AppendString(b, string(c.Input))
	}
	b = append(b, '}')
	b = appendExtra(b, c.Extra, toolCallKnownKey)
	return append(b, '}')
}

func appendToolMessage(b []byte, c *llm.Block) []byte {
	if c.Raw != nil {
		b = append(b, c.Raw...)
		return appendComma(b)
	}
	b = append(b, `{"role":"tool","tool_call_id":`...)
	b = jsonx.AppendString(b, c.ToolUseID)
	b = jsonx.AppendPlainKey(b, "content")
	if c.ContentIsString && onlyPlainText(c.Content, false) || c.Content == nil {
		// nil content (an Anthropic tool_result without content) is written as ""
		b = jsonx.AppendString(b, joinText(c.Content))
	} else {
		b = appendParts(b, c.Content, false)
	}
	b = appendExtra(b, c.Extra, toolMessageKnownKey)
	b = append(b, '}')
	return appendComma(b)
}

func appendTool(b []byte, t *llm.Tool) []byte {
	if t.Raw != nil {
		return append(b, t.Raw...)
	}
	b = append(b, `{"type":"function","function":{"name":`...)
	b = jsonx.AppendString(b, t.Name)
	if t.Description != "" {
		b = jsonx.AppendPlainKey(b, "description")
		b = jsonx.AppendString(b, t.Description)
	}
	if t.InputSchema != nil {
		b = jsonx.AppendPlainKey(b, "parameters")
		b = appendRaw(b, t.InputSchema)
	}
	if t.Strict != nil {
		b = jsonx.AppendPlainKey(b, "strict")
		b = jsonx.AppendBool(b, *t.Strict)
	}
	b = append(b, '}')
	b = appendExtra(b, t.Extra, func(k string) bool { return k == "type" || k == "function" })
	return append(b, '}')
}

func appendToolChoice(b []byte, tc *llm.ToolChoice) []byte {
	if tc.Raw != nil {
		b = jsonx.AppendPlainKey(b, "tool_choice")
		return append(b, tc.Raw...)
	}
	var s string
	switch tc.Type {
	case llm.ToolChoiceNone:
		s = "none"
	case llm.ToolChoiceAuto:
		s = "auto"
	case llm.ToolChoiceAny:
		s = "required"
	case llm.ToolChoiceTool:
		b = jsonx.AppendPlainKey(b, "tool_choice")
		b = append(b, `{"type":"function","function":{"name":`...)
		b = jsonx.AppendString(b, tc.Name)
		b = append(b, '}')
		b = appendExtra(b, tc.Extra, func(k string) bool { return k == "type" || k == "function" })
		return append(b, '}')
	default:
		return b
	}
	b = jsonx.AppendPlainKey(b, "tool_choice")
	return jsonx.AppendString(b, s)
}
