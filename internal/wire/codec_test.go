package wire

import (
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// The table has one codec per format, each answering for its own format
// and paths; their encoders round-trip through their own parsers.
func TestCodecTable(t *testing.T) {
	for _, c := range Codecs() {
		if For(c.Format()) != c {
			t.Errorf("For(%v) is not the table's codec", c.Format())
		}
		if !c.Serves(c.Path(), false) || c.Serves("/other"+c.Path()+"x", true) {
			t.Errorf("%v: Serves(%q)", c.Format(), c.Path())
		}
		if !strings.HasSuffix(c.RequestURL("http://h/base/"), strings.TrimPrefix(c.Path(), "/v1")) {
			t.Errorf("%v: RequestURL %q", c.Format(), c.RequestURL("http://h/base/"))
		}
		req := &llm.Request{Format: c.Format(), Model: "m", MaxTokens: 5, HasMaxTokens: true,
			Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
		b, err := c.EncodeRequest(req)
		if err != nil {
			t.Fatal(err)
		}
		back, err := c.ParseRequest(b)
		if err != nil || back.Model != "m" || back.Messages[0].Text() != "hi" {
			t.Errorf("%v: round trip %s → %+v, %v", c.Format(), b, back, err)
		}
		e := c.ParseError(429, http.Header{}, c.EncodeError(&llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "slow down"}))
		if e.Type != llm.ErrRateLimit || e.Message != "slow down" {
			t.Errorf("%v: error round trip %+v", c.Format(), e)
		}
	}
	if For(llm.FormatUnknown).Format() != llm.FormatOpenAI {
		t.Error("an unknown format does not get the OpenAI-compatible codec")
	}
	if FromHeader(http.Header{"Anthropic-Version": {"2023-06-01"}}).Format() != llm.FormatAnthropic || FromHeader(http.Header{}).Format() != llm.FormatOpenAI {
		t.Error("FromHeader")
	}
}

// Per-endpoint preparation: the 2026-10-21 Anthropic API takes no sampling
// parameters, Anthropic needs max_tokens, an OpenAI stream asks for usage.
func TestPrepareUpstream(t *testing.T) {
	temp := 0.5
	r := &llm.Request{Temperature: &temp}
	dropped := For(llm.FormatAnthropic).PrepareUpstream(r, AnthropicVersionNoSampling)
	if r.Temperature != nil || len(dropped) != 1 || dropped[0] != "temperature" || !r.HasMaxTokens || r.MaxTokens != DefaultMaxTokens {
		t.Errorf("anthropic: %+v, dropped %v", r, dropped)
	}
	r = &llm.Request{Temperature: &temp}
	if d := For(llm.FormatAnthropic).PrepareUpstream(r, DefaultAnthropicVersion); len(d) != 0 || r.Temperature == nil {
		t.Errorf("default version dropped %v", d)
	}
	r = &llm.Request{Stream: true}
	For(llm.FormatOpenAI).PrepareUpstream(r, "")
	if !r.IncludeUsage {
		t.Error("an OpenAI stream does not ask for its usage chunk")
	}
	if v := For(llm.FormatAnthropic).APIVersion("", http.Header{"Anthropic-Version": {"2024-01-01"}}); v != "2024-01-01" {
		t.Errorf("client version %q", v)
	}
	if v := For(llm.FormatOpenAI).APIVersion("x", nil); v != "" {
		t.Errorf("openai version %q", v)
	}
	// As Header.Get: the first value, an empty one or none meaning the
	// default; a name stored in another case is not the header.
	for _, h := range []http.Header{{}, {"Anthropic-Version": {}}, {"Anthropic-Version": {""}}, {"anthropic-version": {"2024-01-01"}}} {
		if v := For(llm.FormatAnthropic).APIVersion("", h); v != DefaultAnthropicVersion || h.Get("Anthropic-Version") != "" {
			t.Errorf("APIVersion over %v = %q, want the default", h, v)
		}
	}
	if v := For(llm.FormatAnthropic).APIVersion("", http.Header{"Anthropic-Version": {"2024-01-01", "2023-06-01"}}); v != "2024-01-01" {
		t.Errorf("two client versions: %q, want the first", v)
	}
}

// The Responses API is served at /v1/responses and /responses; its
// stored responses' routes (/v1/responses/{id}) are not model calls.
func TestResponsesPaths(t *testing.T) {
	c := For(llm.FormatResponses)
	for path, want := range map[string]bool{"/v1/responses": true, "/responses": true, "/v1/responses/resp_1": false, "/v1/responses/resp_1/input_items": false} {
		if got := c.Serves(path, false); got != want {
			t.Errorf("Serves(%q) = %v, want %v", path, got, want)
		}
	}
	if u := c.RequestURL("https://api.openai.com/v1/"); u != "https://api.openai.com/v1/responses" {
		t.Errorf("RequestURL %q", u)
	}
	if c.Continues() || c.KeyEnv() != "OPENAI_API_KEY" || c.Format().String() != "responses" {
		t.Errorf("continues %v, key %q, name %q", c.Continues(), c.KeyEnv(), c.Format())
	}
}

// TestHeaderNamesCanonical: the codecs' RequestIDHeader and PassHeaders
// are canonical names: the server sets the first without canonicalising
// it again and the provider reads the others as map keys (Values).
func TestHeaderNamesCanonical(t *testing.T) {
	for _, c := range Codecs() {
		for _, k := range append([]string{c.RequestIDHeader()}, c.PassHeaders()...) {
			if k != "" && http.CanonicalHeaderKey(k) != k {
				t.Errorf("%v: header %q is not canonical (%q)", c.Format(), k, http.CanonicalHeaderKey(k))
			}
		}
	}
}
