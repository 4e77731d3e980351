package features_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/keelmesh/keel/sim"
)

// Must show (issue 14): a schema nested 3000 deep, wherever a client may put
// one, is refused 400 in the caller's wire format with the limit named —
// before the schema compiler sees it — and the mesh goes on serving.
func TestHostileSchemaRefused(t *testing.T) {
	e := newEnv(t, sim.ZeroLatency())
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 3000) + `{"type":"string"}` + strings.Repeat(`}}`, 3000)
	const limit = "schema nesting depth exceeds 32 (structured_output.max_schema_depth)"
	user := `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name, path, body string
		anthropic        bool // the Anthropic error shape, else OpenAI's
	}{
		{"openai mesh_behavior.output_schema", "/v1/chat/completions",
			`{"model":"sim-sonnet","mesh_behavior":{"output_schema":` + deep + `},` + user + `}`, false},
		{"anthropic mesh_behavior.output_schema", "/v1/messages",
			`{"model":"sim-sonnet","max_tokens":64,"mesh_behavior":{"output_schema":` + deep + `},` + user + `}`, true},
		{"openai response_format.json_schema", "/v1/chat/completions",
			`{"model":"sim-sonnet","response_format":{"type":"json_schema","json_schema":{"name":"x","schema":` + deep + `}},` + user + `}`, false},
		{"anthropic forced tool input_schema", "/v1/messages",
			`{"model":"sim-sonnet","max_tokens":64,"tools":[{"name":"answer","input_schema":` + deep + `}],"tool_choice":{"type":"tool","name":"answer"},` + user + `}`, true},
		{"openai forced function parameters", "/v1/chat/completions",
			`{"model":"sim-sonnet","tools":[{"type":"function","function":{"name":"answer","parameters":` + deep + `}}],"tool_choice":{"type":"function","function":{"name":"answer"}},` + user + `}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hdr := []string{}
			if tt.anthropic {
				hdr = []string{"anthropic-version", "2023-06-01"}
			}
			before := e.rec.count()
			resp, b := e.post(t, tt.path, tt.body, hdr...)
			if resp.StatusCode != 400 {
				t.Fatalf("status %d, want 400: %.300s", resp.StatusCode, b)
			}
			var got struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &got); err != nil {
				t.Fatalf("error body is not JSON: %v: %.300s", err, b)
			}
			if tt.anthropic && got.Type != "error" {
				t.Errorf("type %q, want the Anthropic error envelope (type \"error\"): %.300s", got.Type, b)
			}
			if got.Error.Type != "invalid_request_error" || !strings.Contains(got.Error.Message, limit) {
				t.Errorf("error %+v, want invalid_request_error naming %q", got.Error, limit)
			}
			if n := e.rec.count() - before; n != 0 {
				t.Errorf("%d upstream calls for a refused schema, want 0", n)
			}
		})
	}
	resp, b := e.post(t, "/v1/chat/completions", `{"model":"sim-sonnet","response_format":{"type":"json_schema","json_schema":{"name":"r","schema":`+riskSchema+`}},`+user+`}`)
	if resp.StatusCode != 200 {
		t.Fatalf("a normal request after the hostile ones: status %d: %.300s", resp.StatusCode, b)
	}
}
