package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/responses"
)

// postResponses posts body to the fleet's /v1/responses and returns the
// status and the body.
func postResponses(t *testing.T, f *Fleet, body string) (int, []byte) {
	t.Helper()
	c := &http.Client{Transport: f.Transport()}
	resp, err := c.Post("http://"+TransportHost+"/r/us-east/v1/responses", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func errorOf(t *testing.T, b []byte) (msg, typ, param, code string) {
	t.Helper()
	var e struct {
		Error struct{ Message, Type, Param, Code string } `json:"error"`
	}
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	return e.Error.Message, e.Error.Type, e.Error.Param, e.Error.Code
}

// The Responses API answers as generate does: the same text as the other
// two APIs for the same request, usage with its details.
func TestResponsesAnswer(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	status, b := postResponses(t, f, `{"model":"sim-sonnet","input":"Tell me about hulls.","max_output_tokens":300}`)
	if status != 200 {
		t.Fatalf("status %d: %s", status, b)
	}
	r, err := responses.ParseResponse(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Answer(ZeroLatency(), &llm.Request{Model: "sim-sonnet", MaxTokens: 300, HasMaxTokens: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Tell me about hulls."}}}}})
	if r.Text() != want.Text() || r.Usage.OutputTokens != want.Usage.OutputTokens || !strings.HasPrefix(r.ID, "resp_sim_") {
		t.Errorf("answer %q (%+v, id %s), want %q", r.Text(), r.Usage, r.ID, want.Text())
	}
}

// OpenAI's strictest request errors (docs/RESPONSES.md §4).
func TestResponsesRequestErrors(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, body            string
		status                int
		msg, typ, param, code string
	}{
		{"unknown parameter", `{"model":"sim-sonnet","input":"hi","max_tokens":50}`, 400,
			"Unknown parameter: 'max_tokens'.", "invalid_request_error", "max_tokens", "unknown_parameter"},
		{"max_output_tokens below 16", `{"model":"sim-sonnet","input":"hi","max_output_tokens":10}`, 400,
			"Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16, but got 10 instead.", "invalid_request_error", "max_output_tokens", "integer_below_min_value"},
		{"unknown previous response", `{"model":"sim-sonnet","input":"hi","previous_response_id":"resp_nope"}`, 404,
			"Previous response with id 'resp_nope' not found.", "invalid_request_error", "previous_response_id", "previous_response_not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, b := postResponses(t, f, tc.body)
			msg, typ, param, code := errorOf(t, b)
			if status != tc.status || msg != tc.msg || typ != tc.typ || param != tc.param || code != tc.code {
				t.Errorf("got %d %q %q %q %q, want %d %q %q %q %q", status, msg, typ, param, code, tc.status, tc.msg, tc.typ, tc.param, tc.code)
			}
		})
	}
}

// A stored response (store is on unless false, as OpenAI's default)
// continues by previous_response_id with its whole conversation, tool calls
// included; one given with store false is not kept.
func TestResponsesPreviousResponseID(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	tools := `"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":false}]`
	status, b := postResponses(t, f, `{"model":"sim-sonnet","input":"Please use get_weather for Oslo.",`+tools+`}`)
	if status != 200 {
		t.Fatalf("first turn %d: %s", status, b)
	}
	first, _ := responses.ParseResponse(b)
	if first.StopReason != llm.StopToolUse {
		t.Fatalf("first turn did not call the tool: %s", b)
	}
	call := first.Content[len(first.Content)-1]
	// The follow-up sends only the tool's output: the sim must know the
	// call from its store to answer it, as OpenAI does.
	follow := fmt.Sprintf(`{"model":"sim-sonnet","previous_response_id":%q,"input":[{"type":"function_call_output","call_id":%q,"output":"12°C"}],%s}`, first.ID, call.ID, tools)
	status, b = postResponses(t, f, follow)
	if status != 200 {
		t.Fatalf("follow-up %d: %s", status, b)
	}
	next, _ := responses.ParseResponse(b)
	want := Answer(ZeroLatency(), &llm.Request{Model: "sim-sonnet", Tools: []llm.Tool{{Name: "get_weather"}}, Messages: []llm.Message{
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Please use get_weather for Oslo."}}},
		{Role: llm.RoleAssistant, Content: first.Content},
		{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: call.ID, Content: []llm.Block{{Type: llm.BlockText, Text: "12°C"}}}}},
	}})
	if next.StopReason != llm.StopEndTurn || next.Text() != want.Text() {
		t.Errorf("follow-up %q (%s), want %q: the history was not expanded", next.Text(), next.StopReason, want.Text())
	}

	status, b = postResponses(t, f, `{"model":"sim-sonnet","input":"Not kept.","store":false}`)
	unstored, _ := responses.ParseResponse(b)
	if status != 200 {
		t.Fatal(string(b))
	}
	if status, b = postResponses(t, f, `{"model":"sim-sonnet","input":"again","previous_response_id":"`+unstored.ID+`"}`); status != 404 {
		t.Errorf("a store:false response was kept: %d %s", status, b)
	}
}

// The stream carries OpenAI's event sequence, each event numbered.
func TestResponsesStreamEvents(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	status, b := postResponses(t, f, `{"model":"sim-sonnet","input":"Hi there.","max_output_tokens":20,"stream":true}`)
	if status != 200 {
		t.Fatalf("%d %s", status, b)
	}
	rd := sse.NewReader(bytes.NewReader(b))
	var types []string
	for i := 0; ; i++ {
		ev, err := rd.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Type string `json:"type"`
			Seq  int    `json:"sequence_number"`
		}
		if json.Unmarshal(ev.Data, &d) != nil || d.Seq != i || d.Type != ev.Event {
			t.Fatalf("event %d: %s", i, ev.Data)
		}
		if len(types) == 0 || types[len(types)-1] != d.Type {
			types = append(types, d.Type)
		}
	}
	want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.incomplete"
	if got := strings.Join(types, " "); got != want {
		t.Errorf("events %s\nwant   %s", got, want)
	}
}

// A custom (freeform) tool named in the prompt is called as OpenAI calls
// one: a custom_tool_call item with a text input, in answers and streams.
func TestResponsesCustomToolCall(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	for _, stream := range []string{"false", "true"} {
		status, b := postResponses(t, f, `{"model":"sim-sonnet","stream":`+stream+`,"input":"Please use apply_patch now.","tools":[{"type":"custom","name":"apply_patch"}]}`)
		if status != 200 || !strings.Contains(string(b), `"type":"custom_tool_call"`) || !strings.Contains(string(b), `"name":"apply_patch","input":"`) {
			t.Errorf("stream %s: %d %s", stream, status, b)
		}
		if stream == "true" && !strings.Contains(string(b), "event: response.custom_tool_call_input.done") {
			t.Errorf("stream without the custom input events: %s", b)
		}
	}
}
