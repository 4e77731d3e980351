package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// Roles of contents.
const (
	roleUser  = "user"
	roleModel = "model"
)

// skipSignature is the thoughtSignature Google documents for a function
// call a Gemini 3 model did not make (history from another model, or one
// whose signature was not kept): Gemini 3 refuses a model turn's first
// function call without a signature
// (ai.google.dev/gemini-api/docs/thought-signatures).
const skipSignature = "skip_thought_signature_validator"

// Reasoning effort as a thinking budget: the table of Google's OpenAI
// compatibility layer (ai.google.dev/gemini-api/docs/openai#thinking),
// with minimal as low.
var effortBudget = map[string]int{"none": 0, "minimal": 1024, "low": 1024, "medium": 8192, "high": 24576}

// EncodeRequest writes r as a GenerateContentRequest. The model and the
// stream flag are not in the body (the URL names them). Members the
// Gemini API has no place for must have been removed by translation
// (internal/wire/translate); an Extra "thinking" (Anthropic's) or
// "reasoning_effort" (OpenAI's) becomes thinkingConfig.
func EncodeRequest(r *llm.Request) ([]byte, error) {
	var out request
	var sys []part
	for _, b := range r.System {
		if b.Type == llm.BlockText && b.Text != "" {
			sys = append(sys, part{Text: str(b.Text)})
		}
	}
	names := map[string]string{} // tool_use id → function name
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if b.Type == llm.BlockToolUse {
				names[b.ID] = b.Name
			}
		}
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case llm.RoleSystem, llm.RoleDeveloper:
			if t := m.Text(); t != "" {
				sys = append(sys, part{Text: str(t)})
			}
			continue
		}
		role := roleUser
		if m.Role == llm.RoleAssistant {
			role = roleModel
		}
		parts, err := encodeParts(m.Content, role, names)
		if err != nil {
			return nil, fmt.Errorf("messages[%d]: %w", i, err)
		}
		if len(parts) == 0 {
			continue
		}
		if n := len(out.Contents); n > 0 && out.Contents[n-1].Role == role {
			// consecutive turns of one role (OpenAI tool messages): one
			// content, as Gemini answers parallel calls in one
			out.Contents[n-1].Parts = append(out.Contents[n-1].Parts, parts...)
			continue
		}
		out.Contents = append(out.Contents, content{Role: role, Parts: parts})
	}
	if len(out.Contents) == 0 {
		return nil, errors.New("no contents: the request has no user or assistant message")
	}
	if len(sys) > 0 {
		out.SystemInstruction = &content{Parts: sys}
	}
	if len(r.Tools) > 0 {
		decls := make([]functionDeclaration, 0, len(r.Tools))
		for _, t := range r.Tools {
			decls = append(decls, functionDeclaration{Name: t.Name, Description: t.Description, ParametersJSONSchema: t.InputSchema})
		}
		out.Tools = []tool{{FunctionDeclarations: decls}}
	}
	if tc := r.ToolChoice; tc != nil {
		fc := &functionCallingConfig{}
		switch tc.Type {
		case llm.ToolChoiceAuto:
			fc.Mode = "AUTO"
		case llm.ToolChoiceAny:
			fc.Mode = "ANY"
		case llm.ToolChoiceTool:
			fc.Mode, fc.AllowedFunctionNames = "ANY", []string{tc.Name}
		case llm.ToolChoiceNone:
			fc.Mode = "NONE"
		}
		if fc.Mode != "" {
			out.ToolConfig = &toolConfig{FunctionCallingConfig: fc}
		}
	}
	g, err := generation(r)
	if err != nil {
		return nil, err
	}
	out.GenerationConfig = g
	return json.Marshal(&out)
}

// encodeParts maps a message's blocks to parts.
func encodeParts(blocks []llm.Block, role string, names map[string]string) ([]part, error) {
	var parts []part
	signed := false // a model turn's first function call carries a signature
	for _, b := range blocks {
		switch b.Type {
		case llm.BlockText:
			if b.Text != "" {
				parts = append(parts, part{Text: str(b.Text)})
			}
		case llm.BlockImage:
			img := b.Image
			if img == nil {
				return nil, errors.New("image block without a source")
			}
			if img.Kind == "url" {
				parts = append(parts, part{FileData: &fileData{MimeType: img.MediaType, FileURI: img.URL}})
			} else {
				parts = append(parts, part{InlineData: &blob{MimeType: img.MediaType, Data: img.Data}})
			}
		case llm.BlockToolUse:
			args := b.Input
			if len(args) == 0 {
				args = json.RawMessage("{}")
			}
			p := part{FunctionCall: &functionCall{Name: b.Name, Args: args}}
			if role == roleModel && !signed {
				p.ThoughtSignature, signed = skipSignature, true
			}
			parts = append(parts, p)
		case llm.BlockToolResult:
			name, ok := names[b.ToolUseID]
			if !ok {
				return nil, fmt.Errorf("tool_result %q answers no tool_use of the conversation", b.ToolUseID)
			}
			// The response is an object: "output" for the function's
			// output, "error" for its failure (ai.google.dev/api/caching#FunctionResponse).
			key := "output"
			if b.IsError {
				key = "error"
			}
			v, _ := json.Marshal(map[string]string{key: llm.BlocksText(b.Content)})
			parts = append(parts, part{FunctionResponse: &functionResponse{Name: name, Response: v}})
		case llm.BlockThinking, llm.BlockRedactedThinking:
			// another family's opaque state: translation drops it
		default:
			return nil, fmt.Errorf("%s block: not expressible in the Gemini API", b.Type)
		}
	}
	return parts, nil
}

// generation builds generationConfig; nil when nothing is set.
func generation(r *llm.Request) (*generationConfig, error) {
	g := generationConfig{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, StopSequences: r.StopSequences}
	if r.HasMaxTokens {
		n := r.MaxTokens
		g.MaxOutputTokens = &n
	}
	if rf := r.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_object":
			g.ResponseMimeType = "application/json"
		case "json_schema":
			g.ResponseMimeType, g.ResponseJSONSchema = "application/json", rf.Schema
		}
	}
	if v, ok := r.Extra["thinking"]; ok {
		var th struct {
			Type         string `json:"type"`
			BudgetTokens *int   `json:"budget_tokens"`
		}
		if err := json.Unmarshal(v, &th); err != nil {
			return nil, fmt.Errorf("thinking: %w", err)
		}
		switch th.Type {
		case "disabled":
			zero := 0
			g.ThinkingConfig = &thinkingConfig{ThinkingBudget: &zero}
		default: // enabled, adaptive: the model's thoughts are asked for
			g.ThinkingConfig = &thinkingConfig{ThinkingBudget: th.BudgetTokens, IncludeThoughts: true}
		}
	}
	if v, ok := r.Extra["reasoning_effort"]; ok && g.ThinkingConfig == nil {
		var e string
		if err := json.Unmarshal(v, &e); err != nil {
			return nil, fmt.Errorf("reasoning_effort: %w", err)
		}
		b, ok := effortBudget[strings.ToLower(e)]
		if !ok {
			return nil, fmt.Errorf("reasoning_effort %q: want none, minimal, low, medium or high", e)
		}
		g.ThinkingConfig = &thinkingConfig{ThinkingBudget: &b}
	}
	if g.Temperature == nil && g.TopP == nil && g.TopK == nil && g.MaxOutputTokens == nil && len(g.StopSequences) == 0 &&
		g.ResponseMimeType == "" && g.ThinkingConfig == nil {
		return nil, nil
	}
	return &g, nil
}

// ParseRequest reads a GenerateContentRequest (what the simulator
// serves). The model and stream flag are not in the body: the caller
// sets them from the URL.
func ParseRequest(body []byte) (*llm.Request, error) {
	var in request
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, badRequest("Invalid JSON payload received. " + err.Error())
	}
	if len(in.Contents) == 0 {
		return nil, badRequest("* GenerateContentRequest.contents: contents is not specified")
	}
	r := &llm.Request{Format: llm.FormatGemini}
	if si := in.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				r.System = append(r.System, llm.Block{Type: llm.BlockText, Text: *p.Text})
			}
		}
	}
	calls := 0
	for i, c := range in.Contents {
		m := llm.Message{Role: llm.RoleUser}
		switch c.Role {
		case roleUser, "":
		case roleModel:
			m.Role = llm.RoleAssistant
		default:
			return nil, badRequest(fmt.Sprintf("* GenerateContentRequest.contents[%d].role: Please use a valid role: user, model.", i))
		}
		for j, p := range c.Parts {
			b, err := parsePart(p, &calls)
			if err != nil {
				return nil, badRequest(fmt.Sprintf("* GenerateContentRequest.contents[%d].parts[%d]: %v", i, j, err))
			}
			m.Content = append(m.Content, b)
		}
		r.Messages = append(r.Messages, m)
	}
	for _, t := range in.Tools {
		for _, d := range t.FunctionDeclarations {
			schema := d.ParametersJSONSchema
			if schema == nil {
				schema = d.Parameters
			}
			r.Tools = append(r.Tools, llm.Tool{Name: d.Name, Description: d.Description, InputSchema: schema})
		}
	}
	if tc := in.ToolConfig; tc != nil && tc.FunctionCallingConfig != nil {
		fc := tc.FunctionCallingConfig
		switch {
		case fc.Mode == "ANY" && len(fc.AllowedFunctionNames) == 1:
			r.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: fc.AllowedFunctionNames[0]}
		case fc.Mode == "ANY":
			r.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceAny}
		case fc.Mode == "NONE":
			r.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceNone}
		case fc.Mode == "AUTO":
			r.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceAuto}
		}
	}
	if g := in.GenerationConfig; g != nil {
		r.Temperature, r.TopP, r.TopK, r.StopSequences = g.Temperature, g.TopP, g.TopK, g.StopSequences
		if g.MaxOutputTokens != nil {
			r.MaxTokens, r.HasMaxTokens = *g.MaxOutputTokens, true
		}
		switch {
		case g.ResponseJSONSchema != nil || g.ResponseSchema != nil:
			s := g.ResponseJSONSchema
			if s == nil {
				s = g.ResponseSchema
			}
			r.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: "response", Schema: s}
		case g.ResponseMimeType == "application/json":
			r.ResponseFormat = &llm.ResponseFormat{Type: "json_object"}
		}
		if tc := g.ThinkingConfig; tc != nil {
			v, _ := json.Marshal(tc)
			r.Extra = llm.Extra{"thinkingConfig": v}
		}
	}
	return r, nil
}

// parsePart reads one part as a block; calls numbers the function calls
// for ids.
func parsePart(p part, calls *int) (llm.Block, error) {
	switch {
	case p.Text != nil && p.Thought:
		return llm.Block{Type: llm.BlockThinking, Thinking: *p.Text, Signature: p.ThoughtSignature}, nil
	case p.Text != nil:
		return llm.Block{Type: llm.BlockText, Text: *p.Text}, nil
	case p.InlineData != nil:
		return llm.Block{Type: llm.BlockImage, Image: &llm.ImageSource{Kind: "base64", MediaType: p.InlineData.MimeType, Data: p.InlineData.Data}}, nil
	case p.FileData != nil:
		return llm.Block{Type: llm.BlockImage, Image: &llm.ImageSource{Kind: "url", MediaType: p.FileData.MimeType, URL: p.FileData.FileURI}}, nil
	case p.FunctionCall != nil:
		fc := p.FunctionCall
		args := fc.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		id := fc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", *calls)
		}
		*calls++
		return llm.Block{Type: llm.BlockToolUse, ID: id, Name: fc.Name, Input: args}, nil
	case p.FunctionResponse != nil:
		fr := p.FunctionResponse
		return llm.Block{Type: llm.BlockToolResult, ToolUseID: fr.Name, Content: []llm.Block{{Type: llm.BlockText, Text: string(fr.Response)}}}, nil
	}
	return llm.Block{}, errors.New("a part needs one of text, inlineData, fileData, functionCall, functionResponse")
}

// badRequest is the Gemini API's 400 INVALID_ARGUMENT.
func badRequest(msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT", Message: msg}
}
