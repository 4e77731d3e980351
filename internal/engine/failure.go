package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// decision is what a failed attempt lets the call do next.
type decision uint8

const (
	// decideFail: the request itself is at fault (or the caller left):
	// answer the client now.
	decideFail decision = iota
	// decideRetry: another endpoint (or the same one later) may succeed.
	decideRetry
	// decideFallback: only another model may succeed (its context window).
	decideFallback
)

// failure is a failed attempt, classified once when the attempt ends. The
// policies decide from its fields (errors.As), never from messages.
type failure struct {
	// reason labels metrics, the request log and the debug trace.
	reason string
	decide decision
	// refusal: the endpoint turned the work away before producing any of
	// it (429, 529, 503, a connection refused or reset before the
	// response): trying another endpoint is failover, not a retry of work
	// done, and does not draw on the retry budget.
	refusal bool
	// capacity: a 429/529-style signal; it feeds cooldowns, not breakers.
	capacity bool
	// unreachable: the endpoint's server could not be reached at all.
	unreachable bool
	// endpointFault says the failure counts against the endpoint's health.
	endpointFault bool
	retryAfter    time.Duration
	status        int
	err           error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

// errEmptyStream: a 200 stream that ended before any event.
var errEmptyStream = errors.New("stream ended before any event")

// errDiverged: a re-asked answer did not start with the text the client
// already has, so it cannot be spliced onto it.
var errDiverged = errors.New("the re-asked answer does not start with the text already sent")

// classify maps an attempt's error to a failure (nil stays nil; a failure
// is returned as is).
func classify(err error) *failure {
	if err == nil {
		return nil
	}
	var me *meshError
	if errors.As(err, &me) {
		// Keel's own verdict: final, whatever failure it wraps.
		return &failure{reason: "mesh_" + me.code, err: err}
	}
	var f *failure
	if errors.As(err, &f) {
		return f
	}
	f = &failure{err: err}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		switch {
		case errors.Is(err, errEmptyStream):
			f.reason, f.decide, f.refusal, f.endpointFault = "empty_stream", decideRetry, true, true
		case errors.Is(err, errDiverged):
			f.reason = "continuation_diverged"
		case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			f.reason = "canceled"
		default:
			f.reason = "internal"
		}
		return f
	}
	switch pe.Kind {
	case provider.KindCanceled:
		f.reason = "canceled"
		return f
	case provider.KindConnect:
		f.reason, f.decide, f.refusal, f.endpointFault = "connect_error", decideRetry, true, true
		f.unreachable = pe.BeforeResponse
		return f
	case provider.KindReset:
		f.reason, f.decide, f.endpointFault = "connection_reset", decideRetry, true
		f.refusal, f.unreachable = pe.BeforeResponse, pe.BeforeResponse
		return f
	case provider.KindTimeout:
		f.reason, f.decide, f.endpointFault = "timeout", decideRetry, true
		return f
	case provider.KindProtocol:
		f.reason, f.decide, f.endpointFault = "protocol_error", decideRetry, true
		return f
	}
	if pe.API == nil {
		f.reason = "unknown"
		return f
	}
	a := pe.API
	f.status, f.retryAfter = a.Status, a.RetryAfter
	if pe.Filtered != "" {
		// A content filter refused the prompt: the request is at fault,
		// not the endpoint; other endpoints only when the model says so.
		f.reason = "content_filter"
		if pe.Filtered == provider.ContentFilterFallback {
			f.decide, f.refusal = decideRetry, true
		}
		return f
	}
	switch s := a.Status; {
	case s == http.StatusTooManyRequests:
		f.reason = "rate_limited"
		if a.Code == "insufficient_quota" || a.Code == "credit_balance_exhausted" {
			f.reason = "quota_exhausted" // not transient here, but another provider may serve
		}
		f.decide, f.refusal, f.capacity = decideRetry, true, true
	case s == 529 || a.Type == llm.ErrOverloaded:
		f.reason, f.decide, f.refusal, f.capacity = "overloaded", decideRetry, true, true
	case s == http.StatusServiceUnavailable:
		f.reason, f.decide, f.refusal, f.endpointFault = "status_503", decideRetry, true, true
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s >= 500:
		f.reason, f.decide, f.endpointFault = fmt.Sprintf("status_%d", s), decideRetry, true
	case s == http.StatusOK:
		// An error event inside a 200 stream (typically overloaded_error).
		f.reason, f.decide, f.endpointFault = "stream_error", decideRetry, true
	case isContextExceeded(a):
		f.reason, f.decide = "context_length_exceeded", decideFallback
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		f.reason = fmt.Sprintf("auth_%d", s)
	case s == http.StatusNotFound:
		f.reason = "not_found"
	default:
		f.reason = fmt.Sprintf("status_%d", s)
	}
	return f
}

// contextErrors is how each provider says that a prompt does not fit the
// model's context window: by its error type or code, and where the type
// is a general one, by the fixed wording it pairs it with. A 400 (or 413)
// that matches one is a fallback to a model with a bigger window.
var contextErrors = []struct {
	provider string
	match    func(a *llm.APIError) bool
}{
	// OpenAI and Azure OpenAI: 400 invalid_request_error, code
	// context_length_exceeded (developers.openai.com/docs/guides/error-codes;
	// Azure OpenAI returns OpenAI's error body).
	{"openai", func(a *llm.APIError) bool { return a.Code == "context_length_exceeded" }},
	// Anthropic (and Claude on Vertex AI, which answers in Anthropic's
	// shape): 400 invalid_request_error "prompt is too long: N tokens > M
	// maximum" (platform.claude.com/docs/en/api/errors); the type is
	// general, the message's start is fixed.
	{"anthropic", func(a *llm.APIError) bool {
		return a.Type == llm.ErrInvalidRequest && a.RawType == "" && hasPrefixFold(a.Message, "prompt is too long")
	}},
	// llama.cpp's llama-server: 400, type exceed_context_size_error, in the
	// OpenAI shape on both endpoints (PROTOCOLS.md §6.2).
	{"llama.cpp", func(a *llm.APIError) bool { return a.RawType == "exceed_context_size_error" }},
	// vLLM: 400, type BadRequestError, numeric code 400, "This model's
	// maximum context length is N tokens. However, you requested M tokens
	// …" (vllm-project/vllm issues #20409, #4667).
	{"vllm", func(a *llm.APIError) bool {
		return a.RawType == "BadRequestError" && containsFold(a.Message, "maximum context length")
	}},
	// Amazon Bedrock: 400 ValidationException "Input is too long for
	// requested model." (aws-samples/bedrock-chat#95,
	// aws-samples/assessment-generator#2).
	{"bedrock", func(a *llm.APIError) bool {
		return a.RawType == "ValidationException" && containsFold(a.Message, "input is too long")
	}},
	// Google Vertex AI / Gemini: 400 status INVALID_ARGUMENT "The input
	// token count (N) exceeds the maximum number of tokens allowed (M)."
	// (google-gemini/gemini-cli#4118, #6678).
	{"gemini", func(a *llm.APIError) bool {
		return a.RawType == "INVALID_ARGUMENT" && containsFold(a.Message, "input token count")
	}},
}

// isContextExceeded reports whether a says the prompt exceeds the model's
// context window, in any provider's terms (contextErrors).
func isContextExceeded(a *llm.APIError) bool {
	if a.Status != http.StatusBadRequest && a.Status != http.StatusRequestEntityTooLarge {
		return false
	}
	for _, c := range contextErrors {
		if c.match(a) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), sub)
}

// meshError is a failure Keel decided (no attempt could serve).
type meshError struct {
	code     string
	why      string
	last     error
	attempts int
}

func (m *meshError) Error() string { return m.code + ": " + m.why }
func (m *meshError) Unwrap() error { return m.last }
