package structured

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Settings tune structured-output handling for one mesh. Zero values are
// the defaults. It is plain data, safe to copy.
type Settings struct {
	// RelaxedStreams streams answers through and validates at the end
	// (reported in the X-Mesh-Schema-Valid trailer) instead of buffering
	// and repairing them (strict, the default).
	RelaxedStreams bool
	// PassViolations answers with the raw invalid answer and an
	// X-Mesh-Schema-Violation header instead of MESH_SCHEMA_VIOLATION.
	PassViolations bool
	// DisableReask skips the targeted repair request.
	DisableReask bool
	// DisableImplied ignores schemas implied by the system prompt.
	DisableImplied bool
	// StrictImplied treats an implied schema as a contract: an answer
	// that stays invalid is MESH_SCHEMA_VIOLATION, as for a schema the
	// client gave. Otherwise (the default) an implied schema only helps:
	// the client gets the model's own answer with X-Mesh-Schema-Violation.
	StrictImplied bool
	// SendImplied lets a sure reading of an implied schema go upstream as
	// the model's output format and its keys drive repair and the re-ask
	// (implied: send, and strict). Otherwise (implied: guess, the default)
	// the keys are only reported: the answer is repaired and re-asked as
	// JSON, never asked for keys Keel guessed (STYLE 23).
	SendImplied bool
	// Derive lists declared derivation rules for missing required fields.
	Derive []Derivation
	// Limits bound client schemas before they are compiled (zero fields:
	// DefaultLimits); MaxConcurrentCompiles sizes the mesh's own compile
	// slots.
	Limits Limits
}

// Spec is a call's output contract: which part of its answer must be JSON,
// and against what. A Spec is immutable once made; it is safe for
// concurrent use.
type Spec struct {
	// Schema is the compiled contract; Raw its text.
	Schema *Schema
	Raw    json.RawMessage
	// Tool, when set, names the forced tool whose input must validate;
	// otherwise the answer's text must.
	Tool string
	// Source is where the schema came from: mesh_behavior.output_schema,
	// response_format.json_schema, response_format.json_object(.schema),
	// output_config.format, forced_tool or implied.
	Source string
	// Implied is the system prompt's reading, for an implied schema.
	Implied *Implied
	// Guess, for an implied schema under implied: guess, is the compiled
	// reading, only checked to report its keys (X-Mesh-Schema-Violation);
	// Schema and Raw are then the keyless {"type":"object"} the answer is
	// repaired and re-asked against.
	Guess *Schema
	// JSONMode marks OpenAI JSON mode (response_format json_object, with
	// or without an instructor-style schema member): the answer must
	// parse, but the model's answer is never turned into an error.
	JSONMode bool
}

// Trace describes a call's output contract for its record and debug trace.
type Trace struct {
	// Source is "given" or "implied"; Origin names where a given schema
	// came from (mesh_behavior.output_schema, response_format.json_schema,
	// output_config.format, forced_tool).
	Source, Origin string
	// Sentence is the system-prompt text an implied schema was read from.
	Sentence string
	// Required lists the keys the schema requires at its top level.
	Required []string
	// Schema is the JSON Schema validated against.
	Schema []byte
	// Sent says the schema was also sent upstream in the endpoint's form.
	Sent bool
	// InvalidAnswer is the first answer that failed validation, cut at
	// 4 KiB.
	InvalidAnswer string
}

// MayFail reports whether an answer that stays invalid fails the call
// (502 MESH_SCHEMA_VIOLATION) under c: only for a schema the client gave in
// a structured-output format, or an implied one under
// structured_output.implied: strict. JSON mode and implied schemas are the
// client's or Keel's wish, not a contract: direct, the client would have
// had the model's answer, so it gets it (STYLE 23).
func (sp *Spec) MayFail(c Settings) bool {
	switch {
	case c.PassViolations, sp.JSONMode:
		return false
	case sp.Implied != nil:
		return c.StrictImplied
	}
	return true
}

// Trace describes sp for the call's record and debug trace.
func (sp *Spec) Trace() *Trace {
	st := &Trace{Source: "given", Origin: sp.Source, Schema: sp.Raw, Required: topRequired(sp.Raw)}
	if sp.Implied != nil {
		st.Source, st.Sentence, st.Required = "implied", sp.Implied.Sentence, sp.Implied.Required
		st.Schema = sp.Implied.Schema
	}
	return st
}

func topRequired(raw json.RawMessage) []string {
	var s struct {
		Required []string `json:"required"`
	}
	json.Unmarshal(raw, &s)
	return s.Required
}

// Upstream reports whether sp should be sent upstream with req: JSON mode
// (the attempt decides the form per endpoint), or a schema the client
// named in no wire format of its own (mesh_behavior.output_schema) or one
// implied by its system prompt and read surely, and only an object schema
// with properties (what both providers' structured outputs take). A
// response_format, output_config or forced tool the client sent goes
// upstream as it is.
func (sp *Spec) Upstream(req *llm.Request) bool {
	if sp.JSONMode {
		return true
	}
	if sp.Implied != nil && (!sp.Implied.Sure || sp.Guess != nil) {
		// A guess: reported, never sent (implied: guess), or a reading
		// that is not sure (any mode).
		return false
	}
	if sp.Source != "mesh_behavior.output_schema" && sp.Source != "implied" {
		return false
	}
	if req.ResponseFormat != nil || AnthropicJSONFormat(req) != nil {
		return false
	}
	if tc := req.ToolChoice; tc != nil && tc.Type == llm.ToolChoiceTool {
		return false
	}
	return translate.ObjectRoot(sp.Raw)
}

// objectSchema is what json_object asks for.
var objectSchema = json.RawMessage(`{"type":"object"}`)

// SpecFor finds req's output contract under c, compiling its schema with
// comp; outputSchema is mesh_behavior.output_schema (nil: none). It returns
// nil, nil when the answer passes untouched, and an *llm.APIError for a
// schema the client gave that does not compile (400) or whose compile ctx
// ended (504). An implied schema that does not compile is no contract.
func SpecFor(ctx context.Context, comp *Compiler, c Settings, req *llm.Request, outputSchema json.RawMessage) (*Spec, error) {
	compile := func(raw json.RawMessage, src string) (*Spec, error) {
		s, err := comp.Compile(ctx, raw)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &llm.APIError{Status: http.StatusGatewayTimeout, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout, Message: src + ": " + err.Error()}
			}
			msg := src + ": invalid JSON Schema: " + err.Error()
			if errors.Is(err, ErrSchemaLimit) {
				msg = src + ": schema refused: " + err.Error()
			}
			return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: src, Message: msg}
		}
		return &Spec{Schema: s, Raw: raw, Source: src}, nil
	}
	if len(outputSchema) > 0 {
		return compile(outputSchema, "mesh_behavior.output_schema")
	}
	if raw, src, jsonMode := formatSchema(req); raw != nil {
		sp, err := compile(raw, src)
		if err != nil {
			return nil, err
		}
		sp.JSONMode = jsonMode
		return sp, nil
	}
	if tc := req.ToolChoice; tc != nil && tc.Type == llm.ToolChoiceTool {
		for _, t := range req.Tools {
			if t.Name == tc.Name && len(t.InputSchema) > 0 {
				sp, err := compile(t.InputSchema, "forced_tool")
				if err != nil {
					return nil, err
				}
				sp.Tool = t.Name
				return sp, nil
			}
		}
	}
	if !c.DisableImplied && len(req.Tools) == 0 {
		if sys := req.SystemText(); sys != "" {
			// A keyless demand ("Respond only in JSON.") is read too: the
			// answer is still validated and repaired as JSON, never sent
			// upstream. Readings are kept per prompt (readcache.go).
			imp, ok := promptReadings.read(sys)
			if ok {
				sp, err := compile(imp.Schema, "implied")
				if err != nil {
					return nil, nil // an implied schema we cannot compile is no contract
				}
				if !c.SendImplied && len(imp.Required) > 0 {
					// implied: guess. On blind corpora 8 % of the sure
					// readings missed or misplaced a key: the keys are
					// reported, never asked for. The answer is held to
					// what the prompt surely asks, a JSON object.
					obj, err := compile(objectSchema, "implied")
					if err != nil {
						return nil, err
					}
					obj.Guess = sp.Schema
					sp = obj
				}
				sp.Implied = imp
				return sp, nil
			}
		}
	}
	return nil, nil
}

// formatSchema is the schema of req's structured-output format, its
// source, and whether it is OpenAI JSON mode: response_format json_schema;
// json_object (instructor's JSON modes send the schema beside the type,
// response_format {type: json_object, schema: {…}}, as Together, Fireworks
// and Anyscale take it: validated against); or Anthropic's
// output_config.format. nil when req has none.
func formatSchema(req *llm.Request) (raw json.RawMessage, src string, jsonMode bool) {
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_schema":
			if len(rf.Schema) > 0 {
				return rf.Schema, "response_format.json_schema", false
			}
		case "json_object":
			if s, ok := rf.Extra["schema"]; ok && len(s) > 0 && s[0] == '{' {
				return s, "response_format.json_object.schema", true
			}
			return objectSchema, "response_format.json_object", true
		}
	}
	if raw := AnthropicJSONFormat(req); raw != nil {
		return raw, "output_config.format", false
	}
	return nil, "", false
}

// AnswerJSON returns the part of resp that must be JSON, the index of the
// forced tool's block (-1 for text), and false when the forced tool was
// not called.
func (sp *Spec) AnswerJSON(resp *llm.Response) (string, int, bool) {
	if sp.Tool != "" {
		for i, b := range resp.Content {
			if b.Type == llm.BlockToolUse && b.Name == sp.Tool {
				return string(b.Input), i, true
			}
		}
		return "", -1, false
	}
	return resp.Text(), -1, true
}

// Replace returns a copy of resp with doc, the repaired document, in place
// of the part AnswerJSON returned (idx is its index); resp is not
// modified.
func (sp *Spec) Replace(resp *llm.Response, idx int, doc []byte) *llm.Response {
	out := *resp
	out.Touch()
	if sp.Tool != "" {
		out.Content = append([]llm.Block(nil), resp.Content...)
		out.Content[idx].Input = json.RawMessage(doc)
		return &out
	}
	// One text block carries the document (surrounding prose was part of
	// what the repair removed).
	var content []llm.Block
	placed := false
	for _, b := range resp.Content {
		if b.Type == llm.BlockText {
			if !placed {
				content = append(content, llm.Block{Type: llm.BlockText, Text: string(doc)})
				placed = true
			}
			continue
		}
		content = append(content, b)
	}
	out.Content = content
	return &out
}

// AnthropicJSONFormat returns the schema of Anthropic structured outputs:
// output_config.format (or the beta output_format) of type json_schema.
func AnthropicJSONFormat(req *llm.Request) json.RawMessage {
	type format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if raw, ok := req.Extra["output_config"]; ok {
		var oc struct {
			Format *format `json:"format"`
		}
		if json.Unmarshal(raw, &oc) == nil && oc.Format != nil && oc.Format.Type == "json_schema" && len(oc.Format.Schema) > 0 {
			return oc.Format.Schema
		}
	}
	if raw, ok := req.Extra["output_format"]; ok {
		var f format
		if json.Unmarshal(raw, &f) == nil && f.Type == "json_schema" && len(f.Schema) > 0 {
			return f.Schema
		}
	}
	return nil
}
