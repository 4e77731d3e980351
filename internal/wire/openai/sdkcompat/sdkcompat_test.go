// Package sdkcompat holds only tests: it decodes what the openai package's
// StreamWriter writes with the official Go SDK (openai-go/v3), in its own
// package so that the codec's fuzz builds do not instrument the SDK (with
// it, every FuzzStreamReader execution paid for 132 KiB of coverage
// counters, six times the codec's own, and ran about 3,000 times in 5 s).
// The inputs are the writer's golden outputs, which the openai package's
// TestStreamGolden and TestStreamWriterAnthropicEvents check.
package sdkcompat

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/ssestream"
)

// sdkRead decodes writer output with openai-go's own SSE stream and accumulator.
func sdkRead(t *testing.T, golden string) (oai.ChatCompletionAccumulator, error) {
	t.Helper()
	out, err := os.ReadFile(filepath.Join("..", "testdata", "stream", golden))
	if err != nil {
		t.Fatal(err)
	}
	res := &http.Response{
		StatusCode: 200,
		Header:     http.Header{"Content-Type": {"text/event-stream"}},
		Body:       io.NopCloser(bytes.NewReader(out)),
	}
	stream := ssestream.NewStream[oai.ChatCompletionChunk](ssestream.NewDecoder(res), nil)
	var acc oai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			t.Fatalf("accumulator rejected chunk %+v", stream.Current())
		}
	}
	return acc, stream.Err()
}

func TestSDKCompatibility(t *testing.T) {
	t.Run("openai upstream stream", func(t *testing.T) {
		// full.sse read and written back with IncludeUsage.
		acc, err := sdkRead(t, "full.out.golden")
		if err != nil {
			t.Fatalf("SDK stream error: %v", err)
		}
		msg := acc.Choices[0].Message
		for _, tc := range []struct {
			name      string
			got, want any
		}{
			{"id", acc.ID, "chatcmpl-S1"},
			{"content", msg.Content, `Let me check both "cities".`},
			{"tool calls", len(msg.ToolCalls), 2},
			{"tool 0", msg.ToolCalls[0].ID + " " + msg.ToolCalls[0].Function.Name + " " + msg.ToolCalls[0].Function.Arguments, `call_p get_weather {"city": "Paris"}`},
			{"tool 1", msg.ToolCalls[1].ID + " " + msg.ToolCalls[1].Function.Name + " " + msg.ToolCalls[1].Function.Arguments, `call_r get_weather {"city": "Rome"}`},
			{"finish", acc.Choices[0].FinishReason, "tool_calls"},
			{"prompt tokens", acc.Usage.PromptTokens, int64(120)},
			{"cached tokens", acc.Usage.PromptTokensDetails.CachedTokens, int64(64)},
			{"completion tokens", acc.Usage.CompletionTokens, int64(48)},
			{"total tokens", acc.Usage.TotalTokens, int64(168)},
		} {
			if !reflect.DeepEqual(tc.got, tc.want) {
				t.Errorf("%s (-got +want):\n- %#v\n+ %#v", tc.name, tc.got, tc.want)
			}
		}
	})
	t.Run("anthropic upstream events", func(t *testing.T) {
		// The openai package's anthropicEvents written with IncludeUsage.
		acc, err := sdkRead(t, "anthropic_events_with_usage.golden")
		if err != nil {
			t.Fatalf("SDK stream error: %v", err)
		}
		msg := acc.Choices[0].Message
		if msg.Content != "Hi \"there\"\n" || len(msg.ToolCalls) != 2 ||
			msg.ToolCalls[0].Function.Arguments != `{"city": "Paris"}` || msg.ToolCalls[1].Function.Arguments != "{}" {
			t.Errorf("message = %+v", msg)
		}
		if acc.Usage.PromptTokens != 115 || acc.Usage.PromptTokensDetails.CachedTokens != 100 || acc.Usage.CompletionTokens != 42 {
			t.Errorf("usage = %+v", acc.Usage)
		}
	})
	t.Run("error stream", func(t *testing.T) {
		// error.sse read and written back with IncludeUsage.
		acc, err := sdkRead(t, "error.out.golden")
		var se *ssestream.StreamError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "The server had an error") {
			t.Errorf("err = %v, want a StreamError", err)
		}
		if acc.Choices[0].Message.Content != "Partial" {
			t.Errorf("content before the error = %q", acc.Choices[0].Message.Content)
		}
	})
}
