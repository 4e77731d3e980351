// Package google reads Google Cloud's error shape, which Vertex AI answers
// with for what fails before or around a model (authentication, quota,
// an unknown model or project):
//
//	{"error":{"code":429,"message":"…","status":"RESOURCE_EXHAUSTED","details":[…]}}
//
// (cloud.google.com/apis/design/errors; the Vertex AI generative AI error
// table, cloud.google.com/vertex-ai/generative-ai/docs/model-reference/api-errors).
// Vertex relays a model's own Anthropic-shaped errors as they are; ParseError
// reads those with the anthropic codec. The functions are pure.
package google

import (
	"net/http"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/gemini"
)

// ParseError reads an error answer from a Google API: the Google shape
// (type from status, else from code), an Anthropic-shaped body as the
// anthropic codec reads it, anything else as the status's type with the
// start of the body as its message. RetryAfter comes from the retry-after
// header when Google sends one.
func ParseError(status int, h http.Header, body []byte) *llm.APIError {
	p := jsonx.TrimSpace(body)
	var errObj []byte
	if len(p) > 0 && p[0] == '{' && jsonx.Valid(p) {
		_ = jsonx.EachMember(p, func(k, v []byte) error {
			if string(k) == `"error"` && len(v) > 0 && v[0] == '{' {
				errObj = v
			}
			return nil
		})
	}
	if errObj == nil {
		return relayed(status, h, body)
	}
	var msg, st string
	code := ""
	anthropicType := false
	_ = jsonx.EachMember(errObj, func(k, v []byte) error {
		switch string(k) {
		case `"message"`:
			msg, _ = jsonx.Unquote(v)
		case `"status"`:
			st, _ = jsonx.Unquote(v)
		case `"code"`:
			code = string(v)
		case `"type"`:
			anthropicType = true
		}
		return nil
	})
	if anthropicType && st == "" {
		return relayed(status, h, body)
	}
	e := &llm.APIError{Status: status, Message: msg, RawType: st, RetryAfter: llm.ParseRetryAfter(h, time.Now())}
	if t, ok := gemini.StatusType(st); ok {
		e.Type = t
	} else {
		e.Type = llm.StatusErrorType(status)
	}
	if st != "" && !strings.Contains(msg, st) {
		e.Message = st + ": " + msg
	}
	if e.Message == "" {
		e.Message = http.StatusText(status)
		if code != "" {
			e.Message += " (code " + code + ")"
		}
	}
	return e
}

// relayed reads an error answer that is not in Google's shape (Anthropic's,
// as Vertex relays it, or no JSON at all) with the Anthropic parser, and
// names the status when the answer carries no message: the client always
// gets a clear error.
func relayed(status int, h http.Header, body []byte) *llm.APIError {
	e := anthropic.ParseError(status, h, body)
	if e.Message == "" {
		e.Message = http.StatusText(status)
	}
	return e
}
