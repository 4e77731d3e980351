package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// The token-count endpoint, POST /v1/messages/count_tokens (and
// /r/REGION/v1/messages/count_tokens, ?beta=true accepted), speaks
// Anthropic's Token Counting API
// (docs.anthropic.com/en/api/messages-count-tokens): a Messages request
// without max_tokens, answered {"input_tokens": N}. As Anthropic does, the
// count is the input_tokens the Messages API's usage reports for the same
// request (CountTokens), it is free (no usage recorded, no rate-limit
// headers), a model not served in the Anthropic format is a 404, and a
// member the Messages API takes but the count does not (max_tokens,
// stream, temperature …) is refused with Anthropic's 400 "<member>: Extra
// inputs are not permitted" (the strictest real behaviour: Anthropic's API
// validates the body with extra members forbidden). A region that is down
// resets the connection as for any call; no other fault applies.

// countMembers are the top-level members Anthropic's count_tokens takes
// (its API reference and anthropic-sdk-go v2's MessageCountTokensParams).
var countMembers = map[string]bool{
	"model": true, "messages": true, "system": true, "tools": true, "tool_choice": true, "thinking": true,
	"mcp_servers": true, "context_management": true, "output_config": true, "output_format": true,
}

// countExtra names the first member of a count_tokens body (a JSON object)
// that Anthropic refuses there, in sorted order; "" when none.
func countExtra(body []byte) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return "" // the parser reports the syntax
	}
	var extra []string
	for k := range top {
		if !countMembers[k] {
			extra = append(extra, k)
		}
	}
	if len(extra) == 0 {
		return ""
	}
	sort.Strings(extra)
	return extra[0]
}

func (f *Fleet) serveCountTokens(w http.ResponseWriter, r *http.Request) {
	c := anthropicCodec
	reqID, _ := f.requestID()
	w.Header().Set("Request-Id", reqID)
	fail := func(status int, typ llm.ErrorType, msg string) {
		writeAPIError(w, c, &llm.APIError{Status: status, Type: typ, Message: msg, RequestID: reqID})
	}
	body, err := readBody(r, nil)
	if err != nil {
		fail(http.StatusBadRequest, llm.ErrInvalidRequest, "reading body: "+err.Error())
		return
	}
	if len(body) > maxBodyBytes {
		fail(http.StatusRequestEntityTooLarge, llm.ErrTooLarge, tooLargeMessage)
		return
	}
	if k := countExtra(body); k != "" {
		fail(http.StatusBadRequest, llm.ErrInvalidRequest, k+": Extra inputs are not permitted")
		return
	}
	req, err := anthropic.ParseCountTokens(body)
	if err != nil {
		var ae *llm.APIError
		if !errors.As(err, &ae) {
			ae = &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Message: err.Error()}
		}
		fail(http.StatusBadRequest, llm.ErrInvalidRequest, ae.Message)
		return
	}
	spec := f.models[req.Model]
	if spec == nil || !spec.serves(llm.FormatAnthropic) {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("model: %s not found", req.Model))
		return
	}
	regionName := r.PathValue("region")
	if regionName == "" {
		regionName = spec.Regions[0]
	}
	ep := f.eps[epKey{req.Model, regionName}]
	if ep == nil {
		fail(http.StatusNotFound, llm.ErrNotFound, fmt.Sprintf("model: %s is not served in region %s", req.Model, regionName))
		return
	}
	if ep.region.down.Load() {
		resetConn(w)
		return
	}
	b := strconv.AppendInt([]byte(`{"input_tokens":`), int64(CountTokens(req)), 10)
	b = append(b, '}')
	h := w.Header()
	h.Set("X-Sim-Region", regionName)
	h.Set("X-Sim-Endpoint", ep.name)
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}
