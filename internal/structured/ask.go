package structured

import (
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Target is what an attempt's endpoint takes of a contract.
type Target struct {
	// Mode is how its model takes a JSON Schema (provider.SchemaMode;
	// empty: native).
	Mode provider.SchemaMode
	// JSONMode reports that its API has OpenAI's JSON mode
	// (response_format json_object).
	JSONMode bool
}

// Ask returns req asking t's model for sp in the form t takes, and whether
// that is the forced output tool (whose call is folded back into text). A
// nil sp asks nothing. Continuations, fragments and merge calls (kind) are
// sent as they are, except that JSON mode, the client's own demand,
// reaches every fragment; relaxed says streams pass through as they come
// (structured_output.stream_mode: relaxed), so a stream is not forced
// into a tool call. Ask does not modify req.
func (sp *Spec) Ask(req *llm.Request, t Target, kind string, relaxed bool) (*llm.Request, bool) {
	if sp != nil && sp.JSONMode && kind != "merge" {
		return sp.askJSONMode(req, t)
	}
	if sp == nil || kind == "fragment" || kind == "merge" {
		return req, false
	}
	switch t.Mode {
	case provider.SchemaNone:
		return req, false
	case provider.SchemaTool:
		if len(req.Tools) > 0 || req.Stream && relaxed {
			// The client's own tools, or a stream passed through as it
			// comes: a forced tool call would change the answer's shape.
			return req, false
		}
		return translate.WithOutputTool(req, sp.Raw), true
	}
	// The client's format: translation takes it to the endpoint's.
	out, err := translate.WithOutputSchema(req, req.Format, sp.Raw)
	if err != nil {
		return req, false
	}
	return out, false
}

// jsonModeInstruction tells a model without a JSON mode what OpenAI's
// json_object would have made it do.
const jsonModeInstruction = "Respond with a single valid JSON object and nothing else: no prose, no code fences."

// askJSONMode returns req in the form t understands for OpenAI JSON mode.
// An endpoint whose API has a JSON mode (OpenAI response_format
// json_object) gets req as it is. An Anthropic-format endpoint has none
// (the Messages API rejects response_format, and translation would drop
// it): with an instructor-style schema member whose root is an object with
// properties, Anthropic structured outputs with that schema (json_schema,
// translated to output_config.format) on a native endpoint; otherwise a
// forced output tool with the schema, or an open object, as input (folded
// back into the text: LiteLLM's emulation), where the endpoint takes tools
// and the request has no tools of its own and no thinking or reasoning
// (Anthropic refuses a forced tool with thinking on); a stream answered so
// is buffered and folded even under relaxed streams (the stage's
// OutputTool hook); otherwise an instruction in the system prompt. The
// json_object format is removed, so nothing is dropped.
func (sp *Spec) askJSONMode(req *llm.Request, t Target) (*llm.Request, bool) {
	if t.JSONMode || req.ResponseFormat == nil || req.ResponseFormat.Type != "json_object" {
		return req, false
	}
	out := *req
	out.ResponseFormat = nil
	_, thinking := req.Extra["thinking"]
	_, effort := req.Extra["reasoning_effort"]
	if _, r := req.Extra["reasoning"]; r {
		effort = true
	}
	withSchema := sp.Source == "response_format.json_object.schema"
	switch {
	case withSchema && t.Mode == provider.SchemaNative && translate.ObjectRoot(sp.Raw):
		out.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: translate.OutputSchemaName, Schema: sp.Raw}
		return &out, false
	case t.Mode != provider.SchemaNone && len(req.Tools) == 0 && !thinking && !effort:
		return translate.WithOutputTool(&out, sp.Raw), true
	}
	text := jsonModeInstruction
	if withSchema {
		text += " It must match this JSON Schema: " + string(sp.Raw)
	}
	out.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}, req.Messages...)
	return &out, false
}
