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
