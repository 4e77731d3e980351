package gemini

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// statusTypes maps Google's canonical status (google.rpc.Code, as the
// Gemini API names it: ai.google.dev/gemini-api/docs/troubleshooting) to
// a canonical error type.
var statusTypes = map[string]llm.ErrorType{
	"INVALID_ARGUMENT":    llm.ErrInvalidRequest,
	"FAILED_PRECONDITION": llm.ErrInvalidRequest,
	"OUT_OF_RANGE":        llm.ErrInvalidRequest,
	"UNAUTHENTICATED":     llm.ErrAuthentication,
	"PERMISSION_DENIED":   llm.ErrPermission,
	"NOT_FOUND":           llm.ErrNotFound,
	"ALREADY_EXISTS":      llm.ErrConflict,
	"ABORTED":             llm.ErrConflict,
	"RESOURCE_EXHAUSTED":  llm.ErrRateLimit,
	"UNAVAILABLE":         llm.ErrOverloaded,
	"DEADLINE_EXCEEDED":   llm.ErrTimeout,
	"INTERNAL":            llm.ErrAPI,
	"UNKNOWN":             llm.ErrAPI,
}

// StatusType is the error type of Google's canonical status st
// (google.rpc.Code), shared by the Gemini API and Vertex AI's error shape
// (internal/wire/google); ok is false for a status not listed.
func StatusType(st string) (t llm.ErrorType, ok bool) {
	t, ok = statusTypes[st]
	return t, ok
}

// typeStatuses is the status EncodeError writes per type.
var typeStatuses = map[llm.ErrorType]string{
	llm.ErrInvalidRequest: "INVALID_ARGUMENT",
	llm.ErrAuthentication: "UNAUTHENTICATED",
	llm.ErrPermission:     "PERMISSION_DENIED",
	llm.ErrNotFound:       "NOT_FOUND",
	llm.ErrConflict:       "ABORTED",
	llm.ErrTooLarge:       "INVALID_ARGUMENT",
	llm.ErrRateLimit:      "RESOURCE_EXHAUSTED",
	llm.ErrOverloaded:     "UNAVAILABLE",
	llm.ErrTimeout:        "DEADLINE_EXCEEDED",
	llm.ErrAPI:            "INTERNAL",
	llm.ErrBilling:        "FAILED_PRECONDITION",
}

// maxErrorText bounds how much of a non-JSON error body becomes the message.
const maxErrorText = 1024

// ParseError reads an error answer of the Gemini API: Google's shape
// {"error":{"code","message","status","details"}}, also wrapped in an
// array as some Google fronts send it; RawType keeps the status
// (RESOURCE_EXHAUSTED), which gives the type. RetryAfter comes from
// retry-after, else from a google.rpc.RetryInfo detail's retryDelay
// ("38s"). Any other body becomes the message, typed by the status.
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	e := &llm.APIError{Status: status}
	if h != nil {
		e.RetryAfter = llm.ParseRetryAfter(h, time.Now())
	}
	b := bytes.TrimSpace(body)
	if len(b) > 0 && b[0] == '[' {
		var arr []json.RawMessage
		if json.Unmarshal(b, &arr) == nil && len(arr) > 0 {
			b = arr[0]
		}
	}
	var doc struct {
		Error *errorBody `json:"error"`
	}
	if json.Unmarshal(b, &doc) == nil && doc.Error != nil {
		ge := doc.Error.apiError(status)
		ge.RetryAfter = e.RetryAfter
		if ge.RetryAfter == 0 {
			ge.RetryAfter = retryDelay(doc.Error.Details)
		}
		return ge
	}
	e.Type = llm.StatusErrorType(status)
	e.Message = string(b)
	if len(e.Message) > maxErrorText {
		e.Message = e.Message[:maxErrorText]
	}
	if strings.TrimSpace(e.Message) == "" {
		e.Message = http.StatusText(status)
	}
	if e.Message == "" {
		e.Message = "upstream error"
	}
	return e
}

// apiError maps an error object; status is the HTTP status when the
// object names none.
func (g *errorBody) apiError(status int) *llm.APIError {
	if g.Code >= 400 && g.Code <= 599 && status == http.StatusOK {
		status = g.Code
	}
	e := &llm.APIError{Status: status, Message: g.Message, RawType: g.Status}
	if t, ok := statusTypes[g.Status]; ok {
		e.Type = t
	} else {
		e.Type = llm.StatusErrorType(status)
	}
	if e.Message == "" {
		e.Message = g.Status
	}
	if e.Message == "" {
		e.Message = "upstream error"
	}
	return e
}

// retryDelay reads a RetryInfo detail's retryDelay (a protobuf Duration
// in JSON: "38s", "1.5s").
func retryDelay(details json.RawMessage) time.Duration {
	var ds []struct {
		Type       string `json:"@type"`
		RetryDelay string `json:"retryDelay"`
	}
	if json.Unmarshal(details, &ds) != nil {
		return 0
	}
	for _, d := range ds {
		if strings.HasSuffix(d.Type, "google.rpc.RetryInfo") {
			if v, err := time.ParseDuration(d.RetryDelay); err == nil && v > 0 {
				return v
			}
		}
	}
	return 0
}

// EncodeError writes e in Google's shape; a rate limit carries a
// RetryInfo detail with its retry delay, as the Gemini API's 429 does
// (ai.google.dev/gemini-api/docs/rate-limits).
func EncodeError(e *llm.APIError) []byte {
	st := e.RawType
	if _, ok := statusTypes[st]; !ok {
		st = typeStatuses[e.Type]
		if st == "" {
			st = "INTERNAL"
		}
	}
	out := errorBody{Code: e.Status, Message: e.Message, Status: st}
	if e.Status == http.StatusOK {
		out.Code = http.StatusInternalServerError
	}
	if st == "RESOURCE_EXHAUSTED" && e.RetryAfter > 0 {
		out.Details, _ = json.Marshal([]map[string]string{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": durationText(e.RetryAfter)}})
	}
	b, _ := json.Marshal(map[string]*errorBody{"error": &out})
	return b
}

// durationText is a protobuf Duration in JSON: seconds with an s.
func durationText(d time.Duration) string {
	return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
}
