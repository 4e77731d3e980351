package anthropic

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func TestResponseGolden(t *testing.T) {
	for name, in := range inputs(t, "responses", ".json") {
		t.Run(name, func(t *testing.T) {
			r1, err := ParseResponse(in)
			if err != nil {
				t.Fatalf("ParseResponse: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", "responses", name+".canonical.golden"), dump(t, r1))
			out, err := EncodeResponse(r1)
			if err != nil {
				t.Fatalf("EncodeResponse: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", "responses", name+".wire.golden"), out)
			r2, err := ParseResponse(out)
			if err != nil {
				t.Fatalf("ParseResponse(EncodeResponse(r)): %v", err)
			}
			mustEqual(t, "round trip", r2, r1)
		})
	}
}

func TestParseResponseFields(t *testing.T) {
	in := inputs(t, "responses", ".json")
	parse := func(t *testing.T, name string) *llm.Response {
		t.Helper()
		r, err := ParseResponse(in[name])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("text", func(t *testing.T) {
		mustEqual(t, "response", parse(t, "text"), &llm.Response{
			ID: "msg_013Zva2CMHLNnXjNJJKqJ2EF", Model: "claude-sonnet-4-5-20250929",
			Content:    []llm.Block{{Type: llm.BlockText, Text: "Hi! My name is Claude."}},
			StopReason: llm.StopEndTurn, Usage: llm.Usage{InputTokens: 2095, OutputTokens: 503},
		})
	})
	t.Run("tool_use", func(t *testing.T) {
		r := parse(t, "tool_use")
		if r.StopReason != llm.StopToolUse || len(r.Content) != 4 {
			t.Fatalf("got stop %q and %d blocks", r.StopReason, len(r.Content))
		}
		mustEqual(t, "tool_use block", r.Content[2], llm.Block{Type: llm.BlockToolUse, ID: "toolu_01A09q90qw90lq917835lq9", Name: "get_weather",
			Input: json.RawMessage(`{"location": "San Francisco, CA", "unit": "celsius"}`)})
		if r.Content[3].Type != "server_tool_use" || r.Content[3].Raw == nil {
			t.Errorf("server_tool_use block not kept raw: %+v", r.Content[3])
		}
	})
	t.Run("usage with cache counts", func(t *testing.T) {
		r := parse(t, "usage_cache")
		mustEqual(t, "usage", r.Usage, llm.Usage{
			InputTokens: 12, OutputTokens: 420, CacheWriteTokens: 1500, CacheReadTokens: 30000, ReasoningTokens: 300,
			CacheWrite5mTokens: 1000, CacheWrite1hTokens: 500,
			Extra: llm.Extra{
				"cache_creation":        json.RawMessage(`{}`),
				"output_tokens_details": json.RawMessage(`{"summarized_tokens":12}`),
				"server_tool_use":       json.RawMessage(`{"web_search_requests": 1}`),
				"service_tier":          json.RawMessage(`"standard"`),
			},
		})
		if r.StopReason != llm.StopSequence || r.StopSequence != "END" {
			t.Errorf("stop = %q %q", r.StopReason, r.StopSequence)
		}
		if _, ok := r.Extra["container"]; !ok || len(r.Extra) != 2 {
			t.Errorf("Extra = %v, want container and stop_details", r.Extra)
		}
		if got := r.Usage.PromptTokens(); got != 31512 {
			t.Errorf("PromptTokens = %d, want 31512", got)
		}
	})
	t.Run("unknown stop reason", func(t *testing.T) {
		r := parse(t, "unknown_stop_reason")
		if r.StopReason != "compaction" || r.Usage.ReasoningTokens != 2 || r.Usage.Extra != nil {
			t.Errorf("got stop %q, usage %+v", r.StopReason, r.Usage)
		}
	})
}

func TestEncodeResponse(t *testing.T) {
	tests := []struct {
		name string
		resp llm.Response
		want string
	}{
		{name: "empty", resp: llm.Response{ID: "msg_1", Model: "m"},
			want: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`},
		{name: "reasoning tokens", resp: llm.Response{ID: "msg_2", Model: "m", StopReason: llm.StopMaxTokens,
			Content: []llm.Block{{Type: llm.BlockToolUse, ID: "t", Name: "f"}},
			Usage:   llm.Usage{InputTokens: 1, OutputTokens: 9, ReasoningTokens: 4, Extra: llm.Extra{"output_tokens_details": json.RawMessage(`{"b":1,"thinking_tokens":99}`), "a": json.RawMessage(`true`)}},
			Extra:   llm.Extra{"z": json.RawMessage(`[]`), "container": json.RawMessage(`null`)}},
			want: `{"id":"msg_2","type":"message","role":"assistant","model":"m","content":[{"type":"tool_use","id":"t","name":"f","input":{}}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":1,"output_tokens":9,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"a":true,"output_tokens_details":{"thinking_tokens":4,"b":1}},"container":null,"z":[]}`},
		{name: "cache writes of both TTLs", resp: llm.Response{ID: "msg_3", Model: "m",
			Usage: llm.Usage{InputTokens: 5, OutputTokens: 2, CacheWriteTokens: 3000, CacheWrite5mTokens: 1000, CacheWrite1hTokens: 2000, CacheReadTokens: 7}},
			want: `{"id":"msg_3","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2,"cache_creation_input_tokens":3000,"cache_read_input_tokens":7,"cache_creation":{"ephemeral_5m_input_tokens":1000,"ephemeral_1h_input_tokens":2000}}}`},
		{name: "cache_creation of zeros and a member Keel does not know", resp: llm.Response{ID: "msg_4", Model: "m",
			Usage: llm.Usage{Extra: llm.Extra{"cache_creation": json.RawMessage(`{"ephemeral_24h_input_tokens":0}`), "service_tier": json.RawMessage(`"standard"`)}}},
			want: `{"id":"msg_4","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":0,"output_tokens":0,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0,"ephemeral_1h_input_tokens":0,"ephemeral_24h_input_tokens":0},"service_tier":"standard"}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := EncodeResponse(&tt.resp)
			if err != nil {
				t.Fatal(err)
			}
			if string(out) != tt.want {
				t.Errorf("EncodeResponse (-got +want):\n%s", diff(out, []byte(tt.want)))
			}
		})
	}
}

func TestParseResponseErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "not JSON", body: `<html>bad gateway</html>`, want: "anthropic upstream: invalid JSON: invalid character '<' looking for beginning of value"},
		{name: "not an object", body: `"x"`, want: "anthropic upstream: response body: expected a JSON object, got a string"},
		{name: "error body", body: `{"type":"error","error":{"type":"api_error","message":"x"}}`, want: `anthropic upstream: type: expected "message", got "error"`},
		{name: "wrong role", body: `{"type":"message","role":"user"}`, want: `anthropic upstream: role: expected "assistant", got "user"`},
		{name: "content string", body: `{"content":"hi"}`, want: "anthropic upstream: content: expected an array, got a string"},
		{name: "usage string", body: `{"usage":"x"}`, want: "anthropic upstream: usage: expected an object, got a string"},
		{name: "output_tokens string", body: `{"usage":{"output_tokens":"3"}}`, want: "anthropic upstream: usage.output_tokens: expected an integer, got a string"},
		{name: "bad block", body: `{"content":[{"type":"tool_use","id":"x","name":"f","input":[]}]}`, want: "anthropic upstream: content.0.input: expected an object, got an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseResponse([]byte(tt.body))
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error = %v, want *llm.APIError", err)
			}
			mustEqual(t, "error", ae, &llm.APIError{Status: 502, Type: llm.ErrAPI, MeshCode: llm.MeshUpstreamProtocolFailed, Message: tt.want})
		})
	}
}
