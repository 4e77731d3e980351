package sim

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func geminiConfig() Config {
	c := ZeroLatency()
	c.Gemini = &GeminiSpec{APIKeys: []string{"g-key"}}
	return c
}

func geminiPost(t *testing.T, h harness, path string, header http.Header, body string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.root+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, string(b)
}

const geminiBody = `{"contents":[{"role":"user","parts":[{"text":"Tell me about keels."}]}],"generationConfig":{"maxOutputTokens":64}}`

// TestGeminiRoutes: the fleet answers the Gemini API's calls in its
// shapes, and refuses what it refuses, as it does.
func TestGeminiRoutes(t *testing.T) {
	h := memHarness(mustFleet(t, geminiConfig()))
	key := http.Header{"X-Goog-Api-Key": {"g-key"}}
	for _, tc := range []struct {
		name, path string
		header     http.Header
		body       string
		status     int
		want       []string
	}{
		{"answer", "/v1beta/models/sim-sonnet:generateContent", key, geminiBody, 200,
			[]string{`"candidates":[{"content":{"role":"model","parts":[{"text":"`, `"finishReason":"STOP"`, `"usageMetadata":{"promptTokenCount":`, `"modelVersion":"sim-sonnet"`}},
		{"key in the query", "/v1beta/models/sim-sonnet:generateContent?key=g-key", nil, geminiBody, 200, []string{`"finishReason":"STOP"`}},
		{"region", "/r/eu-west/v1beta/models/sim-sonnet:generateContent", key, geminiBody, 200, []string{`"finishReason":"STOP"`}},
		{"stream", "/v1beta/models/sim-sonnet:streamGenerateContent?alt=sse", key, geminiBody, 200,
			[]string{"data: {\"candidates\":[{\"content\":{\"role\":\"model\",\"parts\":[{\"text\":", `"finishReason":"STOP"`}},
		{"no key", "/v1beta/models/sim-sonnet:generateContent", nil, geminiBody, 403, []string{`"status":"PERMISSION_DENIED"`, `"code":403`}},
		{"wrong key", "/v1beta/models/sim-sonnet:generateContent", http.Header{"X-Goog-Api-Key": {"nope"}}, geminiBody, 400,
			[]string{`{"error":{"code":400,"message":"API key not valid. Please pass a valid API key.","status":"INVALID_ARGUMENT"}}`}},
		{"unknown method", "/v1beta/models/sim-sonnet:predict", key, geminiBody, 404, []string{`"status":"NOT_FOUND"`}},
		{"unknown model", "/v1beta/models/gemini-9:generateContent", key, geminiBody, 404, []string{`"status":"NOT_FOUND"`}},
		{"unknown member", "/v1beta/models/sim-sonnet:generateContent", key, `{"contents":[{"parts":[{"text":"hi"}]}],"max_tokens":5}`, 400, []string{`"status":"INVALID_ARGUMENT"`, "Invalid JSON payload"}},
		{"no contents", "/v1beta/models/sim-sonnet:generateContent", key, `{}`, 400, []string{`"status":"INVALID_ARGUMENT"`}},
		{"model only in openai format", "/v1beta/models/sim-llama:generateContent", key, geminiBody, 404, []string{`"status":"NOT_FOUND"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, b := geminiPost(t, h, tc.path, tc.header, tc.body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, b)
			}
			for _, w := range tc.want {
				if !strings.Contains(b, w) {
					t.Errorf("body lacks %s:\n%s", w, b)
				}
			}
			if resp.Header.Get("X-Request-Id") != "" || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "" {
				t.Errorf("headers the Gemini API does not send: %v", resp.Header)
			}
		})
	}
}

// TestGeminiFaults: a rate limit is RESOURCE_EXHAUSTED with its delay in
// RetryInfo and no retry-after header; an overload 503 UNAVAILABLE; the
// content filter a blocked prompt.
func TestGeminiFaults(t *testing.T) {
	cfg := geminiConfig()
	cfg.Faults = []Fault{
		{Kind: KindRateLimit, Model: "sim-opus", RetryAfter: Duration(1500 * time.Millisecond)},
		{Kind: KindOverloaded, Model: "sim-haiku"},
		{Kind: KindContentFilter, Model: "sim-sonnet"},
	}
	h := memHarness(mustFleet(t, cfg))
	key := http.Header{"X-Goog-Api-Key": {"g-key"}}
	resp, b := geminiPost(t, h, "/v1beta/models/sim-opus:generateContent", key, geminiBody)
	if resp.StatusCode != 429 || !strings.Contains(b, `"status":"RESOURCE_EXHAUSTED"`) ||
		!strings.Contains(b, `{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"1.5s"}`) || resp.Header.Get("Retry-After") != "" {
		t.Errorf("rate limit: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	resp, b = geminiPost(t, h, "/v1beta/models/sim-haiku:generateContent", key, geminiBody)
	if resp.StatusCode != 503 || !strings.Contains(b, `"status":"UNAVAILABLE"`) {
		t.Errorf("overloaded: %d %s", resp.StatusCode, b)
	}
	resp, b = geminiPost(t, h, "/v1beta/models/sim-sonnet:generateContent", key, geminiBody)
	if resp.StatusCode != 200 || !strings.Contains(b, `"promptFeedback":{"blockReason":"SAFETY"`) || strings.Contains(b, "candidates") {
		t.Errorf("content filter: %d %s", resp.StatusCode, b)
	}
	// The Anthropic route of the same model: no such fault there.
	resp, err := h.post(t.Context(), FormatAnthropic, "", chatBody(FormatAnthropic, "sim-sonnet", "hi", false, `,"max_tokens":16`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("Anthropic route: %d, want 200 (the content filter is Gemini's and Azure's)", resp.StatusCode)
	}
}

// TestVertexGeminiNeedsAToken: Gemini on Vertex AI refuses a call
// without an OAuth2 token the fleet issued, as Google does (401
// UNAUTHENTICATED), and takes no Gemini API key instead.
func TestVertexGeminiNeedsAToken(t *testing.T) {
	h := memHarness(mustFleet(t, geminiConfig()))
	const path = "/v1/projects/p/locations/us-central1/publishers/google/models/sim-sonnet:generateContent"
	for _, hd := range []http.Header{nil, {"Authorization": {"Bearer forged"}}, {"X-Goog-Api-Key": {"g-key"}}} {
		resp, b := geminiPost(t, h, path, hd, geminiBody)
		if resp.StatusCode != 401 || !strings.Contains(b, `"status":"UNAUTHENTICATED"`) {
			t.Errorf("%v: %d %s, want 401 UNAUTHENTICATED", hd, resp.StatusCode, b)
		}
	}
}
