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

// TestAnthropicVersionNoSampling: as Anthropic's API, the fleet's
// Anthropic endpoints refuse temperature, top_p and top_k under
// anthropic-version 2026-10-21 (PROTOCOLS.md §0.1), and take them under
// 2023-06-01.
func TestAnthropicVersionNoSampling(t *testing.T) {
	f, err := New(ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: f.Transport()}
	for _, tc := range []struct {
		version, extra string
		status         int
	}{
		{"2026-10-21", `,"temperature":0`, 400},
		{"2026-10-21", `,"top_p":0.9`, 400},
		{"2026-10-21", `,"top_k":5`, 400},
		{"2026-10-21", ``, 200},
		{"2023-06-01", `,"temperature":0,"top_p":0.9,"top_k":5`, 200},
	} {
		body := `{"model":"sim-haiku","max_tokens":16,"messages":[{"role":"user","content":"hi"}]` + tc.extra + `}`
		req, _ := http.NewRequest(http.MethodPost, "http://"+TransportHost+"/v1/messages", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", tc.version)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s %s: status %d, want %d: %s", tc.version, tc.extra, resp.StatusCode, tc.status, b)
		}
		if tc.status == 400 && !strings.Contains(string(b), `"invalid_request_error"`) {
			t.Errorf("%s %s: %s, want invalid_request_error", tc.version, tc.extra, b)
		}
	}
}
