package sim

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

func parseAnthropic(t testing.TB, body string) *llm.Request {
	t.Helper()
	r, err := anthropic.ParseRequest([]byte(body))
	if err != nil {
		t.Fatalf("anthropic.ParseRequest: %v\n%s", err, body)
	}
	return r
}

func parseOpenAI(t testing.TB, body string) *llm.Request {
	t.Helper()
	r, err := openai.ParseRequest([]byte(body))
	if err != nil {
		t.Fatalf("openai.ParseRequest: %v\n%s", err, body)
	}
	return r
}

// userReq is a one-turn request in the canonical model.
func userReq(model, text string) *llm.Request {
	return &llm.Request{Model: model, Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
}

const weatherTool = `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer","minimum":1,"maximum":7},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"detailed":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"where":{"type":"object","properties":{"lat":{"type":"number"},"lon":{"type":"number"}},"required":["lat","lon"]}},"required":["city"]}`

// The same conversations written in both wire formats must get the same answer.
func TestAnswerFormatIndependent(t *testing.T) {
	cases := []struct {
		name      string
		anthropic string
		openai    string
	}{
		{
			name:      "one turn",
			anthropic: `{"model":"sim-opus","max_tokens":1024,"messages":[{"role":"user","content":"Hello there"}]}`,
			openai:    `{"model":"sim-opus","max_completion_tokens":1024,"messages":[{"role":"user","content":"Hello there"}]}`,
		},
		{
			name:      "system and turns",
			anthropic: `{"model":"sim-sonnet","max_tokens":1024,"system":[{"type":"text","text":"You are terse."}],"messages":[{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi."},{"role":"user","content":[{"type":"text","text":"Tell me about queues"}]}]}`,
			openai:    `{"model":"sim-sonnet","max_tokens":1024,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"Hello there"},{"role":"assistant","content":"Hi."},{"role":"user","content":[{"type":"text","text":"Tell me about queues"}]}]}`,
		},
		{
			name:      "tool round trip",
			anthropic: `{"model":"sim-haiku","max_tokens":1024,"tools":[{"name":"get_weather","description":"Weather now","input_schema":` + weatherTool + `}],"messages":[{"role":"user","content":"get_weather for Paris"},{"role":"assistant","content":[{"type":"text","text":"Calling get_weather."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny, 21C"}]}]}`,
			openai:    `{"model":"sim-haiku","max_completion_tokens":1024,"tools":[{"type":"function","function":{"name":"get_weather","description":"Weather now","parameters":` + weatherTool + `}}],"messages":[{"role":"user","content":"get_weather for Paris"},{"role":"assistant","content":"Calling get_weather.","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},{"role":"tool","tool_call_id":"toolu_1","content":"sunny, 21C"}]}`,
		},
		{
			name:      "tool call",
			anthropic: `{"model":"sim-opus","max_tokens":1024,"tools":[{"name":"get_weather","input_schema":` + weatherTool + `}],"messages":[{"role":"user","content":"please get_weather"}]}`,
			openai:    `{"model":"sim-opus","max_completion_tokens":1024,"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weatherTool + `}}],"messages":[{"role":"user","content":"please get_weather"}]}`,
		},
		{
			name:      "stop sequence and cap",
			anthropic: `{"model":"sim-opus","max_tokens":9,"stop_sequences":["zzz"],"messages":[{"role":"user","content":"Count"}]}`,
			openai:    `{"model":"sim-opus","max_completion_tokens":9,"stop":["zzz"],"messages":[{"role":"user","content":"Count"}]}`,
		},
	}
	cfg := DefaultConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := Answer(cfg, parseAnthropic(t, tc.anthropic))
			o := Answer(cfg, parseOpenAI(t, tc.openai))
			if !reflect.DeepEqual(a, o) {
				t.Errorf("answers differ (-anthropic +openai):\n-%+v\n+%+v", a, o)
			}
			if a.Usage.OutputTokens == 0 || a.Usage.InputTokens == 0 {
				t.Errorf("usage = %+v, want non-zero counts", a.Usage)
			}
		})
	}
}

func TestAnswerShape(t *testing.T) {
	cfg := DefaultConfig()
	seen := map[string]bool{}
	for i := range 200 {
		r := Answer(cfg, userReq("sim-opus", fmt.Sprintf("question %d", i)))
		text := r.Text()
		n := len(strings.Fields(text))
		if n < 12 || n > 48 {
			t.Fatalf("answer %d has %d words, want 12..48: %q", i, n, text)
		}
		if r.Usage.OutputTokens != n {
			t.Fatalf("answer %d: output_tokens = %d, want %d words", i, r.Usage.OutputTokens, n)
		}
		if r.StopReason != llm.StopEndTurn || !strings.HasSuffix(text, ".") {
			t.Fatalf("answer %d: stop %q, text %q", i, r.StopReason, text)
		}
		seen[text] = true
	}
	if len(seen) < 195 {
		t.Errorf("only %d distinct answers of 200", len(seen))
	}
	// The model and the seed change the answer; the same inputs never do.
	base := Answer(cfg, userReq("sim-opus", "hi")).Text()
	if got := Answer(cfg, userReq("sim-opus", "hi")).Text(); got != base {
		t.Errorf("same request, different answers: %q vs %q", got, base)
	}
	if Answer(cfg, userReq("sim-haiku", "hi")).Text() == base {
		t.Error("model does not change the answer")
	}
	cfg2 := cfg
	cfg2.Seed = 2
	if Answer(cfg2, userReq("sim-opus", "hi")).Text() == base {
		t.Error("seed does not change the answer")
	}
}

func TestInputTokens(t *testing.T) {
	r := &llm.Request{
		Model:  "sim-opus",
		System: []llm.Block{{Type: llm.BlockText, Text: "be brief"}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "one two three"}}},
			{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "four five"}}},
			{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "six"}}},
		},
		Tools: []llm.Tool{{Name: "t", Description: "does things"}},
	}
	// 2 system words, 3 turns of 1 + 3, 2, 1 words, one tool of 1 + 2.
	if got, want := Answer(DefaultConfig(), r).Usage.InputTokens, 2+(1+3)+(1+2)+(1+1)+(1+2); got != want {
		t.Errorf("input_tokens = %d, want %d", got, want)
	}
}

func TestPrefillContinuation(t *testing.T) {
	cfg := DefaultConfig()
	for _, q := range []string{"first question", "second question", "a third one"} {
		base := userReq("sim-sonnet", q)
		full := Answer(cfg, base).Text()
		for k := 0; k <= len(full); k++ {
			req := userReq("sim-sonnet", q)
			req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: full[:k]}}})
			got := Answer(cfg, req)
			if got.Text() != full[k:] {
				t.Fatalf("prefill %q: got %q, want %q", full[:k], got.Text(), full[k:])
			}
			if k == len(full) && got.Usage.OutputTokens != 0 {
				t.Fatalf("prefill of the whole answer: output_tokens = %d, want 0", got.Usage.OutputTokens)
			}
		}
		// A prefill the answer does not start with gets the whole answer.
		req := userReq("sim-sonnet", q)
		req.Messages = append(req.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "Something else"}}})
		if got := Answer(cfg, req).Text(); got != full {
			t.Errorf("foreign prefill: got %q, want the full answer %q", got, full)
		}
	}
}

// A stream cut at any point of an answer limited by a stop sequence resumes
// to the same text.
func TestPrefillWithStopSequence(t *testing.T) {
	cfg := DefaultConfig()
	full := Answer(cfg, userReq("sim-opus", "stop here")).Text()
	ws := strings.Fields(full)
	stop := " " + ws[len(ws)/2]
	req := userReq("sim-opus", "stop here")
	req.StopSequences = []string{stop}
	want := Answer(cfg, req)
	if want.StopReason != llm.StopSequence || want.StopSequence != stop {
		t.Fatalf("stop = %q %q, want stop_sequence %q", want.StopReason, want.StopSequence, stop)
	}
	text := want.Text()
	for k := 0; k <= len(text); k++ {
		r := userReq("sim-opus", "stop here")
		r.StopSequences = []string{stop}
		r.Messages = append(r.Messages, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: text[:k]}}})
		got := Answer(cfg, r)
		if got.Text() != text[k:] || got.StopReason != llm.StopSequence {
			t.Fatalf("k=%d: got %q (%s), want %q", k, got.Text(), got.StopReason, text[k:])
		}
	}
}

func TestStopSequences(t *testing.T) {
	cfg := DefaultConfig()
	full := Answer(cfg, userReq("sim-opus", "stops")).Text()
	ws := strings.Fields(full)
	cases := []struct {
		name     string
		stops    []string
		wantText string
		wantSeq  string
	}{
		{"absent", []string{"qqqq"}, full, ""},
		{"second word", []string{" " + ws[1]}, ws[0], " " + ws[1]},
		{"mid word", []string{ws[2][1:]}, full[:strings.Index(full, ws[2][1:])], ws[2][1:]},
		{"spans words", []string{ws[3] + " " + ws[4]}, full[:strings.Index(full, ws[3]+" "+ws[4])], ws[3] + " " + ws[4]},
		{"earliest wins", []string{" " + ws[5], " " + ws[1]}, ws[0], " " + ws[1]},
		{"at start", []string{ws[0][:1]}, "", ws[0][:1]},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := userReq("sim-opus", "stops")
			r.StopSequences = tc.stops
			got := Answer(cfg, r)
			if got.Text() != tc.wantText {
				t.Errorf("text = %q, want %q", got.Text(), tc.wantText)
			}
			if got.StopSequence != tc.wantSeq {
				t.Errorf("stop_sequence = %q, want %q", got.StopSequence, tc.wantSeq)
			}
			wantReason := llm.StopSequence
			if tc.wantSeq == "" {
				wantReason = llm.StopEndTurn
			}
			if got.StopReason != wantReason {
				t.Errorf("stop_reason = %q, want %q", got.StopReason, wantReason)
			}
		})
	}
}

func TestMaxTokens(t *testing.T) {
	cfg := DefaultConfig()
	full := Answer(cfg, userReq("sim-opus", "cap me"))
	toks := splitWords(full.Text())
	for _, n := range []int{0, 1, 5, len(toks) - 1, len(toks), len(toks) + 10} {
		r := userReq("sim-opus", "cap me")
		r.MaxTokens, r.HasMaxTokens = n, true
		got := Answer(cfg, r)
		k := min(n, len(toks))
		if want := strings.Join(toks[:k], ""); got.Text() != want {
			t.Errorf("max_tokens %d: text %q, want %q", n, got.Text(), want)
		}
		if got.Usage.OutputTokens != k {
			t.Errorf("max_tokens %d: output_tokens = %d, want %d", n, got.Usage.OutputTokens, k)
		}
		wantStop := llm.StopMaxTokens
		if n >= len(toks) {
			wantStop = llm.StopEndTurn
		}
		if got.StopReason != wantStop {
			t.Errorf("max_tokens %d: stop_reason %q, want %q", n, got.StopReason, wantStop)
		}
	}
}

func toolReq(text string, choice *llm.ToolChoice, names ...string) *llm.Request {
	r := userReq("sim-opus", text)
	for _, n := range names {
		r.Tools = append(r.Tools, llm.Tool{Name: n, InputSchema: json.RawMessage(weatherTool)})
	}
	r.ToolChoice = choice
	return r
}

func toolNames(r *llm.Response) []string {
	var out []string
	for _, b := range r.Content {
		if b.Type == llm.BlockToolUse {
			out = append(out, b.Name)
		}
	}
	return out
}

func TestToolCalls(t *testing.T) {
	cfg := DefaultConfig()
	no := false
	cases := []struct {
		name     string
		req      *llm.Request
		want     []string
		wantText string
	}{
		{"named by mention", toolReq("use get_time please", nil, "get_weather", "get_time"), []string{"get_time"}, "Calling get_time."},
		{"parallel in order of mention", toolReq("get_time then get_weather", nil, "get_weather", "get_time"), []string{"get_time", "get_weather"}, "Calling get_time and get_weather."},
		{"parallel disabled", func() *llm.Request {
			r := toolReq("get_time then get_weather", nil, "get_weather", "get_time")
			r.ParallelToolCalls = &no
			return r
		}(), []string{"get_time"}, "Calling get_time."},
		{"auto without mention", toolReq("hello", nil, "get_weather"), nil, ""},
		{"any without mention", toolReq("hello", &llm.ToolChoice{Type: llm.ToolChoiceAny}, "get_weather", "get_time"), []string{"get_weather"}, "Calling get_weather."},
		{"forced tool", toolReq("get_weather now", &llm.ToolChoice{Type: llm.ToolChoiceTool, Name: "get_time"}, "get_weather", "get_time"), []string{"get_time"}, "Calling get_time."},
		{"none", toolReq("get_weather now", &llm.ToolChoice{Type: llm.ToolChoiceNone}, "get_weather"), nil, ""},
		{"after tool result", func() *llm.Request {
			r := toolReq("get_weather now", nil, "get_weather")
			r.Messages = append(r.Messages,
				llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "t1", Name: "get_weather", Input: json.RawMessage(`{}`)}}},
				llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, ToolUseID: "t1", Content: []llm.Block{{Type: llm.BlockText, Text: "sunny"}}}}})
			return r
		}(), nil, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Answer(cfg, tc.req)
			if names := toolNames(got); !reflect.DeepEqual(names, tc.want) {
				t.Fatalf("tools called = %v, want %v", names, tc.want)
			}
			if tc.want == nil {
				if got.StopReason != llm.StopEndTurn || len(strings.Fields(got.Text())) < 12 {
					t.Errorf("plain answer expected, got %s %q", got.StopReason, got.Text())
				}
				return
			}
			if got.StopReason != llm.StopToolUse {
				t.Errorf("stop_reason = %q, want tool_use", got.StopReason)
			}
			if got.Text() != tc.wantText {
				t.Errorf("text = %q, want %q", got.Text(), tc.wantText)
			}
			for _, b := range got.Content[1:] {
				if !strings.HasPrefix(b.ID, "toolu_sim_") || len(b.ID) != len("toolu_sim_")+16 {
					t.Errorf("tool id %q", b.ID)
				}
				var in struct {
					City     *string `json:"city"`
					Days     *int    `json:"days"`
					Unit     *string `json:"unit"`
					Detailed *bool   `json:"detailed"`
					Tags     []string
					Where    *struct{ Lat, Lon *float64 }
				}
				if err := json.Unmarshal(b.Input, &in); err != nil {
					t.Fatalf("input %s: %v", b.Input, err)
				}
				if in.City == nil || *in.City == "" || in.Days == nil || *in.Days < 1 || *in.Days > 7 ||
					in.Unit == nil || *in.Unit != "celsius" || in.Detailed == nil || len(in.Tags) != 1 ||
					in.Where == nil || in.Where.Lat == nil || in.Where.Lon == nil {
					t.Errorf("input %s does not follow the schema", b.Input)
				}
			}
		})
	}
}

func TestGenValue(t *testing.T) {
	cases := []struct {
		name, schema string
		check        func(any) bool
	}{
		{"const", `{"const":"x"}`, func(v any) bool { return v == "x" }},
		{"enum", `{"type":"string","enum":["a","b"]}`, func(v any) bool { return v == "a" }},
		{"nullable string", `{"type":["null","string"]}`, func(v any) bool { _, ok := v.(string); return ok }},
		{"bounded int", `{"type":"integer","minimum":10,"maximum":12}`, func(v any) bool { n := v.(int64); return n >= 10 && n <= 12 }},
		{"number", `{"type":"number","minimum":-1,"maximum":1}`, func(v any) bool { n := v.(float64); return n >= -1 && n <= 1 }},
		{"anyOf", `{"anyOf":[{"type":"boolean"},{"type":"string"}]}`, func(v any) bool { _, ok := v.(bool); return ok }},
		{"array minItems", `{"type":"array","items":{"type":"integer"},"minItems":2}`, func(v any) bool { return len(v.([]any)) == 2 }},
		{"required without property", `{"type":"object","required":["a"]}`, func(v any) bool { _, ok := v.(map[string]any)["a"]; return ok }},
		{"deep", strings.Repeat(`{"type":"object","properties":{"x":`, 12) + `{"type":"string"}` + strings.Repeat(`}}`, 12), func(v any) bool { return v != nil }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRNG(42)
			v := genValue(parseSchema(json.RawMessage(tc.schema)), &r, 0)
			if !tc.check(v) {
				t.Errorf("genValue(%s) = %#v", tc.schema, v)
			}
		})
	}
}

func TestJSONMode(t *testing.T) {
	cfg := DefaultConfig()
	cases := []struct {
		name string
		rf   *llm.ResponseFormat
		keys []string
	}{
		{"json_object", &llm.ResponseFormat{Type: "json_object"}, []string{"answer"}},
		{"json_schema", &llm.ResponseFormat{Type: "json_schema", Name: "risk", Schema: json.RawMessage(`{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","high"]},"mitigation_steps":{"type":"array","items":{"type":"string"}},"confidence_score":{"type":"number","minimum":0,"maximum":1}},"required":["risk_level","mitigation_steps","confidence_score"],"additionalProperties":false}`)}, []string{"confidence_score", "mitigation_steps", "risk_level"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i := range 50 {
				r := userReq("sim-opus", fmt.Sprintf("json please %d", i))
				r.ResponseFormat = tc.rf
				got := Answer(cfg, r)
				var m map[string]any
				if err := json.Unmarshal([]byte(got.Text()), &m); err != nil {
					t.Fatalf("answer %q is not JSON: %v", got.Text(), err)
				}
				var keys []string
				for k := range m {
					keys = append(keys, k)
				}
				if len(keys) != len(tc.keys) {
					t.Fatalf("keys %v, want %v", keys, tc.keys)
				}
				for _, k := range tc.keys {
					if _, ok := m[k]; !ok {
						t.Fatalf("missing key %q in %s", k, got.Text())
					}
				}
				if got.Usage.OutputTokens != len(splitPieces(got.Text())) {
					t.Fatalf("output_tokens = %d for %q", got.Usage.OutputTokens, got.Text())
				}
			}
		})
	}
	// Anthropic structured outputs ask for JSON too.
	r := parseAnthropic(t, `{"model":"sim-opus","max_tokens":100,"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}},"messages":[{"role":"user","content":"hi"}]}`)
	var m struct{ N *int }
	if got := Answer(cfg, r).Text(); json.Unmarshal([]byte(got), &m) != nil || m.N == nil {
		t.Errorf("output_config answer %q does not follow the schema", got)
	}
}

func TestCorruptJSON(t *testing.T) {
	valid := `{"answer":"the quick","n":[1,2]}`
	seen := map[string]bool{}
	for h := range uint64(4) {
		bad := corruptJSON(valid, h)
		if json.Valid([]byte(bad)) {
			t.Errorf("variant %d is valid JSON: %s", h, bad)
		}
		seen[bad] = true
	}
	if len(seen) != 4 {
		t.Errorf("got %d distinct variants, want 4", len(seen))
	}
}

// A forced tool whose input schema is free-form ({"type":"object"}: how
// JSON mode is emulated on Anthropic) gets the model's answer as input,
// {"answer": …}, as a model fills it; a schema with properties, or a closed
// one, gets a value generated from it.
func TestFreeFormToolInput(t *testing.T) {
	cfg := DefaultConfig()
	for _, tc := range []struct {
		schema string
		want   string // a key of the input
	}{
		{`{"type":"object"}`, "answer"},
		{`{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}`, "city"},
	} {
		req := parseAnthropic(t, `{"model":"sim-sonnet","max_tokens":100,"messages":[{"role":"user","content":"Describe a ship."}],
			"tools":[{"name":"out","input_schema":`+tc.schema+`}],"tool_choice":{"type":"tool","name":"out"}}`)
		resp := Answer(cfg, req)
		var in map[string]any
		for _, b := range resp.Content {
			if b.Type == llm.BlockToolUse {
				json.Unmarshal(b.Input, &in)
			}
		}
		if s, _ := in[tc.want].(string); s == "" || len(in) != 1 {
			t.Errorf("schema %s: input %v, want one non-empty %q", tc.schema, in, tc.want)
		}
	}
}
