package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/golden"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

func dump(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return append(b, '\n')
}

func cases(t testing.TB, dir, ext string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata in %s: %v", dir, err)
	}
	m := make(map[string]string, len(paths))
	for _, p := range paths {
		m[strings.TrimSuffix(filepath.Base(p), ext)] = p
	}
	return m
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Requests: the canonical form and the re-encoding are golden, the
// encoding is deterministic and reads back to the same canonical request.
func TestRequestGolden(t *testing.T) {
	for name, path := range cases(t, "request", ".json") {
		t.Run(name, func(t *testing.T) {
			r, err := ParseRequest(readFile(t, path))
			if err != nil {
				t.Fatalf("ParseRequest: %v", err)
			}
			base := strings.TrimSuffix(path, ".json")
			golden.Check(t, base+".canonical.golden", dump(t, r))
			enc, err := EncodeRequest(r)
			if err != nil {
				t.Fatal(err)
			}
			golden.Check(t, base+".encoded.golden", append(bytes.Clone(enc), '\n'))
			if !json.Valid(enc) {
				t.Fatalf("invalid JSON: %s", enc)
			}
			again, _ := EncodeRequest(r)
			if !bytes.Equal(again, enc) {
				t.Errorf("EncodeRequest is not deterministic")
			}
			r2, err := ParseRequest(enc)
			if err != nil {
				t.Fatalf("ParseRequest(EncodeRequest): %v", err)
			}
			if !reflect.DeepEqual(r2, r) {
				t.Errorf("round trip differs (-got +want):\n%s", golden.Diff(string(dump(t, r2)), string(dump(t, r))))
			}
		})
	}
}

func TestParseRequestDetails(t *testing.T) {
	r, err := ParseRequest(readFile(t, "testdata/request/codex.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Format != llm.FormatResponses || !r.Stream || r.SystemText() != "You are Codex, a coding agent.\n\n<permissions>workspace-write</permissions>" {
		t.Errorf("format %v stream %v system %q", r.Format, r.Stream, r.SystemText())
	}
	roles := ""
	for _, m := range r.Messages {
		roles += string(m.Role)[:1] + ":" + string(m.Content[0].Type) + " "
	}
	if want := "d:text u:text a:reasoning a:tool_use u:tool_result a:text "; roles != want {
		t.Errorf("items %q, want %q", roles, want)
	}
	if b := r.Messages[2].Content[0]; b.Data != "gAAAAABo-ENCRYPTED==" || b.Thinking != "Listing files." || b.Raw == nil {
		t.Errorf("reasoning block %+v", b)
	}
	if b := r.Messages[3].Content[0]; b.ID != "call_abc" || b.Name != "shell" || string(b.Input) != `{"command":["ls"]}` {
		t.Errorf("function_call block %+v", b)
	}
	if b := r.Messages[4].Content[0]; b.ToolUseID != "call_abc" || llm.BlocksText(b.Content) != "a.go\nb.go" {
		t.Errorf("function_call_output block %+v", b)
	}
	if len(r.Tools) != 3 || r.Tools[0].Name != "shell" || r.Tools[0].Raw != nil || r.Tools[1].Type != "web_search" || r.Tools[2].Raw == nil {
		t.Errorf("tools %+v", r.Tools)
	}
	if r.ParallelToolCalls == nil || *r.ParallelToolCalls || r.ToolChoice.Type != llm.ToolChoiceAuto {
		t.Errorf("parallel %v choice %+v", r.ParallelToolCalls, r.ToolChoice)
	}
	for _, k := range []string{"reasoning", "store", "include", "prompt_cache_key", "text"} {
		if r.Extra[k] == nil {
			t.Errorf("Extra lacks %s", k)
		}
	}
	s, _ := ParseRequest(readFile(t, "testdata/request/string_input.json"))
	if PreviousResponseID(s) != "resp_123" || s.MaxTokens != 200 || !s.HasMaxTokens || s.UserID != "u-1" || !s.Messages[0].ContentIsString {
		t.Errorf("string input request %+v", s)
	}
	j, _ := ParseRequest(readFile(t, "testdata/request/json_schema.json"))
	if rf := j.ResponseFormat; rf == nil || rf.Type != "json_schema" || rf.Name != "city" || rf.Strict == nil || !*rf.Strict || rf.Schema == nil {
		t.Errorf("text.format %+v", j.ResponseFormat)
	}
	if j.ToolChoice.Type != llm.ToolChoiceTool || j.ToolChoice.Name != "get_weather" {
		t.Errorf("tool_choice %+v", j.ToolChoice)
	}
}

func TestParseRequestErrors(t *testing.T) {
	for _, tc := range []struct{ name, body, param string }{
		{"not json", `{`, ""},
		{"not object", `[]`, ""},
		{"no model", `{"input":"hi"}`, "model"},
		{"input number", `{"model":"m","input":3}`, "input"},
		{"item no role", `{"model":"m","input":[{"type":"message","content":"x"}]}`, "input[0].role"},
		{"item bad role", `{"model":"m","input":[{"role":"robot","content":"x"}]}`, "input[0].role"},
		{"item no content", `{"model":"m","input":[{"role":"user"}]}`, "input[0].content"},
		{"part no text", `{"model":"m","input":[{"role":"user","content":[{"type":"input_text"}]}]}`, "input[0].content[0].text"},
		{"call no id", `{"model":"m","input":[{"type":"function_call","name":"f","arguments":"{}"}]}`, "input[0]"},
		{"output no call id", `{"model":"m","input":[{"type":"function_call_output","output":"x"}]}`, "input[0].call_id"},
		{"negative max", `{"model":"m","input":"x","max_output_tokens":-1}`, "max_output_tokens"},
		{"bad temperature", `{"model":"m","input":"x","temperature":"hot"}`, "temperature"},
		{"tool without name", `{"model":"m","input":"x","tools":[{"type":"function"}]}`, "tools[0].name"},
		{"bad tool_choice", `{"model":"m","input":"x","tool_choice":"sometimes"}`, "tool_choice"},
		{"text format no type", `{"model":"m","input":"x","text":{"format":{}}}`, "text.format.type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseRequest([]byte(tc.body))
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != llm.ErrInvalidRequest || ae.Param != tc.param {
				t.Fatalf("err = %v (param %q), want a 400 naming %q", err, paramOf(ae), tc.param)
			}
		})
	}
}

func paramOf(e *llm.APIError) string {
	if e == nil {
		return ""
	}
	return e.Param
}

// Answers: the canonical form is golden; a parsed answer encodes to its
// own bytes, and an answer with nothing of them encodes to the golden
// re-encoding that reads back the same.
func TestResponseGolden(t *testing.T) {
	for name, path := range cases(t, "response", ".json") {
		t.Run(name, func(t *testing.T) {
			in := readFile(t, path)
			r, err := ParseResponse(in)
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(path, ".json")
			golden.Check(t, base+".canonical.golden", dump(t, r))
			r.Raw, r.RawFormat = in, llm.FormatResponses
			if b, _ := EncodeResponse(r); !bytes.Equal(b, in) {
				t.Errorf("an untouched answer is not its own bytes")
			}
			r.Touch()
			enc, err := EncodeResponse(r)
			if err != nil || !json.Valid(enc) {
				t.Fatalf("EncodeResponse: %v %s", err, enc)
			}
			golden.Check(t, base+".encoded.golden", append(bytes.Clone(enc), '\n'))
			r2, err := ParseResponse(enc)
			if err != nil {
				t.Fatal(err)
			}
			if r2.Text() != r.Text() || r2.StopReason != r.StopReason || r2.Usage.InputTokens != r.Usage.InputTokens ||
				r2.Usage.CacheReadTokens != r.Usage.CacheReadTokens || r2.Usage.ReasoningTokens != r.Usage.ReasoningTokens || len(r2.Content) != len(r.Content) {
				t.Errorf("re-encoded answer reads back differently:\n%s\n%s", dump(t, r2), dump(t, r))
			}
		})
	}
}

func TestParseResponseMapping(t *testing.T) {
	r, err := ParseResponse(readFile(t, "testdata/response/tool_reasoning.json"))
	if err != nil {
		t.Fatal(err)
	}
	if r.StopReason != llm.StopToolUse || r.Usage.InputTokens != 36 || r.Usage.CacheReadTokens != 64 || r.Usage.ReasoningTokens != 20 || r.Usage.OutputTokens != 30 {
		t.Errorf("stop %q usage %+v", r.StopReason, r.Usage)
	}
	if len(r.Content) != 2 || r.Content[0].Type != llm.BlockReasoning || r.Content[0].Data != "gAAAA-opaque" || r.Content[1].Name != "get_weather" {
		t.Errorf("content %+v", r.Content)
	}
	inc, _ := ParseResponse(readFile(t, "testdata/response/incomplete.json"))
	if inc.StopReason != llm.StopMaxTokens {
		t.Errorf("incomplete stop %q", inc.StopReason)
	}
	_, err = ParseResponse([]byte(`{"id":"r","status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`))
	var ae *llm.APIError
	if !errors.As(err, &ae) || ae.Message != "boom" || ae.Code != "server_error" {
		t.Errorf("failed response err = %v", err)
	}
	for _, bad := range []string{`{`, `[]`, `{"output":3}`, `{"output":[3]}`} {
		if _, err := ParseResponse([]byte(bad)); err == nil {
			t.Errorf("ParseResponse(%s) accepted", bad)
		}
	}
}

func readEvents(t testing.TB, in []byte) ([]*llm.Event, error) {
	t.Helper()
	rd := NewStreamReader(bytes.NewReader(in))
	var evs []*llm.Event
	for {
		ev, err := rd.Next()
		if err == io.EOF {
			return evs, nil
		}
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

func writeEvents(t testing.TB, evs []*llm.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewStreamWriter(sse.NewWriter(&buf, nil))
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func detached(evs []*llm.Event) []*llm.Event {
	out := make([]*llm.Event, len(evs))
	for i, ev := range evs {
		out[i] = ev.Detach()
	}
	return out
}

// eventSummary lists a stream's canonical events in a line each.
func eventSummary(evs []*llm.Event) []byte {
	var b bytes.Buffer
	for _, ev := range evs {
		b.WriteString(ev.Type.String())
		switch ev.Type {
		case llm.EventBlockStart:
			b.WriteString(" " + string(ev.Block.Type) + " " + ev.Block.ID + " " + ev.Block.Name)
		case llm.EventBlockDelta:
			b.WriteString(" " + string(ev.DeltaType) + " " + ev.Delta)
		case llm.EventMessageDelta:
			b.WriteString(" " + string(ev.StopReason))
		case llm.EventError:
			b.WriteString(" " + ev.Err.Message)
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// Streams: the canonical events are golden; written again as they came
// they are the same bytes; encoded from their fields (after a change on
// the way) they form a stream the reader reads to the same events.
func TestStreamGolden(t *testing.T) {
	for name, path := range cases(t, "stream", ".sse") {
		t.Run(name, func(t *testing.T) {
			in := readFile(t, path)
			evs, err := readEvents(t, in)
			if err != nil {
				t.Fatal(err)
			}
			base := strings.TrimSuffix(path, ".sse")
			golden.Check(t, base+".events.golden", eventSummary(evs))
			if out := writeEvents(t, evs); !bytes.Equal(out, in) {
				t.Errorf("passed through, the stream changed:\n%s", golden.Diff(string(out), string(in)))
			}
			enc := writeEvents(t, detached(evs))
			golden.Check(t, base+".encoded.golden", enc)
			evs2, err := readEvents(t, enc)
			if err != nil {
				t.Fatalf("reading the encoded stream: %v", err)
			}
			if a, b := eventSummary(mergedArgs(withoutPings(evs2))), eventSummary(mergedArgs(withoutPings(evs))); !bytes.Equal(a, b) {
				t.Errorf("encoded stream reads back differently (-got +want):\n%s", golden.Diff(string(a), string(b)))
			}
			checkSequence(t, enc)
		})
	}
}

// mergedArgs joins consecutive input_json deltas of a block: a custom tool
// call's input is encoded in one piece when the call ends.
func mergedArgs(evs []*llm.Event) []*llm.Event {
	var out []*llm.Event
	for _, ev := range evs {
		if n := len(out); n > 0 && ev.Type == llm.EventBlockDelta && ev.DeltaType == llm.DeltaInputJSON &&
			out[n-1].Type == llm.EventBlockDelta && out[n-1].DeltaType == llm.DeltaInputJSON && out[n-1].Index == ev.Index {
			cp := *out[n-1]
			cp.Delta += ev.Delta
			out[n-1] = &cp
			continue
		}
		out = append(out, ev)
	}
	return out
}

func withoutPings(evs []*llm.Event) []*llm.Event {
	var out []*llm.Event
	for _, ev := range evs {
		if ev.Type != llm.EventPing {
			out = append(out, ev)
		}
	}
	return out
}

// checkSequence asserts every event's sequence_number is its place.
func checkSequence(t *testing.T, stream []byte) {
	t.Helper()
	rd := sse.NewReader(bytes.NewReader(stream))
	for i := 0; ; i++ {
		ev, err := rd.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Type string `json:"type"`
			Seq  *int   `json:"sequence_number"`
		}
		if err := json.Unmarshal(ev.Data, &d); err != nil || d.Seq == nil || *d.Seq != i || d.Type != ev.Event {
			t.Fatalf("event %d (%s): %s", i, ev.Event, ev.Data)
		}
	}
}

// A stream that ends before its terminal event is a cut stream.
func TestStreamReaderCut(t *testing.T) {
	in := readFile(t, "testdata/stream/reasoning_text_tool.sse")
	cut := in[:bytes.Index(in, []byte("event: response.output_text.done"))]
	evs, err := readEvents(t, cut)
	if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) == 0 {
		t.Fatalf("err %v after %d events, want io.ErrUnexpectedEOF", err, len(evs))
	}
	for _, bad := range []string{
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"x\"}\n\n",
		"data: {\"type\":\"response.created\",\"response\":3}\n\n",
		"data: nope\n\n",
	} {
		if _, err := readEvents(t, []byte(bad)); err == nil || errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: err %v, want a protocol error", bad, err)
		}
	}
}

// A stream recovered mid-way (the first events passed through, the rest
// Keel's own) is numbered on without a gap and ends with the whole text.
func TestStreamWriterSwitchesToEncoding(t *testing.T) {
	in := readFile(t, "testdata/stream/reasoning_text_tool.sse")
	evs, err := readEvents(t, in)
	if err != nil {
		t.Fatal(err)
	}
	mixed := append([]*llm.Event(nil), evs[:11]...) // through the first text delta
	mixed = append(mixed, detached(evs[11:])...)
	out := writeEvents(t, mixed)
	checkSequence(t, out)
	back, err := readEvents(t, out)
	if err != nil {
		t.Fatal(err)
	}
	var text string
	for _, ev := range back {
		if ev.Type == llm.EventBlockDelta && ev.DeltaType == llm.DeltaText {
			text += ev.Delta
		}
	}
	if text != "Let me check." {
		t.Errorf("text %q", text)
	}
	if !bytes.Contains(out, []byte(`"type":"response.completed"`)) || !bytes.Contains(out, []byte(`"encrypted_content":"gAAAA-enc"`)) {
		t.Errorf("no completed answer with the reasoning's opaque state:\n%s", out)
	}
}

// Anthropic thinking given to a Responses client rides in a reasoning
// item's encrypted_content and comes back as the thinking block it was.
func TestAnthropicThinkingRoundTrip(t *testing.T) {
	resp := &llm.Response{ID: "msg_1", Model: "claude", Content: []llm.Block{
		{Type: llm.BlockThinking, Thinking: "Let me think.", Signature: "EqQBCkYIBRgCKkA+sig/=="},
		{Type: llm.BlockRedactedThinking, Data: "EmwKAhgBEgy3redacted=="},
		{Type: llm.BlockText, Text: "Done."},
	}, StopReason: llm.StopEndTurn}
	b, err := EncodeResponse(resp)
	if err != nil {
		t.Fatal(err)
	}
	var parsed struct {
		Output []json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(b, &parsed); err != nil || len(parsed.Output) != 3 {
		t.Fatalf("output %s", b)
	}
	body := `{"model":"m","input":[` + string(parsed.Output[0]) + `,` + string(parsed.Output[1]) + `,{"role":"user","content":"next"}]}`
	r, err := ParseRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	th, red := r.Messages[0].Content[0], r.Messages[1].Content[0]
	if th.Type != llm.BlockThinking || th.Signature != "EqQBCkYIBRgCKkA+sig/==" || th.Thinking != "Let me think." {
		t.Errorf("thinking came back as %+v", th)
	}
	if red.Type != llm.BlockRedactedThinking || red.Data != "EmwKAhgBEgy3redacted==" {
		t.Errorf("redacted thinking came back as %+v", red)
	}
}

// writeAllLenient writes events until the writer refuses one.
func writeAllLenient(w io.Writer, evs []*llm.Event) error {
	sw := NewStreamWriter(sse.NewWriter(w, nil))
	for _, ev := range evs {
		if err := sw.Write(ev); err != nil {
			return err
		}
	}
	return nil
}
