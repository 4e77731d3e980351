package provider

import (
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
)

// Platform is a cloud that serves Anthropic's models behind its own
// envelope: Amazon Bedrock (Bedrock) and Google Vertex AI (Vertex). The
// request is the Anthropic Messages body without "model" (and, on
// Bedrock, without "stream"), with the API version in the body (and, on
// Bedrock, the client's betas); the URL names the model; the authentication is the
// cloud's; the stream's framing and the error shape may be the cloud's
// own. Everything else — translation, the answer, the stream's events,
// continuation by prefill — is the anthropic codec's, so an Anthropic
// model on a platform fails over, hedges and continues as on Anthropic's
// API. A Platform is safe for concurrent use.
type Platform interface {
	// Name is the platform's name: "bedrock" or "vertex".
	Name() string
	// DefaultVersion is the anthropic_version the platform documents,
	// sent when the endpoint names none.
	DefaultVersion() string
	// KeepsStream reports whether a stream's body keeps "stream": true
	// (Vertex) or drops it, the URL saying so (Bedrock).
	KeepsStream() bool
	// BetasInBody reports whether the client's anthropic-beta values go
	// in the body as anthropic_beta (Bedrock) or stay a header (Vertex),
	// as the official SDKs send them.
	BetasInBody() bool
	// CallURL is the URL of a model call of model.
	CallURL(model string, stream bool) string
	// PostURL is the platform's URL for an Anthropic API path beside the
	// model call (/v1/messages/count_tokens), "" when it serves none.
	PostURL(path, model string) string
	// Authorize sets req's authentication once its body is final.
	Authorize(ctx context.Context, req *http.Request, body []byte) error
	// NewStreamReader reads a streamed answer.
	NewStreamReader(r io.Reader) wire.StreamReader
	// ParseError reads an error answer.
	ParseError(status int, h http.Header, body []byte) *llm.APIError
	// Check gets the platform's credentials once: the start-up check that
	// names a provider that cannot authenticate.
	Check(ctx context.Context) error
}

// modelPrefix is how the anthropic codec starts a request whose Model is
// empty (EncodeRequest writes model first).
const modelPrefix = `{"model":""`

// envelope turns body, an Anthropic request encoded with an empty model,
// into a platform's: "model" removed, anthropic_version and (when betas
// has any) anthropic_beta first. betas are the client's anthropic-beta
// header values, comma-separated as the SDKs send them.
func envelope(body []byte, version string, betas []string) []byte {
	rest := body[len(modelPrefix):]
	out := make([]byte, 0, len(body)+32+len(version)+16*len(betas))
	out = append(out, `{"anthropic_version":`...)
	out = jsonx.AppendString(out, version)
	first := true
	for _, v := range betas {
		for b := range strings.SplitSeq(v, ",") {
			if b = strings.TrimSpace(b); b == "" {
				continue
			}
			if first {
				out = append(out, `,"anthropic_beta":[`...)
				first = false
			} else {
				out = append(out, ',')
			}
			out = jsonx.AppendString(out, b)
		}
	}
	if !first {
		out = append(out, ']')
	}
	return append(out, rest...)
}

// withVersion puts anthropic_version first in body, a JSON object that
// has none (a side call's body, which keeps its model).
func withVersion(body []byte, version string) []byte {
	body = jsonx.TrimSpace(body)
	if len(body) < 2 || body[0] != '{' {
		return body
	}
	out := make([]byte, 0, len(body)+32+len(version))
	out = append(out, `{"anthropic_version":`...)
	out = jsonx.AppendString(out, version)
	if rest := jsonx.TrimSpace(body[1:]); len(rest) > 0 && rest[0] != '}' {
		out = append(out, ',')
	}
	return append(out, body[1:]...)
}
