package provider

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// VertexGemini is the host of an endpoint serving Gemini on Google Vertex
// AI: the Gemini API's bodies at
// {host}/v1/projects/{p}/locations/{r}/publishers/google/models/{model}:generateContent
// (:streamGenerateContent?alt=sse for a stream), with an OAuth2 access
// token from the Vertex platform's token source (cached and refreshed
// before it expires) as a bearer token
// (cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference).
// Safe for concurrent use.
type VertexGemini struct {
	v    *Vertex
	base string // …/publishers/google/models/
}

// NewVertexGemini resolves cfg's credentials as NewVertex does.
func NewVertexGemini(ctx context.Context, cfg VertexConfig) (*VertexGemini, error) {
	v, err := NewVertex(ctx, cfg)
	if err != nil {
		return nil, err
	}
	base, ok := strings.CutSuffix(v.base, "/publishers/anthropic/models/")
	if !ok {
		return nil, fmt.Errorf("vertex: unexpected model path %q", v.base)
	}
	return &VertexGemini{v: v, base: base + "/publishers/google/models/"}, nil
}

// Name is "vertex".
func (*VertexGemini) Name() string { return "vertex" }

// CallURL is the model's generateContent, or streamGenerateContent with
// alt=sse.
func (g *VertexGemini) CallURL(model string, stream bool) string {
	if stream {
		return g.base + url.PathEscape(model) + ":streamGenerateContent?alt=sse"
	}
	return g.base + url.PathEscape(model) + ":generateContent"
}

// Authorize sets the access token as a bearer token.
func (g *VertexGemini) Authorize(_ context.Context, set func(k, v string)) error {
	tok, err := g.v.ts.Token()
	if err != nil {
		return fmt.Errorf("getting a Google access token: %w", err)
	}
	set("Authorization", tok.Type()+" "+tok.AccessToken)
	return nil
}

// ParseError reads Google's error shape (internal/wire/gemini).
func (*VertexGemini) ParseError(status int, h http.Header, body []byte) *llm.APIError {
	return wire.For(llm.FormatGemini).ParseError(status, h, body)
}

// Check fetches a token.
func (g *VertexGemini) Check(ctx context.Context) error { return g.v.Check(ctx) }
