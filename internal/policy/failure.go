package policy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// Decision is what a failed attempt lets the call do next.
type Decision uint8

const (
	// DecideFail: the request itself is at fault (or the caller left):
	// answer the client now.
	DecideFail Decision = iota
	// DecideRetry: another endpoint (or the same one later) may succeed.
	DecideRetry
	// DecideFallback: only another model may succeed (its context window).
	DecideFallback
)

// Kind is what went wrong with one attempt. Policies decide from it (and
// from the Failure's flags), never from a message or a label.
type Kind uint8

// Failure kinds.
const (
	KindInternal        Kind = iota // a failure of Keel's own making
	KindCanceled                    // the caller left, or the deadline passed
	KindCancelledLoser              // cancelled because another attempt won
	KindEmptyStream                 // a 200 stream that ended before any event
	KindDiverged                    // a re-asked answer that differs from the text sent
	KindConnect                     // no connection could be made
	KindReset                       // the connection broke
	KindTimeout                     // a header, idle or request timeout fired
	KindProtocol                    // an answer that breaks its wire format
	KindUnknown                     // a provider error without an answer
	KindRateLimited                 // 429
	KindQuotaExhausted              // 429 for a spent quota or credit
	KindOverloaded                  // 529, or an overloaded_error
	KindUnavailable                 // 503
	KindServerError                 // 408, 409, other 5xx
	KindStreamError                 // an error event inside a 200 stream
	KindContextExceeded             // the prompt exceeds the model's window
	KindAuth                        // 401, 403
	KindNotFound                    // 404
	KindRejected                    // any other 4xx
	KindBreakerOpen                 // the endpoint's breaker refused the attempt
	KindMesh                        // Keel's own verdict (MeshError)
	KindContentFilter               // a provider's content filter refused the prompt (Azure, Gemini)
)

// Failure is a failed attempt, classified once when the attempt ends.
type Failure struct {
	Kind     Kind
	Decision Decision
	// Reason labels metrics, the request log and the debug trace; no
	// decision reads it.
	Reason string
	// Refusal: the endpoint turned the work away before producing any of
	// it (429, 529, 503, a connection refused or reset before the
	// response): trying another endpoint is failover, not a retry of work
	// done, and does not draw on the retry budget.
	Refusal bool
	// Capacity: a 429/529-style signal; it feeds cooldowns, not breakers.
	Capacity bool
	// Unreachable: the endpoint's server could not be reached at all.
	Unreachable bool
	RetryAfter  time.Duration
	Status      int
	Err         error
}

func (f *Failure) Error() string { return f.Err.Error() }
func (f *Failure) Unwrap() error { return f.Err }

// Cancelled reports whether the attempt was cancelled (by the caller or
// because another won) rather than failed.
func (f *Failure) Cancelled() bool { return f.Kind == KindCanceled || f.Kind == KindCancelledLoser }

// EndpointFault reports whether the failure counts against the
// endpoint's health: a retryable failure it caused, not the caller's bad
// request or its leaving, nor a breaker's refusal (nothing was sent), nor
// a content filter's refusal (the prompt's doing, even where the model
// lets its other endpoints try).
func (f *Failure) EndpointFault() bool {
	return f.Decision == DecideRetry && f.Kind != KindBreakerOpen && f.Kind != KindContentFilter
}

// ErrEmptyStream: a 200 stream that ended before any event.
var ErrEmptyStream = errors.New("stream ended before any event")

// ErrDiverged: a re-asked answer did not start with the text the client
// already has, so it cannot be spliced onto it.
var ErrDiverged = errors.New("the re-asked answer does not start with the text already sent")

// Diverged is the failure of an attempt whose re-asked answer departs
// from the text the client has (err says how).
func Diverged(err error) *Failure {
	return &Failure{Kind: KindDiverged, Reason: "continuation_diverged", Err: err}
}

// BreakerOpen is the failure of an attempt its endpoint's breaker refused:
// a failover, as nothing was sent.
func BreakerOpen(err error) *Failure {
	return &Failure{Kind: KindBreakerOpen, Reason: "breaker_open", Decision: DecideRetry, Refusal: true, Err: err}
}

// Loser returns f as the failure of an attempt cancelled because another
// won (f is not changed).
func Loser(f *Failure) *Failure {
	cp := *f
	cp.Kind, cp.Reason = KindCancelledLoser, "cancelled_loser"
	return &cp
}

// Classify maps an attempt's error to a failure (nil stays nil; a
// failure is returned as is).
func Classify(err error) *Failure {
	if err == nil {
		return nil
	}
	var me *MeshError
	if errors.As(err, &me) {
		// Keel's own verdict: final, whatever failure it wraps.
		return &Failure{Kind: KindMesh, Reason: "mesh_" + me.Code, Err: err}
	}
	var f *Failure
	if errors.As(err, &f) {
		return f
	}
	var pe *provider.Error
	if !errors.As(err, &pe) {
		return classifyLocal(err)
	}
	switch pe.Kind {
	case provider.KindCanceled, provider.KindConnect, provider.KindReset, provider.KindTimeout, provider.KindProtocol:
		return classifyTransport(err, pe)
	}
	if pe.API == nil {
		return &Failure{Kind: KindUnknown, Reason: "unknown", Err: err}
	}
	if pe.Filtered != "" {
		return classifyFiltered(err, pe)
	}
	return classifyAPI(err, pe.API)
}

// classifyFiltered classifies a content filter's refusal: the request is
// at fault, not the endpoint, so it is final unless the model's
// content_filter option says fallback (its other endpoints are tried).
func classifyFiltered(err error, pe *provider.Error) *Failure {
	f := &Failure{Err: err, Kind: KindContentFilter, Reason: "content_filter", Status: pe.API.Status}
	if pe.Filtered == provider.ContentFilterFallback {
		f.Decision, f.Refusal = DecideRetry, true
	}
	return f
}

// classifyLocal classifies an error that did not come from the provider
// client.
func classifyLocal(err error) *Failure {
	f := &Failure{Err: err}
	switch {
	case errors.Is(err, ErrEmptyStream):
		f.Kind, f.Reason, f.Decision, f.Refusal = KindEmptyStream, "empty_stream", DecideRetry, true
	case errors.Is(err, ErrDiverged):
		f.Kind, f.Reason = KindDiverged, "continuation_diverged"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		f.Kind, f.Reason = KindCanceled, "canceled"
	default:
		f.Kind, f.Reason = KindInternal, "internal"
	}
	return f
}

// classifyTransport classifies a provider error of the transport (pe's
// kind is not KindStatus).
func classifyTransport(err error, pe *provider.Error) *Failure {
	f := &Failure{Err: err}
	switch pe.Kind {
	case provider.KindCanceled:
		f.Kind, f.Reason = KindCanceled, "canceled"
	case provider.KindConnect:
		f.Kind, f.Reason, f.Decision, f.Refusal = KindConnect, "connect_error", DecideRetry, true
		f.Unreachable = pe.BeforeResponse
	case provider.KindReset:
		f.Kind, f.Reason, f.Decision = KindReset, "connection_reset", DecideRetry
		f.Refusal, f.Unreachable = pe.BeforeResponse, pe.BeforeResponse
	case provider.KindTimeout:
		f.Kind, f.Reason, f.Decision = KindTimeout, "timeout", DecideRetry
	default: // provider.KindProtocol
		f.Kind, f.Reason, f.Decision = KindProtocol, "protocol_error", DecideRetry
	}
	return f
}

// classifyAPI classifies an upstream's error answer.
func classifyAPI(err error, a *llm.APIError) *Failure {
	f := &Failure{Err: err, Status: a.Status, RetryAfter: a.RetryAfter}
	switch s := a.Status; {
	case s == http.StatusTooManyRequests:
		f.Kind, f.Reason = KindRateLimited, "rate_limited"
		if a.Code == "insufficient_quota" || a.Code == "credit_balance_exhausted" {
			// Not transient here, but another provider may serve.
			f.Kind, f.Reason = KindQuotaExhausted, "quota_exhausted"
		}
		f.Decision, f.Refusal, f.Capacity = DecideRetry, true, true
	case s == 529 || a.Type == llm.ErrOverloaded:
		f.Kind, f.Reason, f.Decision, f.Refusal, f.Capacity = KindOverloaded, "overloaded", DecideRetry, true, true
	case s == http.StatusServiceUnavailable:
		f.Kind, f.Reason, f.Decision, f.Refusal = KindUnavailable, "status_503", DecideRetry, true
	case s == http.StatusRequestTimeout, s == http.StatusConflict, s >= 500:
		f.Kind, f.Reason, f.Decision = KindServerError, statusReason(s), DecideRetry
	case s == http.StatusOK:
		// An error event inside a 200 stream (typically overloaded_error).
		f.Kind, f.Reason, f.Decision = KindStreamError, "stream_error", DecideRetry
	case IsContextExceeded(a):
		f.Kind, f.Reason, f.Decision = KindContextExceeded, "context_length_exceeded", DecideFallback
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		f.Kind, f.Reason = KindAuth, "auth_"+strconv.Itoa(s)
	case s == http.StatusNotFound:
		f.Kind, f.Reason = KindNotFound, "not_found"
	default:
		f.Kind, f.Reason = KindRejected, statusReason(s)
	}
	return f
}

func statusReason(s int) string { return "status_" + strconv.Itoa(s) }

// contextError is how one provider says that a prompt does not fit the
// model's context window: every field set must match (Prefix and
// Contains, lower case, against the message, case-insensitively); where
// the error type is a general one, the fixed wording it pairs it with
// tells a context error from another bad request.
type contextError struct {
	provider string
	code     string        // APIError.Code
	typ      llm.ErrorType // APIError.Type
	rawType  string        // APIError.RawType, the provider's own type
	// noRawType: the provider's type is the canonical one (RawType empty).
	noRawType bool
	prefix    string
	contains  string
}

// contextErrors is each provider's context error. A 400 (or 413) that
// matches one is a fallback to a model with a bigger window.
var contextErrors = []contextError{
	// OpenAI and Azure OpenAI: 400 invalid_request_error, code
	// context_length_exceeded (developers.openai.com/docs/guides/error-codes;
	// Azure OpenAI returns OpenAI's error body).
	{provider: "openai", code: "context_length_exceeded"},
	// Anthropic (and Claude on Vertex AI, which answers in Anthropic's
	// shape): 400 invalid_request_error "prompt is too long: N tokens > M
	// maximum" (platform.claude.com/docs/en/api/errors); the type is
	// general, the message's start is fixed.
	{provider: "anthropic", typ: llm.ErrInvalidRequest, noRawType: true, prefix: "prompt is too long"},
	// llama.cpp's llama-server: 400, type exceed_context_size_error, in the
	// OpenAI shape on both endpoints (PROTOCOLS.md §6.2).
	{provider: "llama.cpp", rawType: "exceed_context_size_error"},
	// vLLM: 400, type BadRequestError, numeric code 400, "This model's
	// maximum context length is N tokens. However, you requested M tokens
	// …" (vllm-project/vllm issues #20409, #4667).
	{provider: "vllm", rawType: "BadRequestError", contains: "maximum context length"},
	// Amazon Bedrock: 400 ValidationException "Input is too long for
	// requested model." (aws-samples/bedrock-chat#95,
	// aws-samples/assessment-generator#2).
	{provider: "bedrock", rawType: "ValidationException", contains: "input is too long"},
	// Google Vertex AI / Gemini: 400 status INVALID_ARGUMENT "The input
	// token count (N) exceeds the maximum number of tokens allowed (M)."
	// (google-gemini/gemini-cli#4118, #6678).
	{provider: "gemini", rawType: "INVALID_ARGUMENT", contains: "input token count"},
}

// matches reports whether a is c's context error.
func (c *contextError) matches(a *llm.APIError) bool {
	switch {
	case c.code != "" && a.Code != c.code,
		c.typ != "" && a.Type != c.typ,
		c.rawType != "" && a.RawType != c.rawType,
		c.noRawType && a.RawType != "",
		c.prefix != "" && !hasPrefixFold(a.Message, c.prefix),
		c.contains != "" && !strings.Contains(strings.ToLower(a.Message), c.contains):
		return false
	}
	return true
}

// IsContextExceeded reports whether a says the prompt exceeds the model's
// context window, in any provider's terms (contextErrors).
func IsContextExceeded(a *llm.APIError) bool {
	if a.Status != http.StatusBadRequest && a.Status != http.StatusRequestEntityTooLarge {
		return false
	}
	for i := range contextErrors {
		if contextErrors[i].matches(a) {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// MeshError is a failure Keel decided (no attempt could serve): Code is
// the mesh_error_code, Last the last upstream failure.
type MeshError struct {
	Code     string
	Why      string
	Last     error
	Attempts int
}

func (m *MeshError) Error() string { return m.Code + ": " + m.Why }
func (m *MeshError) Unwrap() error { return m.Last }

// NoCandidate says no endpoint could be booked for an attempt.
type NoCandidate struct {
	Err error
	// Filtered: no endpoint meets the request's constraints at all;
	// Exhausted: the call's attempts are spent; BreakerOpen: an endpoint
	// was left out because its breaker is open.
	Filtered, Exhausted, BreakerOpen bool
}

func (n *NoCandidate) Error() string {
	if n.Exhausted {
		return "attempts exhausted"
	}
	return n.Err.Error()
}

func (n *NoCandidate) Unwrap() error { return n.Err }
