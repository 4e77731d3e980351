package features_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// sameFormatProxy is keel serve's handler in front of up with one model per
// format: gpt-x (OpenAI) and claude-x (Anthropic). Closed with the test.
func sameFormatProxy(t *testing.T, up string) *httptest.Server {
	t.Helper()
	cfg, err := config.Parse([]byte(`request_log: {enabled: false}
providers:
  - {name: o, type: openai, base_url: "`+up+`/v1"}
  - {name: a, type: anthropic, base_url: "`+up+`"}
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
	proxy := httptest.NewServer(m.Handler())
	t.Cleanup(func() {
		proxy.Close()
		m.Close()
	})
	return proxy
}

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
	proxy := sameFormatProxy(t, up.URL)

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

// A same-format stream nothing in Keel changes reaches the client event for
// event and byte for byte (issue 15: a 20-event OpenAI stream whose first
// chunk carried text reached the client as 21 re-encoded chunks, without
// service_tier, obfuscation or refusal). The usage chunk Keel asks for on
// its own is not passed to a client that did not ask for it.
func TestSameFormatStreamPassesThroughEventForEvent(t *testing.T) {
	chunk := func(delta, finish, extra string) string {
		return `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","service_tier":"default",` +
			`"system_fingerprint":"fp_2","choices":[{"index":0,"delta":` + delta + `,"logprobs":null,"finish_reason":` + finish + `}]` + extra + `,"obfuscation":"Zx"}` + "\n\n"
	}
	var openaiStream strings.Builder
	openaiStream.WriteString(chunk(`{"role":"assistant","content":"Word0","refusal":null}`, "null", `,"usage":null`))
	for i := 1; i <= 16; i++ {
		openaiStream.WriteString(chunk(`{"content":" word`+strconv.Itoa(i)+`"}`, "null", `,"usage":null`))
	}
	openaiStream.WriteString(chunk(`{}`, `"stop"`, `,"usage":null`))
	usageChunk := `data: {"id":"chatcmpl-9","object":"chat.completion.chunk","created":1767225600,"model":"gpt-x","service_tier":"default","system_fingerprint":"fp_2","choices":[],` +
		`"usage":{"prompt_tokens":9,"completion_tokens":17,"total_tokens":26,"prompt_tokens_details":{"cached_tokens":0}},"obfuscation":"q"}` + "\n\n"
	done := "data: [DONE]\n\n"
	anthropicStream := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_9\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-x\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":9,\"output_tokens\":1,\"service_tier\":\"standard\"}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: ping\ndata: {\"type\": \"ping\"}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hello\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\" there.\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":3}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			io.WriteString(w, openaiStream.String())
			// OpenAI sends the usage chunk only when asked.
			if strings.Contains(string(b), `"include_usage":true`) {
				io.WriteString(w, usageChunk)
			}
			io.WriteString(w, done)
			return
		}
		io.WriteString(w, anthropicStream)
	}))
	defer up.Close()
	proxy := sameFormatProxy(t, up.URL)

	for _, tc := range []struct {
		name, path, body, want string
		hdr                    []string
	}{
		{"openai with usage", "/v1/chat/completions", `{"model":"gpt-x","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
			openaiStream.String() + usageChunk + done, nil},
		{"openai without usage", "/v1/chat/completions", `{"model":"gpt-x","stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			openaiStream.String() + done, nil},
		{"anthropic", "/v1/messages", `{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
			anthropicStream, []string{"anthropic-version", "2023-06-01"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := doRaw(t, proxy.URL+tc.path, http.MethodPost, tc.body, append([]string{"content-type", "application/json"}, tc.hdr...)...)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			got, want := string(b), tc.want
			if g, w := strings.Count(got, "data:"), strings.Count(want, "data:"); g != w {
				t.Errorf("%d events reached the client, the upstream sent %d", g, w)
			}
			if got != want {
				t.Errorf("stream changed on the way:\n got %s\nwant %s", got, want)
			}
		})
	}
}
