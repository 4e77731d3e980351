package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// readEvents reads a stream to its end and returns the events and the final error.
func readEvents(t testing.TB, in []byte) ([]*llm.Event, error) {
	t.Helper()
	r := NewStreamReader(bytes.NewReader(in))
	var evs []*llm.Event
	for n := 0; ; n++ {
		if n > len(in)+1 {
			t.Fatalf("reader returned more events (%d) than input bytes", n)
		}
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// stripRaw returns copies of evs without Raw, as a translator would build them.
func stripRaw(evs []*llm.Event) []*llm.Event {
	out := make([]*llm.Event, len(evs))
	for i, ev := range evs {
		c := *ev
		c.Raw, c.RawFormat = nil, llm.FormatUnknown
		out[i] = &c
	}
	return out
}

// writeEvents writes evs with a StreamWriter and returns the bytes, checking
// the flush count.
func writeEvents(t testing.TB, evs []*llm.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	flushes := 0
	w := NewStreamWriter(sse.NewWriter(&buf, func() error { flushes++; return nil }), StreamOptions{})
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatalf("Write(%v): %v", ev.Type, err)
		}
	}
	if flushes != len(evs) {
		t.Errorf("flushed %d times for %d events", flushes, len(evs))
	}
	return buf.Bytes()
}

// checkFraming asserts PROTOCOLS §0.3/0.4: every event has an "event:" line
// and ends with a blank line.
func checkFraming(t *testing.T, out []byte) {
	t.Helper()
	if !bytes.HasSuffix(out, []byte("\n\n")) {
		t.Errorf("stream does not end with a blank line: %q", out[max(0, len(out)-40):])
	}
	for i, chunk := range strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n") {
		lines := strings.Split(chunk, "\n")
		if !strings.HasPrefix(lines[0], "event: ") {
			t.Errorf("event %d has no event: line: %q", i, chunk)
		}
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "data: ") {
				t.Errorf("event %d has a line that is not data: %q", i, l)
			}
		}
	}
}

func TestStreamGolden(t *testing.T) {
	types := map[llm.EventType]bool{}
	deltas := map[llm.DeltaType]bool{}
	for name, in := range inputs(t, "streams", ".sse") {
		t.Run(name, func(t *testing.T) {
			evs, err := readEvents(t, in)
			if err != io.EOF {
				t.Fatalf("final error = %v, want io.EOF", err)
			}
			for _, ev := range evs {
				types[ev.Type] = true
				deltas[ev.DeltaType] = true
				if ev.RawFormat != llm.FormatAnthropic || ev.Raw == nil {
					t.Errorf("%v event lacks Raw", ev.Type)
				}
			}
			checkGolden(t, filepath.Join("testdata", "streams", name+".events.golden"), dump(t, stripRaw(evs)))

			// Raw pass-through reproduces the input, minus the skipped unknown event.
			verbatim := writeEvents(t, evs)
			want := dropUnknownEvents(t, in)
			if !bytes.Equal(verbatim, want) {
				t.Errorf("raw pass-through (-got +want):\n%s", diff(verbatim, want))
			}

			// Encoding from the canonical fields.
			out := writeEvents(t, stripRaw(evs))
			checkGolden(t, filepath.Join("testdata", "streams", name+".wire.golden"), out)
			checkFraming(t, out)

			// Round trip: reader → writer → reader.
			again, err := readEvents(t, out)
			if err != io.EOF {
				t.Fatalf("re-reading: final error = %v, want io.EOF", err)
			}
			mustEqual(t, "round trip", stripRaw(again), stripRaw(evs))
		})
	}
	for _, typ := range []llm.EventType{llm.EventMessageStart, llm.EventBlockStart, llm.EventBlockDelta, llm.EventBlockStop,
		llm.EventMessageDelta, llm.EventMessageStop, llm.EventPing, llm.EventError} {
		if !types[typ] {
			t.Errorf("no golden stream has a %v event", typ)
		}
	}
	for _, dt := range []llm.DeltaType{llm.DeltaText, llm.DeltaInputJSON, llm.DeltaThinking, llm.DeltaSignature, "citations_delta"} {
		if !deltas[dt] {
			t.Errorf("no golden stream has a %s delta", dt)
		}
	}
}

// dropUnknownEvents re-frames an SSE input as "event: x\ndata: y\n\n" with the
// events the reader skips left out.
func dropUnknownEvents(t *testing.T, in []byte) []byte {
	t.Helper()
	r := sse.NewReader(bytes.NewReader(in))
	var buf bytes.Buffer
	w := sse.NewWriter(&buf, nil)
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return buf.Bytes()
		}
		if err != nil {
			t.Fatal(err)
		}
		if !knownEvent(ev.Event) {
			continue
		}
		if err := w.WriteEvent(ev.Event, ev.Data); err != nil {
			t.Fatal(err)
		}
	}
}

func knownEvent(name string) bool {
	for typ := llm.EventMessageStart; typ <= llm.EventError; typ++ {
		if typ.String() == name {
			return true
		}
	}
	return false
}

func TestStreamGoldenCanonical(t *testing.T) {
	evs, err := readEvents(t, inputs(t, "streams", ".sse")["full"])
	if err != io.EOF {
		t.Fatal(err)
	}
	ms := evs[0]
	mustEqual(t, "message_start", ms.Message, &llm.Response{ID: "msg_1", Model: "claude-sonnet-4-5", Content: []llm.Block{},
		Usage: llm.Usage{InputTokens: 10, OutputTokens: 1, CacheReadTokens: 20, CacheWriteTokens: 5, Extra: llm.Extra{"service_tier": []byte(`"standard"`)}}})
	md := evs[len(evs)-2]
	mustEqual(t, "message_delta", md.Usage, &llm.Usage{OutputTokens: 42, ReasoningTokens: 7})
	if md.StopReason != llm.StopToolUse || md.Type != llm.EventMessageDelta {
		t.Errorf("message_delta: %+v", md)
	}
	var text, input, thinking, sig strings.Builder
	for _, ev := range evs {
		switch ev.DeltaType {
		case llm.DeltaText:
			text.WriteString(ev.Delta)
		case llm.DeltaInputJSON:
			input.WriteString(ev.Delta)
		case llm.DeltaThinking:
			thinking.WriteString(ev.Delta)
		case llm.DeltaSignature:
			sig.WriteString(ev.Delta)
		}
	}
	for _, c := range []struct{ name, got, want string }{
		{"text", text.String(), "Hi, let me check \"Paris\".\n"},
		{"input", input.String(), `{"city": "Paris"}`},
		{"thinking", thinking.String(), "The user wants the weather."},
		{"signature", sig.String(), "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"},
	} {
		if c.got != c.want {
			t.Errorf("%s (-got +want):\n-%q\n+%q", c.name, c.got, c.want)
		}
	}
	errEvs, err := readEvents(t, inputs(t, "streams", ".sse")["error"])
	if err != io.EOF {
		t.Fatal(err)
	}
	mustEqual(t, "error event", errEvs[len(errEvs)-1].Err, &llm.APIError{Status: 200, Type: llm.ErrOverloaded, Message: "Overloaded", RequestID: "req_011"})
}

func TestStreamReaderErrors(t *testing.T) {
	const (
		start   = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"model\":\"x\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n"
		block0  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
		delta0  = "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n"
		stop    = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
		ping    = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
		dataOne = "data: {\"type\":\"message_start\",\"message\":{}}\n\n"
	)
	tests := []struct {
		name      string
		in        string
		wantTypes []llm.EventType
		wantCut   bool   // ErrStreamCut
		wantMsg   string // substring of a protocol error
	}{
		{name: "complete", in: start + block0 + delta0 + stop, wantTypes: []llm.EventType{1, 2, 3, 6}},
		{name: "nothing after message_stop is read", in: start + stop + "garbage\n", wantTypes: []llm.EventType{1, 6}},
		{name: "CRLF framing", in: strings.ReplaceAll(start+ping+stop, "\n", "\r\n"), wantTypes: []llm.EventType{1, 7, 6}},
		{name: "empty stream", in: "", wantCut: true},
		{name: "clean EOF before message_stop", in: start + block0 + delta0, wantTypes: []llm.EventType{1, 2, 3}, wantCut: true},
		{name: "final event lacks blank line", in: start + strings.TrimSuffix(stop, "\n"), wantTypes: []llm.EventType{1}, wantCut: true},
		{name: "cut mid-line", in: start + stop[:30], wantTypes: []llm.EventType{1}, wantCut: true},
		{name: "data-only stream", in: dataOne + dataOne, wantMsg: `stream event without an "event:" line`},
		{name: "only pings", in: ping + ping, wantTypes: []llm.EventType{7, 7}, wantCut: true},
		{name: "comments and empty events are skipped", in: ": hi\n\nid: 3\n\n" + start + stop, wantTypes: []llm.EventType{1, 6}},
		{name: "unknown event skipped", in: start + "event: brand_new\ndata: {\"type\":\"brand_new\"}\n\n" + stop, wantTypes: []llm.EventType{1, 6}},
		{name: "invalid JSON names the event", in: start + "event: content_block_delta\ndata: {\"type\":\n\n", wantTypes: []llm.EventType{1}, wantMsg: `stream event "content_block_delta": invalid JSON`},
		{name: "empty data", in: start + "event: message_stop\ndata:\n\n", wantTypes: []llm.EventType{1}, wantMsg: `"message_stop": empty data`},
		{name: "type mismatch", in: start + "event: message_stop\ndata: {\"type\":\"ping\"}\n\n", wantTypes: []llm.EventType{1}, wantMsg: `data type "ping" does not match the event name`},
		{name: "first index not 0", in: start + strings.Replace(block0, `"index":0`, `"index":1`, 1), wantTypes: []llm.EventType{1}, wantMsg: "index 1 out of order, expected 0"},
		{name: "index gap", in: start + block0 + strings.Replace(block0, `"index":0`, `"index":2`, 1), wantTypes: []llm.EventType{1, 2}, wantMsg: "index 2 out of order, expected 1"},
		{name: "repeated index", in: start + block0 + block0, wantTypes: []llm.EventType{1, 2}, wantMsg: "index 0 out of order, expected 1"},
		{name: "delta for unstarted block", in: start + delta0, wantTypes: []llm.EventType{1}, wantMsg: "index 0 names no started content block"},
		{name: "missing index", in: start + strings.Replace(block0, `"index":0,`, ``, 1), wantTypes: []llm.EventType{1}, wantMsg: "index: field required"},
		{name: "event before message_start", in: block0, wantMsg: "event before message_start"},
		{name: "message_start twice", in: start + start, wantTypes: []llm.EventType{1}, wantMsg: "message_start repeated"},
		{name: "delta without delta", in: start + block0 + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0}\n\n", wantTypes: []llm.EventType{1, 2}, wantMsg: "delta: field required"},
		{name: "bad usage", in: start + "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{},\"usage\":{\"output_tokens\":\"x\"}}\n\n", wantTypes: []llm.EventType{1}, wantMsg: "usage.output_tokens: expected an integer"},
		{name: "error event ends the stream", in: start + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n" + start, wantTypes: []llm.EventType{1, 8}},
		{name: "error event with non-JSON data", in: "event: error\ndata: upstream exploded\n\n", wantTypes: []llm.EventType{8}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs, err := readEvents(t, []byte(tt.in))
			var types []llm.EventType
			for _, ev := range evs {
				types = append(types, ev.Type)
			}
			mustEqual(t, "event types", types, tt.wantTypes)
			switch {
			case tt.wantCut:
				if err != ErrStreamCut || !errors.Is(err, io.ErrUnexpectedEOF) {
					t.Errorf("final error = %v, want ErrStreamCut", err)
				}
			case tt.wantMsg != "":
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.MeshCode != llm.MeshUpstreamProtocolFailed || ae.Status != 502 || !strings.Contains(ae.Message, tt.wantMsg) {
					t.Errorf("final error = %v, want a protocol error containing %q", err, tt.wantMsg)
				}
			default:
				if err != io.EOF {
					t.Errorf("final error = %v, want io.EOF", err)
				}
			}
		})
	}
}

func TestStreamReaderErrorsAreSticky(t *testing.T) {
	r := NewStreamReader(strings.NewReader("data: {}\n\nevent: ping\ndata: {\"type\":\"ping\"}\n\n"))
	_, err1 := r.Next()
	_, err2 := r.Next()
	if err1 == nil || err1 != err2 {
		t.Errorf("errors %v then %v, want the same error twice", err1, err2)
	}
}

func TestStreamReaderErrorEvent(t *testing.T) {
	evs, _ := readEvents(t, []byte("event: error\ndata: upstream exploded\n\n"))
	mustEqual(t, "non-JSON error event", evs[0].Err, &llm.APIError{Status: 200, Type: llm.ErrAPI, Message: "upstream exploded"})
	evs, _ = readEvents(t, []byte("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"weird_error\",\"message\":\"m\",\"details\":{\"error_code\":\"c\"}}}\n\n"))
	mustEqual(t, "unknown type", evs[0].Err, &llm.APIError{Status: 200, Type: llm.ErrAPI, RawType: "weird_error", Message: "m", Code: "c"})
}

func TestStreamWriterEvents(t *testing.T) {
	tests := []struct {
		name string
		ev   llm.Event
		want string
	}{
		{name: "message_start", ev: llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: "msg_1", Model: "m", Usage: llm.Usage{InputTokens: 10, OutputTokens: 1}}},
			want: `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}}`},
		{name: "text start", ev: llm.Event{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockText}},
			want: `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
		{name: "tool_use start", ev: llm.Event{Type: llm.EventBlockStart, Index: 1, Block: &llm.Block{Type: llm.BlockToolUse, ID: "toolu_1", Name: "f"}},
			want: `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"toolu_1","name":"f","input":{}}}`},
		{name: "thinking start", ev: llm.Event{Type: llm.EventBlockStart, Index: 2, Block: &llm.Block{Type: llm.BlockThinking}},
			want: `{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}}`},
		{name: "text delta", ev: llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: "a\"b\n"},
			want: `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a\"b\n"}}`},
		{name: "input_json delta", ev: llm.Event{Type: llm.EventBlockDelta, Index: 1, DeltaType: llm.DeltaInputJSON, Delta: `{"a":`},
			want: `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`},
		{name: "thinking delta", ev: llm.Event{Type: llm.EventBlockDelta, Index: 2, DeltaType: llm.DeltaThinking, Delta: "hmm"},
			want: `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"hmm"}}`},
		{name: "signature delta", ev: llm.Event{Type: llm.EventBlockDelta, Index: 2, DeltaType: llm.DeltaSignature, Delta: "sig"},
			want: `{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"sig"}}`},
		{name: "block stop", ev: llm.Event{Type: llm.EventBlockStop, Index: 2}, want: `{"type":"content_block_stop","index":2}`},
		{name: "message_delta", ev: llm.Event{Type: llm.EventMessageDelta, StopReason: llm.StopEndTurn, Usage: &llm.Usage{OutputTokens: 42}},
			want: `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":42}}`},
		{name: "message_delta full usage", ev: llm.Event{Type: llm.EventMessageDelta, StopReason: llm.StopSequence, StopSequence: "END",
			Usage: &llm.Usage{InputTokens: 5, OutputTokens: 42, CacheReadTokens: 3, CacheWriteTokens: 2, ReasoningTokens: 7}},
			want: `{"type":"message_delta","delta":{"stop_reason":"stop_sequence","stop_sequence":"END"},"usage":{"input_tokens":5,"output_tokens":42,"cache_creation_input_tokens":2,"cache_read_input_tokens":3,"output_tokens_details":{"thinking_tokens":7}}}`},
		{name: "message_stop", ev: llm.Event{Type: llm.EventMessageStop}, want: `{"type":"message_stop"}`},
		{name: "ping", ev: llm.Event{Type: llm.EventPing}, want: `{"type":"ping"}`},
		{name: "error", ev: llm.Event{Type: llm.EventError, Err: &llm.APIError{Status: 529, Type: llm.ErrOverloaded, Message: "Overloaded"}},
			want: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
		{name: "mesh error", ev: llm.Event{Type: llm.EventError, Err: &llm.APIError{Status: 504, Type: llm.ErrTimeout, Message: "deadline", MeshCode: llm.MeshTimeout}},
			want: `{"type":"error","error":{"type":"timeout_error","message":"deadline","mesh_error_code":"MESH_TIMEOUT"}}`},
		{name: "raw from another format is re-encoded", ev: llm.Event{Type: llm.EventPing, Raw: []byte(`{"choices":[]}`), RawFormat: llm.FormatOpenAI}, want: `{"type":"ping"}`},
		{name: "raw anthropic is verbatim", ev: llm.Event{Type: llm.EventPing, Raw: []byte(`{"type": "ping", "x": 1}`), RawFormat: llm.FormatAnthropic}, want: `{"type": "ping", "x": 1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := writeEvents(t, []*llm.Event{&tt.ev})
			want := "event: " + tt.ev.Type.String() + "\ndata: " + tt.want + "\n\n"
			if string(out) != want {
				t.Errorf("Write (-got +want):\n-%s\n+%s", out, want)
			}
		})
	}
}

func TestStreamWriterRejects(t *testing.T) {
	for _, ev := range []llm.Event{
		{Type: 0},
		{Type: 99},
		{Type: llm.EventMessageStart},
		{Type: llm.EventBlockStart},
		{Type: llm.EventError},
		{Type: llm.EventBlockDelta, DeltaType: "citations_delta", Delta: "not json"},
	} {
		var buf bytes.Buffer
		if err := NewStreamWriter(sse.NewWriter(&buf, nil), StreamOptions{}).Write(&ev); err == nil || buf.Len() != 0 {
			t.Errorf("Write(%+v) = %v and wrote %q, want an error and nothing written", ev, err, buf.String())
		}
	}
}

// TestDataOnlyStreamIsReported: the SDK silently yields nothing for a
// data-only stream (PROTOCOLS §0.3); StreamReader must report it instead.
func TestDataOnlyStreamIsReported(t *testing.T) {
	in := []byte("data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	if _, err := readEvents(t, in); err == nil || err == io.EOF {
		t.Errorf("StreamReader final error = %v, want a protocol error", err)
	}
}

// longStream is an Anthropic stream of n text deltas.
func longStream(n int) []byte {
	var b strings.Builder
	b.WriteString("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
	b.WriteString("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	for i := range n {
		fmt.Fprintf(&b, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" word%d\"}}\n\n", i)
		if i%10 == 0 {
			b.WriteString("event: ping\ndata: {\"type\": \"ping\"}\n\n")
		}
	}
	b.WriteString("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	b.WriteString("event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":9}}\n\n")
	b.WriteString("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	return []byte(b.String())
}

// A reader given its events back reuses them: the events read are the
// same as without recycling, and a delta costs one allocation (its text)
// in the steady state, not three (issue 15: no per-event allocations).
func TestStreamReaderRecycles(t *testing.T) {
	in := longStream(200)
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
	// 200 deltas and 20 pings; the fixed part (reader, buffers, the
	// message and block starts) is well under 40 allocations.
	if perEvent := (allocs - 40) / 220; perEvent > 1 {
		t.Errorf("%.0f allocations for 220 steady events: %.2f each, want at most 1 (the delta's text)", allocs, perEvent)
	}
}
