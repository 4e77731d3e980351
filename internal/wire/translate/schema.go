package translate

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// AnthropicSchema returns a copy of a JSON Schema in the subset Anthropic
// structured outputs accept (its structured-outputs docs, "JSON Schema
// limitations"; the API answers 400 otherwise, e.g. "For 'object' type,
// 'additionalProperties' must be explicitly set to false", "For 'number'
// type, properties maximum, minimum are not supported"): every object
// schema closed with "additionalProperties": false; numeric bounds
// (minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf),
// string lengths (minLength, maxLength) and array bounds other than
// minItems 0 or 1 (maxItems, a larger minItems, uniqueItems) moved into
// the schema's description, as Anthropic's own SDKs do, so the model still
// reads them. Keel validates the answer against the schema as given, so
// nothing is lost; the copy only steers the model.
func AnthropicSchema(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	anthropicSubset(v)
	return json.Marshal(v)
}

// schemaKeys hold one subschema; schemaLists a list of them; schemaMaps a
// name → subschema mapping.
var (
	schemaKeys  = []string{"items", "not", "if", "then", "else", "contains", "additionalItems", "unevaluatedItems", "propertyNames"}
	schemaLists = []string{"anyOf", "allOf", "oneOf", "prefixItems"}
	schemaMaps  = []string{"properties", "$defs", "definitions", "patternProperties", "dependentSchemas"}
	// unsupported are the constraint keywords Anthropic rejects, in the
	// order they are written into a description.
	unsupported = []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minLength", "maxLength", "minItems", "maxItems", "uniqueItems"}
)

func anthropicSubset(v any) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	_, hasProps := m["properties"]
	if m["type"] == "object" || hasProps {
		m["additionalProperties"] = false
	}
	var notes []string
	for _, k := range unsupported {
		c, ok := m[k]
		if !ok {
			continue
		}
		if n, isNum := c.(float64); k == "minItems" && isNum && (n == 0 || n == 1) {
			continue // supported
		}
		b, _ := json.Marshal(c)
		notes = append(notes, k+": "+string(b))
		delete(m, k)
	}
	if len(notes) > 0 {
		d, _ := m["description"].(string)
		if d != "" {
			d += " "
		}
		m["description"] = d + "{" + strings.Join(notes, ", ") + "}"
	}
	for _, k := range schemaKeys {
		anthropicSubset(m[k])
	}
	for _, k := range schemaLists {
		if l, ok := m[k].([]any); ok {
			for _, s := range l {
				anthropicSubset(s)
			}
		}
	}
	for _, k := range schemaMaps {
		if mm, ok := m[k].(map[string]any); ok {
			for _, s := range mm {
				anthropicSubset(s)
			}
		}
	}
}

// ObjectRoot reports whether a schema's root is an object schema with
// named properties: the only kind both providers' structured outputs take
// as an answer's shape (OpenAI requires an object root; a closed object
// with no properties would only admit {}).
func ObjectRoot(raw json.RawMessage) bool {
	var root struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(raw, &root) != nil || len(root.Properties) == 0 {
		return false
	}
	return root.Type == nil || root.Type == "object"
}

// OutputSchemaName is the name Keel gives a schema it sends upstream on its
// own (an OpenAI json_schema response_format name, or the forced tool's).
const OutputSchemaName = "keel_output"

// WithOutputSchema returns a copy of req that asks the model for JSON
// matching schema in the native form of format: OpenAI response_format
// json_schema (not strict: strict mode takes only schemas with every
// property required and objects closed), or Anthropic
// output_config.format with the schema in Anthropic's subset (merged into an
// output_config the client sent, such as one with effort).
func WithOutputSchema(req *llm.Request, format llm.Format, schema json.RawMessage) (*llm.Request, error) {
	out := *req
	if format.Family() == llm.FormatOpenAI {
		out.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: OutputSchemaName, Schema: schema}
		return &out, nil
	}
	closed, err := AnthropicSchema(schema)
	if err != nil {
		return nil, err
	}
	oc := map[string]json.RawMessage{}
	if raw, ok := req.Extra["output_config"]; ok {
		if err := json.Unmarshal(raw, &oc); err != nil {
			return nil, fmt.Errorf("output_config: %w", err)
		}
	}
	oc["format"], _ = json.Marshal(map[string]any{"type": "json_schema", "schema": json.RawMessage(closed)})
	b, err := json.Marshal(oc)
	if err != nil {
		return nil, err
	}
	out.Extra = make(llm.Extra, len(req.Extra)+1)
	for k, v := range req.Extra {
		out.Extra[k] = v
	}
	out.Extra["output_config"] = b
	return &out, nil
}

// WithOutputTool returns a copy of req that forces a call of a tool whose
// input schema is schema, for endpoints without native structured outputs;
// FoldOutputTool turns the answer back into text.
func WithOutputTool(req *llm.Request, schema json.RawMessage) *llm.Request {
	out := *req
	out.Tools = append(append([]llm.Tool(nil), req.Tools...), llm.Tool{Name: OutputSchemaName,
		Description: "Give the answer as this tool's input.", InputSchema: schema})
	out.ToolChoice = &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: OutputSchemaName}
	return &out
}

// FoldOutputTool replaces the forced output tool's call in resp by a text
// block holding its input, and the tool_use stop by end_turn, so the
// client sees the answer it asked for (as Bifrost folds its emulation
// tool). It reports whether it found the call.
func FoldOutputTool(resp *llm.Response) bool {
	for i, b := range resp.Content {
		if b.Type == llm.BlockToolUse && b.Name == OutputSchemaName {
			resp.Touch()
			resp.Content = append(resp.Content[:i:i], append([]llm.Block{{Type: llm.BlockText, Text: string(b.Input)}}, resp.Content[i+1:]...)...)
			if resp.StopReason == llm.StopToolUse {
				resp.StopReason = llm.StopEndTurn
			}
			return true
		}
	}
	return false
}
