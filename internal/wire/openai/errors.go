package openai

import (
	"bytes"
	"cmp"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// wireErrorType is the error.type written for e: RawType when the upstream
// used a word outside the canonical set, else the canonical type in
// OpenAI's words, which SDKs and retry logic branch on
// (developers.openai.com/docs/guides/error-codes; PROTOCOLS.md §2.3, §6.1):
// invalid_request_error for every client error (OpenAI says it on 401,
// 403, 404, 409 and 413 too), requests for a rate limit (insufficient_quota
// for a spent quota), server_error for a failure on the serving side.
func wireErrorType(e *llm.APIError) string {
	if e.RawType != "" {
		return e.RawType
	}
	t := e.Type
	if t == "" {
		t = statusType(e.Status)
	}
	switch t {
	case llm.ErrAPI, llm.ErrOverloaded, llm.ErrTimeout:
		return "server_error"
	case llm.ErrRateLimit:
		if wireErrorCode(e) == "insufficient_quota" {
			return "insufficient_quota"
		}
		return "requests"
	case llm.ErrBilling:
		return "insufficient_quota"
	case llm.ErrAuthentication, llm.ErrPermission, llm.ErrNotFound, llm.ErrConflict, llm.ErrTooLarge:
		return string(llm.ErrInvalidRequest)
	}
	return string(t)
}

// wireErrorCode is the error.code written for e: its own, else OpenAI's
// code for the condition where OpenAI has one (rate_limit_exceeded,
// insufficient_quota, invalid_api_key), else none.
func wireErrorCode(e *llm.APIError) string {
	if e.Code != "" || e.RawType != "" {
		return e.Code
	}
	switch e.Type {
	case llm.ErrRateLimit:
		if e.MeshCode == llm.MeshKeyBudgetExceeded {
			return "insufficient_quota"
		}
		return "rate_limit_exceeded"
	case llm.ErrBilling:
		return "insufficient_quota"
	case llm.ErrAuthentication:
		return "invalid_api_key"
	}
	return ""
}

// statusType is llm.StatusErrorType, except that a status below 400 (an
// error inside a 200 stream) gives api_error.
func statusType(status int) llm.ErrorType {
	if status < 400 {
		return llm.ErrAPI
	}
	return llm.StatusErrorType(status)
}

// EncodeError writes e in OpenAI's error shape:
// {"error":{"message","type","param","code","mesh_error_code"?}} with param
// and code null when empty. Status, request id and retry-after belong in the
// HTTP response line and headers, not here.
func EncodeError(e *llm.APIError) []byte {
	b := make([]byte, 0, 128+len(e.Message))
	return appendErrorBody(b, e, true)
}

func appendErrorBody(b []byte, e *llm.APIError, withParam bool) []byte {
	b = append(b, `{"error":{"message":`...)
	b = jsonx.AppendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = jsonx.AppendString(b, wireErrorType(e))
	if withParam {
		b = append(b, `,"param":`...)
		if e.Param == "" {
			b = append(b, "null"...)
		} else {
			b = jsonx.AppendString(b, e.Param)
		}
	}
	b = append(b, `,"code":`...)
	if code := wireErrorCode(e); code == "" {
		b = append(b, "null"...)
	} else {
		b = jsonx.AppendString(b, code)
	}
	if e.MeshCode != "" {
		b = append(b, `,"mesh_error_code":`...)
		b = jsonx.AppendString(b, e.MeshCode)
	}
	return append(b, "}}"...)
}

// errStop ends a walk over a JSON array early.
var errStop = errors.New("stop")

// maxErrorText bounds how much of a non-JSON error body becomes the message.
const maxErrorText = 1024

// ParseError turns any upstream error answer into an APIError. A JSON body
// {"error":{message,type,param,code,mesh_error_code}} is read member by member
// ({"error":"text"} and {"message":"text"} are accepted too, and so are the
// shapes of OpenAI-compatible servers: vLLM's top-level {"object":"error",
// "message","type","code"}, Google's {"error":{"code","message","status"}},
// alone or wrapped in an array, whose status is read as the type, and AWS's
// {"message"} with the type in the X-Amzn-Errortype header); any other body
// becomes the message (trimmed, at most 1 KiB) with the type taken from the
// status. RetryAfter comes from retry-after-ms, else retry-after (seconds or
// an HTTP date); RequestID from x-request-id.
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	e := &llm.APIError{Status: status}
	if h != nil {
		e.RequestID = h.Get("x-request-id")
		e.RetryAfter = llm.ParseRetryAfter(h, time.Now())
	}
	var typ, topType, topCode, gStatus string
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '[' && jsonx.Valid(trimmed) {
		// Google's APIs (Gemini, Vertex AI) may wrap the error object in an
		// array: [{"error":{...}}]. The first element is the error.
		_ = jsonx.EachElement(trimmed, func(_ int, v []byte) error {
			if len(v) > 0 && v[0] == '{' {
				trimmed = v
			}
			return errStop
		})
	}
	if len(trimmed) > 0 && trimmed[0] == '{' && jsonx.Valid(trimmed) {
		_ = jsonx.EachMember(trimmed, func(k, v []byte) error {
			switch string(bareKey(k)) {
			case "error":
				switch {
				case len(v) > 0 && v[0] == '{':
					_ = jsonx.EachMember(v, func(ek, ev []byte) error {
						switch string(bareKey(ek)) {
						case "message":
							e.Message = scalarText(ev)
						case "type":
							typ = scalarText(ev)
						case "param":
							e.Param = scalarText(ev)
						case "code":
							e.Code = scalarText(ev)
						case "status":
							// Google's APIs name the error in status
							// (INVALID_ARGUMENT) beside a numeric code.
							gStatus = scalarText(ev)
						case "mesh_error_code":
							e.MeshCode = scalarText(ev)
						}
						return nil
					})
				case len(v) > 0 && v[0] == '"':
					e.Message = scalarText(v)
				}
			case "message":
				if e.Message == "" {
					e.Message = scalarText(v)
				}
			case "type":
				// vLLM's older shape: {"object":"error","message","type","code"}.
				topType = scalarText(v)
			case "code":
				topCode = scalarText(v)
			}
			return nil
		})
	} else if len(trimmed) > 0 {
		e.Message = truncateText(trimmed, maxErrorText)
	}
	if e.Message == "" {
		if e.Message = http.StatusText(status); e.Message == "" {
			e.Message = "upstream error (status " + strconv.Itoa(status) + ")"
		}
	}
	if typ == "" {
		typ, e.Code = topType, cmp.Or(e.Code, topCode)
	}
	if typ == "" {
		typ = gStatus
	}
	if typ == "" && h != nil {
		// AWS services (Amazon Bedrock) name the error in a header,
		// "ValidationException:http://internal.amazon.com/…", beside a body
		// of {"message": …}.
		typ, _, _ = strings.Cut(h.Get("X-Amzn-Errortype"), ":")
	}
	e.Type, e.RawType = classify(typ, status, e.Code)
	return e
}

// classify picks the canonical type for an OpenAI error.type, status and
// code, and keeps the upstream's word in RawType when EncodeError would not
// write it back from the canonical type (so an error relayed to an OpenAI
// client says what the upstream said).
func classify(typ string, status int, code string) (llm.ErrorType, string) {
	t := canonicalType(typ, status)
	if typ == "" || wireErrorType(&llm.APIError{Status: status, Type: t, Code: code}) == typ {
		return t, ""
	}
	return t, typ
}

// canonicalType maps an OpenAI error.type and status to a canonical type.
func canonicalType(typ string, status int) llm.ErrorType {
	byStatus := statusType(status)
	switch t := llm.ErrorType(typ); t {
	case "":
		return byStatus
	case "server_error":
		if status >= 400 && byStatus != llm.ErrAPI {
			return byStatus
		}
		return llm.ErrAPI
	case llm.ErrInvalidRequest:
		// OpenAI says invalid_request_error on 401 and 404 too: trust the status.
		if status >= 400 {
			return byStatus
		}
		return t
	case llm.ErrAuthentication, llm.ErrBilling, llm.ErrPermission, llm.ErrNotFound,
		llm.ErrConflict, llm.ErrTooLarge, llm.ErrRateLimit, llm.ErrAPI, llm.ErrTimeout, llm.ErrOverloaded:
		return t
	}
	return byStatus
}

// scalarText renders a JSON string, number or boolean as text; null and
// containers give "".
func scalarText(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	switch v[0] {
	case '"':
		s, _ := unquote(v)
		return s
	case '{', '[', 'n':
		return ""
	}
	return string(v)
}

func truncateText(b []byte, n int) string {
	if len(b) <= n {
		return strings.ToValidUTF8(string(b), "\uFFFD")
	}
	for n > 0 && !utf8.RuneStart(b[n]) {
		n--
	}
	return strings.ToValidUTF8(string(b[:n]), "\uFFFD") + "…"
}
