package google

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

var errorCases = []struct {
	name   string
	status int
	header http.Header
	body   string
	typ    llm.ErrorType
	raw    string
	msg    string
	retry  time.Duration
}{
	{"resource exhausted", 429, nil, `{"error":{"code":429,"message":"Resource exhausted, please try again later.","status":"RESOURCE_EXHAUSTED"}}`,
		llm.ErrRateLimit, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED: Resource exhausted, please try again later.", 0},
	{"with retry-after", 429, http.Header{"Retry-After": {"7"}}, `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo"}]}}`,
		llm.ErrRateLimit, "RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED: Quota exceeded", 7 * time.Second},
	{"unauthenticated", 401, nil, `{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}`,
		llm.ErrAuthentication, "UNAUTHENTICATED", "UNAUTHENTICATED: Request had invalid authentication credentials.", 0},
	{"not found", 404, nil, `{"error":{"code":404,"message":"Publisher Model not found.","status":"NOT_FOUND"}}`,
		llm.ErrNotFound, "NOT_FOUND", "NOT_FOUND: Publisher Model not found.", 0},
	{"unavailable", 503, nil, `{"error":{"code":503,"message":"The service is currently unavailable.","status":"UNAVAILABLE"}}`,
		llm.ErrOverloaded, "UNAVAILABLE", "UNAVAILABLE: The service is currently unavailable.", 0},
	{"status in message", 400, nil, `{"error":{"code":400,"message":"INVALID_ARGUMENT: bad","status":"INVALID_ARGUMENT"}}`,
		llm.ErrInvalidRequest, "INVALID_ARGUMENT", "INVALID_ARGUMENT: bad", 0},
	{"unknown status", 418, nil, `{"error":{"code":418,"message":"teapot","status":"TEAPOT"}}`,
		llm.ErrInvalidRequest, "TEAPOT", "TEAPOT: teapot", 0},
	{"no message", 500, nil, `{"error":{"code":500}}`, llm.ErrAPI, "", "Internal Server Error (code 500)", 0},
	{"anthropic error relayed", 529, nil, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		llm.ErrOverloaded, "", "Overloaded", 0},
	{"not json", 502, nil, `upstream connect error`, llm.ErrAPI, "", "upstream connect error", 0},
}

func TestParseError(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			e := ParseError(tc.status, h, []byte(tc.body))
			if e.Status != tc.status || e.Type != tc.typ || e.RawType != tc.raw || e.Message != tc.msg || e.RetryAfter != tc.retry {
				t.Errorf("got %d %s raw %q %q retry %v, want %d %s raw %q %q retry %v", e.Status, e.Type, e.RawType, e.Message, e.RetryAfter,
					tc.status, tc.typ, tc.raw, tc.msg, tc.retry)
			}
		})
	}
}

func FuzzParseError(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.status, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		e := ParseError(status, http.Header{}, body)
		if e == nil || e.Type == "" || e.Status != status || e.Message == "" && status >= 100 && status < 600 && http.StatusText(status) != "" {
			t.Fatalf("ParseError(%d, %q) = %+v", status, body, e)
		}
	})
}
