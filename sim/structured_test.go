package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// structuredCfg is ZeroLatency plus one model per StructuredOutputs option.
func structuredCfg() Config {
	cfg := ZeroLatency()
	for _, m := range []struct{ name, mode string }{
		{"so-default", ""},
		{"so-native", StructuredNative},
		{"so-unsupported", StructuredUnsupported},
		{"so-ignored", StructuredIgnored},
	} {
		cfg.Models = append(cfg.Models, ModelSpec{Name: m.name, Capability: 3, ContextWindow: 200_000,
			Regions: []string{"us-east"}, StructuredOutputs: m.mode})
	}
	return cfg
}

const (
	closedSchema = `{"type":"object","properties":{"risk":{"type":"string","enum":["low","high"]},"steps":{"type":"array","items":{"type":"object","properties":{"what":{"type":"string"}},"required":["what"],"additionalProperties":false}},"score":{"type":"number"}},"required":["risk","steps","score"],"additionalProperties":false}`
	// openSchema is closedSchema with the nested item object left open.
	openSchema = `{"type":"object","properties":{"risk":{"type":"string","enum":["low","high"]},"steps":{"type":"array","items":{"type":"object","properties":{"what":{"type":"string"}},"required":["what"]}},"score":{"type":"number"}},"required":["risk","steps","score"],"additionalProperties":false}`
	// boundedSchema is closed, with bounds Anthropic rejects and OpenAI takes.
	boundedSchema = `{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1},"name":{"type":"string","maxLength":9},"tags":{"type":"array","minItems":1,"items":{"type":"string"}}},"required":["score","name","tags"],"additionalProperties":false}`
)

// Each wire reads only its own structured-output field and answers the
// other wire's with the 400 the real API gives; a model's
// StructuredOutputs decides whether a json_schema format is honoured,
// rejected or ignored.
func TestStructuredOutputsPerWire(t *testing.T) {
	cfg := structuredCfg()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)

	var (
		ocClosed  = `,"output_config":{"format":{"type":"json_schema","schema":` + closedSchema + `}}`
		ocOpen    = `,"output_config":{"format":{"type":"json_schema","schema":` + openSchema + `}}`
		ofClosed  = `,"output_format":{"type":"json_schema","schema":` + closedSchema + `}`
		ocJSONObj = `,"output_config":{"format":{"type":"json_object"}}`
		rfSchema  = `,"response_format":{"type":"json_schema","json_schema":{"name":"risk","schema":` + closedSchema + `}}`
		rfOpen    = `,"response_format":{"type":"json_schema","json_schema":{"name":"risk","schema":` + openSchema + `}}`
		rfJSONObj = `,"response_format":{"type":"json_object"}`
		openMsg   = "output_config.format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false"
	)
	type want int
	const (
		plain    want = iota // 200, the answer to the request without the format
		schema               // 200, a value of closedSchema / openSchema
		jsonObj              // 200, a JSON object
		rejected             // 400 invalid_request_error with msg (and param)
	)
	cases := []struct {
		name   string
		format Format
		model  string
		extra  string
		want   want
		msg    string
		param  string
	}{
		// Anthropic: output_config.format / output_format only, closed objects only.
		{"anthropic default output_config", FormatAnthropic, "so-default", ocClosed, schema, "", ""},
		{"anthropic native output_config", FormatAnthropic, "so-native", ocClosed, schema, "", ""},
		{"anthropic native output_format beta", FormatAnthropic, "so-native", ofClosed, schema, "", ""},
		{"anthropic native open nested object", FormatAnthropic, "so-native", ocOpen, rejected, openMsg, ""},
		{"anthropic native output_format open", FormatAnthropic, "so-native", `,"output_format":{"type":"json_schema","schema":` + openSchema + `}`, rejected,
			"output_format.schema: For 'object' type, 'additionalProperties' must be explicitly set to false", ""},
		{"anthropic native numeric bounds", FormatAnthropic, "so-native",
			`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1}},"additionalProperties":false}}}`, rejected,
			"output_config.format.schema: For 'number' type, properties maximum, minimum are not supported", ""},
		{"anthropic native bounds, first in key order", FormatAnthropic, "so-native", `,"output_config":{"format":{"type":"json_schema","schema":` + boundedSchema + `}}`, rejected,
			"output_config.format.schema: For 'string' type, property 'maxLength' is not supported", ""},
		{"anthropic native string length", FormatAnthropic, "so-native",
			`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string","maxLength":9}},"additionalProperties":false}}}`, rejected,
			"output_config.format.schema: For 'string' type, property 'maxLength' is not supported", ""},
		{"anthropic native minItems 1 is supported", FormatAnthropic, "so-native",
			`,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"tags":{"type":"array","minItems":1,"items":{"type":"string"}}},"required":["tags"],"additionalProperties":false}}}`, jsonObj, "", ""},
		{"openai native bounds", FormatOpenAI, "so-native", `,"response_format":{"type":"json_schema","json_schema":{"name":"b","schema":` + boundedSchema + `}}`, jsonObj, "", ""},
		{"anthropic native response_format", FormatAnthropic, "so-native", rfSchema, rejected, "response_format: Extra inputs are not permitted", ""},
		{"anthropic native json_object type", FormatAnthropic, "so-native", ocJSONObj, rejected, "output_config.format.type: Input should be 'json_schema'", ""},
		{"anthropic native no format", FormatAnthropic, "so-native", "", plain, "", ""},
		{"anthropic unsupported output_config", FormatAnthropic, "so-unsupported", ocClosed, rejected, "'so-unsupported' does not support output format", ""},
		{"anthropic unsupported no format", FormatAnthropic, "so-unsupported", "", plain, "", ""},
		{"anthropic ignored output_config", FormatAnthropic, "so-ignored", ocClosed, plain, "", ""},
		{"anthropic ignored open schema", FormatAnthropic, "so-ignored", ocOpen, plain, "", ""},
		{"anthropic ignored response_format", FormatAnthropic, "so-ignored", rfSchema, plain, "", ""},

		// OpenAI: response_format only; no additionalProperties rule outside strict.
		{"openai default json_schema", FormatOpenAI, "so-default", rfSchema, schema, "", ""},
		{"openai native json_schema", FormatOpenAI, "so-native", rfSchema, schema, "", ""},
		{"openai native open schema", FormatOpenAI, "so-native", rfOpen, schema, "", ""},
		{"openai native json_object", FormatOpenAI, "so-native", rfJSONObj, jsonObj, "", ""},
		{"openai native output_config", FormatOpenAI, "so-native", ocClosed, rejected, "Unrecognized request argument supplied: output_config", ""},
		{"openai native output_format", FormatOpenAI, "so-native", ofClosed, rejected, "Unrecognized request argument supplied: output_format", ""},
		{"openai unsupported json_schema", FormatOpenAI, "so-unsupported", rfSchema, rejected,
			"Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", "response_format"},
		{"openai unsupported json_object", FormatOpenAI, "so-unsupported", rfJSONObj, jsonObj, "", ""},
		{"openai ignored json_schema", FormatOpenAI, "so-ignored", rfSchema, plain, "", ""},
		{"openai ignored json_object", FormatOpenAI, "so-ignored", rfJSONObj, jsonObj, "", ""},
		{"openai ignored output_config", FormatOpenAI, "so-ignored", ocClosed, plain, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chatBody(tc.format, tc.model, "assess the plan", false, tc.extra)
			status, text, ae := postText(t, h, tc.format, body)

			// The oracle agrees with the fleet.
			oracle, oerr := AnswerFormat(cfg, tc.format, parseWire(t, tc.format, body), 0)

			if tc.want == rejected {
				if status != http.StatusBadRequest || ae == nil {
					t.Fatalf("status %d, text %q; want 400", status, text)
				}
				if ae.Type != llm.ErrInvalidRequest || ae.Message != tc.msg {
					t.Errorf("error (type, message) = (%s, %q), want (invalid_request_error, %q)", ae.Type, ae.Message, tc.msg)
				}
				if tc.format == FormatOpenAI && ae.Param != tc.param {
					t.Errorf("param = %q, want %q", ae.Param, tc.param)
				}
				if oe, ok := oerr.(*llm.APIError); !ok || oe.Message != tc.msg {
					t.Errorf("AnswerFormat error = %v, want %q", oerr, tc.msg)
				}
				return
			}
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, ae)
			}
			if oerr != nil || oracle.Text() != text {
				t.Errorf("AnswerFormat = %v, %v; the fleet answered %q", oracle, oerr, text)
			}
			switch tc.want {
			case plain:
				_, without, _ := postText(t, h, tc.format, chatBody(tc.format, tc.model, "assess the plan", false, ""))
				if text != without {
					t.Errorf("answer %q, want the answer without a format %q", text, without)
				}
			case schema:
				sc := closedSchema
				if strings.Contains(tc.extra, openSchema) {
					sc = openSchema
				}
				if err := validateSchema(sc, text); err != nil {
					t.Errorf("answer %q does not validate: %v", text, err)
				}
			case jsonObj:
				var m map[string]any
				if err := json.Unmarshal([]byte(text), &m); err != nil {
					t.Errorf("answer %q is not a JSON object: %v", text, err)
				}
			}
		})
	}
}

// Every place a nested object schema can sit is checked on the Anthropic
// wire.
func TestStructuredAnthropicClosedObjects(t *testing.T) {
	open := `{"type":"object","properties":{"a":{"type":"string"}}}`
	closed := `{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}`
	wrap := func(inner string) string {
		return `{"type":"object","properties":{"x":` + inner + `},"required":["x"],"additionalProperties":false}`
	}
	cases := []struct {
		name, schema string
		open         bool
	}{
		{"closed root", closed, false},
		{"open root", open, true},
		{"root additionalProperties true", `{"type":"object","properties":{},"additionalProperties":true}`, true},
		{"root additionalProperties schema", `{"type":"object","additionalProperties":{"type":"string"}}`, true},
		{"untyped object with properties", `{"properties":{"a":{"type":"string"}}}`, true},
		{"nullable object type list", `{"type":["object","null"],"properties":{}}`, true},
		{"property", wrap(open), true},
		{"closed property", wrap(closed), false},
		{"items", wrap(`{"type":"array","items":` + open + `}`), true},
		{"prefixItems", wrap(`{"type":"array","prefixItems":[{"type":"string"},` + open + `]}`), true},
		{"anyOf", wrap(`{"anyOf":[{"type":"null"},` + open + `]}`), true},
		{"allOf", wrap(`{"allOf":[` + open + `]}`), true},
		{"oneOf", wrap(`{"oneOf":[` + closed + `,` + open + `]}`), true},
		{"$defs", `{"type":"object","properties":{"x":{"$ref":"#/$defs/d"}},"additionalProperties":false,"$defs":{"d":` + open + `}}`, true},
		{"definitions", `{"type":"object","properties":{"x":{"$ref":"#/definitions/d"}},"additionalProperties":false,"definitions":{"d":` + open + `}}`, true},
		{"closed everywhere", `{"type":"object","properties":{"x":{"anyOf":[` + closed + `]},"y":{"type":"array","items":` + closed + `}},"additionalProperties":false,"$defs":{"d":` + closed + `}}`, false},
		{"string root", `{"type":"string"}`, false},
	}
	cfg := structuredCfg()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chatBody(FormatAnthropic, "so-native", "x", false, `,"output_config":{"format":{"type":"json_schema","schema":`+tc.schema+`}}`)
			_, err := AnswerFormat(cfg, FormatAnthropic, parseWire(t, FormatAnthropic, body), 0)
			if got := err != nil; got != tc.open {
				t.Errorf("rejected = %v (%v), want %v", got, err, tc.open)
			}
		})
	}
}

func TestStructuredOutputsValidate(t *testing.T) {
	cfg := structuredCfg()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Models[0].StructuredOutputs = "sometimes"
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "models[0].structured_outputs") {
		t.Errorf("Validate = %v, want a structured_outputs error", err)
	}
}

// postText posts body and returns the status and the answer's text, or the
// error.
func postText(t *testing.T, h harness, format Format, body string) (int, string, *llm.APIError) {
	t.Helper()
	resp, err := h.post(context.Background(), format, "", body)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, "", parseError(format, resp)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var r *llm.Response
	if format == FormatOpenAI {
		r, err = openai.ParseResponse(b)
	} else {
		r, err = anthropic.ParseResponse(b)
	}
	if err != nil {
		t.Fatalf("parsing response: %v\n%s", err, b)
	}
	return resp.StatusCode, r.Text(), nil
}

func parseWire(t *testing.T, format Format, body string) *llm.Request {
	t.Helper()
	if format == FormatOpenAI {
		return parseOpenAI(t, body)
	}
	return parseAnthropic(t, body)
}

func validateSchema(schema, doc string) error {
	sch, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		return err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", sch); err != nil {
		return err
	}
	s, err := c.Compile("schema.json")
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		return err
	}
	return s.Validate(v)
}

// OpenAI's strict mode takes only schemas whose every object is closed and
// requires all its properties, and response_format has three types; the
// errors name where, as OpenAI's do. A model that ignores formats takes
// anything.
func TestStructuredOpenAIStrict(t *testing.T) {
	cfg := structuredCfg()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	rf := func(schema string) string {
		return `,"response_format":{"type":"json_schema","json_schema":{"name":"risk","strict":true,"schema":` + schema + `}}`
	}
	missing := `{"type":"object","properties":{"risk":{"type":"string"},"score":{"type":"number"}},"required":["risk"],"additionalProperties":false}`
	anyOfOpen := `{"type":"object","properties":{"x":{"anyOf":[{"type":"null"},{"type":"object","properties":{}}]}},"required":["x"],"additionalProperties":false}`
	cases := []struct {
		name, model, extra string
		ok                 bool // 200 with a value of the schema
		msg, param, code   string
	}{
		{name: "closed", model: "so-native", extra: rf(closedSchema), ok: true},
		{name: "open nested item", model: "so-native", extra: rf(openSchema),
			msg: "Invalid schema for response_format 'risk': In context=('properties', 'steps', 'items'), 'additionalProperties' is required to be supplied and to be false.", param: "response_format"},
		{name: "open root", model: "so-native", extra: rf(`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`),
			msg: "Invalid schema for response_format 'risk': In context=(), 'additionalProperties' is required to be supplied and to be false.", param: "response_format"},
		{name: "property not required", model: "so-native", extra: rf(missing),
			msg: "Invalid schema for response_format 'risk': In context=(), 'required' is required to be supplied and to be an array including every key in properties. Missing 'score'.", param: "response_format"},
		{name: "open anyOf alternative", model: "so-native", extra: rf(anyOfOpen),
			msg: "Invalid schema for response_format 'risk': In context=('properties', 'x', 'anyOf', 1), 'additionalProperties' is required to be supplied and to be false.", param: "response_format"},
		{name: "unsupported model says so first", model: "so-unsupported", extra: rf(openSchema),
			msg: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.", param: "response_format"},
		{name: "unknown type", model: "so-native", extra: `,"response_format":{"type":"object"}`,
			msg: "Invalid value: 'object'. Supported values are: 'json_object', 'json_schema', and 'text'.", param: "response_format.type", code: "invalid_value"},
		{name: "ignored: strict open", model: "so-ignored", extra: rf(openSchema), ok: true},
		{name: "ignored: unknown type", model: "so-ignored", extra: `,"response_format":{"type":"object"}`, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := chatBody(FormatOpenAI, tc.model, "assess the plan", false, tc.extra)
			status, text, ae := postText(t, h, FormatOpenAI, body)
			if tc.ok {
				if status != http.StatusOK {
					t.Fatalf("status %d: %v", status, ae)
				}
				if tc.model != "so-ignored" {
					if err := validateSchema(closedSchema, text); err != nil {
						t.Errorf("answer %q does not validate: %v", text, err)
					}
				}
				return
			}
			if status != http.StatusBadRequest || ae == nil {
				t.Fatalf("status %d, text %q; want 400", status, text)
			}
			if ae.Type != llm.ErrInvalidRequest || ae.Message != tc.msg || ae.Param != tc.param || ae.Code != tc.code {
				t.Errorf("error (type, message, param, code) = (%s, %q, %q, %q)\nwant (invalid_request_error, %q, %q, %q)", ae.Type, ae.Message, ae.Param, ae.Code, tc.msg, tc.param, tc.code)
			}
		})
	}
}
