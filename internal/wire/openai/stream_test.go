package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// readAll drains a StreamReader, returning its events and the final error.
func readAll(t testing.TB, in []byte) ([]*llm.Event, error) {
	t.Helper()
	r := NewStreamReader(bytes.NewReader(in))
	var evs []*llm.Event
	for range 100000 {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	t.Fatal("reader did not end")
	return nil, nil
}

// writeAll encodes events with a StreamWriter.
func writeAll(t testing.TB, evs []*llm.Event, opt StreamOptions) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := NewStreamWriter(sse.NewWriter(&buf, nil), opt)
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatalf("Write(%v): %v", ev.Type, err)
		}
	}
	return buf.Bytes()
}

// eventLines renders events one JSON object per line for golden files.
func eventLines(t testing.TB, evs []*llm.Event) []byte {
	t.Helper()
	type line struct {
		Type         string         `json:"type"`
		Index        int            `json:"index"`
		Message      *llm.Response  `json:"message,omitempty"`
		Block        *llm.Block     `json:"block,omitempty"`
		DeltaType    llm.DeltaType  `json:"delta_type,omitempty"`
		Delta        string         `json:"delta,omitempty"`
		StopReason   llm.StopReason `json:"stop_reason,omitempty"`
		StopSequence string         `json:"stop_sequence,omitempty"`
		Usage        *llm.Usage     `json:"usage,omitempty"`
		Err          *llm.APIError  `json:"err,omitempty"`
		HasRaw       bool           `json:"has_raw,omitempty"`
	}
	var b bytes.Buffer
	for _, ev := range evs {
		j, err := json.Marshal(line{ev.Type.String(), ev.Index, ev.Message, ev.Block, ev.DeltaType, ev.Delta,
			ev.StopReason, ev.StopSequence, ev.Usage, ev.Err, ev.Raw != nil})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(j)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// withoutRaw copies events without Raw/RawFormat, which legitimately differ
// between an upstream's chunking and the writer's.
func withoutRaw(evs []*llm.Event) []llm.Event {
	out := make([]llm.Event, len(evs))
	for i, ev := range evs {

		out[i] = *ev.Detach()
	}
	return out
}

// detached copies events without their upstream bytes, so a writer
// encodes every one of them (what the .out.golden files hold).
func detached(evs []*llm.Event) []*llm.Event {
	out := make([]*llm.Event, len(evs))
	for i, ev := range evs {
		out[i] = ev.Detach()
	}
	return out
}

func TestStreamGolden(t *testing.T) {
	for name, path := range cases(t, "stream", ".sse") {
		t.Run(name, func(t *testing.T) {
			evs, err := readAll(t, readFile(t, path))
			if err != io.EOF {
				t.Fatalf("reader ended with %v, want io.EOF", err)
			}
			base := strings.TrimSuffix(path, ".sse")
			checkGolden(t, base+".events.golden", eventLines(t, evs))
			out := writeAll(t, detached(evs), StreamOptions{IncludeUsage: true})
			checkGolden(t, base+".out.golden", out)
			checkFraming(t, out)

			// reader -> writer -> reader gives the same events
			again, err := readAll(t, out)
			if err != io.EOF {
				t.Fatalf("re-reading the writer's output ended with %v", err)
			}
			if got, want := withoutRaw(again), withoutRaw(evs); !reflect.DeepEqual(got, want) {
				t.Errorf("round trip (-got +want):\n%s", diff(string(eventLines(t, again)), string(eventLines(t, evs))))
			}
		})
	}
}

// checkFraming asserts PROTOCOLS §0.4 and §0.5 on writer output: every event
// ends with a blank line, there are no event: lines, and only a final error
// event has a top-level "error" member.
func checkFraming(t *testing.T, out []byte) {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Fatalf("output does not end with a blank line: %q", out)
	}
	events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	for i, ev := range events {
		if strings.HasPrefix(ev, ":") {
			continue // comment
		}
		if strings.Contains(ev, "\n") || !strings.HasPrefix(ev, "data: ") {
			t.Errorf("event %d is not a single data line: %q", i, ev)
			continue
		}
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			if i != len(events)-1 {
				t.Errorf("[DONE] is not last")
			}
			continue
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Errorf("event %d: %v", i, err)
			continue
		}
		if _, ok := m["error"]; ok && (i != len(events)-1 || len(m) != 1) {
			t.Errorf("event %d has a top-level error key: %s", i, data)
		}
	}
}

func TestStreamReaderReassembly(t *testing.T) {
	evs, err := readAll(t, readFile(t, "testdata/stream/full.sse"))
	if err != io.EOF {
		t.Fatal(err)
	}
	text, args := map[int]string{}, map[int]string{}
	kinds := map[int]llm.BlockType{}
	open := map[int]bool{}
	var delta *llm.Event
	for _, ev := range evs {
		switch ev.Type {
		case llm.EventBlockStart:
			if open[ev.Index] || kinds[ev.Index] != "" {
				t.Errorf("block %d started twice", ev.Index)
			}
			if ev.Index != len(kinds) {
				t.Errorf("block index %d not contiguous", ev.Index)
			}
			kinds[ev.Index], open[ev.Index] = ev.Block.Type, true
		case llm.EventBlockDelta:
			if !open[ev.Index] {
				t.Errorf("delta for closed block %d", ev.Index)
			}
			if ev.DeltaType == llm.DeltaText {
				text[ev.Index] += ev.Delta
			} else {
				args[ev.Index] += ev.Delta
			}
		case llm.EventBlockStop:
			open[ev.Index] = false
		case llm.EventMessageDelta:
			delta = ev
		}
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"kinds", kinds, map[int]llm.BlockType{0: llm.BlockText, 1: llm.BlockToolUse, 2: llm.BlockToolUse}},
		{"text", text[0], `Let me check both "cities".`},
		{"paris", args[1], `{"city": "Paris"}`},
		{"rome", args[2], `{"city": "Rome"}`},
		{"stop", delta.StopReason, llm.StopToolUse},
		{"usage", *delta.Usage, llm.Usage{InputTokens: 56, OutputTokens: 48, CacheReadTokens: 64,
			Extra: llm.Extra{"prompt_tokens_details": json.RawMessage(`{"audio_tokens":0}`),
				"completion_tokens_details": json.RawMessage(`{"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}`)}}},
		{"start", *evs[0].Message, llm.Response{ID: "chatcmpl-S1", Model: "gpt-4o", Created: 1767225700, SystemFingerprint: "fp_1"}},
		{"last", evs[len(evs)-1].Type, llm.EventMessageStop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("(-got +want):\n- %#v\n+ %#v", tc.got, tc.want)
			}
		})
	}
	for i, o := range open {
		if o {
			t.Errorf("block %d never closed", i)
		}
	}
}

type failingReader struct{ r io.Reader }

var errNetwork = errors.New("connection reset")

func (f failingReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if err == io.EOF {
		return n, errNetwork
	}
	return n, err
}

func TestStreamReaderEnds(t *testing.T) {
	full := string(readFile(t, "testdata/stream/full.sse"))
	noDone := full[:strings.Index(full, "data: [DONE]")]
	chunk := `data: {"id":"c","choices":[{"index":0,"delta":{"content":"x"}}]}`
	for _, tc := range []struct {
		name    string
		in      io.Reader
		wantErr func(error) bool
		events  int
	}{
		{"clean [DONE]", strings.NewReader(full), func(err error) bool { return err == io.EOF }, 16},
		{"no [DONE]", strings.NewReader(noDone), func(err error) bool { return errors.Is(err, ErrStreamCut) }, 14},
		{"cut inside an event", strings.NewReader(chunk + "\n\n" + chunk), func(err error) bool { return errors.Is(err, ErrStreamCut) }, 3},
		{"empty body", strings.NewReader(""), func(err error) bool { return errors.Is(err, ErrStreamCut) }, 0},
		{"read error", failingReader{strings.NewReader(chunk + "\n\n")}, func(err error) bool {
			return errors.Is(err, ErrStreamCut) && errors.Is(err, errNetwork)
		}, 3},
		{"malformed chunk", strings.NewReader(chunk + "\n\ndata: {oops}\n\n"), func(err error) bool {
			var e *llm.APIError
			return errors.As(err, &e) && e.MeshCode == llm.MeshUpstreamProtocolFailed && e.Status == 502
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewStreamReader(tc.in)
			n := 0
			var err error
			for ; n < 1000; n++ {
				if _, err = r.Next(); err != nil {
					break
				}
			}
			if !tc.wantErr(err) {
				t.Errorf("err = %v", err)
			}
			if n != tc.events {
				t.Errorf("got %d events before the error, want %d", n, tc.events)
			}
			if errors.Is(err, ErrStreamCut) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("ErrStreamCut does not wrap io.ErrUnexpectedEOF")
			}
			if _, again := r.Next(); again != err {
				t.Errorf("second Next = %v, want the same %v", again, err)
			}
		})
	}
}

func TestStreamReaderQuirks(t *testing.T) {
	t.Run("error null is an error, as in openai-go", func(t *testing.T) {
		evs, err := readAll(t, []byte(`data: {"id":"c","choices":[],"error":null}`+"\n\n"))
		if err != io.EOF || len(evs) != 1 || evs[0].Type != llm.EventError || evs[0].Err.Status != 200 || evs[0].Raw == nil {
			t.Errorf("events %v, err %v", evs, err)
		}
	})
	t.Run("same index, new id starts a new tool", func(t *testing.T) {
		in := `data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"f","arguments":"{}"}}]}}]}

data: {"id":"c","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"g","arguments":"{\"x\":1}"}}]},"finish_reason":"tool_calls"}]}

data: [DONE]

`
		evs, err := readAll(t, []byte(in))
		if err != io.EOF {
			t.Fatal(err)
		}
		var starts []string
		for _, ev := range evs {
			if ev.Type == llm.EventBlockStart {
				starts = append(starts, ev.Block.ID+":"+ev.Block.Name+":"+strconv.Itoa(ev.Index))
			}
		}
		if want := []string{"a:f:0", "b:g:1"}; !reflect.DeepEqual(starts, want) {
			t.Errorf("starts (-got +want):\n- %v\n+ %v", starts, want)
		}
	})
	t.Run("Azure's prompt filter chunk does not start the message", func(t *testing.T) {
		// Azure OpenAI starts a chat stream with the prompt's content
		// filter results: no choices, an empty id and model
		// (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter).
		in := `data: {"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{"hate":{"filtered":false,"severity":"safe"}}}]}

data: {"id":"chatcmpl-1","model":"gpt-4o-2024-11-20","created":1767225600,"choices":[{"index":0,"delta":{"role":"assistant","content":"Hi"},"content_filter_results":{}}]}

data: {"id":"chatcmpl-1","model":"gpt-4o-2024-11-20","created":1767225600,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}

data: [DONE]

`
		evs, err := readAll(t, []byte(in))
		if err != io.EOF {
			t.Fatal(err)
		}
		m := evs[0].Message
		if evs[0].Type != llm.EventMessageStart || m.ID != "chatcmpl-1" || m.Model != "gpt-4o-2024-11-20" || m.Created != 1767225600 {
			t.Errorf("message start %+v, want the answer's id, model and time", m)
		}
	})
	t.Run("reasoning_content becomes a thinking block", func(t *testing.T) {
		in := `data: {"id":"c","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}

data: {"id":"c","choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}

data: [DONE]

`
		evs, _ := readAll(t, []byte(in))
		var got []string
		for _, ev := range evs[1:] {
			got = append(got, ev.Type.String()+":"+strconv.Itoa(ev.Index)+":"+ev.Delta)
		}
		want := []string{"content_block_start:0:", "content_block_delta:0:hmm", "content_block_stop:0:",
			"content_block_start:1:", "content_block_delta:1:ok", "content_block_stop:1:", "message_delta:0:", "message_stop:0:"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("(-got +want):\n- %v\n+ %v", got, want)
		}
	})
}

// anthropicEvents is a canonical stream as the Anthropic reader produces it.
func anthropicEvents() []*llm.Event {
	return []*llm.Event{
		{Type: llm.EventMessageStart, Message: &llm.Response{ID: "msg_1", Model: "claude-sonnet", Created: 1767225900,
			Usage: llm.Usage{InputTokens: 10, CacheReadTokens: 100, CacheWriteTokens: 5, OutputTokens: 1}}},
		{Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockThinking}},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaThinking, Delta: "let me think"},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaSignature, Delta: "sig"},
		{Type: llm.EventBlockStop, Index: 0},
		{Type: llm.EventPing},
		{Type: llm.EventBlockStart, Index: 1, Block: &llm.Block{Type: llm.BlockText}},
		{Type: llm.EventBlockDelta, Index: 1, DeltaType: llm.DeltaText, Delta: "Hi \"there\"\n"},
		{Type: llm.EventBlockStop, Index: 1},
		{Type: llm.EventBlockStart, Index: 2, Block: &llm.Block{Type: llm.BlockToolUse, ID: "toolu_1", Name: "get_weather", Input: json.RawMessage("{}")}},
		{Type: llm.EventBlockDelta, Index: 2, DeltaType: llm.DeltaInputJSON, Delta: ""},
		{Type: llm.EventBlockDelta, Index: 2, DeltaType: llm.DeltaInputJSON, Delta: `{"city": "Pa`},
		{Type: llm.EventBlockDelta, Index: 2, DeltaType: llm.DeltaInputJSON, Delta: `ris"}`},
		{Type: llm.EventBlockStop, Index: 2},
		{Type: llm.EventBlockStart, Index: 3, Block: &llm.Block{Type: llm.BlockToolUse, ID: "toolu_2", Name: "now", Input: json.RawMessage("{}")}},
		{Type: llm.EventBlockDelta, Index: 3, DeltaType: llm.DeltaInputJSON, Delta: ""},
		{Type: llm.EventBlockStop, Index: 3},
		{Type: llm.EventMessageDelta, StopReason: llm.StopToolUse, Usage: &llm.Usage{OutputTokens: 42}},
		{Type: llm.EventMessageStop},
	}
}

func TestStreamWriterAnthropicEvents(t *testing.T) {
	for _, tc := range []struct {
		name string
		opt  StreamOptions
	}{
		{"with_usage", StreamOptions{IncludeUsage: true}},
		{"without_usage", StreamOptions{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := writeAll(t, anthropicEvents(), tc.opt)
			checkGolden(t, "testdata/stream/anthropic_events_"+tc.name+".golden", out)
			checkFraming(t, out)
			if got := bytes.Contains(out, []byte(`"choices":[]`)); got != tc.opt.IncludeUsage {
				t.Errorf("usage chunk present = %v, want %v", got, tc.opt.IncludeUsage)
			}
		})
	}
	t.Run("writes nothing after the end", func(t *testing.T) {
		var buf bytes.Buffer
		w := NewStreamWriter(sse.NewWriter(&buf, nil), StreamOptions{})
		for _, ev := range []*llm.Event{
			{Type: llm.EventMessageStart, Message: &llm.Response{ID: "x", Created: 1}},
			{Type: llm.EventError, Err: &llm.APIError{Type: llm.ErrOverloaded, Message: "Overloaded"}},
			{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockText}},
			{Type: llm.EventMessageStop},
		} {
			if err := w.Write(ev); err != nil {
				t.Fatal(err)
			}
		}
		want := `data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}

data: {"error":{"message":"Overloaded","type":"server_error","code":null}}

`
		if buf.String() != want {
			t.Errorf("(-got +want):\n%s", diff(buf.String(), want))
		}
	})
	t.Run("block index out of range", func(t *testing.T) {
		w := NewStreamWriter(sse.NewWriter(io.Discard, nil), StreamOptions{})
		if err := w.Write(&llm.Event{Type: llm.EventBlockStart, Index: -1, Block: &llm.Block{Type: llm.BlockText}}); err == nil {
			t.Error("no error for index -1")
		}
	})
	t.Run("created defaults to now", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var buf bytes.Buffer
			w := NewStreamWriter(sse.NewWriter(&buf, nil), StreamOptions{})
			if err := w.Write(&llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: "x"}}); err != nil {
				t.Fatal(err)
			}
			if want := `"created":` + strconv.FormatInt(time.Now().Unix(), 10) + `,`; !strings.Contains(buf.String(), want) {
				t.Errorf("%s lacks %s", buf.String(), want)
			}
		})
	})
}

// realStream is a stream shaped as OpenAI's API sends it (2026): members
// Keel's model has no field for (service_tier, obfuscation, refusal, usage
// null), the first content inside the role chunk, a tool call, the finish
// chunk, the usage chunk, [DONE].
const realStream = `data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"q1"}

data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[{"index":0,"delta":{"content":"lo."},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"x"}

data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"yy"}

data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":1}"}}]},"logprobs":null,"finish_reason":null}],"usage":null,"obfuscation":"z"}

data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null,"obfuscation":"w"}

data: {"id":"chatcmpl-R","object":"chat.completion.chunk","created":1767225700,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_9","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}},"obfuscation":"v"}

data: [DONE]

`

// dataEvents splits SSE output into its data payloads.
func dataEvents(t *testing.T, b []byte) []string {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(b))
	var out []string
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading SSE: %v", err)
		}
		out = append(out, string(ev.Data))
	}
}

func TestStreamPassesThroughChunkForChunk(t *testing.T) {
	in := dataEvents(t, []byte(realStream))
	noUsage := append(append([]string{}, in[:5]...), in[6])
	for _, tc := range []struct {
		name string
		opt  StreamOptions
		want []string
	}{
		{"usage asked", StreamOptions{IncludeUsage: true}, in},
		// Keel asks upstream for usage on its own; a client that did not
		// ask gets no usage chunk.
		{"usage not asked", StreamOptions{}, noUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := readAll(t, []byte(realStream))
			if err != io.EOF {
				t.Fatalf("reader ended with %v", err)
			}
			out := writeAll(t, evs, tc.opt)
			checkFraming(t, out)
			if got := dataEvents(t, out); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("%d chunks out of %d in (-got +want):\n%s", len(got), len(in), diff(strings.Join(got, "\n"), strings.Join(tc.want, "\n")))
			}
		})
	}
	t.Run("golden inputs", func(t *testing.T) {
		// Every stream of the golden set passes through unchanged but for the
		// chunks that carry nothing (an empty delta after the first).
		for name, path := range cases(t, "stream", ".sse") {
			raw := readFile(t, path)
			evs, err := readAll(t, raw)
			if err != io.EOF || evs[len(evs)-1].Type == llm.EventError {
				continue // error events are encoded in Keel's shape
			}
			got := dataEvents(t, writeAll(t, evs, StreamOptions{IncludeUsage: true}))
			in := dataEvents(t, raw)
			j := 0
			for _, g := range got {
				for j < len(in) && in[j] != g {
					j++
				}
				if j == len(in) {
					t.Errorf("%s: chunk %q is not one of the input's, in order", name, g)
					break
				}
				j++
			}
		}
	})
}

func TestStreamGroupChangedIsEncoded(t *testing.T) {
	evs, err := readAll(t, []byte(realStream))
	if err != io.EOF {
		t.Fatalf("reader ended with %v", err)
	}
	// The first chunk gave message_start, a text block start and a delta;
	// change the delta: the whole chunk is encoded from the events, the
	// role chunk and the content chunk, and nothing is written twice.
	if evs[2].Type != llm.EventBlockDelta || evs[2].RawSeq != 3 || !evs[2].RawLast {
		t.Fatalf("third event is %v seq %d last %v, want the first chunk's delta, 3, true", evs[2].Type, evs[2].RawSeq, evs[2].RawLast)
	}
	evs[2] = evs[2].Detach()
	evs[2].Delta = "HEL"
	out := writeAll(t, evs, StreamOptions{IncludeUsage: true})
	got := dataEvents(t, out)
	in := dataEvents(t, []byte(realStream))
	if len(got) != len(in)+1 {
		t.Fatalf("%d chunks, want %d (the first chunk as two encoded chunks): %q", len(got), len(in)+1, got)
	}
	if !strings.Contains(got[0], `"delta":{"role":"assistant","content":""}`) || !strings.Contains(got[1], `"delta":{"content":"HEL"}`) {
		t.Errorf("first chunks %q, want the encoded role chunk and the changed delta", got[:2])
	}
	if !reflect.DeepEqual(got[2:], in[1:]) {
		t.Errorf("the rest did not pass through (-got +want):\n%s", diff(strings.Join(got[2:], "\n"), strings.Join(in[1:], "\n")))
	}
	again, err := readAll(t, out)
	if err != io.EOF {
		t.Fatalf("re-reading: %v", err)
	}
	var text strings.Builder
	for _, ev := range again {
		if ev.DeltaType == llm.DeltaText {
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != "HELlo." {
		t.Errorf("text %q, want %q", text.String(), "HELlo.")
	}
	t.Run("held group cut short is flushed before an error", func(t *testing.T) {
		// The finish chunk's events are held until [DONE]; an error in
		// between (the stream was cut) writes what they encode first.
		evs, _ := readAll(t, []byte(realStream))
		var cut []*llm.Event
		for _, ev := range evs {
			if ev.Type == llm.EventMessageDelta {
				break
			}
			cut = append(cut, ev)
		}
		cut = append(cut, &llm.Event{Type: llm.EventError, Err: &llm.APIError{Type: llm.ErrAPI, Message: "cut"}})
		got := dataEvents(t, writeAll(t, cut, StreamOptions{}))
		last := got[len(got)-1]
		if !strings.HasPrefix(last, `{"error":`) || len(got) != 5 {
			t.Errorf("got %d chunks ending %q, want the 4 content chunks then the error", len(got), last)
		}
	})
}

// A reader given its events back reuses them, and a one-event chunk's
// bytes: the events read are the same as without recycling, and a content
// chunk costs one allocation (its text) in the steady state (issue 15).
func TestStreamReaderRecycles(t *testing.T) {
	var b strings.Builder
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := range 200 {
		b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" w` + strconv.Itoa(i) + `"},"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n")
	in := []byte(b.String())
	plain := NewStreamReader(bytes.NewReader(in))
	recycling := NewStreamReader(bytes.NewReader(in))
	for i := 0; ; i++ {
		want, werr := plain.Next()
		got, gerr := recycling.Next()
		if werr != gerr {
			t.Fatalf("event %d: error %v, want %v", i, gerr, werr)
		}
		if werr != nil {
			break
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("event %d: %+v, want %+v", i, got, want)
		}
		recycling.Recycle(got)
	}
	allocs := testing.AllocsPerRun(5, func() {
		r := NewStreamReader(bytes.NewReader(in))
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			r.Recycle(ev)
		}
	})
	t.Logf("%.0f allocations", allocs)
	if perEvent := (allocs - 40) / 200; perEvent > 1 {
		t.Errorf("%.0f allocations for 200 content chunks: %.2f each, want at most 1 (the text)", allocs, perEvent)
	}
}
