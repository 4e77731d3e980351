package translate

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// requestCase is a client request in one format, translated for an endpoint
// of the other.
type requestCase struct {
	name string
	from llm.Format
	body string
}

// requestCases cover every request mapping of issue 7 item 1 in both
// directions (a2o: Anthropic client → OpenAI endpoint, o2a: the reverse),
// and the features one side cannot express.
var requestCases = []requestCase{
	// system prompt
	{"a2o_system_string", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"system":"You are terse.","messages":[{"role":"user","content":"Hi"}]}`},
	{"a2o_system_blocks", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"You are terse."},{"type":"text","text":"Answer in French.","cache_control":{"type":"ephemeral"}}],"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_system_message", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"}]}`},
	{"o2a_system_and_developer_parts", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"Be exact."}]},{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"}]}`},
	{"o2a_system_mid_conversation", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"system","content":"Now answer in French."},{"role":"user","content":"How are you?"}]}`},
	{"o2a_only_system", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"system","content":"Summarise the rules."},{"role":"system","content":"Rule one: be kind."}]}`},
	{"a2o_mid_conversation_system_turn", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello."},{"role":"system","content":"Now answer in French."},{"role":"user","content":"How are you?"}]}`},
	// multi-turn
	{"a2o_multi_turn", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"One"},{"role":"assistant","content":[{"type":"text","text":"Two"}]},{"role":"user","content":[{"type":"text","text":"Three"},{"type":"text","text":"Four"}]},{"role":"assistant","content":"Five"}]}`},
	{"o2a_multi_turn", llm.FormatOpenAI, `{"model":"m","max_completion_tokens":100,"messages":[{"role":"user","content":"One"},{"role":"assistant","content":"Two"},{"role":"user","content":[{"type":"text","text":"Three"},{"type":"text","text":"Four"}]},{"role":"assistant","content":null,"refusal":null}]}`},
	// images
	{"a2o_images", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}},{"type":"image","source":{"type":"url","url":"https://example.com/cat.jpg"}},{"type":"text","text":"Compare."}]}]}`},
	{"o2a_images", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,/9j/4AAQ"}},{"type":"image_url","image_url":{"url":"https://example.com/cat.jpg","detail":"high"}},{"type":"text","text":"Compare."}]}]}`},
	// tools and tool_choice
	{"a2o_tools_auto", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"get_weather","description":"Weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"tool_choice":{"type":"auto"},"messages":[{"role":"user","content":"Weather?"}]}`},
	{"a2o_tools_any_no_parallel", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"Go"}]}`},
	{"a2o_tools_none", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"},"messages":[{"role":"user","content":"Go"}]}`},
	{"a2o_tools_named", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"a","input_schema":{"type":"object"}},{"name":"b","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"b"},"messages":[{"role":"user","content":"Go"}]}`},
	{"o2a_tools_auto", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","description":"Weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]},"strict":true}}],"tool_choice":"auto","messages":[{"role":"user","content":"Weather?"}]}`},
	{"o2a_tools_required_no_parallel", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}],"tool_choice":"required","parallel_tool_calls":false,"messages":[{"role":"user","content":"Go"}]}`},
	{"o2a_tools_none", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}],"tool_choice":"none","messages":[{"role":"user","content":"Go"}]}`},
	{"o2a_tools_named", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}},{"type":"function","function":{"name":"b","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"b"}},"messages":[{"role":"user","content":"Go"}]}`},
	{"o2a_no_parallel_without_choice", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}],"parallel_tool_calls":false,"messages":[{"role":"user","content":"Go"}]}`},
	// tool calls and results, ids preserved
	{"a2o_tool_history", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Weather in Paris and Oslo?"},{"role":"assistant","content":[{"type":"text","text":"Checking."},{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_02","name":"get_weather","input":{"city":"Oslo"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_01","content":"18C"},{"type":"tool_result","tool_use_id":"toolu_02","content":[{"type":"text","text":"-3C"}],"is_error":true},{"type":"text","text":"And tomorrow?"}]}]}`},
	{"o2a_tool_history", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Weather in Paris and Oslo?"},{"role":"assistant","content":"","tool_calls":[{"id":"call_01","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_02","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}}]},{"role":"tool","tool_call_id":"call_01","content":"18C"},{"role":"tool","tool_call_id":"call_02","content":[{"type":"text","text":"-3C"}]},{"role":"user","content":"And tomorrow?"}]}`},
	{"o2a_tool_ids_and_bad_arguments", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":null,"tool_calls":[{"id":"functions.get_weather:0","type":"function","function":{"name":"get_weather","arguments":"{\"city\":"}}]},{"role":"tool","tool_call_id":"functions.get_weather:0","content":"18C"}]}`},
	{"a2o_long_tool_name", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"name":"mcp__workspace_server__search_every_document_in_the_shared_drive_by_title","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"mcp__workspace_server__search_every_document_in_the_shared_drive_by_title"},"messages":[{"role":"user","content":"Find it"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0123456789012345678901234567890123456789","name":"mcp__workspace_server__search_every_document_in_the_shared_drive_by_title","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_0123456789012345678901234567890123456789","content":"none"}]}]}`},
	{"o2a_dotted_tool_name", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"function","function":{"name":"weather.get","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"weather.get"}},"messages":[{"role":"user","content":"Weather?"}]}`},
	// stop sequences
	{"a2o_stop_sequences", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"stop_sequences":["END","###"],"messages":[{"role":"user","content":"Hi"}]}`},
	{"a2o_stop_sequences_over_four", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"stop_sequences":["a","b","c","d","e","f"],"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_stop_string", llm.FormatOpenAI, `{"model":"m","stop":"END","messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_stop_array", llm.FormatOpenAI, `{"model":"m","stop":["END","###"],"messages":[{"role":"user","content":"Hi"}]}`},
	// sampling
	{"a2o_sampling_top_k", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"temperature":0.7,"top_p":0.9,"top_k":40,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_sampling", llm.FormatOpenAI, `{"model":"m","temperature":0.7,"top_p":0.9,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_temperature_above_one", llm.FormatOpenAI, `{"model":"m","temperature":1.6,"messages":[{"role":"user","content":"Hi"}]}`},
	// max tokens
	{"a2o_max_tokens", llm.FormatAnthropic, `{"model":"m","max_tokens":321,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_max_completion_tokens", llm.FormatOpenAI, `{"model":"m","max_completion_tokens":321,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_max_tokens_legacy", llm.FormatOpenAI, `{"model":"m","max_tokens":321,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_max_tokens_default", llm.FormatOpenAI, `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`},
	// metadata / user
	{"a2o_metadata_user", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"metadata":{"user_id":"u-42"},"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_user", llm.FormatOpenAI, `{"model":"m","user":"u-42","messages":[{"role":"user","name":"ann","content":"Hi"}]}`},
	{"o2a_safety_identifier", llm.FormatOpenAI, `{"model":"m","safety_identifier":"u-42","messages":[{"role":"user","content":"Hi"}]}`},
	// streaming
	{"a2o_stream", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_stream", llm.FormatOpenAI, `{"model":"m","stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false},"messages":[{"role":"user","content":"Hi"}]}`},
	// structured output
	{"o2a_response_format_json_schema", llm.FormatOpenAI, `{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"city","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false},"strict":true}},"messages":[{"role":"user","content":"A city"}]}`},
	{"o2a_response_format_text", llm.FormatOpenAI, `{"model":"m","response_format":{"type":"text"},"n":1,"messages":[{"role":"user","content":"Hi"}]}`},
	{"a2o_output_config", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"}},"required":["name"],"additionalProperties":false}}},"messages":[{"role":"user","content":"A city"}]}`},
	{"a2o_output_config_loose_schema", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"name":{"type":"string"},"pop":{"type":"integer"}},"required":["name"],"additionalProperties":false}}},"messages":[{"role":"user","content":"A city"}]}`},
	// features the target cannot express (dropped under the default policy)
	{"a2o_thinking", llm.FormatAnthropic, `{"model":"m","max_tokens":2000,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"Let me think.","signature":"sig"},{"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"Hello."}]},{"role":"user","content":"Again"}]}`},
	{"a2o_server_tool_and_document", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"tools":[{"type":"web_search_20260318","name":"web_search"},{"name":"a","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"Text"}},{"type":"text","text":"Summarise.","cache_control":{"type":"ephemeral"}}]}]}`},
	{"a2o_tool_result_image", llm.FormatAnthropic, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Screenshot?"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"shot","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Here."},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}]}]}`},
	{"o2a_openai_only_parameters", llm.FormatOpenAI, `{"model":"m","logprobs":true,"top_logprobs":2,"seed":7,"frequency_penalty":0.5,"presence_penalty":0.1,"logit_bias":{"50256":-100},"store":true,"service_tier":"flex","messages":[{"role":"user","content":"Hi"}]}`},
	{"o2a_audio_and_file_parts", llm.FormatOpenAI, `{"model":"m","modalities":["text","audio"],"audio":{"voice":"alloy","format":"wav"},"messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"UklG","format":"wav"}},{"type":"file","file":{"file_id":"file-1"}},{"type":"text","text":"Transcribe."}]}]}`},
	{"o2a_response_format_json_object", llm.FormatOpenAI, `{"model":"m","response_format":{"type":"json_object"},"messages":[{"role":"user","content":"JSON please"}]}`},
	{"o2a_custom_tool", llm.FormatOpenAI, `{"model":"m","tools":[{"type":"custom","custom":{"name":"sql"}},{"type":"function","function":{"name":"a","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"Go"}]}`},
}

// translateRequest parses c's body in its format, prepares it for the other
// format and encodes it as that format's upstream body.
func translateRequest(t *testing.T, c requestCase, p Policy) (body []byte, rep Report, err error) {
	t.Helper()
	var req *llm.Request
	target := llm.FormatOpenAI
	if c.from == llm.FormatAnthropic {
		req, err = anthropic.ParseRequest([]byte(c.body))
	} else {
		req, err = openai.ParseRequest([]byte(c.body))
		target = llm.FormatAnthropic
	}
	if err != nil {
		t.Fatalf("parsing the client request: %v", err)
	}
	before := dump(req)
	out, rep, err := Prepare(req, target, p)
	if after := dump(req); after != before {
		t.Fatalf("Prepare modified its input (-got +want):\n%s", diffLines(after, before))
	}
	if err != nil {
		return nil, rep, err
	}
	if target == llm.FormatOpenAI {
		body, err = openai.EncodeUpstreamRequest(out)
	} else {
		body, err = anthropic.EncodeRequest(out)
	}
	if err != nil {
		t.Fatalf("encoding the upstream request: %v", err)
	}
	return body, rep, nil
}

// TestRequestGolden translates each client request for the other format and
// compares the upstream body and the dropped list with
// testdata/requests/<name>.golden. The upstream body must also parse with
// the target's own parser (what the upstream API would accept).
func TestRequestGolden(t *testing.T) {
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			body, rep, err := translateRequest(t, c, Policy{Unsupported: Drop})
			if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			if c.from == llm.FormatAnthropic {
				_, err = openai.ParseRequest(body)
			} else {
				_, err = anthropic.ParseRequest(body)
			}
			if err != nil {
				t.Errorf("the target's parser rejects the translated body: %v\n%s", err, body)
			}
			var got strings.Builder
			got.WriteString("# dropped: " + strings.Join(rep.Dropped, ",") + "\n")
			for _, n := range sortedKeys(rep.names) {
				got.WriteString("# tool name " + n + " <- " + rep.names[n] + "\n")
			}
			for _, n := range sortedKeys(rep.ids) {
				got.WriteString("# tool id " + n + " <- " + rep.ids[n] + "\n")
			}
			got.Write(indentJSON(t, body))
			checkGolden(t, filepath.Join("testdata", "requests", c.name+".golden"), []byte(got.String()))
		})
	}
}

// TestRejectPolicy checks that under Policy Reject every case that drops a
// feature fails with a 400 naming it and the endpoint, and that cases that
// drop only hints or nothing still pass.
func TestRejectPolicy(t *testing.T) {
	hintsOnly := map[string]bool{
		"a2o_system_blocks": true, "a2o_tools_any_no_parallel": true, "o2a_images": true,
		"o2a_user": true, "o2a_stream": true, "a2o_tool_history": true,
	}
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			_, dropRep, _ := translateRequest(t, c, Policy{Unsupported: Drop})
			_, _, err := translateRequest(t, c, Policy{Unsupported: Reject, Endpoint: "sim-llama/us-east/sim-openai"})
			if len(dropRep.Dropped) == 0 || hintsOnly[c.name] {
				if err != nil {
					t.Fatalf("Reject failed a request that drops only hints %v: %v", dropRep.Dropped, err)
				}
				return
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("Reject gave %v, want an *llm.APIError (dropped: %v)", err, dropRep.Dropped)
			}
			if ae.Status != 400 || ae.Type != llm.ErrInvalidRequest || ae.MeshCode != llm.MeshBadRequest {
				t.Errorf("error = %d %s %s, want 400 invalid_request_error MESH_BAD_REQUEST", ae.Status, ae.Type, ae.MeshCode)
			}
			if !strings.Contains(ae.Message, "sim-llama/us-east/sim-openai") || !strings.Contains(ae.Message, "set translation policy drop") {
				t.Errorf("message %q does not name the endpoint and the way out", ae.Message)
			}
			named := false
			for _, f := range dropRep.Dropped {
				named = named || strings.Contains(ae.Message, f)
			}
			if !named {
				t.Errorf("message %q names none of %v", ae.Message, dropRep.Dropped)
			}
		})
	}
}

// TestDefaultPolicyRefusesLostContent: under the default policy content
// the target cannot carry (a document, an image in a tool result, audio,
// a server tool, an unknown block) is a 400 naming each such block, never a
// silent drop (issue 25); a request that loses no content is sent with the
// same parameters dropped as under Drop. A past turn's thinking is not
// content the model would miss: it is dropped and named
// (TestPastThinkingIsDroppedAndNamed).
func TestDefaultPolicyRefusesLostContent(t *testing.T) {
	lossy := 0
	for _, c := range requestCases {
		t.Run(c.name, func(t *testing.T) {
			dropBody, dropRep, err := translateRequest(t, c, Policy{Unsupported: Drop})
			if err != nil {
				t.Fatal(err)
			}
			body, rep, err := translateRequest(t, c, Policy{Endpoint: "gpt-x/us/openai"})
			if len(dropRep.Lost) == 0 {
				if err != nil || string(body) != string(dropBody) || !slices.Equal(rep.Dropped, dropRep.Dropped) {
					t.Fatalf("no content lost, yet default policy gave %v, dropped %v (drop: %v)", err, rep.Dropped, dropRep.Dropped)
				}
				return
			}
			lossy++
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != llm.ErrInvalidRequest || ae.MeshCode != llm.MeshBadRequest {
				t.Fatalf("content %v lost: got %v, want a 400 MESH_BAD_REQUEST", dropRep.Lost, err)
			}
			for _, f := range dropRep.Lost {
				if !strings.Contains(ae.Message, f) {
					t.Errorf("message %q does not name %s", ae.Message, f)
				}
			}
			if !strings.Contains(ae.Message, "gpt-x/us/openai") || !strings.Contains(ae.Message, "translation policy drop") {
				t.Errorf("message %q does not name the endpoint and the way out", ae.Message)
			}
		})
	}
	if lossy < 3 {
		t.Errorf("%d cases lose content, want the table to hold at least 3", lossy)
	}
}

// TestRejectMessage pins the exact wording of the reject error.
func TestRejectMessage(t *testing.T) {
	for _, tc := range []struct {
		name     string
		features []string
		target   llm.Format
		endpoint string
		want     string
	}{
		{"one", []string{"top_k"}, llm.FormatOpenAI, "sim-llama/us-east", "top_k is not supported by the OpenAI-format endpoint sim-llama/us-east; set translation policy drop to drop it"},
		{"several", []string{"n", "seed"}, llm.FormatAnthropic, "sim-opus/eu-west", "n, seed are not supported by the Anthropic-format endpoint sim-opus/eu-west; set translation policy drop to drop them"},
		{"unnamed endpoint", []string{"thinking"}, llm.FormatOpenAI, "", "thinking is not supported by an OpenAI-format endpoint; set translation policy drop to drop it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := rejectError(tc.features, tc.target, tc.endpoint).Message; got != tc.want {
				t.Errorf("message (-got +want):\n-%s\n+%s", got, tc.want)
			}
		})
	}
}

// TestPrepareSameFormat checks that a request already in the target format
// is returned untouched, and that an invalid policy is an error.
func TestPrepareSameFormat(t *testing.T) {
	req, err := anthropic.ParseRequest([]byte(`{"model":"m","max_tokens":1,"top_k":3,"thinking":{"type":"enabled","budget_tokens":1},"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	out, rep, err := Prepare(req, llm.FormatAnthropic, Policy{Unsupported: Reject})
	if err != nil || out != req || rep.Translated() || len(rep.Dropped) != 0 {
		t.Errorf("same format: out==req %v, report %+v, err %v; want the request itself, an empty report, no error", out == req, rep, err)
	}
	if _, _, err := Prepare(req, llm.FormatOpenAI, Policy{Unsupported: "ignore"}); err == nil {
		t.Error("an unknown policy was accepted")
	}
}

// TestPastThinkingIsDroppedAndNamed: under the default policy an earlier
// turn's signed thinking is dropped and named in Report.Dropped, not
// refused: it is opaque state of the family that made it (issue 24 item 3),
// which Anthropic itself leaves out of later turns' context.
func TestPastThinkingIsDroppedAndNamed(t *testing.T) {
	c := requestCase{"a2o_past_thinking", llm.FormatAnthropic, `{"model":"m","max_tokens":100,` +
		`"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"c2ln"},{"type":"text","text":"Hello."}]},{"role":"user","content":"Again"}]}`}
	body, rep, err := translateRequest(t, c, Policy{Endpoint: "gpt-x/us/openai"})
	if err != nil {
		t.Fatalf("default policy refused: %v", err)
	}
	if len(rep.Lost) != 0 || !slices.Contains(rep.Dropped, "thinking") {
		t.Errorf("Lost = %v, Dropped = %v; want nothing lost and thinking named", rep.Lost, rep.Dropped)
	}
	if strings.Contains(string(body), "c2ln") || strings.Contains(string(body), "hmm") {
		t.Errorf("upstream body still carries the thinking: %s", body)
	}
}
