package anthropic

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

func TestEncodeErrorGolden(t *testing.T) {
	tests := []struct {
		name string
		err  llm.APIError
	}{
		{name: "rate_limit", err: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "Number of request tokens has exceeded your per-minute rate limit", RequestID: "req_011CSHoEeqs5C35K2UUqR7Fy"}},
		{name: "mesh_timeout", err: llm.APIError{Status: 504, Type: llm.ErrTimeout, Message: "all attempts timed out after 30s", MeshCode: llm.MeshTimeout}},
		{name: "details_code", err: llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Message: "prompt is too long: 210000 tokens > 200000 maximum", Code: "prompt_too_long", RequestID: "req_1"}},
		{name: "raw_type", err: llm.APIError{Status: 413, Type: llm.ErrTooLarge, RawType: "request_too_large", Message: "Request exceeds the maximum allowed number of bytes."}},
		{name: "type_from_status", err: llm.APIError{Status: 529, Message: "Overloaded"}},
		{name: "bad_request", err: llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "max_tokens: field required"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := EncodeError(&tt.err)
			checkGolden(t, filepath.Join("testdata", "errors", tt.name+".golden"), out)
			h := http.Header{}
			got := ParseError(tt.err.Status, h, out)
			want := tt.err
			if want.Type == "" {
				want.Type = llm.StatusErrorType(want.Status)
			}
			if want.RawType == string(want.Type) {
				want.RawType = "" // a known type needs no raw copy
			}
			mustEqual(t, "ParseError(EncodeError(e))", got, &want)
		})
	}
}

func TestParseError(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes, cut at a rune boundary
	tests := []struct {
		name   string
		status int
		header http.Header
		body   string
		want   llm.APIError
	}{
		{name: "JSON body", status: 529, header: http.Header{"Request-Id": {"req_hdr"}, "Retry-After": {"2"}},
			body: `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded","details":{"error_code":"capacity"}},"request_id":"req_body"}`,
			want: llm.APIError{Status: 529, Type: llm.ErrOverloaded, Message: "Overloaded", Code: "capacity", RequestID: "req_body", RetryAfter: 2 * time.Second}},
		{name: "request id from header", status: 401, header: http.Header{"Request-Id": {"req_hdr"}},
			body: `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`,
			want: llm.APIError{Status: 401, Type: llm.ErrAuthentication, Message: "invalid x-api-key", RequestID: "req_hdr"}},
		{name: "unknown type kept raw", status: 418, body: `{"type":"error","error":{"type":"teapot_error","message":"short and stout"}}`,
			want: llm.APIError{Status: 418, Type: llm.ErrInvalidRequest, RawType: "teapot_error", Message: "short and stout"}},
		{name: "mesh code from a Keel upstream", status: 503, body: `{"type":"error","error":{"type":"overloaded_error","message":"open","mesh_error_code":"MESH_CIRCUIT_OPEN"}}`,
			want: llm.APIError{Status: 503, Type: llm.ErrOverloaded, Message: "open", MeshCode: llm.MeshCircuitOpen}},
		{name: "HTML body", status: 502, body: "\n  <html><body>Bad Gateway</body></html>\n",
			want: llm.APIError{Status: 502, Type: llm.ErrAPI, Message: "<html><body>Bad Gateway</body></html>"}},
		{name: "empty body", status: 504, want: llm.APIError{Status: 504, Type: llm.ErrTimeout, Message: "Gateway Timeout"}},
		{name: "JSON without error object", status: 500, body: `{"message":"boom"}`,
			want: llm.APIError{Status: 500, Type: llm.ErrAPI, Message: `{"message":"boom"}`}},
		{name: "error member not an object", status: 400, body: `{"error":"bad","request_id":"r"}`,
			want: llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Message: `{"error":"bad","request_id":"r"}`}},
		{name: "wrong member types ignored", status: 429, body: `{"error":{"type":7,"message":["x"],"details":"y"}}`,
			want: llm.APIError{Status: 429, Type: llm.ErrRateLimit}},
		{name: "long body cut", status: 500, body: long, want: llm.APIError{Status: 500, Type: llm.ErrAPI, Message: long[:512]}},
		{name: "retry-after-ms wins", status: 429, header: http.Header{"Retry-After-Ms": {"1500.5"}, "Retry-After": {"9"}},
			body: "slow down", want: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "slow down", RetryAfter: 1500*time.Millisecond + 500*time.Microsecond}},
		{name: "bad retry-after-ms falls back", status: 429, header: http.Header{"Retry-After-Ms": {"soon"}, "Retry-After": {"0.25"}},
			body: "x", want: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "x", RetryAfter: 250 * time.Millisecond}},
		{name: "negative retry-after", status: 429, header: http.Header{"Retry-After": {"-3"}},
			body: "x", want: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "x"}},
		{name: "garbage retry-after", status: 429, header: http.Header{"Retry-After": {"tomorrow"}},
			body: "x", want: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Message: "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.header
			if h == nil {
				h = http.Header{}
			}
			mustEqual(t, "ParseError", ParseError(tt.status, h, []byte(tt.body)), &tt.want)
		})
	}
}

// TestParseErrorRetryAfterDate runs in a synctest bubble, whose clock starts
// at 2000-01-01 00:00:00 UTC, so an HTTP-date retry-after has an exact value.
func TestParseErrorRetryAfterDate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		tests := []struct {
			date string
			want time.Duration
		}{
			{"Sat, 01 Jan 2000 00:00:30 GMT", 30 * time.Second},
			{"Saturday, 01-Jan-00 00:01:00 GMT", time.Minute}, // RFC 850
			{"Fri, 31 Dec 1999 23:59:00 GMT", 0},              // in the past
		}
		for _, tt := range tests {
			e := ParseError(429, http.Header{"Retry-After": {tt.date}}, nil)
			if e.RetryAfter != tt.want {
				t.Errorf("retry-after %q: RetryAfter = %v, want %v", tt.date, e.RetryAfter, tt.want)
			}
		}
	})
}
