package keel_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// A same-format answer that nothing in Keel changes reaches the client
// byte for byte: its members, their order and spacing, members Keel's
// model of the format does not know (issue 15: re-encoding added refusal,
// logprobs and usage details the upstream never sent). An answer Keel does
// change (a repaired JSON answer) is encoded anew.
func TestSameFormatAnswerPassesThroughByteForByte(t *testing.T) {
	openaiBody := `{"id":"chatcmpl-1", "object":"chat.completion","created":1767225600,"model":"gpt-x",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Hello there."},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12},"service_tier":"default","x_vendor":{"a":[1,2]}}`
	anthropicBody := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"Hello there."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3,"service_tier":"standard"},"container":null}`
	fenced := "```json\n{\"risk_level\": \"low\"}\n```"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.Contains(string(b), "response_format"):
			io.WriteString(w, strings.Replace(openaiBody, `"Hello there."`, `"`+strings.ReplaceAll(strings.ReplaceAll(fenced, "\"", `\"`), "\n", `\n`)+`"`, 1))
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			io.WriteString(w, openaiBody)
		default:
			io.WriteString(w, anthropicBody)
		}
	}))
	defer up.Close()
	cfg, err := config.Parse([]byte(`request_log: {enabled: false}
providers:
  - {name: o, type: openai, base_url: "`+up.URL+`/v1"}
  - {name: a, type: anthropic, base_url: "`+up.URL+`"}
models:
  - {name: gpt-x, endpoints: [{provider: o}]}
  - {name: claude-x, endpoints: [{provider: a}]}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	proxy := httptest.NewServer(m.Handler())
	defer proxy.Close()

	_, b := doRaw(t, proxy.URL+"/v1/chat/completions", http.MethodPost, `{"model":"gpt-x","messages":[{"role":"user","content":"hi"}]}`, "content-type", "application/json")
	if got := string(b); got != openaiBody {
		t.Errorf("OpenAI answer changed on the way:\n got %s\nwant %s", got, openaiBody)
	}
	_, b = doRaw(t, proxy.URL+"/v1/messages", http.MethodPost, `{"model":"claude-x","max_tokens":9,"messages":[{"role":"user","content":"hi"}]}`,
		"content-type", "application/json", "anthropic-version", "2023-06-01")
	if got := string(b); got != anthropicBody {
		t.Errorf("Anthropic answer changed on the way:\n got %s\nwant %s", got, anthropicBody)
	}
	resp, b := doRaw(t, proxy.URL+"/v1/chat/completions", http.MethodPost,
		`{"model":"gpt-x","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_object"}}`, "content-type", "application/json")
	if got := string(b); resp.Header.Get("X-Mesh-Repaired") == "" || !strings.Contains(got, `"content":"{\"risk_level\": \"low\"}"`) {
		t.Errorf("repaired answer: %s %s", resp.Header.Get("X-Mesh-Repaired"), b)
	}
}
