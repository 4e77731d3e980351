package structured

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func TestSpecFor(t *testing.T) {
	obj := json.RawMessage(pointSchema)
	sys := func(text string) []llm.Block { return []llm.Block{{Type: llm.BlockText, Text: text}} }
	cases := []struct {
		name     string
		cfg      Settings
		req      llm.Request
		behavior json.RawMessage
		// want
		source   string // "" for no contract
		tool     string
		jsonMode bool
		implied  bool
		upstream bool
		status   int // an error's status
		errText  string
	}{
		{name: "none", req: llm.Request{}},
		{name: "mesh_behavior.output_schema first", req: llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"string"}`)}},
			behavior: obj, source: "mesh_behavior.output_schema"},
		{name: "output_schema alone is sent upstream", behavior: obj, source: "mesh_behavior.output_schema", upstream: true},
		{name: "response_format json_schema", req: llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_schema", Schema: obj}}, source: "response_format.json_schema"},
		{name: "json_object", req: llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_object"}}, source: "response_format.json_object", jsonMode: true, upstream: true},
		{name: "json_object with instructor's schema", req: llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_object", Extra: map[string]json.RawMessage{"schema": obj}}},
			source: "response_format.json_object.schema", jsonMode: true, upstream: true},
		{name: "anthropic output_config.format", req: llm.Request{Extra: map[string]json.RawMessage{"output_config": json.RawMessage(`{"format":{"type":"json_schema","schema":` + pointSchema + `}}`)}},
			source: "output_config.format"},
		{name: "anthropic beta output_format", req: llm.Request{Extra: map[string]json.RawMessage{"output_format": json.RawMessage(`{"type":"json_schema","schema":` + pointSchema + `}`)}},
			source: "output_config.format"},
		{name: "forced tool", req: llm.Request{Tools: []llm.Tool{{Name: "point", InputSchema: obj}}, ToolChoice: &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: "point"}},
			source: "forced_tool", tool: "point"},
		// implied: guess (the default) reports the reading, never sends it
		// (STYLE 23); implied: send and strict send a sure reading.
		{name: "implied by the system prompt", req: llm.Request{System: sys(`Respond only with JSON containing the keys "risk" and "score".`)},
			source: "implied", implied: true, upstream: false},
		{name: "implied, sent under implied: send", cfg: Settings{SendImplied: true}, req: llm.Request{System: sys(`Respond only with JSON containing the keys "risk" and "score".`)},
			source: "implied", implied: true, upstream: true},
		{name: "implied off", cfg: Settings{DisableImplied: true}, req: llm.Request{System: sys(`Respond only with JSON containing the keys "risk" and "score".`)}},
		{name: "no implied schema beside tools", req: llm.Request{System: sys(`Respond only with JSON containing the keys "risk" and "score".`), Tools: []llm.Tool{{Name: "t"}}}},
		{name: "invalid schema: 400", behavior: json.RawMessage(`{"type":12}`), status: http.StatusBadRequest, errText: "mesh_behavior.output_schema: invalid JSON Schema"},
		{name: "schema over a limit: 400", cfg: Settings{Limits: Limits{MaxProperties: 1}}, req: llm.Request{ResponseFormat: &llm.ResponseFormat{Type: "json_schema", Schema: obj}},
			status: http.StatusBadRequest, errText: "response_format.json_schema: schema refused: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, err := SpecFor(context.Background(), NewCompiler(tc.cfg.Limits), tc.cfg, &tc.req, tc.behavior)
			if tc.status != 0 {
				ae, ok := err.(*llm.APIError)
				if !ok || ae.Status != tc.status || !strings.Contains(ae.Message, tc.errText) {
					t.Fatalf("err = %v, want %d containing %q", err, tc.status, tc.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.source == "" {
				if sp != nil {
					t.Fatalf("spec from %s, want none", sp.Source)
				}
				return
			}
			if sp == nil {
				t.Fatalf("no spec, want one from %s", tc.source)
			}
			if sp.Source != tc.source || sp.Tool != tc.tool || sp.JSONMode != tc.jsonMode || (sp.Implied != nil) != tc.implied {
				t.Errorf("spec source %q tool %q json mode %v implied %v, want %q %q %v %v", sp.Source, sp.Tool, sp.JSONMode, sp.Implied != nil, tc.source, tc.tool, tc.jsonMode, tc.implied)
			}
			if got := sp.Upstream(&tc.req); got != tc.upstream {
				t.Errorf("Upstream = %v, want %v", got, tc.upstream)
			}
			tr := sp.Trace()
			if tc.implied != (tr.Source == "implied") || tr.Origin != sp.Source {
				t.Errorf("trace %+v", tr)
			}
		})
	}
}

// A compile whose context ended is a 504 MESH_TIMEOUT, not a 400.
func TestSpecForTimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := SpecFor(ctx, NewCompiler(Limits{}), Settings{}, &llm.Request{}, json.RawMessage(pointSchema))
	if ae, ok := err.(*llm.APIError); !ok || ae.Status != http.StatusGatewayTimeout || ae.MeshCode != llm.MeshTimeout {
		t.Fatalf("err = %v, want 504 MESH_TIMEOUT", err)
	}
}

func TestMayFail(t *testing.T) {
	given, implied, jsonMode := &Spec{}, &Spec{Implied: &Implied{}}, &Spec{JSONMode: true}
	for _, tc := range []struct {
		name string
		sp   *Spec
		cfg  Settings
		want bool
	}{
		{"given", given, Settings{}, true},
		{"given, pass violations", given, Settings{PassViolations: true}, false},
		{"implied", implied, Settings{}, false},
		{"implied strict", implied, Settings{StrictImplied: true}, true},
		{"JSON mode", jsonMode, Settings{StrictImplied: true}, false},
	} {
		if got := tc.sp.MayFail(tc.cfg); got != tc.want {
			t.Errorf("%s: MayFail = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// Replace puts the document in one text block of a copy, keeping the other
// blocks in order.
func TestReplace(t *testing.T) {
	resp := &llm.Response{Content: []llm.Block{{Type: llm.BlockThinking, Thinking: "hm"}, {Type: llm.BlockText, Text: "Here: "}, {Type: llm.BlockText, Text: "{x}"}},
		Raw: []byte("upstream bytes")}
	out := (&Spec{}).Replace(resp, -1, []byte(`{"x":1}`))
	if len(out.Content) != 2 || out.Content[0].Thinking != "hm" || out.Content[1].Text != `{"x":1}` || out.Raw != nil {
		t.Errorf("replaced %+v", out)
	}
	if len(resp.Content) != 3 || resp.Raw == nil {
		t.Error("the response given was modified")
	}
}
