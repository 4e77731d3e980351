package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
)

// The values of ModelSpec.StructuredOutputs: how a model treats a request
// for a json_schema output format over its wire.
const (
	// StructuredNative (also ""): the model answers a value of the schema,
	// as OpenAI gpt-4o-2024-08-06 and later do with response_format
	// json_schema, and Claude Sonnet 4.5+ / Opus 4.1+ with
	// output_config.format (platform.claude.com/docs/en/build-with-claude/structured-outputs).
	StructuredNative = "native"
	// StructuredUnsupported: the model rejects a json_schema format with a
	// 400 invalid_request_error, as OpenAI does for gpt-3.5-turbo ("Invalid
	// parameter: 'response_format' of type 'json_schema' is not supported
	// with this model.") and Anthropic for models before structured outputs
	// ("'claude-3-5-haiku-20241022' does not support output format").
	// json_object, which those OpenAI models have, is still honoured.
	StructuredUnsupported = "unsupported"
	// StructuredIgnored: the endpoint accepts a json_schema format and
	// ignores it, answering as if none was asked, as llama.cpp's server has
	// done (ggml-org/llama.cpp#24097, #10732: HTTP 200, schema not
	// enforced) and as lenient OpenAI-compatible servers do with fields they
	// do not know: the other wire's format fields are ignored too.
	// json_object is honoured (llama.cpp has a JSON grammar for it).
	StructuredIgnored = "ignored"
)

func validStructuredOutputs(s string) error {
	switch s {
	case "", StructuredNative, StructuredUnsupported, StructuredIgnored:
		return nil
	}
	return fmt.Errorf("unknown structured_outputs %q (want native, unsupported or ignored)", s)
}

// outputFormat returns the JSON output format an endpoint of spec (nil: an
// unknown model, the defaults) serving wire f answers req with, or nil for
// a plain answer. A non-nil error is the 400 the endpoint answers instead;
// the format returned with it is the one the answer would follow if the
// endpoint accepted the request (what Answer computes).
//
// Each wire reads only its own field, as the real APIs do:
//   - Anthropic: output_config.format (or the beta output_format) of type
//     json_schema, whose every object schema sets "additionalProperties":
//     false (platform.claude.com/docs/en/build-with-claude/structured-outputs,
//     "additionalProperties must be set to false for objects") and
//     carries no numeric bounds, string lengths or array bounds but
//     minItems 0/1 (400 "For 'number' type, properties maximum, minimum
//     are not supported"); a
//     response_format member is a 400 ("response_format: Extra inputs are
//     not permitted": the Messages API rejects unknown top-level fields).
//   - OpenAI: response_format json_object or json_schema (PROTOCOLS.md
//     §2.1); with "strict": true every object schema must set
//     "additionalProperties": false and require every property; another
//     type is a 400 invalid_value; an output_config or output_format member
//     is a 400 ("Unrecognized request argument supplied: output_config").
func outputFormat(spec *ModelSpec, f llm.Format, req *llm.Request) (*llm.ResponseFormat, *llm.APIError) {
	mode := StructuredNative
	if spec != nil && spec.StructuredOutputs != "" {
		mode = spec.StructuredOutputs
	}
	if f == llm.FormatOpenAI {
		return openaiOutputFormat(mode, req)
	}
	if f == llm.FormatGemini {
		// responseMimeType application/json with responseJsonSchema (or
		// responseSchema): Gemini 2 and later models answer a value of it
		// (ai.google.dev/gemini-api/docs/structured-output).
		if mode == StructuredIgnored {
			return nil, nil
		}
		return req.ResponseFormat, nil
	}
	rf, param, ae := anthropicOutputFormat(req)
	if mode == StructuredIgnored {
		return nil, nil
	}
	if ae == nil {
		if _, ok := req.Extra["response_format"]; ok || req.ResponseFormat != nil {
			ae = invalid("", "response_format: Extra inputs are not permitted")
		}
	}
	if ae == nil && rf != nil && mode == StructuredUnsupported {
		ae = invalid("", fmt.Sprintf("'%s' does not support output format", req.Model))
	}
	if ae == nil && rf != nil {
		sc := parseSchemaAny(rf.Schema)
		if openObject(sc, 0) {
			ae = invalid("", param+".schema: For 'object' type, 'additionalProperties' must be explicitly set to false")
		} else if typ, keys := unsupportedBounds(sc, 0); len(keys) == 1 {
			ae = invalid("", fmt.Sprintf("%s.schema: For '%s' type, property '%s' is not supported", param, typ, keys[0]))
		} else if len(keys) > 1 {
			ae = invalid("", fmt.Sprintf("%s.schema: For '%s' type, properties %s are not supported", param, typ, strings.Join(keys, ", ")))
		}
	}
	return rf, ae
}

// anthropicUnsupported are the constraint keywords Anthropic's structured
// outputs reject with a 400 ("For 'number' type, properties maximum,
// minimum are not supported"; its structured-outputs docs, JSON Schema
// limitations: no numeric bounds, no string lengths, no array bounds but
// minItems 0 or 1). Its SDKs move them into the description instead.
var anthropicUnsupported = []string{"exclusiveMaximum", "exclusiveMinimum", "maxItems", "maxLength", "maximum", "minItems", "minLength", "minimum", "multipleOf"}

// unsupportedBounds returns the first schema in s that carries keywords
// Anthropic rejects: its type and the keywords, sorted.
func unsupportedBounds(s any, depth int) (string, []string) {
	m, ok := s.(map[string]any)
	if !ok || depth > 64 {
		return "", nil
	}
	var keys []string
	for _, k := range anthropicUnsupported {
		v, ok := m[k]
		if !ok {
			continue
		}
		if n, num := v.(float64); k == "minItems" && num && (n == 0 || n == 1) {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) > 0 {
		typ, _ := m["type"].(string)
		return typ, keys
	}
	for _, k := range [...]string{"properties", "$defs", "definitions"} {
		sub, _ := m[k].(map[string]any)
		for _, name := range sortedKeys(sub) {
			if t, ks := unsupportedBounds(sub[name], depth+1); len(ks) > 0 {
				return t, ks
			}
		}
	}
	if t, ks := unsupportedBounds(m["items"], depth+1); len(ks) > 0 {
		return t, ks
	}
	for _, k := range [...]string{"items", "prefixItems", "anyOf", "allOf", "oneOf"} {
		list, _ := m[k].([]any)
		for _, v := range list {
			if t, ks := unsupportedBounds(v, depth+1); len(ks) > 0 {
				return t, ks
			}
		}
	}
	return "", nil
}

// anthropicOutputFormat reads output_format, else output_config.format. The
// param is the member the format came from.
func anthropicOutputFormat(req *llm.Request) (*llm.ResponseFormat, string, *llm.APIError) {
	param := "output_format"
	raw := req.Extra["output_format"]
	if ocRaw := req.Extra["output_config"]; raw == nil && len(ocRaw) > 0 && string(ocRaw) != "null" {
		var oc map[string]json.RawMessage
		if json.Unmarshal(ocRaw, &oc) != nil {
			return nil, "", invalid("", "output_config: Input should be a valid dictionary")
		}
		raw, param = oc["format"], "output_config.format"
	}
	if len(raw) == 0 || string(raw) == "null" {
		return nil, "", nil
	}
	var of struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(raw, &of) != nil {
		return nil, "", invalid("", param+": Input should be a valid dictionary")
	}
	if of.Type != "json_schema" { // the one type there is; this wording is not documented
		return nil, "", invalid("", fmt.Sprintf("%s.type: Input should be 'json_schema'", param))
	}
	if len(of.Schema) == 0 || string(of.Schema) == "null" {
		return nil, "", invalid("", param+".schema: Field required")
	}
	return &llm.ResponseFormat{Type: "json_schema", Schema: of.Schema}, param, nil
}

func openaiOutputFormat(mode string, req *llm.Request) (*llm.ResponseFormat, *llm.APIError) {
	var ae *llm.APIError
	if mode != StructuredIgnored {
		for _, k := range [...]string{"output_config", "output_format"} {
			if _, ok := req.Extra[k]; ok {
				ae = invalid("", "Unrecognized request argument supplied: "+k)
				break
			}
		}
	}
	if raw, ok := req.Extra["response_format"]; ok && ae == nil && mode != StructuredIgnored {
		// A form the codec keeps verbatim; OpenAI rejects an unknown type
		// ("Invalid value: 'object'. Supported values are: …",
		// epuerta9/deep-research-py#19).
		var of struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(raw, &of) == nil && of.Type != "text" && of.Type != "json_object" && of.Type != "json_schema" {
			ae = invalid("response_format.type", fmt.Sprintf("Invalid value: '%s'. Supported values are: 'json_object', 'json_schema', and 'text'.", of.Type))
			ae.Code = "invalid_value"
		}
	}
	rf := req.ResponseFormat
	if rf == nil || rf.Type != "json_object" && rf.Type != "json_schema" {
		return nil, ae
	}
	if rf.Type == "json_schema" {
		switch mode {
		case StructuredIgnored:
			return nil, nil
		case StructuredUnsupported:
			if ae == nil {
				ae = invalid("response_format", "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.")
			}
		}
		if ae == nil && rf.Strict != nil && *rf.Strict {
			if where, problem := strictViolation(parseSchemaAny(rf.Schema), nil, 0); problem != "" {
				ae = invalid("response_format", fmt.Sprintf("Invalid schema for response_format '%s': In context=%s, %s", rf.Name, where, problem))
			}
		}
	}
	return rf, ae
}

// strictViolation returns the first place (as OpenAI names it, a Python
// tuple of the path) and problem that OpenAI's strict mode rejects in s:
// an object schema without "additionalProperties": false, or whose
// required does not list every property (PROTOCOLS.md §2.1; the wording
// as OpenAI answers it, e.g. dottxt-ai/outlines#844, moeru-ai/xsai#202).
// Members are visited in sorted order (OpenAI goes in document order).
func strictViolation(s any, path []any, depth int) (string, string) {
	m, ok := s.(map[string]any)
	if !ok || depth > 64 {
		return "", ""
	}
	if isObjectSchema(m) {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return pyTuple(path), "'additionalProperties' is required to be supplied and to be false."
		}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		for _, k := range sortedKeys(props) {
			if !slices.Contains(req, any(k)) {
				return pyTuple(path), fmt.Sprintf("'required' is required to be supplied and to be an array including every key in properties. Missing '%s'.", k)
			}
		}
	}
	for _, k := range [...]string{"properties", "$defs", "definitions"} {
		sub, _ := m[k].(map[string]any)
		for _, name := range sortedKeys(sub) {
			if w, p := strictViolation(sub[name], append(slices.Clip(path), k, name), depth+1); p != "" {
				return w, p
			}
		}
	}
	if w, p := strictViolation(m["items"], append(slices.Clip(path), "items"), depth+1); p != "" {
		return w, p
	}
	for _, k := range [...]string{"items", "prefixItems", "anyOf", "allOf", "oneOf"} {
		list, _ := m[k].([]any)
		for i, v := range list {
			if w, p := strictViolation(v, append(slices.Clip(path), k, i), depth+1); p != "" {
				return w, p
			}
		}
	}
	return "", ""
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// pyTuple renders a path as a Python tuple: (), ('items',),
// ('properties', 'steps', 'anyOf', 0).
func pyTuple(path []any) string {
	var b strings.Builder
	b.WriteByte('(')
	for i, p := range path {
		if i > 0 {
			b.WriteString(", ")
		}
		switch v := p.(type) {
		case string:
			b.WriteString("'" + v + "'")
		default:
			fmt.Fprint(&b, v)
		}
	}
	if len(path) == 1 {
		b.WriteByte(',')
	}
	b.WriteByte(')')
	return b.String()
}

func invalid(param, msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: param, Message: msg}
}

func parseSchemaAny(raw json.RawMessage) any {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil
	}
	return v
}

// openObject reports whether s holds an object schema that does not set
// "additionalProperties": false, looking through properties, items,
// prefixItems, anyOf, allOf, oneOf, $defs and definitions.
func openObject(s any, depth int) bool {
	m, ok := s.(map[string]any)
	if !ok || depth > 64 {
		return false
	}
	if isObjectSchema(m) {
		if ap, ok := m["additionalProperties"].(bool); !ok || ap {
			return true
		}
	}
	for _, k := range [...]string{"properties", "$defs", "definitions"} {
		sub, _ := m[k].(map[string]any)
		for _, v := range sub {
			if openObject(v, depth+1) {
				return true
			}
		}
	}
	// items is a schema, or (draft 4–2019) a list of them like prefixItems.
	if openObject(m["items"], depth+1) {
		return true
	}
	for _, k := range [...]string{"items", "prefixItems", "anyOf", "allOf", "oneOf"} {
		list, _ := m[k].([]any)
		for _, v := range list {
			if openObject(v, depth+1) {
				return true
			}
		}
	}
	return false
}

// isObjectSchema reports whether m describes objects: its type is (or
// includes) "object", or it has no type and has properties.
func isObjectSchema(m map[string]any) bool {
	switch t := m["type"].(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	case nil:
		_, ok := m["properties"]
		return ok
	}
	return false
}
