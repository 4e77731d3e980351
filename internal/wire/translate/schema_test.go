package translate

import (
	"encoding/json"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestAnthropicSchemaClosesEveryObject: Anthropic rejects an object schema
// without "additionalProperties": false anywhere in output_config.format,
// so the copy sent upstream is closed at every depth, and an explicit
// true is coerced.
func TestAnthropicSchemaClosesEveryObject(t *testing.T) {
	in := `{"type":"object","properties":{"a":{"type":"object","properties":{"b":{"type":"string"}}},
		"list":{"type":"array","items":{"type":"object","properties":{"c":{}},"additionalProperties":true}},
		"u":{"anyOf":[{"type":"object","properties":{"d":{}}},{"type":"null"}]}},
		"$defs":{"x":{"properties":{"e":{}}}}}`
	out, err := AnthropicSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	get := func(m map[string]any, path ...string) map[string]any {
		var cur any = m
		for _, p := range path {
			switch c := cur.(type) {
			case map[string]any:
				cur = c[p]
			case []any:
				cur = c[0]
			}
		}
		return cur.(map[string]any)
	}
	for _, path := range [][]string{{}, {"properties", "a"}, {"properties", "list", "items"}, {"properties", "u", "anyOf", "0"}, {"$defs", "x"}} {
		if ap, ok := get(v, path...)["additionalProperties"].(bool); !ok || ap {
			t.Errorf("%v: additionalProperties = %v, want false", path, get(v, path...)["additionalProperties"])
		}
	}
	if _, ok := get(v, "properties", "a", "properties", "b")["additionalProperties"]; ok {
		t.Error("a string schema was given additionalProperties")
	}
}

// TestTranslatedResponseFormatIsClosed: an OpenAI client's json_schema
// (not strict, objects open) sent to an Anthropic endpoint arrives closed.
func TestTranslatedResponseFormatIsClosed(t *testing.T) {
	req := &llm.Request{Format: llm.FormatOpenAI, Model: "m", HasMaxTokens: true, MaxTokens: 10,
		Messages:       []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}},
		ResponseFormat: &llm.ResponseFormat{Type: "json_schema", Name: "o", Schema: json.RawMessage(`{"type":"object","properties":{"k":{"type":"string"}}}`)}}
	out, _, err := Prepare(req, llm.FormatAnthropic, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	var oc struct {
		Format struct {
			Schema struct {
				AdditionalProperties *bool `json:"additionalProperties"`
			} `json:"schema"`
		} `json:"format"`
	}
	if err := json.Unmarshal(out.Extra["output_config"], &oc); err != nil {
		t.Fatal(err)
	}
	if ap := oc.Format.Schema.AdditionalProperties; ap == nil || *ap {
		t.Fatalf("output_config.format.schema.additionalProperties = %v, want false", ap)
	}
}

func TestWithOutputSchemaPerFormat(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"k":{}},"required":["k"]}`)
	req := &llm.Request{Extra: llm.Extra{"output_config": json.RawMessage(`{"effort":"low"}`)}}
	o, err := WithOutputSchema(req, llm.FormatOpenAI, schema)
	if err != nil || o.ResponseFormat == nil || o.ResponseFormat.Type != "json_schema" || string(o.ResponseFormat.Schema) != string(schema) || o.ResponseFormat.Strict != nil {
		t.Fatalf("openai: %+v, %v", o.ResponseFormat, err)
	}
	a, err := WithOutputSchema(req, llm.FormatAnthropic, schema)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(a.Extra["output_config"]); got != `{"effort":"low","format":{"schema":{"additionalProperties":false,"properties":{"k":{}},"required":["k"],"type":"object"},"type":"json_schema"}}` {
		t.Fatalf("anthropic output_config = %s", got)
	}
	if string(req.Extra["output_config"]) != `{"effort":"low"}` {
		t.Fatal("the client's request was modified")
	}
	for raw, want := range map[string]bool{`{"type":"object","properties":{"a":{}}}`: true, `{"properties":{"a":{}}}`: true,
		`{"type":"object"}`: false, `{}`: false, `{"type":"array","items":{}}`: false} {
		if ObjectRoot(json.RawMessage(raw)) != want {
			t.Errorf("ObjectRoot(%s) = %v", raw, !want)
		}
	}
}

func TestFoldOutputTool(t *testing.T) {
	resp := &llm.Response{StopReason: llm.StopToolUse, Content: []llm.Block{{Type: llm.BlockText, Text: "Sure."},
		{Type: llm.BlockToolUse, Name: OutputSchemaName, ID: "t1", Input: json.RawMessage(`{"k":1}`)}}}
	if !FoldOutputTool(resp) {
		t.Fatal("not folded")
	}
	if resp.StopReason != llm.StopEndTurn || len(resp.Content) != 2 || resp.Content[1].Type != llm.BlockText || resp.Content[1].Text != `{"k":1}` {
		t.Fatalf("folded = %+v", resp)
	}
	if FoldOutputTool(&llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "x"}}}) {
		t.Fatal("folded an answer without the tool call")
	}
}

// Anthropic rejects numeric, string-length and array bounds: the copy sent
// moves them into the description (minItems 0 or 1 stays).
func TestAnthropicSchemaMovesUnsupportedBounds(t *testing.T) {
	in := `{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":1,"description":"confidence"},
		"name":{"type":"string","maxLength":40},"tags":{"type":"array","minItems":1,"maxItems":5,"items":{"type":"string"}},
		"two":{"type":"array","minItems":2}}}`
	out, err := AnthropicSchema(json.RawMessage(in))
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Properties map[string]map[string]any `json:"properties"`
	}
	json.Unmarshal(out, &v)
	p := v.Properties
	for name, gone := range map[string][]string{"score": {"minimum", "maximum"}, "name": {"maxLength"}, "tags": {"maxItems"}, "two": {"minItems"}} {
		for _, k := range gone {
			if _, ok := p[name][k]; ok {
				t.Errorf("%s.%s still sent", name, k)
			}
		}
	}
	if p["tags"]["minItems"] != 1.0 {
		t.Errorf("minItems 1 removed: %v", p["tags"])
	}
	if d := p["score"]["description"]; d != "confidence {minimum: 0, maximum: 1}" {
		t.Errorf("score description %q", d)
	}
	if d := p["name"]["description"]; d != "{maxLength: 40}" {
		t.Errorf("name description %q", d)
	}
}
