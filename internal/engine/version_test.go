package engine

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// anthropicUpstream answers every Messages call with a short answer and
// keeps the last call's anthropic-version and body.
type anthropicUpstream struct {
	mu      sync.Mutex
	version string
	body    map[string]any
}

func (u *anthropicUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	r.Body.Close()
	u.mu.Lock()
	u.version = r.Header.Get("Anthropic-Version")
	u.body = nil
	_ = json.Unmarshal(raw, &u.body)
	u.mu.Unlock()
	const answer = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(strings.NewReader(answer)), Request: r}, nil
}

// Must show (issue 25): the rules of an anthropic-version follow the
// endpoint, not the client's header. Under the 2026-10-21 header of the
// current Anthropic SDKs, an Anthropic-format server that is not
// Anthropic's API (llama.cpp, vLLM, a proxy) keeps temperature, top_p and
// top_k and is sent the version it speaks (the default); Anthropic's API,
// or an endpoint declaring that version (or declaring it speaks the
// client's), has them dropped, and says so.
func TestVersionRulesFollowTheEndpoint(t *testing.T) {
	cases := []struct {
		name     string
		baseURL  string
		declared string
		client   string // the client's anthropic-version
		kept     bool
		sent     string // the anthropic-version sent upstream
	}{
		{name: "llama.cpp under the new client header", baseURL: "http://127.0.0.1:8080", client: "2026-10-21", kept: true, sent: "2023-06-01"},
		{name: "a proxy under the new client header", baseURL: "https://llm-proxy.internal.example/anthropic", client: "2026-10-21", kept: true, sent: "2023-06-01"},
		{name: "anthropic's api under the new client header", baseURL: "https://api.anthropic.com", client: "2026-10-21", sent: "2026-10-21"},
		{name: "anthropic's api under the old client header", baseURL: "https://api.anthropic.com/", client: "2023-06-01", kept: true, sent: "2023-06-01"},
		{name: "anthropic's api without a client header", baseURL: "https://api.anthropic.com", kept: true, sent: "2023-06-01"},
		{name: "a server declaring 2026-10-21", baseURL: "http://127.0.0.1:8080", declared: "2026-10-21", client: "2023-06-01", sent: "2026-10-21"},
		{name: "a server declaring 2023-06-01", baseURL: "https://api.anthropic.com", declared: "2023-06-01", client: "2026-10-21", kept: true, sent: "2023-06-01"},
		{name: "a proxy declaring it speaks the client's version", baseURL: "https://llm-proxy.internal.example", declared: provider.AnthropicVersionClient, client: "2026-10-21", sent: "2026-10-21"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			up := &anthropicUpstream{}
			e, err := newEngine(Options{
				Endpoints: []*provider.Endpoint{{ID: "a", Model: "m", UpstreamModel: "m", Region: "r", Provider: "p", Format: llm.FormatAnthropic,
					BaseURL: tc.baseURL, AnthropicVersion: tc.declared, Capability: 3, ContextWindow: 200_000}},
				Client:     provider.NewClient(up),
				Resilience: Resilience{DisableHedging: true}, Stages: stages(t, chain.Config{}),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			req := ask(llm.FormatAnthropic, "m", false)
			temp, topP, topK := 0.0, 0.9, 5
			req.Temperature, req.TopP, req.TopK = &temp, &topP, &topK
			h := http.Header{}
			if tc.client != "" {
				h.Set("Anthropic-Version", tc.client)
			}
			out, err := e.Do(context.Background(), req, Call{RequestID: "t", ClientHeader: h})
			if err != nil {
				t.Fatal(err)
			}
			up.mu.Lock()
			body, version := up.body, up.version
			up.mu.Unlock()
			if version != tc.sent {
				t.Errorf("anthropic-version sent %q, want %q", version, tc.sent)
			}
			_, hasTemp := body["temperature"]
			_, hasTopP := body["top_p"]
			_, hasTopK := body["top_k"]
			if tc.kept {
				if body["temperature"] != 0.0 || body["top_p"] != 0.9 || body["top_k"] != 5.0 {
					t.Errorf("upstream body temperature %v top_p %v top_k %v, want 0, 0.9 and 5 kept", body["temperature"], body["top_p"], body["top_k"])
				}
				if len(out.Record.Dropped()) != 0 {
					t.Errorf("dropped %v, want nothing", out.Record.Dropped())
				}
			} else {
				if hasTemp || hasTopP || hasTopK {
					t.Errorf("upstream body %v: sampling parameters sent to an endpoint speaking 2026-10-21", body)
				}
				if want := []string{"temperature", "top_p", "top_k"}; !slices.Equal(out.Record.Dropped(), want) {
					t.Errorf("dropped %v, want %v", out.Record.Dropped(), want)
				}
			}
		})
	}
}
