package translate

import (
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// responseCase is an upstream answer in one format, returned to a client of
// the other. request, when set, is the client's request (in the client's
// format) whose Report restores names; otherwise a plain one is used.
type responseCase struct {
	name     string
	upstream llm.Format
	body     string
	request  string
}

const (
	plainAnthropicRequest = `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`
	plainOpenAIRequest    = `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`
)

// responseCases cover stop reasons (end_turn ↔ stop, max_tokens ↔ length,
// tool_use ↔ tool_calls, stop_sequence, refusal ↔ content_filter), usage
// with cached tokens, tool calls with ids, restored tool names, and members
// only the upstream's format has.
var responseCases = []responseCase{
	{"o2a_stop_cached_usage", llm.FormatOpenAI, `{"id":"chatcmpl-1","object":"chat.completion","created":1767225600,"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],"usage":{"prompt_tokens":120,"completion_tokens":3,"total_tokens":123,"prompt_tokens_details":{"cached_tokens":100}}}`, ""},
	{"o2a_length", llm.FormatOpenAI, `{"id":"chatcmpl-2","object":"chat.completion","created":1767225600,"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"Once upon"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}`, ""},
	{"o2a_tool_calls", llm.FormatOpenAI, `{"id":"chatcmpl-3","object":"chat.completion","created":1767225600,"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_a","type":"function","function":{"name":"weather_get_b8affdae","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"weather_get_b8affdae","arguments":"{\"city\":\"Oslo\"}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":30,"completion_tokens":20,"total_tokens":50}}`,
		`{"model":"m","max_tokens":100,"tools":[{"name":"weather.get","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather?"}]}`},
	{"o2a_content_filter_refusal", llm.FormatOpenAI, `{"id":"chatcmpl-4","object":"chat.completion","created":1767225600,"model":"llama","choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":"I can't help with that."},"finish_reason":"content_filter"}],"usage":{"prompt_tokens":9,"completion_tokens":7,"total_tokens":16}}`, ""},
	{"o2a_openai_only_members", llm.FormatOpenAI, `{"id":"chatcmpl-5","object":"chat.completion","created":1767225600,"model":"llama","service_tier":"default","system_fingerprint":"fp_1","choices":[{"index":0,"message":{"role":"assistant","content":"Hi.","annotations":[]},"logprobs":{"content":[]},"finish_reason":"eos"}],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":1,"accepted_prediction_tokens":0}}}`, ""},
	{"a2o_end_turn_cache_usage", llm.FormatAnthropic, `{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Hello there."}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":20,"output_tokens":3,"cache_creation_input_tokens":50,"cache_read_input_tokens":100}}`, ""},
	{"a2o_max_tokens", llm.FormatAnthropic, `{"id":"msg_2","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Once upon"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":2}}`, ""},
	{"a2o_tool_use", llm.FormatAnthropic, `{"id":"msg_3","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_a","name":"mcp__workspace_server__search_every_document_in_the_sha_a78537d8","input":{"q":"x"}},{"type":"tool_use","id":"toolu_b","name":"other","input":{}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":30,"output_tokens":20}}`,
		`{"model":"m","tools":[{"type":"function","function":{"name":"mcp__workspace_server__search_every_document_in_the_shared_drive_by_title","parameters":{"type":"object"}}},{"type":"function","function":{"name":"other","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Find it"}]}`},
	{"a2o_stop_sequence", llm.FormatAnthropic, `{"id":"msg_4","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"One, two"}],"stop_reason":"stop_sequence","stop_sequence":"three","usage":{"input_tokens":5,"output_tokens":3}}`, ""},
	{"a2o_refusal", llm.FormatAnthropic, `{"id":"msg_5","type":"message","role":"assistant","model":"claude","content":[{"type":"text","text":"I can't."}],"stop_reason":"refusal","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":3}}`, ""},
	{"a2o_thinking_and_anthropic_only_members", llm.FormatAnthropic, `{"id":"msg_6","type":"message","role":"assistant","model":"claude","container":{"id":"c1"},"content":[{"type":"thinking","thinking":"Hmm.","signature":"s"},{"type":"text","text":"Hi.","citations":null}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":9,"service_tier":"standard","cache_creation":{"ephemeral_5m_input_tokens":0},"output_tokens_details":{"thinking_tokens":6}}}`, ""},
}

// reportFor prepares the client request of a response case for the
// upstream's format.
func reportFor(t *testing.T, c responseCase) Report {
	t.Helper()
	var req *llm.Request
	var err error
	body := c.request
	if client := otherFormat(c.upstream); client == llm.FormatAnthropic {
		if body == "" {
			body = plainAnthropicRequest
		}
		req, err = anthropic.ParseRequest([]byte(body))
	} else {
		if body == "" {
			body = plainOpenAIRequest
		}
		req, err = openai.ParseRequest([]byte(body))
	}
	if err != nil {
		t.Fatalf("parsing the client request: %v", err)
	}
	_, rep, err := Prepare(req, c.upstream, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestResponseGolden parses each upstream answer, restores it with the
// Report of the client's request and encodes it in the client's format;
// the result is compared with testdata/responses/<name>.golden and must
// parse with the client format's parser.
func TestResponseGolden(t *testing.T) {
	for _, c := range responseCases {
		t.Run(c.name, func(t *testing.T) {
			rep := reportFor(t, c)
			var resp *llm.Response
			var err error
			if c.upstream == llm.FormatOpenAI {
				resp, err = openai.ParseResponse([]byte(c.body))
			} else {
				resp, err = anthropic.ParseResponse([]byte(c.body))
			}
			if err != nil {
				t.Fatalf("parsing the upstream answer: %v", err)
			}
			before := dump(resp)
			restored := rep.RestoreResponse(resp)
			if after := dump(resp); after != before {
				t.Fatalf("RestoreResponse modified its input (-got +want):\n%s", diffLines(after, before))
			}
			var out []byte
			if c.upstream == llm.FormatOpenAI {
				out, err = anthropic.EncodeResponse(restored)
				if err == nil {
					_, err = anthropic.ParseResponse(out)
				}
			} else {
				out, err = openai.EncodeResponse(restored)
				if err == nil {
					_, err = openai.ParseResponse(out)
				}
			}
			if err != nil {
				t.Fatalf("encoding or re-reading the client answer: %v\n%s", err, out)
			}
			checkGolden(t, filepath.Join("testdata", "responses", c.name+".golden"), indentJSON(t, out))
		})
	}
}

// TestStopReasonMapping pins the stop reason each client format sees for
// each upstream value (PROTOCOLS §5.2), through parse, restore and encode.
func TestStopReasonMapping(t *testing.T) {
	for _, tc := range []struct {
		name     string
		upstream llm.Format
		wire     string // upstream stop_reason / finish_reason
		want     string // what the client's wire says
	}{
		{"end_turn to stop", llm.FormatAnthropic, "end_turn", "stop"},
		{"max_tokens to length", llm.FormatAnthropic, "max_tokens", "length"},
		{"tool_use to tool_calls", llm.FormatAnthropic, "tool_use", "tool_calls"},
		{"stop_sequence to stop", llm.FormatAnthropic, "stop_sequence", "stop"},
		{"refusal to content_filter", llm.FormatAnthropic, "refusal", "content_filter"},
		{"pause_turn to stop", llm.FormatAnthropic, "pause_turn", "stop"},
		{"context window to length", llm.FormatAnthropic, "model_context_window_exceeded", "length"},
		{"unknown to stop", llm.FormatAnthropic, "brand_new", "stop"},
		{"stop to end_turn", llm.FormatOpenAI, "stop", "end_turn"},
		{"length to max_tokens", llm.FormatOpenAI, "length", "max_tokens"},
		{"tool_calls to tool_use", llm.FormatOpenAI, "tool_calls", "tool_use"},
		{"function_call to tool_use", llm.FormatOpenAI, "function_call", "tool_use"},
		{"content_filter to refusal", llm.FormatOpenAI, "content_filter", "refusal"},
		{"unknown to end_turn", llm.FormatOpenAI, "eos", "end_turn"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := Report{client: otherFormat(tc.upstream), upstream: tc.upstream}
			var got string
			if tc.upstream == llm.FormatAnthropic {
				r, err := anthropic.ParseResponse([]byte(`{"id":"m","type":"message","role":"assistant","model":"x","content":[],"stop_reason":"` + tc.wire + `","usage":{"input_tokens":1,"output_tokens":1}}`))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := openai.EncodeResponse(rep.RestoreResponse(r))
				back, err := openai.ParseResponse(b)
				if err != nil {
					t.Fatal(err)
				}
				got = map[llm.StopReason]string{llm.StopEndTurn: "stop", llm.StopMaxTokens: "length", llm.StopToolUse: "tool_calls", llm.StopRefusal: "content_filter"}[back.StopReason]
			} else {
				r, err := openai.ParseResponse([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"x","choices":[{"index":0,"message":{"role":"assistant","content":"a"},"finish_reason":"` + tc.wire + `"}]}`))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := anthropic.EncodeResponse(rep.RestoreResponse(r))
				back, err := anthropic.ParseResponse(b)
				if err != nil {
					t.Fatal(err)
				}
				got = string(back.StopReason)
			}
			if got != tc.want {
				t.Errorf("client sees %q (-got +want):\n-%s\n+%s", tc.wire, got, tc.want)
			}
		})
	}
}

func otherFormat(f llm.Format) llm.Format {
	if f == llm.FormatAnthropic {
		return llm.FormatOpenAI
	}
	return llm.FormatAnthropic
}
