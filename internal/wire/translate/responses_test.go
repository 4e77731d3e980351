package translate

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/internal/wire/responses"
)

// codexRequest is a Codex CLI turn as it reaches Keel: developer message,
// a reasoning item with OpenAI's encrypted state, Anthropic thinking
// carried in another, a function call and its output, built-in tools.
const codexRequest = `{"model":"m","instructions":"You are Codex.","input":[` +
	`{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions>workspace-write</permissions>"}]},` +
	`{"type":"message","role":"user","content":[{"type":"input_text","text":"List the files."}]},` +
	`{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"Listing."}],"encrypted_content":"gAAAA-openai"},` +
	`{"type":"reasoning","id":"rs_2","summary":[{"type":"summary_text","text":"Thought."}],"encrypted_content":"keel.anthropic.thinking.EqSig=="},` +
	`{"type":"message","role":"assistant","id":"msg_1","status":"completed","content":[{"type":"output_text","text":"Looking.","annotations":[]}]},` +
	`{"type":"function_call","id":"fc_1","call_id":"call_a","name":"shell","arguments":"{\"command\":[\"ls\"]}"},` +
	`{"type":"function_call","id":"fc_2","call_id":"call_b","name":"shell","arguments":"{\"command\":[\"pwd\"]}"},` +
	`{"type":"function_call_output","call_id":"call_a","output":"a.go"},` +
	`{"type":"function_call_output","call_id":"call_b","output":"/src"},` +
	`{"type":"message","role":"user","content":"Now read a.go"}],` +
	`"tools":[{"type":"function","name":"shell","description":"Run","strict":false,"parameters":{"type":"object","properties":{"command":{"type":"array","items":{"type":"string"}}}}},` +
	`{"type":"web_search","search_context_size":"low"},{"type":"custom","name":"apply_patch","format":{"type":"text"}}],` +
	`"tool_choice":"auto","parallel_tool_calls":false,"reasoning":{"effort":"high","summary":"auto"},"store":false,"stream":true,` +
	`"include":["reasoning.encrypted_content"],"prompt_cache_key":"sess-1","text":{"verbosity":"low"},"max_output_tokens":4000}`

type responsesCase struct {
	name   string
	from   llm.Format
	target llm.Format
	body   string
}

var responsesCases = []responsesCase{
	{"r2a_codex", llm.FormatResponses, llm.FormatAnthropic, codexRequest},
	{"r2o_codex", llm.FormatResponses, llm.FormatOpenAI, codexRequest},
	{"r2a_json_schema", llm.FormatResponses, llm.FormatAnthropic, `{"model":"m","input":"City?","text":{"format":{"type":"json_schema","name":"city","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"],"additionalProperties":false}}}}`},
	{"o2r_chat", llm.FormatOpenAI, llm.FormatResponses, `{"model":"m","max_completion_tokens":5,"stop":["END"],"reasoning_effort":"low","verbosity":"high","prompt_cache_key":"k","service_tier":"flex","seed":7,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object"}}},` +
		`"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"get_weather"}},` +
		`"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather?"},{"role":"assistant","content":"Checking.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}]}`},
	{"a2r_messages", llm.FormatAnthropic, llm.FormatResponses, `{"model":"m","max_tokens":100,"system":[{"type":"text","text":"Be brief.","cache_control":{"type":"ephemeral"}}],"top_k":5,"metadata":{"user_id":"u1"},` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}},{"type":"web_search_20250305","name":"web_search","max_uses":3}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true},` +
		`"messages":[{"role":"user","content":"Weather?"},{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm.","signature":"SIG"},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},` +
		`{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny","is_error":true},{"type":"text","text":"Thanks"}]}]}`},
	{"r2r_foreign_thinking", llm.FormatResponses, llm.FormatResponses, codexRequest},
}

func parseAs(t *testing.T, f llm.Format, body string) *llm.Request {
	t.Helper()
	var req *llm.Request
	var err error
	switch f {
	case llm.FormatAnthropic:
		req, err = anthropic.ParseRequest([]byte(body))
	case llm.FormatOpenAI:
		req, err = openai.ParseRequest([]byte(body))
	default:
		req, err = responses.ParseRequest([]byte(body))
	}
	if err != nil {
		t.Fatalf("parsing: %v", err)
	}
	return req
}

func encodeAs(t *testing.T, f llm.Format, r *llm.Request) []byte {
	t.Helper()
	var b []byte
	var err error
	switch f {
	case llm.FormatAnthropic:
		b, err = anthropic.EncodeRequest(r)
	case llm.FormatOpenAI:
		b, err = openai.EncodeUpstreamRequest(r)
	default:
		b, err = responses.EncodeRequest(r)
	}
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	return b
}

// TestResponsesTranslationGolden translates Responses requests for the
// other two formats and Chat and Messages requests for a Responses
// endpoint; the upstream body and the dropped list are golden, and the
// target's own parser accepts the body.
func TestResponsesTranslationGolden(t *testing.T) {
	for _, c := range responsesCases {
		t.Run(c.name, func(t *testing.T) {
			req := parseAs(t, c.from, c.body)
			before := dump(req)
			out, rep, err := Prepare(req, c.target, Policy{})
			if err != nil {
				t.Fatal(err)
			}
			if dump(req) != before {
				t.Fatal("Prepare modified its input")
			}
			body := encodeAs(t, c.target, out)
			parseAs(t, c.target, string(body))
			got := "# dropped: " + strings.Join(rep.Dropped, ",") + "\n" + string(indentJSON(t, body))
			checkGolden(t, filepath.Join("testdata", "requests", c.name+".golden"), []byte(got))
		})
	}
}

// The facts the goldens hold, asserted: opaque state only to its family,
// a Responses client's items merged into turns, the parameters mapped.
func TestResponsesTranslationFacts(t *testing.T) {
	prep := func(from, to llm.Format, body string) (*llm.Request, Report, string) {
		out, rep, err := Prepare(parseAs(t, from, body), to, Policy{})
		if err != nil {
			t.Fatal(err)
		}
		return out, rep, string(encodeAs(t, to, out))
	}
	_, rep, body := prep(llm.FormatResponses, llm.FormatAnthropic, codexRequest)
	for _, want := range []string{`"signature":"EqSig=="`, `"thinking":"Thought."`, `"type":"web_search_20250305"`, `"disable_parallel_tool_use":true`,
		`"name":"apply_patch","input_schema":{"type":"object","properties":{"input":{"type":"string"`} {
		if !strings.Contains(body, want) {
			t.Errorf("to Anthropic: body lacks %s", want)
		}
	}
	for _, never := range []string{"gAAAA-openai", "keel.anthropic"} {
		if strings.Contains(body, never) {
			t.Errorf("to Anthropic: body holds %s", never)
		}
	}
	for _, d := range []string{"reasoning.encrypted_content", "web_search.search_context_size", "reasoning", "text"} {
		if !slices.Contains(rep.Dropped, d) {
			t.Errorf("to Anthropic: dropped %v lacks %s", rep.Dropped, d)
		}
	}
	out, _, _ := prep(llm.FormatResponses, llm.FormatAnthropic, codexRequest)
	var roles []string
	for _, m := range out.Messages {
		roles = append(roles, string(m.Role))
	}
	if got := strings.Join(roles, ","); got != "developer,user,assistant,user" {
		t.Errorf("to Anthropic: turns %s, want developer,user,assistant,user (one assistant turn of thinking, text and both calls; one user turn of both outputs and the text)", got)
	}

	_, rep, body = prep(llm.FormatResponses, llm.FormatOpenAI, codexRequest)
	for _, want := range []string{`"reasoning_effort":"high"`, `"verbosity":"low"`, `"prompt_cache_key":"sess-1"`, `"tool_call_id":"call_b"`} {
		if !strings.Contains(body, want) {
			t.Errorf("to Chat: body lacks %s:\n%s", want, body)
		}
	}
	for _, never := range []string{"gAAAA-openai", "EqSig", "web_search"} {
		if strings.Contains(body, never) {
			t.Errorf("to Chat: body holds %s", never)
		}
	}
	for _, d := range []string{"reasoning.encrypted_content", "thinking", "reasoning.summary", "tool:web_search", "store"} {
		if !slices.Contains(rep.Dropped, d) {
			t.Errorf("to Chat: dropped %v lacks %s", rep.Dropped, d)
		}
	}

	_, rep, body = prep(llm.FormatOpenAI, llm.FormatResponses, responsesCases[3].body)
	for _, want := range []string{`"reasoning":{"effort":"low"}`, `"text":{"format":{"type":"json_schema"`, `"verbosity":"high"`, `"store":false`, `"max_output_tokens":16`, `"service_tier":"flex"`, `"role":"system","content":"Be brief."`} {
		if !strings.Contains(body, want) {
			t.Errorf("Chat to Responses: body lacks %s:\n%s", want, body)
		}
	}
	for _, d := range []string{"stop_sequences", "max_tokens<16", "seed"} {
		if !slices.Contains(rep.Dropped, d) {
			t.Errorf("Chat to Responses: dropped %v lacks %s", rep.Dropped, d)
		}
	}

	custom := `{"model":"m","tools":[{"type":"custom","name":"apply_patch"}],"input":[{"role":"user","content":"Patch it."},` +
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_p","name":"apply_patch","input":"*** Begin Patch\n*** End Patch"},` +
		`{"type":"custom_tool_call_output","call_id":"call_p","output":"Done."}]}`
	for _, to := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
		_, rep, body = prep(llm.FormatResponses, to, custom)
		want := []string{`"id":"toolu_`, `"input":{"input":"*** Begin Patch\n*** End Patch"}`, `"tool_use_id":"call_p","content":"Done."`}
		if to == llm.FormatOpenAI {
			want = []string{`"id":"call_p"`, `"arguments":"{\"input\":\"*** Begin Patch\\n*** End Patch\"}"`, `"tool_call_id":"call_p","content":"Done."`}
		}
		for _, w := range want[1:] {
			if !strings.Contains(body, w) {
				t.Errorf("custom tool call to %v: body lacks %s:\n%s", to, w, body)
			}
		}
		if len(rep.Dropped) != 0 {
			t.Errorf("custom tool call to %v dropped %v", to, rep.Dropped)
		}
	}

	_, rep, body = prep(llm.FormatResponses, llm.FormatResponses, codexRequest)
	if !strings.Contains(body, "gAAAA-openai") || strings.Contains(body, "EqSig") || !slices.Equal(rep.Dropped, []string{"thinking"}) {
		t.Errorf("same format: Anthropic thinking must be left out (dropped %v):\n%s", rep.Dropped, body)
	}
}

// OpenAI reasoning blocks never reach a client of another format: left
// out of the stream, the blocks after them numbered on from 0, and the
// Responses stream's bookkeeping events (pings) dropped.
func TestStreamRestorerDropsReasoning(t *testing.T) {
	req := parseAs(t, llm.FormatAnthropic, `{"model":"m","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`)
	_, rep, err := Prepare(req, llm.FormatResponses, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	sr := rep.NewStreamRestorer()
	evs := []*llm.Event{
		{Type: llm.EventMessageStart, Message: &llm.Response{ID: "resp_1"}},
		{Type: llm.EventPing, Raw: []byte(`{}`), RawFormat: llm.FormatResponses},
		{Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockReasoning}},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaThinking, Delta: "hmm"},
		{Type: llm.EventBlockStop, Index: 0},
		{Type: llm.EventBlockStart, Index: 1, Block: &llm.Block{Type: llm.BlockText}},
		{Type: llm.EventBlockDelta, Index: 1, DeltaType: llm.DeltaText, Delta: "Hello"},
		{Type: llm.EventBlockStop, Index: 1},
		{Type: llm.EventMessageStop},
	}
	var got []string
	for _, ev := range evs {
		if out := sr.Restore(ev); out != nil {
			got = append(got, out.Type.String()+":"+string(rune('0'+out.Index)))
		}
	}
	want := "message_start:0 content_block_start:0 content_block_delta:0 content_block_stop:0 message_stop:0"
	if g := strings.Join(got, " "); g != want {
		t.Errorf("events %s\nwant   %s", g, want)
	}
}

// A web search Anthropic ran for a Responses client comes back as a
// web_search_call item; its results block is left out, its text kept.
func TestWebSearchCallForResponsesClient(t *testing.T) {
	_, rep, err := Prepare(parseAs(t, llm.FormatResponses, `{"model":"m","input":"News?","tools":[{"type":"web_search"}]}`), llm.FormatAnthropic, Policy{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := anthropic.ParseResponse([]byte(`{"id":"msg_1","type":"message","role":"assistant","model":"claude","content":[` +
		`{"type":"server_tool_use","id":"srvtoolu_01","name":"web_search","input":{"query":"keel news"}},` +
		`{"type":"web_search_tool_result","tool_use_id":"srvtoolu_01","content":[{"type":"web_search_result","url":"https://example.com","title":"Ex","encrypted_content":"E","page_age":null}]},` +
		`{"type":"text","text":"Keel shipped.","citations":[{"type":"web_search_result_location","url":"https://example.com","title":"Ex","encrypted_index":"I","cited_text":"c"}]}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3}}`))
	if err != nil {
		t.Fatal(err)
	}
	out := rep.RestoreResponse(resp)
	if len(out.Content) != 2 || string(out.Content[0].Raw) != `{"id":"ws_01","type":"web_search_call","status":"completed","action":{"type":"search","query":"keel news"}}` ||
		out.Content[1].Text != "Keel shipped." || out.Content[1].Extra != nil {
		t.Errorf("content %s", dump(out.Content))
	}
	b, err := responses.EncodeResponse(out)
	if err != nil || !strings.Contains(string(b), `"type":"web_search_call"`) {
		t.Errorf("encoded %s %v", b, err)
	}
}

// TestCachedOnlyWebSearchIsNotMadeLive: Codex sends web_search with
// "external_web_access": false (cached results only). Anthropic's web search
// fetches the live web and is billed per search, so such a tool is not mapped
// onto it: it is dropped and named; a web_search without the flag is mapped.
func TestCachedOnlyWebSearchIsNotMadeLive(t *testing.T) {
	for _, c := range []struct {
		tool   string
		mapped bool
	}{
		{`{"type":"web_search","external_web_access":false}`, false},
		{`{"type":"web_search","external_web_access":true}`, true},
		{`{"type":"web_search"}`, true},
	} {
		out, rep, err := Prepare(parseAs(t, llm.FormatResponses, `{"model":"m","input":"Hi","tools":[`+c.tool+`]}`), llm.FormatAnthropic, Policy{})
		if err != nil {
			t.Fatalf("%s: %v", c.tool, err)
		}
		body := string(encodeAs(t, llm.FormatAnthropic, out))
		if got := strings.Contains(body, "web_search_20250305"); got != c.mapped {
			t.Errorf("%s: mapped to Anthropic's web search = %v, want %v: %s", c.tool, got, c.mapped, body)
		}
		if !c.mapped && !slices.Contains(rep.Dropped, "tool:web_search") {
			t.Errorf("%s: dropped %v, want tool:web_search named", c.tool, rep.Dropped)
		}
	}
}
