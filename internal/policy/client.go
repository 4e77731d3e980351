package policy

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// ClientError turns the error a call's attempts ended with into the
// client's error, after attempts attempts. Keel's verdict (a MeshError)
// keeps the last upstream error's status and type, so SDKs classify it as
// they would have direct; an upstream's own answer that was not retried
// passes through unchanged; anything else is a 502.
func ClientError(err error, attempts int) *llm.APIError {
	if me, ok := errors.AsType[*MeshError](err); ok {
		return meshAnswer(me, attempts)
	}
	if ae, ok := errors.AsType[*llm.APIError](err); ok {
		return ae
	}
	if pe, ok := errors.AsType[*provider.Error](err); ok && pe.API != nil {
		out := *pe.API // a non-retryable upstream answer passes through unchanged
		return &out
	}
	return &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: err.Error()}
}

// meshAnswer is the client's error for Keel's verdict me.
func meshAnswer(me *MeshError, attempts int) *llm.APIError {
	out := &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: me.Code}
	if me.Code == llm.MeshTimeout {
		out.Status, out.Type = http.StatusGatewayTimeout, llm.ErrTimeout
	}
	if pe, ok := errors.AsType[*provider.Error](me.Last); ok && pe.API != nil {
		out.Status, out.Type, out.Code, out.Param, out.RawType = pe.API.Status, pe.API.Type, pe.API.Code, pe.API.Param, pe.API.RawType
		if out.Status == http.StatusOK {
			out.Status = llm.TypeStatus(out.Type)
		}
	} else if me.Last != nil && me.Code != llm.MeshTimeout {
		out.Status, out.Type = http.StatusBadGateway, llm.ErrAPI
	}
	out.Message = fmt.Sprintf("%s after %d attempts", me.Why, attempts)
	if me.Last != nil {
		out.Message += "; last: " + me.Last.Error()
	}
	return out
}
