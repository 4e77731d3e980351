package sim

import (
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
)

// The real caps on the messages of one request (see ModelSpec.MaxMessages).
const (
	// anthropicMaxMessages: "There is a limit of 100,000 messages in a
	// single request." (Messages API reference, messages parameter).
	anthropicMaxMessages = 100_000
	// openaiMaxMessages: OpenAI answers more with 400 invalid_request_error,
	// code array_above_max_length, param messages ("Invalid 'messages':
	// array too long. Expected an array with maximum length 2048, but got an
	// array with length 2050 instead.", obot-platform/obot#1009,
	// openai/openai-dotnet#317).
	openaiMaxMessages = 2048
)

// checkMessageCount returns the 400 an endpoint of spec serving wire f
// answers a request of n messages with, or nil.
func checkMessageCount(spec *ModelSpec, f llm.Format, n int) *llm.APIError {
	limit := anthropicMaxMessages
	if f == llm.FormatOpenAI {
		limit = openaiMaxMessages
	}
	if spec != nil && spec.MaxMessages > 0 {
		limit = spec.MaxMessages
	}
	if n <= limit {
		return nil
	}
	if f == llm.FormatOpenAI {
		return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: "messages", Code: "array_above_max_length",
			Message: fmt.Sprintf("Invalid 'messages': array too long. Expected an array with maximum length %d, but got an array with length %d instead.", limit, n)}
	}
	// In the Messages API's validation wording ("<field>: <problem>", as in
	// "response_format: Extra inputs are not permitted"); the exact text of
	// this one is not documented.
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest,
		Message: fmt.Sprintf("messages: List should have at most %d items after validation, not %d", limit, n)}
}
