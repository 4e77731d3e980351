package provider

import (
	"context"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// Host addresses and authenticates the model calls of an endpoint whose
// provider names the model (or deployment) in the URL or authenticates
// its own way — Azure OpenAI, the Gemini API — while the request, answer
// and stream stay its format's. A nil Host means the format's own: the
// codec's path under BaseURL and its key header. A Host is immutable
// (apart from a credential cache) and safe for concurrent use.
type Host interface {
	// Name is the provider kind: "azure", "gemini".
	Name() string
	// CallURL is the URL of a model call to model (a deployment name on
	// Azure), streamed when stream.
	CallURL(model string, stream bool) string
	// Authorize sets a call's credentials with set; an error means none
	// could be had (a token source failed).
	Authorize(ctx context.Context, set func(k, v string)) error
	// ParseError reads an error answer.
	ParseError(status int, h http.Header, body []byte) *llm.APIError
	// Check gets the credentials once: the start-up check that names a
	// provider that cannot authenticate.
	Check(ctx context.Context) error
}

// authorize sets the credentials of a call to ep: its host's, else its
// format's key header and API version.
func authorize(ctx context.Context, ep *Endpoint, codec wire.Codec, set func(k, v string), version string) *Error {
	if ep.Host == nil {
		codec.SetAuth(set, ep.APIKey, version)
		return nil
	}
	if err := ep.Host.Authorize(ctx, set); err != nil {
		return hostAuthError(ep, err)
	}
	return nil
}

// hostAuthError is the failure of an attempt whose credentials could not
// be had: a 401 authentication_error naming the provider, so the caller
// knows which account to fix and the call can go to another endpoint.
func hostAuthError(ep *Endpoint, err error) *Error {
	return &Error{Kind: KindStatus, Endpoint: ep.ID, BeforeResponse: true, Err: err,
		API: &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication,
			Message: fmt.Sprintf("provider %s (%s) cannot authenticate: %v", ep.Provider, ep.Host.Name(), err)}}
}

// statusError is the failure of an attempt answered with an error
// status: the answer read in ep's shape (parseError).
func statusError(ep *Endpoint, codec wire.Codec, resp *http.Response, b []byte) *Error {
	return apiError(ep, parseError(ep, codec, resp, b))
}

// apiError is the failure of an attempt the upstream refused with a; a
// content filter's refusal is marked with ep's policy.
func apiError(ep *Endpoint, a *llm.APIError) *Error {
	e := &Error{Kind: KindStatus, Endpoint: ep.ID, API: a}
	if a.Code == CodeContentFilter {
		e.Filtered = ep.ContentFilter
		if e.Filtered == "" {
			e.Filtered = ContentFilterFail
		}
	}
	return e
}

// CodeContentFilter is the error code of a prompt a provider's content
// filter refused (Azure OpenAI's 400, internal/wire/azure; a prompt the
// Gemini API blocked, internal/wire/gemini).
const CodeContentFilter = "content_filter"

// ContentFilter is what a call does when an endpoint's content filter
// refuses its prompt (a model's content_filter).
type ContentFilter string

// The content filter policies.
const (
	// ContentFilterFail: the refusal reaches the client; the request is at
	// fault, no other endpoint is tried.
	ContentFilterFail ContentFilter = "fail"
	// ContentFilterFallback: the model's other endpoints are tried.
	ContentFilterFallback ContentFilter = "fallback"
)
