package structured

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

func TestAsk(t *testing.T) {
	obj := json.RawMessage(pointSchema)
	given := &Spec{Raw: obj, Source: "mesh_behavior.output_schema"}
	jsonMode := &Spec{Raw: objectSchema, Source: "response_format.json_object", JSONMode: true}
	jsonSchema := &Spec{Raw: obj, Source: "response_format.json_object.schema", JSONMode: true}
	ask := func(format llm.Format) *llm.Request {
		return &llm.Request{Format: format, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "a point"}}}}}
	}
	withJSONObject := func(extra map[string]json.RawMessage) *llm.Request {
		r := ask(llm.FormatOpenAI)
		r.ResponseFormat = &llm.ResponseFormat{Type: "json_object"}
		r.Extra = extra
		return r
	}
	streaming := ask(llm.FormatOpenAI)
	streaming.Stream = true
	withTools := ask(llm.FormatOpenAI)
	withTools.Tools = []llm.Tool{{Name: "own"}}
	cases := []struct {
		name     string
		sp       *Spec
		req      *llm.Request
		t        Target
		kind     string
		relaxed  bool
		want     string // "same", "response_format", "output_config", "tool", "instruction"
		wantTool bool
	}{
		{"no contract", nil, ask(llm.FormatOpenAI), Target{}, "primary", false, "same", false},
		{"native, OpenAI client", given, ask(llm.FormatOpenAI), Target{Mode: provider.SchemaNative}, "primary", false, "response_format", false},
		{"native, Anthropic client", given, ask(llm.FormatAnthropic), Target{}, "primary", false, "output_config", false},
		{"tool mode", given, ask(llm.FormatOpenAI), Target{Mode: provider.SchemaTool}, "primary", false, "tool", true},
		{"tool mode, client tools", given, withTools, Target{Mode: provider.SchemaTool}, "primary", false, "same", false},
		{"tool mode, relaxed stream", given, streaming, Target{Mode: provider.SchemaTool}, "primary", true, "same", false},
		{"none", given, ask(llm.FormatOpenAI), Target{Mode: provider.SchemaNone}, "primary", false, "same", false},
		{"a fragment is sent as it is", given, ask(llm.FormatOpenAI), Target{Mode: provider.SchemaNative}, "fragment", false, "same", false},
		{"a merge call is sent as it is", given, ask(llm.FormatOpenAI), Target{Mode: provider.SchemaNative}, "merge", false, "same", false},
		{"JSON mode on an API that has it", jsonMode, withJSONObject(nil), Target{JSONMode: true}, "primary", false, "same", false},
		{"JSON mode without it: the output tool", jsonMode, withJSONObject(nil), Target{}, "fragment", false, "tool", true},
		{"JSON mode with a schema on a native endpoint", jsonSchema, withJSONObject(nil), Target{Mode: provider.SchemaNative}, "primary", false, "response_format", false},
		{"JSON mode with thinking: an instruction", jsonSchema, withJSONObject(map[string]json.RawMessage{"thinking": json.RawMessage(`{}`)}), Target{Mode: provider.SchemaTool}, "primary", false, "instruction", false},
		{"JSON mode, no tools taken: an instruction", jsonMode, withJSONObject(nil), Target{Mode: provider.SchemaNone}, "primary", false, "instruction", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := len(tc.req.Messages)
			out, tool := tc.sp.Ask(tc.req, tc.t, tc.kind, tc.relaxed)
			if tool != tc.wantTool {
				t.Errorf("tool = %v, want %v", tool, tc.wantTool)
			}
			if len(tc.req.Messages) != before {
				t.Error("the request given was modified")
			}
			if got := asked(out, tc.req); got != tc.want {
				t.Errorf("asked by %s, want %s", got, tc.want)
			}
		})
	}
}

// asked says how out asks for the contract, compared with req.
func asked(out, req *llm.Request) string {
	switch {
	case out == req:
		return "same"
	case len(out.Messages) > len(req.Messages) && strings.HasPrefix(out.Messages[0].Text(), jsonModeInstruction):
		return "instruction"
	case out.ToolChoice != nil && out.ToolChoice.Type == llm.ToolChoiceTool:
		return "tool"
	case out.ResponseFormat != nil && out.ResponseFormat.Type == "json_schema":
		return "response_format"
	case out.Extra["output_config"] != nil:
		return "output_config"
	}
	return "unknown"
}
