package policy

import (
	"errors"
	"fmt"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// TestClientError: what the client gets for each way a call's attempts
// can end.
func TestClientError(t *testing.T) {
	upstream429 := &provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: &llm.APIError{Status: 429, Type: llm.ErrRateLimit, Code: "rate_limit_exceeded", Param: "p", RawType: "requests", Message: "slow down"}}
	inStream := &provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: &llm.APIError{Status: 200, Type: llm.ErrOverloaded, Message: "Overloaded"}}
	reset := &provider.Error{Kind: provider.KindReset, Endpoint: "e", Err: errors.New("connection reset")}
	own := &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "no endpoint meets the constraints"}
	cases := []struct {
		name string
		err  error
		want string // status type code mesh_code: message
	}{
		{name: "budget spent after upstream 429s", err: &MeshError{Code: llm.MeshBudgetExhausted, Why: "retry budget exhausted", Last: Classify(upstream429)},
			want: "429 rate_limit_error rate_limit_exceeded MESH_BUDGET_EXHAUSTED: retry budget exhausted after 3 attempts; last: " + upstream429.Error()},
		{name: "error event in a 200 stream", err: &MeshError{Code: llm.MeshFallbackExhausted, Why: "every attempt failed", Last: inStream},
			want: "529 overloaded_error  MESH_FALLBACK_EXHAUSTED: every attempt failed after 3 attempts; last: " + inStream.Error()},
		{name: "last failure without an answer", err: &MeshError{Code: llm.MeshFallbackExhausted, Why: "every attempt failed", Last: reset},
			want: "502 api_error  MESH_FALLBACK_EXHAUSTED: every attempt failed after 3 attempts; last: " + reset.Error()},
		{name: "timeout", err: &MeshError{Code: llm.MeshTimeout, Why: "no endpoint can be tried again before the deadline", Last: reset},
			want: "504 timeout_error  MESH_TIMEOUT: no endpoint can be tried again before the deadline after 3 attempts; last: " + reset.Error()},
		{name: "circuit open, nothing sent", err: &MeshError{Code: llm.MeshCircuitOpen, Why: "all open"},
			want: "503 overloaded_error  MESH_CIRCUIT_OPEN: all open after 3 attempts"},
		{name: "keel's own answer", err: fmt.Errorf("routing: %w", own), want: "400 invalid_request_error  MESH_BAD_REQUEST: no endpoint meets the constraints"},
		{name: "upstream answer not retried", err: Classify(upstream429), want: "429 rate_limit_error rate_limit_exceeded : slow down"},
		{name: "anything else", err: errors.New("boom"), want: "502 api_error  MESH_FALLBACK_EXHAUSTED: boom"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ae := ClientError(tc.err, 3)
			got := fmt.Sprintf("%d %s %s %s: %s", ae.Status, ae.Type, ae.Code, ae.MeshCode, ae.Message)
			if got != tc.want {
				t.Errorf("(-got +want):\n-%s\n+%s", got, tc.want)
			}
		})
	}
	// An upstream's answer passes through whole.
	if ae := ClientError(upstream429, 1); ae.Param != "p" || ae.RawType != "requests" {
		t.Errorf("pass-through %+v", ae)
	}
}
