package structured

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// FuzzSpecFor: whatever a client puts in response_format's schema, its
// schema member, output_config or mesh_behavior.output_schema, SpecFor
// never panics: it finds a contract whose Trace and Upstream work, finds
// none, or refuses the call with a 400 naming where the schema came from.
func FuzzSpecFor(f *testing.F) {
	f.Add(pointSchema, "", "", "")
	f.Add("", pointSchema, "", "")
	f.Add("", "", `{"format":{"type":"json_schema","schema":`+pointSchema+`}}`, "")
	f.Add("", "", "", pointSchema)
	f.Add(`{"type":12}`, `{"$ref":"http://x"}`, `{"format":{"type":"json_schema","schema":{"type":12}}}`, `{`)
	f.Add("", `[1]`, `{"format":null}`, `{"type":"object","properties":{"a":{"$ref":"#/$defs/a"}},"$defs":{"a":{"$ref":"#/$defs/a"}}}`)
	comp := NewCompiler(Limits{})
	f.Fuzz(func(t *testing.T, rfSchema, rfMember, outputConfig, behavior string) {
		req := &llm.Request{Extra: map[string]json.RawMessage{}}
		switch {
		case rfSchema != "":
			req.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(rfSchema)}
		case rfMember != "":
			req.ResponseFormat = &llm.ResponseFormat{Type: "json_object", Extra: map[string]json.RawMessage{"schema": json.RawMessage(rfMember)}}
		}
		if outputConfig != "" {
			req.Extra["output_config"] = json.RawMessage(outputConfig)
		}
		sp, err := SpecFor(context.Background(), comp, Config{}, req, json.RawMessage(behavior))
		if err != nil {
			ae, ok := err.(*llm.APIError)
			if !ok || ae.Status != http.StatusBadRequest || ae.Param == "" {
				t.Fatalf("err = %v, want a 400 naming its parameter", err)
			}
			return
		}
		if sp != nil {
			sp.Trace()
			sp.Upstream(req)
			sp.AnswerJSON(&llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "{}"}}})
		}
	})
}
