package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func TestRequestGolden(t *testing.T) {
	for name, path := range cases(t, "request", ".json") {
		t.Run(name, func(t *testing.T) {
			in := readFile(t, path)
			r, err := ParseRequest(in)
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(path, ".json")+".canonical.golden", dump(t, r))
			enc, err := EncodeRequest(r)
			if err != nil {
				t.Fatalf("EncodeRequest: %v", err)
			}
			checkGolden(t, strings.TrimSuffix(path, ".json")+".encoded.golden", append(bytes.Clone(enc), '\n'))
			if !json.Valid(enc) {
				t.Fatalf("EncodeRequest wrote invalid JSON: %s", enc)
			}
			if bytes.Contains(enc, []byte("mesh_behavior")) {
				t.Errorf("EncodeRequest wrote mesh_behavior: %s", enc)
			}
			again, err := EncodeRequest(r)
			if err != nil || !bytes.Equal(again, enc) {
				t.Errorf("EncodeRequest is not deterministic:\n%s\n%s", enc, again)
			}
			r2, err := ParseRequest(enc)
			if err != nil {
				t.Fatalf("ParseRequest(EncodeRequest): %v", err)
			}
			r2.MeshBehavior = r.MeshBehavior // never re-encoded, by design
			if !reflect.DeepEqual(r2, r) {
				t.Errorf("round trip differs (-got +want):\n%s", diff(string(dump(t, r2)), string(dump(t, r))))
			}
		})
	}
}

func TestParseRequestDetails(t *testing.T) {
	parse := func(t *testing.T, name string) *llm.Request {
		t.Helper()
		r, err := ParseRequest(readFile(t, "testdata/request/"+name+".json"))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("system and developer stay in messages", func(t *testing.T) {
		r := parse(t, "system_developer")
		roles := []llm.Role{r.Messages[0].Role, r.Messages[1].Role, r.Messages[2].Role}
		if want := []llm.Role{llm.RoleSystem, llm.RoleDeveloper, llm.RoleUser}; !reflect.DeepEqual(roles, want) {
			t.Errorf("roles = %v, want %v", roles, want)
		}
		if len(r.System) != 0 {
			t.Errorf("System = %v, want empty", r.System)
		}
		if got := r.SystemText(); got != "You are terse.\n\nAnswer in French.Use metric units." {
			t.Errorf("SystemText = %q", got)
		}
		if r.Messages[2].Name != "alice" {
			t.Errorf("Name = %q", r.Messages[2].Name)
		}
	})
	t.Run("tool messages group into one user message", func(t *testing.T) {
		r := parse(t, "multi_turn_tools")
		if len(r.Messages) != 8 {
			t.Fatalf("got %d messages, want 8", len(r.Messages))
		}
		m := r.Messages[2]
		if m.Role != llm.RoleUser || len(m.Content) != 2 || m.Content[0].Type != llm.BlockToolResult ||
			m.Content[0].ToolUseID != "call_1" || m.Content[1].ToolUseID != "call_2" {
			t.Errorf("tool group = %+v", m)
		}
		if got := llm.BlocksText(m.Content[1].Content); got != "24C, sunny" {
			t.Errorf("tool result text = %q", got)
		}
		a := r.Messages[1]
		if !a.ContentIsNull || len(a.Content) != 2 || string(a.Content[1].Input) != `{"city":"Rome","unit":"c"}` {
			t.Errorf("assistant = %+v", a)
		}
		bad := r.Messages[5].Content
		if bad[1].Type != llm.BlockToolUse || bad[1].Raw == nil || string(bad[1].Input) != "{}" || bad[1].ID != "call_3" || bad[1].Name != "get_weather" {
			t.Errorf("invalid arguments block = %+v", bad[1])
		}
		if bad[2].Raw == nil || bad[2].Name != "ping" {
			t.Errorf("empty arguments block = %+v", bad[2])
		}
		if _, ok := r.Messages[6].Content[0].Extra["name"]; !ok {
			t.Errorf("tool message name not kept in Block.Extra: %+v", r.Messages[6].Content[0])
		}
	})
	t.Run("image parts", func(t *testing.T) {
		c := parse(t, "image_parts").Messages[0].Content
		if s := c[1].Image; s == nil || s.Kind != "base64" || s.MediaType != "image/png" || s.Data != "iVBORw0KGgoAAAANSUhEUg==" {
			t.Errorf("data URL = %+v", s)
		}
		if s := c[2].Image; s == nil || s.Kind != "url" || s.URL != "https://example.com/cat.jpg" || s.Detail != "high" {
			t.Errorf("http URL = %+v", s)
		}
		if c[3].Raw == nil || c[3].Type != llm.BlockImage {
			t.Errorf("image_url with unknown member not raw: %+v", c[3])
		}
		if c[4].Raw == nil || c[4].Type != "input_audio" {
			t.Errorf("input_audio not raw: %+v", c[4])
		}
	})
	t.Run("top level", func(t *testing.T) {
		r := parse(t, "unknown_fields")
		if !r.MaxTokensLegacy || r.MaxTokens != 256 || !r.HasMaxTokens || r.UserID != "user-123" || r.N != 1 {
			t.Errorf("request = %+v", r)
		}
		if string(r.MeshBehavior) != `{"fallback":["b"],"max_latency_ms":2000}` {
			t.Errorf("MeshBehavior = %s", r.MeshBehavior)
		}
		for _, k := range []string{"seed", "logprobs", "top_logprobs", "metadata", "reasoning_effort", "service_tier", "store", "prediction", "web_search_options", "frequency_penalty"} {
			if _, ok := r.Extra[k]; !ok {
				t.Errorf("Extra lacks %q", k)
			}
		}
		if r.Temperature == nil || *r.Temperature != 1e-7 {
			t.Errorf("Temperature = %v", r.Temperature)
		}
	})
	t.Run("tool choice forms", func(t *testing.T) {
		for _, tc := range []struct {
			file string
			want llm.ToolChoice
		}{
			{"tool_choice_none", llm.ToolChoice{Type: llm.ToolChoiceNone}},
			{"tool_choice_auto", llm.ToolChoice{Type: llm.ToolChoiceAuto}},
			{"tool_choice_required", llm.ToolChoice{Type: llm.ToolChoiceAny}},
			{"tools_choice_function", llm.ToolChoice{Type: llm.ToolChoiceTool, Name: "get_weather"}},
		} {
			if got := parse(t, tc.file).ToolChoice; got == nil || !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("%s: ToolChoice = %+v, want %+v", tc.file, got, tc.want)
			}
		}
		if tc := parse(t, "tool_choice_allowed_tools").ToolChoice; tc == nil || tc.Raw == nil || tc.Type != "" {
			t.Errorf("allowed_tools = %+v", tc)
		}
		r := parse(t, "tools_choice_function")
		if r.ParallelToolCalls == nil || *r.ParallelToolCalls {
			t.Errorf("ParallelToolCalls = %v", r.ParallelToolCalls)
		}
		if r.Tools[0].Strict == nil || !*r.Tools[0].Strict || r.Tools[2].Type != "custom" || r.Tools[2].Raw == nil {
			t.Errorf("tools = %+v", r.Tools)
		}
	})
	t.Run("response format", func(t *testing.T) {
		if rf := parse(t, "response_format_json_object").ResponseFormat; rf == nil || rf.Type != "json_object" {
			t.Errorf("json_object = %+v", rf)
		}
		rf := parse(t, "response_format_json_schema").ResponseFormat
		if rf == nil || rf.Type != "json_schema" || rf.Name != "person" || rf.Description != "A person" || rf.Strict == nil || !*rf.Strict || len(rf.Schema) == 0 {
			t.Errorf("json_schema = %+v", rf)
		}
		r := parse(t, "both_max_tokens")
		if r.ResponseFormat != nil || r.Extra["response_format"] == nil || r.Extra["max_tokens"] == nil || r.MaxTokens != 60 || r.MaxTokensLegacy {
			t.Errorf("unrepresentable response_format / both max tokens: %+v", r)
		}
	})
	t.Run("stop", func(t *testing.T) {
		if r := parse(t, "stop_string"); !r.StopIsString || !reflect.DeepEqual(r.StopSequences, []string{"\n\n"}) {
			t.Errorf("stop string = %q %v", r.StopSequences, r.StopIsString)
		}
		if r := parse(t, "stop_array"); r.StopIsString || len(r.StopSequences) != 3 || !r.HasMaxTokens || r.MaxTokens != 0 {
			t.Errorf("stop array = %q %v", r.StopSequences, r.StopIsString)
		}
	})
	t.Run("stream options", func(t *testing.T) {
		r := parse(t, "stream_options")
		if !r.Stream || !r.IncludeUsage || string(r.StreamOptionsExtra["include_obfuscation"]) != "false" {
			t.Errorf("stream options = %+v", r)
		}
	})
}

func TestEncodeUpstreamRequest(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		want       string
	}{
		{"stream without usage gets it", "stream_no_usage", `"stream":true,"stream_options":{"include_usage":true}`},
		{"stream with usage keeps extras", "stream_options", `"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest(readFile(t, "testdata/request/"+tc.file+".json"))
			if err != nil {
				t.Fatal(err)
			}
			before := *r
			b, err := EncodeUpstreamRequest(r)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b, []byte(tc.want)) {
				t.Errorf("body %s lacks %s", b, tc.want)
			}
			if !reflect.DeepEqual(*r, before) {
				t.Errorf("EncodeUpstreamRequest modified its argument")
			}
		})
	}
	t.Run("non-stream unchanged", func(t *testing.T) {
		r, _ := ParseRequest(readFile(t, "testdata/request/stop_string.json"))
		a, _ := EncodeRequest(r)
		b, _ := EncodeUpstreamRequest(r)
		if !bytes.Equal(a, b) {
			t.Errorf("got %s, want %s", b, a)
		}
	})
}

func TestEncodeRequestCrossFormat(t *testing.T) {
	f := 0.5
	for _, tc := range []struct {
		name string
		r    *llm.Request
		want string
	}{
		{
			name: "anthropic system string",
			r: &llm.Request{Model: "m", System: []llm.Block{{Type: llm.BlockText, Text: "Be nice."}}, SystemIsString: true,
				Messages:  []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}},
				MaxTokens: 10, HasMaxTokens: true, TopK: new(int), Temperature: &f},
			want: `{"model":"m","messages":[{"role":"system","content":"Be nice."},{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":10,"temperature":0.5}`,
		},
		{
			name: "anthropic system blocks, tool results before user text, thinking dropped",
			r: &llm.Request{Model: "m",
				System: []llm.Block{{Type: llm.BlockText, Text: "A"}, {Type: llm.BlockText, Text: "B", Extra: llm.Extra{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}}},
				Messages: []llm.Message{
					{Role: llm.RoleAssistant, Content: []llm.Block{
						{Type: llm.BlockThinking, Thinking: "hmm", Signature: "sig"},
						{Type: llm.BlockText, Text: "Calling."},
						{Type: llm.BlockToolUse, ID: "toolu_1", Name: "f", Input: json.RawMessage(`{"x":1}`)},
					}},
					{Role: llm.RoleUser, Content: []llm.Block{
						{Type: llm.BlockToolResult, ToolUseID: "toolu_1"},
						{Type: llm.BlockText, Text: "go on"},
					}},
				}},
			want: `{"model":"m","messages":[{"role":"system","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},{"role":"assistant","content":[{"type":"text","text":"Calling."}],"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"x\":1}"}}]},{"role":"tool","tool_call_id":"toolu_1","content":""},{"role":"user","content":[{"type":"text","text":"go on"}]}]}`,
		},
		{
			name: "tool choice any and base64 image",
			r: &llm.Request{Model: "m", ToolChoice: &llm.ToolChoice{Type: llm.ToolChoiceAny},
				Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockImage, Image: &llm.ImageSource{Kind: "base64", MediaType: "image/jpeg", Data: "AAAA"}}}}}},
			want: `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpeg;base64,AAAA"}}]}],"tool_choice":"required"}`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := EncodeRequest(tc.r)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("(-got +want):\n- %s\n+ %s", got, tc.want)
			}
		})
	}
	t.Run("NaN is an error", func(t *testing.T) {
		nan := 0.0
		nan /= nan
		if _, err := EncodeRequest(&llm.Request{Model: "m", Temperature: &nan}); err == nil {
			t.Error("no error for NaN temperature")
		}
	})
}

func TestParseRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, param, msg string
	}{
		{"malformed JSON", `{"model":`, "", "request body is not valid JSON"},
		{"not an object", `[1,2]`, "", "request body must be a JSON object"},
		{"missing model", `{` + msgs + `}`, "model", "model: required"},
		{"model wrong type", `{"model":3,` + msgs + `}`, "model", "model: expected a string, got a number"},
		{"missing messages", `{"model":"m"}`, "messages", "messages: required"},
		{"empty messages", `{"model":"m","messages":[]}`, "messages", "messages: must contain at least one message"},
		{"messages not array", `{"model":"m","messages":{}}`, "messages", "messages: expected an array, got an object"},
		{"message not object", `{"model":"m","messages":["hi"]}`, "messages[0]", "messages[0]: expected an object, got a string"},
		{"missing role", `{"model":"m","messages":[{"content":"hi"}]}`, "messages[0].role", "messages[0].role: required"},
		{"function role", `{"model":"m","messages":[{"role":"function","name":"f","content":"x"}]}`, "messages[0].role", `messages[0].role: unsupported role "function"`},
		{"user content missing", `{"model":"m","messages":[{"role":"user"}]}`, "messages[0].content", "messages[0].content: required"},
		{"content number", `{"model":"m","messages":[{"role":"user","content":1}]}`, "messages[0].content", "messages[0].content: expected a string or an array of content parts, got a number"},
		{"part without type", `{"model":"m","messages":[{"role":"user","content":[{"text":"x"}]}]}`, "messages[0].content[0].type", "messages[0].content[0].type: required"},
		{"text part not string", `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":5}]}]}`, "messages[0].content[0].text", "messages[0].content[0].text: expected a string, got a number"},
		{"image_url without url", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{}}]}]}`, "messages[0].content[0].image_url.url", "messages[0].content[0].image_url.url: required"},
		{"tool message without id", `{"model":"m","messages":[{"role":"tool","content":"x"}]}`, "messages[0].tool_call_id", "messages[0].tool_call_id: required"},
		{"tool_calls not array", `{"model":"m","messages":[{"role":"assistant","tool_calls":{}}]}`, "messages[0].tool_calls", "messages[0].tool_calls: expected an array, got an object"},
		{"tool call without id", `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "messages[0].tool_calls[0].id", "messages[0].tool_calls[0].id: required"},
		{"temperature string", `{"model":"m",` + msgs + `,"temperature":"hot"}`, "temperature", "temperature: expected a number, got a string"},
		{"temperature overflow", `{"model":"m",` + msgs + `,"temperature":1e999}`, "temperature", "temperature: number out of range"},
		{"n above 1", `{"model":"m",` + msgs + `,"n":2}`, "n", "n: only 1 is supported"},
		{"n zero", `{"model":"m",` + msgs + `,"n":0}`, "n", "n: must be 1"},
		{"stop number", `{"model":"m",` + msgs + `,"stop":7}`, "stop", "stop: expected a string or an array of strings, got a number"},
		{"stop element", `{"model":"m",` + msgs + `,"stop":["a",1]}`, "stop[1]", "stop[1]: expected a string, got a number"},
		{"stream string", `{"model":"m",` + msgs + `,"stream":"yes"}`, "stream", "stream: expected a boolean, got a string"},
		{"stream_options string", `{"model":"m",` + msgs + `,"stream_options":"x"}`, "stream_options", "stream_options: expected an object, got a string"},
		{"include_usage number", `{"model":"m",` + msgs + `,"stream_options":{"include_usage":1}}`, "stream_options.include_usage", "stream_options.include_usage: expected a boolean, got a number"},
		{"tools object", `{"model":"m",` + msgs + `,"tools":{}}`, "tools", "tools: expected an array, got an object"},
		{"tool without type", `{"model":"m",` + msgs + `,"tools":[{"function":{"name":"f"}}]}`, "tools[0].type", "tools[0].type: required"},
		{"tool without name", `{"model":"m",` + msgs + `,"tools":[{"type":"function","function":{}}]}`, "tools[0].function.name", "tools[0].function.name: required"},
		{"tool_choice number", `{"model":"m",` + msgs + `,"tool_choice":1}`, "tool_choice", "tool_choice: expected a string or an object, got a number"},
		{"response_format string", `{"model":"m",` + msgs + `,"response_format":"json"}`, "response_format", "response_format: expected an object, got a string"},
		{"max_tokens float", `{"model":"m",` + msgs + `,"max_tokens":1.5}`, "max_tokens", "max_tokens: expected an integer, got 1.5"},
		{"max_completion_tokens negative", `{"model":"m",` + msgs + `,"max_completion_tokens":-1}`, "max_completion_tokens", "max_completion_tokens: must not be negative"},
		{"user number", `{"model":"m",` + msgs + `,"user":1}`, "user", "user: expected a string, got a number"},
		{"parallel_tool_calls string", `{"model":"m",` + msgs + `,"parallel_tool_calls":"no"}`, "parallel_tool_calls", "parallel_tool_calls: expected a boolean, got a string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tc.body))
			if err == nil {
				t.Fatalf("no error; request = %+v", r)
			}
			var e *llm.APIError
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *llm.APIError", err)
			}
			want := &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: tc.param, Message: tc.msg}
			if !reflect.DeepEqual(e, want) {
				t.Errorf("(-got +want):\n- %+v\n+ %+v", e, want)
			}
		})
	}
}

// TestParseRequestMaxTokensBound: max_completion_tokens and max_tokens are
// integers from 0 to MaxTokensLimit, read as the anthropic package reads
// max_tokens (same bound, same messages). Before the fix an integral 1e3 or
// 1024.0 was rejected here but accepted by the anthropic parser, and 2^31
// was reported as "expected an integer".
func TestParseRequestMaxTokensBound(t *testing.T) {
	const tooLarge = ", which is the maximum allowed number of output tokens"
	tests := []struct {
		name  string
		value string
		want  int    // when err is ""
		err   string // the message after "<param>: "
	}{
		{name: "zero", value: `0`, want: 0},
		{name: "typical", value: `1024`, want: 1024},
		{name: "integral fraction", value: `1024.0`, want: 1024},
		{name: "integral exponent", value: `1e3`, want: 1000},
		{name: "negative zero", value: `-0`, want: 0},
		{name: "at the bound", value: `2147483647`, want: MaxTokensLimit},
		{name: "just above the bound", value: `2147483648`, err: "2147483648 > 2147483647" + tooLarge},
		{name: "above the bound as exponent", value: `1e10`, err: "1e10 > 2147483647" + tooLarge},
		{name: "beyond int64", value: `99999999999999999999999`, err: "99999999999999999999999 > 2147483647" + tooLarge},
		{name: "beyond float64", value: `1e400`, err: "1e400 > 2147483647" + tooLarge},
		{name: "long literal is cut in the message", value: `1` + strings.Repeat("0", 100), err: "1" + strings.Repeat("0", 31) + "… > 2147483647" + tooLarge},
		{name: "negative", value: `-1`, err: "must not be negative"},
		{name: "negative beyond int64", value: `-99999999999999999999999`, err: "must not be negative"},
		{name: "negative beyond float64", value: `-1e400`, err: "must not be negative"},
		{name: "fraction", value: `1.5`, err: "expected an integer, got 1.5"},
		{name: "fraction above the bound", value: `2147483647.5`, err: "expected an integer, got 2147483647.5"},
		{name: "string", value: `"1024"`, err: "expected an integer, got a string"},
		{name: "boolean", value: `true`, err: "expected an integer, got a boolean"},
	}
	for _, param := range []string{"max_completion_tokens", "max_tokens"} {
		for _, tt := range tests {
			t.Run(param+"/"+tt.name, func(t *testing.T) {
				body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"` + param + `":` + tt.value + `}`
				r, err := ParseRequest([]byte(body))
				if tt.err == "" {
					if err != nil {
						t.Fatalf("ParseRequest: %v", err)
					}
					if !r.HasMaxTokens || r.MaxTokens != tt.want || r.MaxTokensLegacy != (param == "max_tokens") {
						t.Errorf("MaxTokens = %d (HasMaxTokens %v, legacy %v), want %d", r.MaxTokens, r.HasMaxTokens, r.MaxTokensLegacy, tt.want)
					}
					return
				}
				var e *llm.APIError
				if !errors.As(err, &e) {
					t.Fatalf("error %v (%T) is not *llm.APIError", err, err)
				}
				want := &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: param, Message: param + ": " + tt.err}
				if !reflect.DeepEqual(e, want) {
					t.Errorf("(-got +want):\n- %+v\n+ %+v", e, want)
				}
			})
		}
	}
}

// TestParseRequestRejectsBrokenText: a body with invalid UTF-8 or an unpaired
// UTF-16 surrogate escape is a 400 with param null, as Chat Completions
// answers it ("We could not parse the JSON body of your request"), with what
// and where the problem is. Before the fix the text fields were silently
// rewritten to U+FFFD and unknown members (Extra) passed through to the
// upstream byte for byte.
func TestParseRequestRejectsBrokenText(t *testing.T) {
	const pre = `{"model":"m","messages":[{"role":"user","content":"` // 51 bytes
	const post = `"}]}`
	const cannot = "We could not parse the JSON body of your request: "
	tests := []struct {
		name string
		body string
		want string // "" means accepted
	}{
		{name: "paired surrogates", body: pre + `\ud83d\ude00 ` + "\u00e9\u4e2d😀" + post},
		{name: "escaped backslash before u", body: pre + `\\ud800` + post},
		{name: "escaped backslashes then a real escape", body: pre + `\\\\\u00e9` + post},
		{name: "lone high surrogate", body: pre + `ab\ud800` + post, want: cannot + "no low surrogate in string at line 1 column 54 (char 53)"},
		{name: "high surrogate then a plain escape", body: pre + `\ud83d\n` + post, want: cannot + "no low surrogate in string at line 1 column 52 (char 51)"},
		{name: "high surrogate then a non-low escape", body: pre + `\uD83D\u0041` + post, want: cannot + "invalid low surrogate in string at line 1 column 52 (char 51)"},
		{name: "lone low surrogate", body: pre + `\ude00` + post, want: cannot + "invalid high surrogate in string at line 1 column 52 (char 51)"},
		{name: "after multi-byte text", body: pre + "é中" + `\udfff` + post, want: cannot + "invalid high surrogate in string at line 1 column 54 (char 53)"},
		{name: "in an unknown member", body: pre + `x"}],"x_trace":"\ud800"}`, want: cannot + "no low surrogate in string at line 1 column 68 (char 67)"},
		{name: "invalid UTF-8 byte", body: pre + "ok\xff" + post, want: cannot + "invalid UTF-8 encoding in string at line 1 column 54 (char 53)"},
		{name: "UTF-8 encoded surrogate", body: pre + "\xed\xa0\x80" + post, want: cannot + "invalid UTF-8 encoding in string at line 1 column 52 (char 51)"},
		{name: "first problem wins", body: pre + `\ud800` + "\xff" + post, want: cannot + "no low surrogate in string at line 1 column 52 (char 51)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ParseRequest: %v", err)
				}
				if _, err := EncodeRequest(r); err != nil {
					t.Fatalf("EncodeRequest: %v", err)
				}
				return
			}
			var e *llm.APIError
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T) is not *llm.APIError", err, err)
			}
			want := &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: tt.want}
			if !reflect.DeepEqual(e, want) {
				t.Errorf("(-got +want):\n- %+v\n+ %+v", e, want)
			}
		})
	}
}
