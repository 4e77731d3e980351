package features_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// upstreamBodies is a fake upstream of all three formats that keeps the
// request bodies it got, by path, and answers with canned bodies; paths
// under /bad answer 500.
type upstreamBodies struct {
	mu     sync.Mutex
	bodies map[string][]string
}

func (u *upstreamBodies) got(path string) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.bodies[path]
}

const (
	cannedAnthropic = `{"id":"msg_t","type":"message","role":"assistant","model":"claude-x","content":[` +
		`{"type":"thinking","thinking":"I weighed it.","signature":"EqMBCkgIARAB+/sig=="},{"type":"text","text":"Yes."}],` +
		`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":3}}`
	cannedResponses = `{"id":"resp_t","object":"response","created_at":1767225600,"status":"completed","error":null,"incomplete_details":null,"model":"gpt-x",` +
		`"output":[{"id":"rs_t","type":"reasoning","summary":[],"encrypted_content":"gAAAA+/enc=="},` +
		`{"id":"msg_t","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Yes.","annotations":[]}]}],` +
		`"usage":{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":1},"total_tokens":12},"store":false}`
	cannedChat = `{"id":"chatcmpl-t","object":"chat.completion","created":1767225600,"model":"gpt-x",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Yes."},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"total_tokens":12}}`
)

// cannedResponsesStream is a Responses stream with reasoning, text and a
// function call, as OpenAI sends one.
var cannedResponsesStream, _ = os.ReadFile("../../internal/wire/responses/testdata/stream/reasoning_text_tool.sse")

// opaqueProxy is keel serve's handler in front of an upstreamBodies with
// a model per family: to-anth (Anthropic), to-resp (Responses), to-chat
// (Chat Completions), and the alias anth-then-resp, whose first model's
// Anthropic endpoint fails so that the call falls back to a Responses
// endpoint.
func opaqueProxy(t *testing.T) (*httptest.Server, *upstreamBodies) {
	t.Helper()
	ub := &upstreamBodies{bodies: map[string][]string{}}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ub.mu.Lock()
		ub.bodies[r.URL.Path] = append(ub.bodies[r.URL.Path], string(b))
		ub.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasPrefix(r.URL.Path, "/bad"):
			w.WriteHeader(http.StatusInternalServerError)
			io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"down"}}`)
		case strings.HasSuffix(r.URL.Path, "/messages"):
			io.WriteString(w, cannedAnthropic)
		case strings.HasSuffix(r.URL.Path, "/responses") && strings.Contains(string(b), `"stream":true`):
			w.Header().Set("Content-Type", "text/event-stream")
			w.Write(cannedResponsesStream)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			io.WriteString(w, cannedResponses)
		default:
			io.WriteString(w, cannedChat)
		}
	}))
	t.Cleanup(up.Close)
	cfg, err := config.Parse([]byte(`request_log: {enabled: false}
providers:
  - {name: a, type: anthropic, base_url: "`+up.URL+`"}
  - {name: abad, type: anthropic, base_url: "`+up.URL+`/bad"}
  - {name: r, type: openai, api: responses, base_url: "`+up.URL+`/v1"}
  - {name: c, type: openai, base_url: "`+up.URL+`/v1"}
models:
  - {name: to-anth, endpoints: [{provider: a}]}
  - {name: to-resp, endpoints: [{provider: r}]}
  - {name: to-chat, endpoints: [{provider: c}]}
  - {name: bad-anth, endpoints: [{provider: abad}]}
aliases:
  - {name: anth-then-resp, models: [bad-anth, to-resp], strategy: ordered}
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
	return proxy, ub
}

// Must show: encrypted reasoning and thinking signatures round-trip byte
// for byte on their own family and are never sent to another; leaving one
// out is said in X-Mesh-Dropped.
func TestOpaqueStateStaysWithItsFamily(t *testing.T) {
	proxy, ub := opaqueProxy(t)
	const (
		openaiEnc = "gAAAA+/enc=="
		anthSig   = "EqMBCkgIARAB+/sig=="
	)
	// 1. A Responses client gets each family's opaque state in reasoning
	// items: OpenAI's as it came, Anthropic's thinking wrapped.
	items := map[string]json.RawMessage{}
	for _, model := range []string{"to-resp", "to-anth"} {
		_, b := doRaw(t, proxy.URL+"/v1/responses", http.MethodPost, `{"model":"`+model+`","input":"Is it?","include":["reasoning.encrypted_content"],"store":false}`)
		var r struct {
			Output []json.RawMessage `json:"output"`
		}
		if err := json.Unmarshal(b, &r); err != nil || len(r.Output) != 2 {
			t.Fatalf("%s answer %s", model, b)
		}
		items[model] = r.Output[0]
	}
	if model := "to-resp"; !strings.Contains(string(items[model]), `"encrypted_content":"`+openaiEnc+`"`) {
		t.Errorf("OpenAI reasoning reached the client changed: %s", items[model])
	}
	if model := "to-anth"; !strings.Contains(string(items[model]), `"encrypted_content":"keel.anthropic.thinking.`+anthSig+`"`) ||
		!strings.Contains(string(items[model]), "I weighed it.") {
		t.Errorf("Anthropic thinking reached the client as %s", items[model])
	}

	// 2. The client sends both back; each endpoint gets its own family's
	// state byte for byte and never the other's.
	next := `{"model":"MODEL","store":false,"input":[{"role":"user","content":"Is it?"},` + string(items["to-resp"]) + `,` + string(items["to-anth"]) +
		`,{"role":"assistant","content":"Yes."},{"role":"user","content":"Sure?"}]}`
	for _, tc := range []struct {
		model, path       string
		want, never       []string
		dropped           []string
		wantThinkingBlock bool
	}{
		{"to-resp", "/v1/responses", []string{`"encrypted_content":"` + openaiEnc + `"`}, []string{anthSig, "I weighed it."}, []string{"thinking"}, false},
		{"to-anth", "/v1/messages", []string{`"signature":"` + anthSig + `"`, `"thinking":"I weighed it."`}, []string{openaiEnc, "keel.anthropic"}, []string{"reasoning.encrypted_content"}, true},
		{"to-chat", "/v1/chat/completions", nil, []string{openaiEnc, anthSig, "I weighed it.", "keel.anthropic"}, []string{"reasoning.encrypted_content", "thinking"}, false},
	} {
		t.Run(tc.model, func(t *testing.T) {
			resp, b := doRaw(t, proxy.URL+"/v1/responses", http.MethodPost, strings.Replace(next, "MODEL", tc.model, 1))
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			bodies := ub.got(tc.path)
			sent := bodies[len(bodies)-1]
			for _, w := range tc.want {
				if !strings.Contains(sent, w) {
					t.Errorf("upstream body lacks %s:\n%s", w, sent)
				}
			}
			for _, n := range tc.never {
				if strings.Contains(sent, n) {
					t.Errorf("upstream body holds %s of the other family:\n%s", n, sent)
				}
			}
			for _, d := range tc.dropped {
				if !strings.Contains(resp.Header.Get("X-Mesh-Dropped"), d) {
					t.Errorf("X-Mesh-Dropped = %q, want it to name %s", resp.Header.Get("X-Mesh-Dropped"), d)
				}
			}
		})
	}

	// 3. An Anthropic client's thinking, failed over from an Anthropic
	// endpoint to a Responses one: the Anthropic attempt got it, the
	// Responses one never did, and the answer says so.
	body := `{"model":"anth-then-resp","max_tokens":64,"messages":[{"role":"user","content":"Is it?"},` +
		`{"role":"assistant","content":[{"type":"thinking","thinking":"Hmm.","signature":"SIG-ANTH-789"},{"type":"redacted_thinking","data":"RED-1"},{"type":"text","text":"Yes."}]},` +
		`{"role":"user","content":"Sure?"}]}`
	resp, b := doRaw(t, proxy.URL+"/v1/messages", http.MethodPost, body, "anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 {
		t.Fatalf("failover status %d: %s", resp.StatusCode, b)
	}
	if bad := ub.got("/bad/v1/messages"); len(bad) == 0 || !strings.Contains(bad[0], `"signature":"SIG-ANTH-789"`) || !strings.Contains(bad[0], `"data":"RED-1"`) {
		t.Errorf("the Anthropic attempt did not get the thinking as sent: %v", bad)
	}
	rs := ub.got("/v1/responses")
	if sent := rs[len(rs)-1]; strings.Contains(sent, "SIG-ANTH-789") || strings.Contains(sent, "RED-1") || strings.Contains(sent, "Hmm.") {
		t.Errorf("the Responses endpoint got Anthropic thinking: %s", sent)
	}
	if !strings.Contains(resp.Header.Get("X-Mesh-Dropped"), "thinking") {
		t.Errorf("X-Mesh-Dropped = %q, want thinking", resp.Header.Get("X-Mesh-Dropped"))
	}
	var msg struct {
		Content []struct{ Type, Text string } `json:"content"`
	}
	if json.Unmarshal(b, &msg) != nil || len(msg.Content) != 1 || msg.Content[0].Type != "text" || msg.Content[0].Text != "Yes." {
		t.Errorf("the Anthropic client got %s (OpenAI reasoning must not reach it)", b)
	}
}

// A Responses answer and stream that nothing in Keel changes reach the
// client byte for byte from a Responses endpoint.
func TestResponsesSameFormatPassesThroughByteForByte(t *testing.T) {
	proxy, _ := opaqueProxy(t)
	_, b := doRaw(t, proxy.URL+"/v1/responses", http.MethodPost, `{"model":"to-resp","input":"Is it?"}`)
	if string(b) != cannedResponses {
		t.Errorf("answer changed on the way:\n got %s\nwant %s", b, cannedResponses)
	}
	if len(cannedResponsesStream) == 0 {
		t.Fatal("no canned stream")
	}
	_, b = doRaw(t, proxy.URL+"/v1/responses", http.MethodPost, `{"model":"to-resp","input":"Is it?","stream":true}`)
	if string(b) != string(cannedResponsesStream) {
		t.Errorf("stream changed on the way:\n got %s\nwant %s", b, cannedResponsesStream)
	}
}
