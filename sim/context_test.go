package sim

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestContextErrorShapes checks what a prompt longer than the model's
// context window gets back, as each real server says it: Anthropic's
// message, OpenAI's code, and llama.cpp's own shape (PROTOCOLS.md §6.2) on
// both of its endpoints, streamed or not.
func TestContextErrorShapes(t *testing.T) {
	const long = "one two three four five six seven eight nine ten"
	cases := []struct {
		name   string
		shape  string
		format Format
		stream bool
		want   string // the error object, as JSON, the body's "error" member holds
	}{
		{name: "anthropic", format: FormatAnthropic,
			want: `{"type":"invalid_request_error","message":"prompt is too long: 11 tokens > 8 maximum"}`},
		{name: "openai", format: FormatOpenAI,
			want: `{"message":"This model's maximum context length is 8 tokens. However, your messages resulted in 11 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}`},
		{name: "llama.cpp openai", shape: ContextErrorLlamaCpp, format: FormatOpenAI,
			want: `{"code":400,"message":"request (11 tokens) exceeds the available context size (8 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":11,"n_ctx":8}`},
		{name: "llama.cpp openai stream", shape: ContextErrorLlamaCpp, format: FormatOpenAI, stream: true,
			want: `{"code":400,"message":"request (11 tokens) exceeds the available context size (8 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":11,"n_ctx":8}`},
		{name: "llama.cpp messages", shape: ContextErrorLlamaCpp, format: FormatAnthropic,
			want: `{"code":400,"message":"request (11 tokens) exceeds the available context size (8 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":11,"n_ctx":8}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ZeroLatency()
			cfg.Models = cfg.Models[:1]
			cfg.Models[0].ContextWindow = 8
			cfg.Models[0].Formats = nil
			cfg.Models[0].ContextError = tc.shape
			f, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			h := memHarness(f)
			resp, err := h.post(context.Background(), tc.format, "", chatBody(tc.format, cfg.Models[0].Name, long, tc.stream, ""))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			var body struct {
				Error json.RawMessage `json:"error"`
			}
			if err := json.Unmarshal(b, &body); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			if got := string(body.Error); got != tc.want {
				t.Errorf("error (-got +want):\n- %s\n+ %s", got, tc.want)
			}
		})
	}
	cfg := ZeroLatency()
	cfg.Models[0].ContextError = "vllm"
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "context_error") {
		t.Errorf("an unknown shape: %v, want an error naming context_error", err)
	}
}
