package policy

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

func apiErr(status int, typ llm.ErrorType, code string) error {
	return &provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: &llm.APIError{Status: status, Type: typ, Code: code, RetryAfter: time.Second}}
}

// TestClassify: each error an attempt can end with has one kind, one
// decision and the flags the policies read; the reason is the label the
// request log and metrics have always shown.
func TestClassify(t *testing.T) {
	cases := []struct {
		name                           string
		err                            error
		kind                           Kind
		decision                       Decision
		reason                         string
		refusal, capacity, unreachable bool
		endpointFault                  bool
	}{
		{name: "rate limited", err: apiErr(429, llm.ErrRateLimit, ""), kind: KindRateLimited, decision: DecideRetry, reason: "rate_limited", refusal: true, capacity: true, endpointFault: true},
		{name: "quota", err: apiErr(429, llm.ErrRateLimit, "insufficient_quota"), kind: KindQuotaExhausted, decision: DecideRetry, reason: "quota_exhausted", refusal: true, capacity: true, endpointFault: true},
		{name: "credit", err: apiErr(429, llm.ErrRateLimit, "credit_balance_exhausted"), kind: KindQuotaExhausted, decision: DecideRetry, reason: "quota_exhausted", refusal: true, capacity: true, endpointFault: true},
		{name: "529", err: apiErr(529, llm.ErrOverloaded, ""), kind: KindOverloaded, decision: DecideRetry, reason: "overloaded", refusal: true, capacity: true, endpointFault: true},
		{name: "overloaded type on 500", err: apiErr(500, llm.ErrOverloaded, ""), kind: KindOverloaded, decision: DecideRetry, reason: "overloaded", refusal: true, capacity: true, endpointFault: true},
		{name: "503", err: apiErr(503, llm.ErrAPI, ""), kind: KindUnavailable, decision: DecideRetry, reason: "status_503", refusal: true, endpointFault: true},
		{name: "500", err: apiErr(500, llm.ErrAPI, ""), kind: KindServerError, decision: DecideRetry, reason: "status_500", endpointFault: true},
		{name: "408", err: apiErr(408, llm.ErrTimeout, ""), kind: KindServerError, decision: DecideRetry, reason: "status_408", endpointFault: true},
		{name: "409", err: apiErr(409, llm.ErrAPI, ""), kind: KindServerError, decision: DecideRetry, reason: "status_409", endpointFault: true},
		{name: "error event in a 200", err: apiErr(200, llm.ErrAPI, ""), kind: KindStreamError, decision: DecideRetry, reason: "stream_error", endpointFault: true},
		{name: "context", err: apiErr(400, llm.ErrInvalidRequest, "context_length_exceeded"), kind: KindContextExceeded, decision: DecideFallback, reason: "context_length_exceeded"},
		{name: "401", err: apiErr(401, llm.ErrAuthentication, ""), kind: KindAuth, reason: "auth_401"},
		{name: "403", err: apiErr(403, llm.ErrPermission, ""), kind: KindAuth, reason: "auth_403"},
		{name: "404", err: apiErr(404, llm.ErrNotFound, ""), kind: KindNotFound, reason: "not_found"},
		{name: "400", err: apiErr(400, llm.ErrInvalidRequest, ""), kind: KindRejected, reason: "status_400"},
		{name: "content filter", err: &provider.Error{Kind: provider.KindStatus, API: &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "content_filter"}, Filtered: provider.ContentFilterFail}, kind: KindContentFilter, reason: "content_filter"},
		{name: "content filter, fallback", err: &provider.Error{Kind: provider.KindStatus, API: &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "content_filter"}, Filtered: provider.ContentFilterFallback}, kind: KindContentFilter, decision: DecideRetry, reason: "content_filter", refusal: true},
		{name: "status without answer", err: &provider.Error{Kind: provider.KindStatus, Endpoint: "e"}, kind: KindUnknown, reason: "unknown"},
		{name: "connect refused", err: &provider.Error{Kind: provider.KindConnect, BeforeResponse: true}, kind: KindConnect, decision: DecideRetry, reason: "connect_error", refusal: true, unreachable: true, endpointFault: true},
		{name: "connect (tls)", err: &provider.Error{Kind: provider.KindConnect}, kind: KindConnect, decision: DecideRetry, reason: "connect_error", refusal: true, endpointFault: true},
		{name: "reset before response", err: &provider.Error{Kind: provider.KindReset, BeforeResponse: true}, kind: KindReset, decision: DecideRetry, reason: "connection_reset", refusal: true, unreachable: true, endpointFault: true},
		{name: "reset mid-answer", err: &provider.Error{Kind: provider.KindReset}, kind: KindReset, decision: DecideRetry, reason: "connection_reset", endpointFault: true},
		{name: "timeout", err: &provider.Error{Kind: provider.KindTimeout}, kind: KindTimeout, decision: DecideRetry, reason: "timeout", endpointFault: true},
		{name: "protocol", err: &provider.Error{Kind: provider.KindProtocol}, kind: KindProtocol, decision: DecideRetry, reason: "protocol_error", endpointFault: true},
		{name: "provider canceled", err: &provider.Error{Kind: provider.KindCanceled}, kind: KindCanceled, reason: "canceled"},
		{name: "context canceled", err: fmt.Errorf("reading: %w", context.Canceled), kind: KindCanceled, reason: "canceled"},
		{name: "deadline", err: context.DeadlineExceeded, kind: KindCanceled, reason: "canceled"},
		{name: "empty stream", err: ErrEmptyStream, kind: KindEmptyStream, decision: DecideRetry, reason: "empty_stream", refusal: true, endpointFault: true},
		{name: "diverged", err: ErrDiverged, kind: KindDiverged, reason: "continuation_diverged"},
		{name: "internal", err: errors.New("boom"), kind: KindInternal, reason: "internal"},
		{name: "mesh verdict", err: &MeshError{Code: llm.MeshBudgetExhausted, Why: "spent", Last: apiErr(500, llm.ErrAPI, "")}, kind: KindMesh, reason: "mesh_" + llm.MeshBudgetExhausted},
		{name: "breaker open", err: BreakerOpen(errors.New("open")), kind: KindBreakerOpen, decision: DecideRetry, reason: "breaker_open", refusal: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := Classify(tc.err)
			got := fmt.Sprintf("%v %v %s refusal=%v capacity=%v unreachable=%v fault=%v", f.Kind, f.Decision, f.Reason, f.Refusal, f.Capacity, f.Unreachable, f.EndpointFault())
			want := fmt.Sprintf("%v %v %s refusal=%v capacity=%v unreachable=%v fault=%v", tc.kind, tc.decision, tc.reason, tc.refusal, tc.capacity, tc.unreachable, tc.endpointFault)
			if got != want {
				t.Errorf("Classify(%v) (-got +want):\n-%s\n+%s", tc.err, got, want)
			}
			if !errors.Is(f, tc.err) {
				t.Errorf("the failure does not wrap %v", tc.err)
			}
			if f.Kind != KindMesh && Classify(f) != f {
				// (A verdict is classified from the verdict it wraps, never
				// from the last failure that verdict wraps in turn.)
				t.Error("a failure is not returned as is")
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) is not nil")
	}
}

func TestRetryAfterAndStatusKept(t *testing.T) {
	f := Classify(apiErr(http.StatusTooManyRequests, llm.ErrRateLimit, ""))
	if f.Status != 429 || f.RetryAfter != time.Second {
		t.Errorf("status %d, retry-after %v; want 429, 1s", f.Status, f.RetryAfter)
	}
}

func TestLoserKeepsTheOriginal(t *testing.T) {
	f := Classify(&provider.Error{Kind: provider.KindCanceled})
	l := Loser(f)
	if l.Kind != KindCancelledLoser || l.Reason != "cancelled_loser" || !l.Cancelled() || l.EndpointFault() {
		t.Errorf("loser %+v", l)
	}
	if f.Kind != KindCanceled || f.Reason != "canceled" {
		t.Errorf("Loser changed the original: %+v", f)
	}
}

// TestContextErrorsByProvider: each provider's "prompt too long" answer,
// as it arrives on the wire and as Keel's parser for that wire reads it, is
// a fallback to a model with a bigger window; other 400s that mention
// tokens are not. Sources are cited at contextErrors.
func TestContextErrorsByProvider(t *testing.T) {
	cases := []struct {
		name     string
		format   llm.Format // the wire the answer came on
		status   int
		header   http.Header
		body     string
		fallback bool
	}{
		{name: "openai", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			fallback: true},
		{name: "azure openai", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			fallback: true},
		{name: "anthropic", format: llm.FormatAnthropic, status: 400,
			body:     `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011"}`,
			fallback: true},
		{name: "claude on vertex", format: llm.FormatAnthropic, status: 400,
			body:     `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201544 tokens > 200000 maximum"}}`,
			fallback: true},
		{name: "llama.cpp chat completions", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"code":400,"message":"request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1441,"n_ctx":1024}}`,
			fallback: true},
		{name: "llama.cpp messages", format: llm.FormatAnthropic, status: 400,
			body:     `{"error":{"code":400,"message":"request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1441,"n_ctx":1024}}`,
			fallback: true},
		{name: "vllm", format: llm.FormatOpenAI, status: 400,
			body:     `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			fallback: true},
		{name: "vllm error object", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 2048 tokens. However, your request has 2049 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`,
			fallback: true},
		{name: "bedrock", format: llm.FormatOpenAI, status: 400,
			header:   http.Header{"X-Amzn-Errortype": {"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}},
			body:     `{"message":"Input is too long for requested model."}`,
			fallback: true},
		{name: "gemini", format: llm.FormatOpenAI, status: 400,
			body:     `[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`,
			fallback: true},

		// Not a context error: the request is at fault whatever the model.
		{name: "openai max_tokens too large", format: llm.FormatOpenAI, status: 400,
			body: `{"error":{"message":"max_tokens is too large: 500000. This model supports at most 16384 completion tokens, whereas you provided 500000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`},
		{name: "vllm max_tokens negative", format: llm.FormatOpenAI, status: 400,
			body: `{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}`},
		{name: "anthropic other invalid request", format: llm.FormatAnthropic, status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: the context window of this conversation has an empty message"}}`},
		{name: "bedrock other validation", format: llm.FormatOpenAI, status: 400,
			header: http.Header{"X-Amzn-Errortype": {"ValidationException"}},
			body:   `{"message":"Malformed input request: expected maxLength: 42000, actual: 46735, please reformat your input and try again."}`},
		{name: "gemini other invalid argument", format: llm.FormatOpenAI, status: 400,
			body: `{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			var ae *llm.APIError
			if tc.format == llm.FormatOpenAI {
				ae = openai.ParseError(tc.status, h, []byte(tc.body))
			} else {
				ae = anthropic.ParseError(tc.status, h, []byte(tc.body))
			}
			f := Classify(&provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: ae})
			if got := f.Decision == DecideFallback && f.Kind == KindContextExceeded && f.Reason == "context_length_exceeded"; got != tc.fallback {
				t.Errorf("parsed %+v: decision %v kind %v reason %q, want a context fallback %v", *ae, f.Decision, f.Kind, f.Reason, tc.fallback)
			}
		})
	}
}
