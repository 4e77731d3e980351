// Package sdkcompat holds only tests: it decodes the translated streams of
// the translate package's TestStreamGolden (testdata/streams/*.sse, which
// that test checks byte for byte) with the client's official Go SDK
// (anthropic-sdk-go Message.Accumulate, openai-go ChatCompletionAccumulator),
// in its own package so that translate's fuzz build does not instrument
// both SDKs (with them, FuzzPrepare paid for 187 KiB of coverage counters
// per call and ran 4,000-10,000 times in 5 s).
package sdkcompat

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	asdk "github.com/anthropics/anthropic-sdk-go/v2"
	assestream "github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"
	osdk "github.com/openai/openai-go/v3"
	ossestream "github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/keelmesh/keel/internal/llm"
)

// tool is one tool call as the client must see it: the upstream's id, the
// client's own (restored) name and the arguments.
type tool struct{ id, name, input string }

// streamCase is what a translated stream must reassemble to; the same
// answers as the translate package's streamCases.
type streamCase struct {
	name  string
	text  string
	tools []tool
	stop  llm.StopReason
	usage llm.Usage
}

var streamCases = []streamCase{
	{
		name: "parallel_tools",
		text: "Let me check both.",
		tools: []tool{
			{"toolu_a", "weather.get", `{"city": "Paris", "days": [1, 2, 3], "units": "metric"}`},
			{"toolu_b", "get_time", `{"tz": "Europe/Oslo", "format": "24h"}`},
		},
		stop:  llm.StopToolUse,
		usage: llm.Usage{InputTokens: 25, OutputTokens: 40, CacheReadTokens: 100, CacheWriteTokens: 7},
	},
	{name: "text_max_tokens", text: "Once upon a time", stop: llm.StopMaxTokens, usage: llm.Usage{InputTokens: 5, OutputTokens: 4}},
	{name: "text_stop_sequence", text: "One, two", stop: llm.StopSequence, usage: llm.Usage{InputTokens: 5, OutputTokens: 3}},
}

// TestStreamsDecodeWithSDKs: an Anthropic upstream's stream translated for an
// OpenAI client (a2o_*) decodes with openai-go, an OpenAI upstream's for an
// Anthropic client (o2a_*) with anthropic-sdk-go, each to exactly the text,
// tool calls (ids, restored names, inputs), stop reason and usage.
func TestStreamsDecodeWithSDKs(t *testing.T) {
	for _, c := range streamCases {
		t.Run("a2o_"+c.name, func(t *testing.T) { checkOpenAISDK(t, c, read(t, "a2o_"+c.name)) })
		t.Run("o2a_"+c.name, func(t *testing.T) { checkAnthropicSDK(t, c, read(t, "o2a_"+c.name)) })
	}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "streams", name+".sse"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func checkAnthropicSDK(t *testing.T, c streamCase, out []byte) {
	t.Helper()
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(out)), Request: httptest.NewRequest("POST", "http://keel.test/v1/messages", nil)}
	st := assestream.NewStream[asdk.MessageStreamEventUnion](assestream.NewDecoder(res), nil)
	defer st.Close()
	var msg asdk.Message
	for st.Next() {
		if err := msg.Accumulate(st.Current()); err != nil {
			t.Fatalf("Accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("SDK stream error: %v", err)
	}
	if len(msg.Content) != 1+len(c.tools) {
		t.Fatalf("SDK built %d blocks, want %d: %+v", len(msg.Content), 1+len(c.tools), msg.Content)
	}
	if got := msg.Content[0].Text; got != c.text {
		t.Errorf("text (-got +want):\n-%q\n+%q", got, c.text)
	}
	for i, tl := range c.tools {
		b := msg.Content[i+1]
		if b.Type != "tool_use" || b.ID != tl.id || b.Name != tl.name {
			t.Errorf("block %d = %s %s %s, want tool_use %s %s", i+1, b.Type, b.ID, b.Name, tl.id, tl.name)
		}
		jsonEq(t, "tool input", b.Input, []byte(tl.input))
	}
	wantStop := c.stop
	if wantStop == llm.StopSequence {
		wantStop = llm.StopEndTurn // OpenAI's "stop" does not say a sequence matched
	}
	if string(msg.StopReason) != string(wantStop) {
		t.Errorf("stop reason %q, want %q", msg.StopReason, wantStop)
	}
	u := msg.Usage
	if got, want := [4]int64{u.InputTokens, u.OutputTokens, u.CacheReadInputTokens, u.CacheCreationInputTokens},
		[4]int64{int64(c.usage.InputTokens), int64(c.usage.OutputTokens), int64(c.usage.CacheReadTokens), int64(c.usage.CacheWriteTokens)}; got != want {
		t.Errorf("usage in/out/read/write (-got +want):\n-%v\n+%v", got, want)
	}
}

func checkOpenAISDK(t *testing.T, c streamCase, out []byte) {
	t.Helper()
	res := &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(out))}
	st := ossestream.NewStream[osdk.ChatCompletionChunk](ossestream.NewDecoder(res), nil)
	var acc osdk.ChatCompletionAccumulator
	for st.Next() {
		if !acc.AddChunk(st.Current()) {
			t.Fatalf("accumulator rejected chunk %+v", st.Current())
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("SDK stream error: %v", err)
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	m := acc.Choices[0].Message
	if m.Content != c.text {
		t.Errorf("text (-got +want):\n-%q\n+%q", m.Content, c.text)
	}
	if len(m.ToolCalls) != len(c.tools) {
		t.Fatalf("SDK built %d tool calls, want %d", len(m.ToolCalls), len(c.tools))
	}
	for i, tl := range c.tools {
		tc := m.ToolCalls[i]
		if tc.ID != tl.id || tc.Function.Name != tl.name {
			t.Errorf("tool call %d = %s %s, want %s %s", i, tc.ID, tc.Function.Name, tl.id, tl.name)
		}
		jsonEq(t, "arguments", []byte(tc.Function.Arguments), []byte(tl.input))
	}
	want := map[llm.StopReason]string{llm.StopToolUse: "tool_calls", llm.StopMaxTokens: "length", llm.StopSequence: "stop", llm.StopEndTurn: "stop"}[c.stop]
	if acc.Choices[0].FinishReason != want {
		t.Errorf("finish reason %q, want %q", acc.Choices[0].FinishReason, want)
	}
	u := acc.Usage
	if got, want := [3]int64{u.PromptTokens, u.CompletionTokens, u.PromptTokensDetails.CachedTokens},
		[3]int64{int64(c.usage.PromptTokens()), int64(c.usage.OutputTokens), int64(c.usage.CacheReadTokens)}; got != want {
		t.Errorf("usage prompt/completion/cached (-got +want):\n-%v\n+%v", got, want)
	}
}

// jsonEq compares two JSON documents by value.
func jsonEq(t *testing.T, what string, got, want []byte) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: got invalid JSON %q: %v", what, got, err)
		return
	}
	if err := json.Unmarshal(want, &w); err != nil {
		t.Fatalf("%s: want invalid JSON %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s (-got +want):\n-%s\n+%s", what, got, want)
	}
}
