package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestRequestGolden parses every request in testdata/requests, compares the
// canonical value and the re-encoded body with golden files, and checks the
// round trip ParseRequest → EncodeRequest → ParseRequest is lossless.
func TestRequestGolden(t *testing.T) {
	for name, in := range inputs(t, "requests", ".json") {
		t.Run(name, func(t *testing.T) {
			r1, err := ParseRequest(in)
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", "requests", name+".canonical.golden"), dump(t, r1))
			out, err := EncodeRequest(r1)
			if err != nil {
				t.Fatalf("EncodeRequest: %v", err)
			}
			checkGolden(t, filepath.Join("testdata", "requests", name+".wire.golden"), out)
			if !json.Valid(out) {
				t.Fatalf("EncodeRequest wrote invalid JSON: %s", out)
			}
			if bytes.Contains(out, []byte("mesh_behavior")) {
				t.Errorf("EncodeRequest wrote mesh_behavior: %s", out)
			}
			r2, err := ParseRequest(out)
			if err != nil {
				t.Fatalf("ParseRequest(EncodeRequest(r)): %v", err)
			}
			want := *r1
			want.MeshBehavior = nil // never sent upstream
			mustEqual(t, "round trip", r2, &want)
			again, err := EncodeRequest(r2)
			if err != nil || !bytes.Equal(again, out) {
				t.Errorf("encoding is not stable (-got +want):\n%s", diff(again, out))
			}
		})
	}
}

// TestParseRequestFields checks the canonical fields that the golden dumps
// show, so a wrong golden cannot be accepted by -update unnoticed.
func TestParseRequestFields(t *testing.T) {
	read := func(t *testing.T, name string) *llm.Request {
		t.Helper()
		r, err := ParseRequest(inputs(t, "requests", ".json")[name])
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	t.Run("string system", func(t *testing.T) {
		r := read(t, "string_system")
		mustEqual(t, "system", r.System, []llm.Block{{Type: llm.BlockText, Text: "You are a terse assistant."}})
		if !r.SystemIsString || r.Format != llm.FormatAnthropic || r.MaxTokens != 1024 || !r.HasMaxTokens {
			t.Errorf("got SystemIsString=%v Format=%v MaxTokens=%d/%v", r.SystemIsString, r.Format, r.MaxTokens, r.HasMaxTokens)
		}
		mustEqual(t, "messages", r.Messages, []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Hello, Claude"}}, ContentIsString: true}})
	})
	t.Run("block system with cache_control", func(t *testing.T) {
		r := read(t, "block_system_cache_control")
		mustEqual(t, "system", r.System, []llm.Block{
			{Type: llm.BlockText, Text: "You are a helpful assistant."},
			{Type: llm.BlockText, Text: "Here is a long reference document ...", Extra: llm.Extra{"cache_control": json.RawMessage(`{"type": "ephemeral", "ttl": "1h"}`)}},
		})
		if r.SystemIsString {
			t.Error("SystemIsString = true for an array")
		}
	})
	t.Run("object system with mesh_behavior", func(t *testing.T) {
		r := read(t, "object_system_mesh_behavior")
		mustEqual(t, "system", r.System, []llm.Block{{Type: llm.BlockText, Text: "Answer in JSON."}})
		if !r.SystemIsString {
			t.Error("SystemIsString = false for string content")
		}
		if got, want := string(r.MeshBehavior), `{"hedge": {"after": "300ms"}, "fallback": ["gpt-5-mini"]}`; got != want {
			t.Errorf("MeshBehavior (-got +want):\n-%s\n+%s", got, want)
		}
	})
	t.Run("multi-turn with tools and images", func(t *testing.T) {
		r := read(t, "multi_turn_tools")
		user := r.Messages[0].Content
		mustEqual(t, "base64 image", user[1].Image, &llm.ImageSource{Kind: "base64", MediaType: "image/png", Data: "iVBORw0KGgo="})
		mustEqual(t, "url image", user[2].Image, &llm.ImageSource{Kind: "url", URL: "https://example.com/cat.jpg"})
		if user[3].Type != llm.BlockImage || user[3].Raw == nil || user[3].Image != nil {
			t.Errorf("file image: got %+v, want Raw kept", user[3])
		}
		if user[4].Type != "document" || string(user[4].Raw) == "" {
			t.Errorf("document: got %+v, want Raw kept", user[4])
		}
		asst := r.Messages[1].Content
		mustEqual(t, "thinking", asst[0], llm.Block{Type: llm.BlockThinking, Thinking: "The photo shows the Eiffel tower.", Signature: "EqQBCkYIARgCIkDt"})
		mustEqual(t, "redacted", asst[1], llm.Block{Type: llm.BlockRedactedThinking, Data: "EmwKAhgBEgy3va3pzix"})
		mustEqual(t, "citations null kept", asst[2].Extra, llm.Extra{"citations": json.RawMessage("null")})
		mustEqual(t, "tool_use", asst[3], llm.Block{Type: llm.BlockToolUse, ID: "toolu_01A", Name: "get_weather",
			Input: json.RawMessage(`{"city": "Paris", "unit": "celsius"}`), Extra: llm.Extra{"cache_control": json.RawMessage(`{"type": "ephemeral"}`)}})
		res := r.Messages[2].Content
		mustEqual(t, "string tool_result", res[0], llm.Block{Type: llm.BlockToolResult, ToolUseID: "toolu_01A",
			Content: []llm.Block{{Type: llm.BlockText, Text: "18°C, \"sunny\"\nwind 5 km/h"}}, ContentIsString: true})
		if !res[1].IsError || len(res[1].Content) != 2 || res[1].ContentIsString || res[1].Content[1].Image == nil {
			t.Errorf("block tool_result: got %+v", res[1])
		}
		mustEqual(t, "tool_result without content", res[2], llm.Block{Type: llm.BlockToolResult, ToolUseID: "toolu_01C"})
		if got, want := res[3].Text, "Thanks! <b>&</b> \u2028 done"; got != want {
			t.Errorf("escaped text = %q, want %q", got, want)
		}
	})
	t.Run("tools and tool_choice", func(t *testing.T) {
		r := read(t, "tools_tool_choice_auto")
		strict := true
		mustEqual(t, "client tool", r.Tools[0], llm.Tool{Name: "get_weather", Description: "Get the weather.",
			InputSchema: json.RawMessage(`{"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}`),
			Strict:      &strict, Extra: llm.Extra{"cache_control": json.RawMessage(`{"type": "ephemeral"}`)}})
		mustEqual(t, "explicit custom tool", r.Tools[1], llm.Tool{Name: "get_time", InputSchema: json.RawMessage(`{"type": "object"}`)})
		if tl := r.Tools[2]; tl.Type != "web_search_20260318" || tl.Name != "web_search" || tl.Raw == nil {
			t.Errorf("server tool: got %+v", tl)
		}
		mustEqual(t, "tool_choice", r.ToolChoice, &llm.ToolChoice{Type: llm.ToolChoiceAuto, DisableParallel: &strict})
		no := false
		mustEqual(t, "any", read(t, "tool_choice_any").ToolChoice, &llm.ToolChoice{Type: llm.ToolChoiceAny, DisableParallel: &no})
		mustEqual(t, "tool", read(t, "tool_choice_tool").ToolChoice, &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: "f"})
		mustEqual(t, "none", read(t, "tool_choice_none").ToolChoice, &llm.ToolChoice{Type: llm.ToolChoiceNone})
		mustEqual(t, "unknown form", read(t, "tool_choice_unknown_form").ToolChoice,
			&llm.ToolChoice{Type: "allowed_tools", Raw: json.RawMessage(`{"type":"allowed_tools","tools":[{"name":"f"}]}`)})
	})
	t.Run("sampling", func(t *testing.T) {
		r := read(t, "sampling")
		if r.Temperature == nil || *r.Temperature != 0.7 || r.TopP == nil || *r.TopP != 0.95 || r.TopK == nil || *r.TopK != 40 {
			t.Errorf("sampling: temperature %v top_p %v top_k %v", r.Temperature, r.TopP, r.TopK)
		}
		if !r.HasMaxTokens || r.MaxTokens != 0 {
			t.Errorf("max_tokens 0: got %d/%v, want 0/true", r.MaxTokens, r.HasMaxTokens)
		}
		mustEqual(t, "stop_sequences", r.StopSequences, []string{"\n\nHuman:", "END"})
		if r.UserID != "user-1234" || !r.Stream {
			t.Errorf("UserID=%q Stream=%v", r.UserID, r.Stream)
		}
		mustEqual(t, "metadata extra", r.MetadataExtra, llm.Extra{"tenant": json.RawMessage(`"acme"`)})
	})
	t.Run("unknown top-level members", func(t *testing.T) {
		r := read(t, "unknown_top_level")
		var keys []string
		for k := range r.Extra {
			keys = append(keys, k)
		}
		for _, k := range []string{"thinking", "output_config", "service_tier", "container", "inference_geo", "cache_control"} {
			if _, ok := r.Extra[k]; !ok {
				t.Errorf("Extra lacks %q (has %v)", k, keys)
			}
		}
		if len(r.Extra) != 6 {
			t.Errorf("Extra has %d members %v, want 6", len(r.Extra), keys)
		}
		if string(r.MeshBehavior) != `{"timeout": "20s"}` {
			t.Errorf("MeshBehavior = %s", r.MeshBehavior)
		}
		if r.Messages[1].Role != llm.RoleSystem {
			t.Errorf("mid-conversation system role = %q", r.Messages[1].Role)
		}
		mustEqual(t, "message extra", r.Messages[0].Extra, llm.Extra{"x_trace": json.RawMessage(`"abc"`)})
	})
}

func TestParseRequestNulls(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],
		"system":null,"temperature":null,"top_p":null,"top_k":null,"tools":null,"tool_choice":null,
		"stop_sequences":null,"metadata":null}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 1, HasMaxTokens: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "x"}}, ContentIsString: true}}}
	mustEqual(t, "nulls read as absent", r, want)
}

func TestParseRequestErrors(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const base = `"model":"m","max_tokens":10,`
	tests := []struct {
		name string
		body string
		want string
	}{
		{name: "empty body", body: ``, want: "invalid JSON: unexpected end of JSON input"},
		{name: "truncated JSON", body: `{"model":"m"`, want: "invalid JSON: unexpected end of JSON input"},
		{name: "syntax error", body: `{"model":}`, want: "invalid JSON: invalid character '}' looking for beginning of value"},
		{name: "not an object", body: `[1]`, want: "request body: expected a JSON object, got an array"},
		{name: "missing model", body: `{"max_tokens":10,` + msgs + `}`, want: "model: field required"},
		{name: "model not a string", body: `{"model":5,"max_tokens":10,` + msgs + `}`, want: "model: expected a string, got a number"},
		{name: "empty model", body: `{"model":"","max_tokens":10,` + msgs + `}`, want: "model: must not be empty"},
		{name: "missing max_tokens", body: `{"model":"m",` + msgs + `}`, want: "max_tokens: field required"},
		{name: "null max_tokens", body: `{"model":"m","max_tokens":null,` + msgs + `}`, want: "max_tokens: field required"},
		{name: "max_tokens string", body: `{"model":"m","max_tokens":"10",` + msgs + `}`, want: "max_tokens: expected an integer, got a string"},
		{name: "max_tokens fraction", body: `{"model":"m","max_tokens":1.5,` + msgs + `}`, want: "max_tokens: expected an integer, got 1.5"},
		{name: "max_tokens negative", body: `{"model":"m","max_tokens":-1,` + msgs + `}`, want: "max_tokens: must be greater than or equal to 0"},
		{name: "missing messages", body: `{` + base[:len(base)-1] + `}`, want: "messages: field required"},
		{name: "empty messages", body: `{` + base + `"messages":[]}`, want: "messages: must contain at least one message"},
		{name: "messages object", body: `{` + base + `"messages":{}}`, want: "messages: expected an array, got an object"},
		{name: "message not object", body: `{` + base + `"messages":["hi"]}`, want: "messages.0: expected an object, got a string"},
		{name: "bad role", body: `{` + base + `"messages":[{"role":"user","content":"a"},{"role":"tool","content":"b"}]}`, want: `messages.1.role: must be "user", "assistant" or "system", got "tool"`},
		{name: "developer role", body: `{` + base + `"messages":[{"role":"developer","content":"a"}]}`, want: `messages.0.role: must be "user", "assistant" or "system", got "developer"`},
		{name: "missing role", body: `{` + base + `"messages":[{"content":"a"}]}`, want: "messages.0.role: field required"},
		{name: "missing content", body: `{` + base + `"messages":[{"role":"user"}]}`, want: "messages.0.content: field required"},
		{name: "content number", body: `{` + base + `"messages":[{"role":"user","content":1}]}`, want: "messages.0.content: expected a string or an array of content blocks, got a number"},
		{name: "block without type", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"text":"b"}]}]}`, want: "messages.0.content.1.type: field required"},
		{name: "block type not string", body: `{` + base + `"messages":[{"role":"user","content":[{"type":1}]}]}`, want: "messages.0.content.0.type: expected a string, got a number"},
		{name: "block not object", body: `{` + base + `"messages":[{"role":"user","content":["a"]}]}`, want: "messages.0.content.0: expected an object, got a string"},
		{name: "text without text", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"text"}]}]}`, want: "messages.0.content.0.text: field required"},
		{name: "text not string", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"text","text":["a"]}]}]}`, want: "messages.0.content.0.text: expected a string, got an array"},
		{name: "tool_use input string", body: `{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":"{}"}]}]}`, want: "messages.0.content.0.input: expected an object, got a string"},
		{name: "tool_use without input", body: `{` + base + `"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]}]}`, want: "messages.0.content.0.input: field required"},
		{name: "tool_result without id", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","content":"x"}]}]}`, want: "messages.0.content.0.tool_use_id: field required"},
		{name: "tool_result is_error string", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","is_error":"yes"}]}]}`, want: "messages.0.content.0.is_error: expected a boolean, got a string"},
		{name: "tool_result nested bad block", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text"}]}]}]}`, want: "messages.0.content.0.content.0.text: field required"},
		{name: "image without source", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"image"}]}]}`, want: "messages.0.content.0.source: field required"},
		{name: "image source without type", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":{"data":"x"}}]}]}`, want: "messages.0.content.0.source.type: field required"},
		{name: "image source not object", body: `{` + base + `"messages":[{"role":"user","content":[{"type":"image","source":"x"}]}]}`, want: "messages.0.content.0.source: expected an object, got a string"},
		{name: "thinking not string", body: `{` + base + `"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":1}]}]}`, want: "messages.0.content.0.thinking: expected a string, got a number"},
		{name: "system number", body: `{` + base + msgs + `,"system":1}`, want: "system: expected a string or an array of content blocks, got a number"},
		{name: "system block bad", body: `{` + base + msgs + `,"system":[{"type":"text","text":1}]}`, want: "system.0.text: expected a string, got a number"},
		{name: "system object unknown member", body: `{` + base + msgs + `,"system":{"content":"x","extra":1}}`, want: "system.extra: unknown member of the system object (allowed: content, mesh_behavior)"},
		{name: "system object without content", body: `{` + base + msgs + `,"system":{"mesh_behavior":{}}}`, want: "system.content: field required"},
		{name: "system mesh_behavior not object", body: `{` + base + msgs + `,"system":{"content":"x","mesh_behavior":[]}}`, want: "system.mesh_behavior: expected an object, got an array"},
		{name: "mesh_behavior twice", body: `{` + base + msgs + `,"system":{"content":"x","mesh_behavior":{}},"mesh_behavior":{}}`, want: "mesh_behavior: given both at the top level and in system"},
		{name: "mesh_behavior not object", body: `{` + base + msgs + `,"mesh_behavior":"fast"}`, want: "mesh_behavior: expected an object, got a string"},
		{name: "temperature string", body: `{` + base + msgs + `,"temperature":"0.5"}`, want: "temperature: expected a number, got a string"},
		{name: "temperature out of range", body: `{` + base + msgs + `,"temperature":1e400}`, want: "temperature: number 1e400 out of range"},
		{name: "top_p bool", body: `{` + base + msgs + `,"top_p":true}`, want: "top_p: expected a number, got a boolean"},
		{name: "top_k fraction", body: `{` + base + msgs + `,"top_k":0.5}`, want: "top_k: expected an integer, got 0.5"},
		{name: "stream string", body: `{` + base + msgs + `,"stream":"true"}`, want: "stream: expected a boolean, got a string"},
		{name: "stop_sequences element", body: `{` + base + msgs + `,"stop_sequences":["a",1]}`, want: "stop_sequences.1: expected a string, got a number"},
		{name: "stop_sequences string", body: `{` + base + msgs + `,"stop_sequences":"a"}`, want: "stop_sequences: expected an array, got a string"},
		{name: "metadata string", body: `{` + base + msgs + `,"metadata":"u"}`, want: "metadata: expected an object, got a string"},
		{name: "metadata user_id number", body: `{` + base + msgs + `,"metadata":{"user_id":1}}`, want: "metadata.user_id: expected a string, got a number"},
		{name: "tools object", body: `{` + base + msgs + `,"tools":{}}`, want: "tools: expected an array, got an object"},
		{name: "tool without name", body: `{` + base + msgs + `,"tools":[{"input_schema":{}}]}`, want: "tools.0.name: field required"},
		{name: "tool schema not object", body: `{` + base + msgs + `,"tools":[{"name":"f","input_schema":"x"}]}`, want: "tools.0.input_schema: expected an object, got a string"},
		{name: "tool strict string", body: `{` + base + msgs + `,"tools":[{"name":"f","strict":"yes"}]}`, want: "tools.0.strict: expected a boolean, got a string"},
		{name: "tool_choice without type", body: `{` + base + msgs + `,"tool_choice":{"name":"f"}}`, want: "tool_choice.type: field required"},
		{name: "tool_choice tool without name", body: `{` + base + msgs + `,"tool_choice":{"type":"tool"}}`, want: `tool_choice.name: field required when type is "tool"`},
		{name: "tool_choice string", body: `{` + base + msgs + `,"tool_choice":"auto"}`, want: "tool_choice: expected an object, got a string"},
		{name: "tool_choice disable string", body: `{` + base + msgs + `,"tool_choice":{"type":"any","disable_parallel_tool_use":"no"}}`, want: "tool_choice.disable_parallel_tool_use: expected a boolean, got a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRequest([]byte(tt.body))
			if err == nil {
				t.Fatalf("ParseRequest succeeded: %+v", r)
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %T is not *llm.APIError: %v", err, err)
			}
			want := &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: tt.want}
			mustEqual(t, "error", ae, want)
		})
	}
}

// TestEncodeRequestHoistsSystem covers the one cross-format step: system and
// developer messages of an OpenAI-origin request move to the top-level system.
func TestEncodeRequestHoistsSystem(t *testing.T) {
	text := func(s string) []llm.Block { return []llm.Block{{Type: llm.BlockText, Text: s}} }
	cache := llm.Extra{"cache_control": json.RawMessage(`{"type":"ephemeral"}`)}
	tests := []struct {
		name       string
		req        llm.Request
		wantSystem []llm.Block
		wantString bool
	}{
		{name: "openai_strings", wantSystem: text("Be brief.\n\nUse metric units."), wantString: true, req: llm.Request{Format: llm.FormatOpenAI, Model: "m", MaxTokens: 5, HasMaxTokens: true, Messages: []llm.Message{
			{Role: llm.RoleSystem, Content: text("Be brief."), ContentIsString: true},
			{Role: llm.RoleUser, Content: text("hi"), ContentIsString: true},
			{Role: llm.RoleDeveloper, Content: text("Use metric units."), ContentIsString: true},
		}}},
		{name: "openai_blocks_after_top_level", wantSystem: []llm.Block{
			{Type: llm.BlockText, Text: "Top.", Extra: cache}, {Type: llm.BlockText, Text: "Part one."}, {Type: llm.BlockText, Text: "Part two.", Extra: cache},
		}, req: llm.Request{Format: llm.FormatOpenAI, Model: "m", MaxTokens: 5, HasMaxTokens: true,
			System: []llm.Block{{Type: llm.BlockText, Text: "Top.", Extra: cache}},
			Messages: []llm.Message{
				{Role: llm.RoleSystem, Content: []llm.Block{{Type: llm.BlockText, Text: "Part one."}, {Type: llm.BlockText, Text: ""}, {Type: llm.BlockText, Text: "Part two.", Extra: cache}}},
				{Role: llm.RoleUser, Content: text("hi")},
			}}},
		{name: "anthropic_system_turn_stays", wantSystem: text("Top.\n\nDev note."), wantString: true, req: llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 5, HasMaxTokens: true,
			System: text("Top."), SystemIsString: true,
			Messages: []llm.Message{
				{Role: llm.RoleUser, Content: text("hi"), ContentIsString: true},
				{Role: llm.RoleSystem, Content: text("Now be formal.")},
				{Role: llm.RoleDeveloper, Content: text("Dev note."), ContentIsString: true},
			}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := EncodeRequest(&tt.req)
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, filepath.Join("testdata", "requests", "hoist_"+tt.name+".wire.golden"), out)
			r, err := ParseRequest(out)
			if err != nil {
				t.Fatalf("re-parsing: %v", err)
			}
			for _, m := range r.Messages {
				if m.Role == llm.RoleDeveloper || (m.Role == llm.RoleSystem && tt.req.Format != llm.FormatAnthropic) {
					t.Errorf("message with role %s was not hoisted", m.Role)
				}
			}
			mustEqual(t, "system", r.System, tt.wantSystem)
			if r.SystemIsString != tt.wantString {
				t.Errorf("SystemIsString = %v, want %v", r.SystemIsString, tt.wantString)
			}
		})
	}
}

func TestEncodeRequestRejectsInvalidRaw(t *testing.T) {
	base := func() *llm.Request {
		return &llm.Request{Model: "m", MaxTokens: 1, HasMaxTokens: true, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "x"}}}}}
	}
	nan := 0.0
	nan /= nan
	tests := []struct {
		name   string
		mutate func(r *llm.Request)
		want   string
	}{
		{name: "extra", mutate: func(r *llm.Request) { r.Extra = llm.Extra{"thinking": json.RawMessage(`{`)} }, want: "thinking is not valid JSON"},
		{name: "empty extra", mutate: func(r *llm.Request) { r.Extra = llm.Extra{"x": nil} }, want: "x is not valid JSON"},
		{name: "block raw", mutate: func(r *llm.Request) { r.Messages[0].Content[0].Raw = json.RawMessage(`nope`) }, want: "messages.0.content.0 is not valid JSON"},
		{name: "tool input", mutate: func(r *llm.Request) {
			r.Messages[0].Content[0] = llm.Block{Type: llm.BlockToolUse, Input: json.RawMessage(`{"a":}`)}
		}, want: "messages.0.content.0.input is not valid JSON"},
		{name: "schema", mutate: func(r *llm.Request) {
			r.Tools = []llm.Tool{{Name: "f", InputSchema: json.RawMessage(`[`)}}
		}, want: "tools.0.input_schema is not valid JSON"},
		{name: "NaN temperature", mutate: func(r *llm.Request) { r.Temperature = &nan }, want: "temperature: unsupported number NaN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := base()
			tt.mutate(r)
			_, err := EncodeRequest(r)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("EncodeRequest error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestEncodeRequestNeverWritesMeshBehavior(t *testing.T) {
	r := &llm.Request{Model: "m", MaxTokens: 1, HasMaxTokens: true,
		Messages:     []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "x"}}, ContentIsString: true}},
		MeshBehavior: json.RawMessage(`{"a":1}`),
		Extra:        llm.Extra{"mesh_behavior": json.RawMessage(`{"b":2}`), "z": json.RawMessage(`1`)}}
	out, err := EncodeRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"z":1}`; got != want {
		t.Errorf("EncodeRequest (-got +want):\n-%s\n+%s", got, want)
	}
}

// TestParseRequestMaxTokensBound: max_tokens is an integer from 0 to
// MaxTokensLimit. The Messages API rejects a value above the model's output
// limit with 400 "max_tokens: N > M, which is the maximum allowed number of
// output tokens for <model>"; Keel does not know the model's limit before
// routing, so it applies the bound every integer field of both APIs has
// (int32) and leaves the model's limit to the upstream. Before the fix
// 2^31 and larger integers up to 2^63 were accepted and sent upstream, and
// integers beyond int64 were reported as non-integers.
func TestParseRequestMaxTokensBound(t *testing.T) {
	const tooLarge = ", which is the maximum allowed number of output tokens"
	tests := []struct {
		name  string
		value string
		want  int    // when err is ""
		err   string // the whole message
	}{
		{name: "zero", value: `0`, want: 0},
		{name: "typical", value: `1024`, want: 1024},
		{name: "integral fraction", value: `1024.0`, want: 1024},
		{name: "integral exponent", value: `1e3`, want: 1000},
		{name: "negative zero", value: `-0`, want: 0},
		{name: "at the bound", value: `2147483647`, want: MaxTokensLimit},
		{name: "just above the bound", value: `2147483648`, err: "max_tokens: 2147483648 > 2147483647" + tooLarge},
		{name: "above the bound as exponent", value: `1e10`, err: "max_tokens: 1e10 > 2147483647" + tooLarge},
		{name: "beyond int64", value: `99999999999999999999999`, err: "max_tokens: 99999999999999999999999 > 2147483647" + tooLarge},
		{name: "beyond float64", value: `1e400`, err: "max_tokens: 1e400 > 2147483647" + tooLarge},
		{name: "long literal is cut in the message", value: `1` + strings.Repeat("0", 100), err: "max_tokens: 1" + strings.Repeat("0", 31) + "… > 2147483647" + tooLarge},
		{name: "negative", value: `-1`, err: "max_tokens: must be greater than or equal to 0"},
		{name: "negative beyond int64", value: `-99999999999999999999999`, err: "max_tokens: must be greater than or equal to 0"},
		{name: "negative beyond float64", value: `-1e400`, err: "max_tokens: must be greater than or equal to 0"},
		{name: "fraction", value: `1.5`, err: "max_tokens: expected an integer, got 1.5"},
		{name: "fraction above the bound", value: `2147483647.5`, err: "max_tokens: expected an integer, got 2147483647.5"},
		{name: "string", value: `"1024"`, err: "max_tokens: expected an integer, got a string"},
		{name: "boolean", value: `true`, err: "max_tokens: expected an integer, got a boolean"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":` + tt.value + `,"messages":[{"role":"user","content":"hi"}]}`
			r, err := ParseRequest([]byte(body))
			if tt.err == "" {
				if err != nil {
					t.Fatalf("ParseRequest: %v", err)
				}
				if !r.HasMaxTokens || r.MaxTokens != tt.want {
					t.Errorf("MaxTokens = %d (HasMaxTokens %v), want %d", r.MaxTokens, r.HasMaxTokens, tt.want)
				}
				return
			}
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T) is not *llm.APIError", err, err)
			}
			mustEqual(t, "error", ae, &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: tt.err})
		})
	}
}

// TestParseRequestRejectsBrokenText: a body with invalid UTF-8 or an unpaired
// UTF-16 surrogate escape is a 400, as the Messages API answers it ("The
// request body is not valid JSON: no low surrogate in string: line 1 column
// N (char N-1)"; anthropics/claude-code issues 6508, 8272, 9586 quote it).
// Before the fix the text fields were silently rewritten to U+FFFD and
// unknown members (Extra) passed through to the upstream byte for byte.
func TestParseRequestRejectsBrokenText(t *testing.T) {
	const pre = `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"` // 66 bytes
	const post = `"}]}`
	const notJSON = "The request body is not valid JSON: "
	tests := []struct {
		name string
		body string
		want string // "" means accepted
	}{
		{name: "paired surrogates", body: pre + `\ud83d\ude00 ` + "\u00e9\u4e2d😀" + post},
		{name: "escaped backslash before u", body: pre + `\\ud800` + post},
		{name: "escaped backslashes then a real escape", body: pre + `\\\\\u00e9` + post},
		{name: "lone high surrogate", body: pre + `ab\ud800` + post, want: notJSON + "no low surrogate in string: line 1 column 69 (char 68)"},
		{name: "high surrogate then a plain escape", body: pre + `\ud83d\n` + post, want: notJSON + "no low surrogate in string: line 1 column 67 (char 66)"},
		{name: "high surrogate then a non-low escape", body: pre + `\uD83D\u0041` + post, want: notJSON + "invalid low surrogate in string: line 1 column 67 (char 66)"},
		{name: "two high surrogates", body: pre + `\ud83d\ud83d\ude00` + post, want: notJSON + "invalid low surrogate in string: line 1 column 67 (char 66)"},
		{name: "lone low surrogate", body: pre + `\ude00` + post, want: notJSON + "invalid high surrogate in string: line 1 column 67 (char 66)"},
		{name: "after multi-byte text", body: pre + "é中" + `\udfff` + post, want: notJSON + "invalid high surrogate in string: line 1 column 69 (char 68)"},
		{name: "on a later line", body: "{\n\"model\":\"m\",\n\"x\":\"\\udbff\"}", want: notJSON + "no low surrogate in string: line 3 column 6 (char 20)"},
		{name: "in an unknown member", body: `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"x"}],"x_trace":"\ud800"}`, want: notJSON + "no low surrogate in string: line 1 column 83 (char 82)"},
		{name: "in a member name", body: `{"\udc00":1,"model":"m"}`, want: notJSON + "invalid high surrogate in string: line 1 column 3 (char 2)"},
		{name: "invalid UTF-8 byte", body: pre + "ok\xff" + post, want: notJSON + "invalid UTF-8 encoding in string: line 1 column 69 (char 68)"},
		{name: "truncated UTF-8 sequence", body: pre + "\xe4\xb8" + post, want: notJSON + "invalid UTF-8 encoding in string: line 1 column 67 (char 66)"},
		{name: "UTF-8 encoded surrogate", body: pre + "\xed\xa0\x80" + post, want: notJSON + "invalid UTF-8 encoding in string: line 1 column 67 (char 66)"},
		{name: "first problem wins", body: pre + "\xff" + `\ud800` + post, want: notJSON + "invalid UTF-8 encoding in string: line 1 column 67 (char 66)"},
		{name: "first problem wins, escape first", body: pre + `\ud800` + "\xff" + post, want: notJSON + "no low surrogate in string: line 1 column 67 (char 66)"},
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
			var ae *llm.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("error %v (%T) is not *llm.APIError", err, err)
			}
			mustEqual(t, "error", ae, &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: tt.want})
		})
	}
}
