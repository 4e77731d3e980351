package anthropic

import (
	"bytes"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
)

// maxErrorMessage bounds the message taken from a non-JSON error body.
const maxErrorMessage = 512

// EncodeError writes the Messages API error body:
//
//	{"type":"error","error":{"type":T,"message":M,"details":{"error_code":C}?,"mesh_error_code":K?},"request_id":R?}
//
// T is e.RawType when set, else e.Type, else the type of e.Status.
func EncodeError(e *llm.APIError) []byte {
	b := make([]byte, 0, 128+len(e.Message))
	b = append(b, `{"type":"error","error":`...)
	b = appendErrorObject(b, e)
	if e.RequestID != "" {
		b = append(b, `,"request_id":`...)
		b = jsonx.AppendString(b, e.RequestID)
	}
	return append(b, '}')
}

func appendErrorObject(b []byte, e *llm.APIError) []byte {
	typ := e.RawType
	if typ == "" {
		typ = string(e.Type)
	}
	if typ == "" {
		typ = string(llm.StatusErrorType(e.Status))
		if e.Status == 0 || e.Status == 200 {
			typ = string(llm.ErrAPI)
		}
	}
	b = append(b, `{"type":`...)
	b = jsonx.AppendString(b, typ)
	b = append(b, `,"message":`...)
	b = jsonx.AppendString(b, e.Message)
	if e.Code != "" {
		b = append(b, `,"details":{"error_code":`...)
		b = jsonx.AppendString(b, e.Code)
		b = append(b, '}')
	}
	if e.MeshCode != "" {
		b = append(b, `,"mesh_error_code":`...)
		b = jsonx.AppendString(b, e.MeshCode)
	}
	return append(b, '}')
}

// knownErrorType reports whether t is one of the canonical error types.
func knownErrorType(t string) bool {
	switch llm.ErrorType(t) {
	case llm.ErrInvalidRequest, llm.ErrAuthentication, llm.ErrBilling, llm.ErrPermission,
		llm.ErrNotFound, llm.ErrConflict, llm.ErrTooLarge, llm.ErrRateLimit, llm.ErrAPI,
		llm.ErrTimeout, llm.ErrOverloaded:
		return true
	}
	return false
}

// ParseError reads an upstream error answer. Any body is accepted: a JSON
// error object gives type, message, details.error_code (Code),
// mesh_error_code and request_id; anything else gives the trimmed start of
// the body as the message and the status's type. An error type outside the
// canonical set is kept in RawType with Type taken from the status.
// RetryAfter comes from retry-after-ms, then retry-after (seconds or an HTTP
// date), as the SDKs read them; RequestID falls back to the request-id header.
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	e := &llm.APIError{Status: status}
	if !parseErrorBody(e, body) {
		e.Type = llm.StatusErrorType(status)
		e.Message = bodyPrefix(body)
		if e.Message == "" {
			e.Message = http.StatusText(status)
		}
	}
	if e.RequestID == "" {
		e.RequestID = h.Get("request-id")
	}
	e.RetryAfter = llm.ParseRetryAfter(h, time.Now())
	return e
}

// parseErrorBody fills e from a JSON error body and reports whether the body
// was one: an object whose "error" member is an object.
func parseErrorBody(e *llm.APIError, body []byte) bool {
	body = jsonx.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' || !jsonx.Valid(body) {
		return false
	}
	var errObj []byte
	_ = eachMember(nil, body, func(k string, v []byte) error {
		switch k {
		case "error":
			if len(v) > 0 && v[0] == '{' {
				errObj = v
			}
		case "request_id":
			e.RequestID, _ = str(nil, v)
		}
		return nil
	})
	if errObj == nil {
		e.RequestID = ""
		return false
	}
	fillError(e, errObj)
	return true
}

// fillError reads an error object {type, message, details, mesh_error_code}.
// Members of the wrong type are ignored: an error body is read best-effort.
func fillError(e *llm.APIError, v []byte) {
	var typ string
	_ = eachMember(nil, v, func(k string, v []byte) error {
		switch k {
		case "type":
			typ, _ = str(nil, v)
		case "message":
			e.Message, _ = str(nil, v)
		case "mesh_error_code":
			e.MeshCode, _ = str(nil, v)
		case "details":
			if len(v) > 0 && v[0] == '{' {
				_ = eachMember(nil, v, func(dk string, dv []byte) error {
					if dk == "error_code" {
						e.Code, _ = str(nil, dv)
					}
					return nil
				})
			}
		}
		return nil
	})
	switch {
	case knownErrorType(typ):
		e.Type = llm.ErrorType(typ)
	default:
		e.Type = llm.StatusErrorType(e.Status)
		if e.Status == 200 {
			e.Type = llm.ErrAPI
		}
		e.RawType = typ
	}
}

// bodyPrefix is the trimmed start of a non-JSON body, cut at a rune boundary.
func bodyPrefix(body []byte) string {
	body = bytes.TrimSpace(body)
	if len(body) > maxErrorMessage {
		i := maxErrorMessage
		for i > 0 && !utf8.RuneStart(body[i]) {
			i--
		}
		body = body[:i]
	}
	return strings.ToValidUTF8(string(body), "\uFFFD")
}
