package azure

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

var sampleResults = []FilterResult{
	{Category: "hate", Filtered: true, Severity: "high"},
	{Category: "jailbreak", Filtered: true, Detected: true},
	{Category: "self_harm", Severity: "safe"},
	{Category: "sexual", Severity: "safe"},
	{Category: "violence", Filtered: true, Severity: "medium"},
}

var errorCases = []struct {
	name   string
	status int
	header http.Header
	body   string
	want   llm.APIError
}{
	{
		name:   "content filter",
		status: 400,
		header: http.Header{"Apim-Request-Id": {"apim-1"}},
		body:   string(EncodeContentFilterError(sampleResults)),
		want: llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "content_filter", Param: "prompt", RequestID: "apim-1",
			Message: ContentFilterMessage + " (content filter: hate severity high, jailbreak detected, violence severity medium)"},
	},
	{
		// Azure's documented example has no innererror
		// (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter).
		name:   "content filter without results",
		status: 400,
		body:   `{"error":{"message":"The response was filtered","type":null,"param":"prompt","code":"content_filter","status":400}}`,
		want:   llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "content_filter", Param: "prompt", Message: "The response was filtered"},
	},
	{
		name:   "rate limit",
		status: 429,
		header: http.Header{"Retry-After": {"6"}, "Retry-After-Ms": {"5500"}, "X-Request-Id": {"r-2"}},
		body:   `{"error":{"code":"429","message":"Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."}}`,
		want: llm.APIError{Status: 429, Type: llm.ErrRateLimit, Code: "429", RequestID: "r-2", RetryAfter: 5500 * time.Millisecond,
			Message: "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current OpenAI S0 pricing tier. Please retry after 6 seconds."},
	},
	{
		name:   "missing api-version",
		status: 404,
		body:   `{"error":{"code":"404","message":"Resource not found"}}`,
		want:   llm.APIError{Status: 404, Type: llm.ErrNotFound, Code: "404", Message: "Resource not found"},
	},
	{
		name:   "bad key",
		status: 401,
		body:   `{"error":{"code":"401","message":"Access denied due to invalid subscription key or wrong API endpoint."}}`,
		want:   llm.APIError{Status: 401, Type: llm.ErrAuthentication, Code: "401", Message: "Access denied due to invalid subscription key or wrong API endpoint."},
	},
	{
		name:   "openai shape",
		status: 400,
		body:   `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
		want:   llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Code: "context_length_exceeded", Param: "messages", Message: "This model's maximum context length is 128000 tokens."},
	},
	{
		name:   "not json",
		status: 502,
		body:   `<html>Bad Gateway</html>`,
		want:   llm.APIError{Status: 502, Type: llm.ErrAPI, Message: "<html>Bad Gateway</html>"},
	},
}

func TestParseError(t *testing.T) {
	for _, tc := range errorCases {
		t.Run(tc.name, func(t *testing.T) {
			got := ParseError(tc.status, tc.header, []byte(tc.body))
			if !reflect.DeepEqual(*got, tc.want) {
				t.Errorf("ParseError:\n got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
}

func TestEncodeErrorRoundTrip(t *testing.T) {
	for _, e := range []llm.APIError{
		{Status: 401, Type: llm.ErrAuthentication, Message: "Access denied due to invalid subscription key or wrong API endpoint."},
		{Status: 404, Type: llm.ErrNotFound, Message: "Resource not found"},
		{Status: 404, Type: llm.ErrNotFound, Code: "DeploymentNotFound", Message: "The API deployment for this resource does not exist."},
		{Status: 429, Type: llm.ErrRateLimit, Message: "Rate limit is exceeded. Try again in 1 seconds."},
		{Status: 400, Type: llm.ErrInvalidRequest, Param: "messages", Message: "messages: bad"},
	} {
		t.Run(e.Message, func(t *testing.T) {
			got := ParseError(e.Status, nil, EncodeError(&e))
			want := e
			if want.Code == "" && e.Status != 400 {
				want.Code = strconv.Itoa(e.Status)
			}
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("ParseError(EncodeError):\n got %+v\nwant %+v", *got, want)
			}
		})
	}
}

// FuzzParseError: any body and status give an error with a message and
// the status's class, never a panic.
func FuzzParseError(f *testing.F) {
	for _, tc := range errorCases {
		f.Add(tc.status, []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 599 {
			return
		}
		e := ParseError(status, nil, body)
		if e.Status != status || e.Message == "" || e.Type == "" {
			t.Fatalf("ParseError(%d, %q) = %+v", status, body, e)
		}
	})
}
