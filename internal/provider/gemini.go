package provider

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// GeminiAPI is the host of an endpoint on Google's Gemini API: the model
// in the URL, models/{model}:generateContent or
// :streamGenerateContent?alt=sse (server-sent events; without alt=sse the
// API streams a JSON array), the key in x-goog-api-key
// (ai.google.dev/api/generate-content, ai.google.dev/api#authentication).
type GeminiAPI struct {
	base, key string
}

// NewGeminiAPI returns the host of the Gemini API at base
// (https://generativelanguage.googleapis.com) with key.
func NewGeminiAPI(base, key string) (*GeminiAPI, error) {
	if key == "" {
		return nil, errors.New("gemini: no api key")
	}
	return &GeminiAPI{base: strings.TrimRight(base, "/"), key: key}, nil
}

// Name is "gemini".
func (*GeminiAPI) Name() string { return "gemini" }

// CallURL is {base}/v1beta/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse for a stream.
func (g *GeminiAPI) CallURL(model string, stream bool) string {
	u := g.base + "/v1beta/models/" + url.PathEscape(strings.TrimPrefix(model, "models/"))
	if stream {
		return u + ":streamGenerateContent?alt=sse"
	}
	return u + ":generateContent"
}

// Authorize sets x-goog-api-key.
func (g *GeminiAPI) Authorize(_ context.Context, set func(k, v string)) error {
	wire.For(llm.FormatGemini).SetAuth(set, g.key, "")
	return nil
}

// ParseError reads Google's error shape (internal/wire/gemini).
func (*GeminiAPI) ParseError(status int, h http.Header, body []byte) *llm.APIError {
	return wire.For(llm.FormatGemini).ParseError(status, h, body)
}

// Check: a key needs none (it is set).
func (*GeminiAPI) Check(context.Context) error { return nil }
