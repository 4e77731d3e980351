package assemble

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// openaiAnswer is the simulated upstream: OpenAI's Chat Completions
// answering with a JSON object (the response shape of
// https://platform.openai.com/docs/api-reference/chat/object).
type openaiAnswer struct{}

func (openaiAnswer) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"{\"a\":\"1\",\"b\":\"2\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":5,"total_tokens":10}}`
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)), Request: r}, nil
}

// Issue 26: two meshes built from configs with different
// structured_output limits do not change each other's (the limits were
// process-wide, the last mesh built sizing every other): a schema of two
// properties is refused by the mesh allowing one, built first, and served
// by the mesh allowing ten, built after it.
func TestTwoMeshesKeepTheirOwnSchemaLimits(t *testing.T) {
	const base = "providers: [{name: o, type: openai, base_url: \"http://o.test/v1\"}]\nmodels: [{name: m, endpoints: [{provider: o}]}]\ntelemetry: {metrics: false, dashboard: false}\n"
	narrow, err := Build(parse(t, base+"structured_output: {max_schema_properties: 1, max_concurrent_schema_compiles: 1}\n"), Options{Upstream: openaiAnswer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer narrow.Close()
	wide, err := Build(parse(t, base+"structured_output: {max_schema_properties: 10, max_concurrent_schema_compiles: 4}\n"), Options{Upstream: openaiAnswer{}})
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	call := func(m *Mesh) (int, string) {
		req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:7878/v1/chat/completions", strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"rate it"}],
			"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"required":["a","b"]}}}}`))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		m.Server().ServeHTTP(rec, req)
		return rec.Code, rec.Body.String()
	}
	if code, body := call(wide); code != http.StatusOK {
		t.Fatalf("mesh allowing 10 properties: %d %s", code, body)
	}
	if code, body := call(narrow); code != http.StatusBadRequest || !strings.Contains(body, "max_schema_properties") {
		t.Fatalf("mesh allowing 1 property, built before the other: %d %s; want 400 naming max_schema_properties", code, body)
	}
}
