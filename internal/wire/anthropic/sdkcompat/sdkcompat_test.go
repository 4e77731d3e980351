// Package sdkcompat holds only tests: it decodes what the anthropic
// package's StreamWriter writes with the official Go SDK
// (anthropic-sdk-go/v2), in its own package so that the codec's fuzz builds
// do not instrument the SDK.
package sdkcompat

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	codec "github.com/keelmesh/keel/internal/wire/anthropic"
)

// readEvents reads a golden stream file to its clean end.
func readEvents(t *testing.T, path string) ([]*llm.Event, error) {
	t.Helper()
	in, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	r := codec.NewStreamReader(bytes.NewReader(in))
	var evs []*llm.Event
	for {
		ev, err := r.Next()
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
}

// stripRaw returns copies of evs without Raw, so the writer encodes fields.
func stripRaw(evs []*llm.Event) []*llm.Event {
	out := make([]*llm.Event, len(evs))
	for i, ev := range evs {
		c := *ev
		c.Raw, c.RawFormat = nil, llm.FormatUnknown
		out[i] = &c
	}
	return out
}

func writeEvents(t *testing.T, evs []*llm.Event) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := codec.NewStreamWriter(sse.NewWriter(&buf, nil), codec.StreamOptions{})
	for _, ev := range evs {
		if err := w.Write(ev); err != nil {
			t.Fatalf("Write(%v): %v", ev.Type, err)
		}
	}
	return buf.Bytes()
}

// sdkStream decodes out with the official SDK's SSE decoder and accumulator.
func sdkStream(t *testing.T, out []byte) (anthropic.Message, []string, error) {
	t.Helper()
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}, "Request-Id": {"req_sdk"}},
		Body:       io.NopCloser(bytes.NewReader(out)),
		Request:    httptest.NewRequest("POST", "http://keel.test/v1/messages", nil),
	}
	stream := ssestream.NewStream[anthropic.MessageStreamEventUnion](ssestream.NewDecoder(res), nil)
	defer stream.Close()
	var msg anthropic.Message
	var types []string
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := msg.Accumulate(ev); err != nil {
			t.Fatalf("Accumulate(%s): %v", ev.Type, err)
		}
	}
	return msg, types, stream.Err()
}

// TestStreamWriterSDKCompatible decodes the writer's output with the official
// Go SDK (anthropic-sdk-go/v2) and checks what its accumulator builds.
func TestStreamWriterSDKCompatible(t *testing.T) {
	evs, err := readEvents(t, filepath.Join("..", "testdata", "streams", "full.sse"))
	if err != io.EOF {
		t.Fatal(err)
	}
	for _, mode := range []string{"encoded", "raw"} {
		t.Run(mode, func(t *testing.T) {
			in := evs
			if mode == "encoded" {
				in = stripRaw(evs)
			}
			msg, types, err := sdkStream(t, writeEvents(t, in))
			if err != nil {
				t.Fatalf("SDK stream error: %v", err)
			}
			if len(types) != len(evs)-2 { // the SDK skips the two pings
				t.Errorf("SDK saw %d events %v, want %d", len(types), types, len(evs)-2)
			}
			if len(msg.Content) != 3 {
				t.Fatalf("SDK message has %d blocks, want 3: %s", len(msg.Content), msg.RawJSON())
			}
			got := map[string]any{
				"id": msg.ID, "model": string(msg.Model), "stop_reason": string(msg.StopReason),
				"thinking": msg.Content[0].Thinking, "signature": msg.Content[0].Signature,
				"text": msg.Content[1].Text, "citations": len(msg.Content[1].Citations),
				"tool_id": msg.Content[2].ID, "tool_name": msg.Content[2].Name, "tool_input": string(msg.Content[2].Input),
				"input_tokens": msg.Usage.InputTokens, "output_tokens": msg.Usage.OutputTokens,
				"cache_read": msg.Usage.CacheReadInputTokens, "cache_write": msg.Usage.CacheCreationInputTokens,
				"thinking_tokens": msg.Usage.OutputTokensDetails.ThinkingTokens,
			}
			want := map[string]any{
				"id": "msg_1", "model": "claude-sonnet-4-5", "stop_reason": "tool_use",
				"thinking": "The user wants the weather.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3h",
				"text": "Hi, let me check \"Paris\".\n", "citations": 1,
				"tool_id": "toolu_1", "tool_name": "get_weather", "tool_input": `{"city": "Paris"}`,
				"input_tokens": int64(10), "output_tokens": int64(42),
				"cache_read": int64(20), "cache_write": int64(5),
				"thinking_tokens": int64(7),
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("SDK accumulated message (-got +want):\n-%v\n+%v", got, want)
			}
		})
	}
}

func TestStreamWriterSDKError(t *testing.T) {
	evs, err := readEvents(t, filepath.Join("..", "testdata", "streams", "error.sse"))
	if err != io.EOF {
		t.Fatal(err)
	}
	msg, _, err := sdkStream(t, writeEvents(t, stripRaw(evs)))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("SDK error = %v, want *anthropic.Error", err)
	}
	if apiErr.StatusCode != 200 || apiErr.Type() != "overloaded_error" || apiErr.Message != "Overloaded" {
		t.Errorf("SDK error: status %d type %q message %q", apiErr.StatusCode, apiErr.Type(), apiErr.Message)
	}
	if len(msg.Content) != 1 || msg.Content[0].Text != "Partial" {
		t.Errorf("SDK message before the error: %s", msg.RawJSON())
	}
}

// TestSDKIgnoresDataOnly documents why every event needs an event: line: the
// SDK reports nothing for a data-only stream, while StreamReader reports it.
func TestSDKIgnoresDataOnly(t *testing.T) {
	in := []byte("data: {\"type\":\"message_start\",\"message\":{\"id\":\"m\"}}\n\ndata: {\"type\":\"message_stop\"}\n\n")
	_, types, err := sdkStream(t, in)
	if len(types) != 0 || err != nil {
		t.Errorf("SDK: %v, %v; the SDK behaviour PROTOCOLS §0.3 describes has changed", types, err)
	}
}
