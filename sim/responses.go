package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/internal/wire/responses"
)

// responsesCodec serves the OpenAI Responses API (POST /v1/responses) as
// OpenAI does (docs/RESPONSES.md): its errors are Chat Completions' shape.
var responsesCodec = &codec{
	format:      llm.FormatResponses,
	parse:       parseResponsesRequest,
	encode:      responses.EncodeResponse,
	encodeError: openai.EncodeError,
	stream: func(w *sse.Writer, _ *llm.Request) eventWriter {
		return responses.NewStreamWriter(w)
	},
}

// responsesParams are the request members OpenAI's Responses API knows
// (openai-go v3 ResponseNewParams, plus stream, which the SDK sets itself,
// and client_metadata, an object of strings that OpenAI's own Codex CLI
// (0.171.0) sends on every turn to api.openai.com with an API key, so the
// API takes it although the SDK types do not name it; docs/CLIENTS.md).
var responsesParams = map[string]bool{
	"client_metadata": true,
	"background":      true, "instructions": true, "max_output_tokens": true, "max_tool_calls": true,
	"parallel_tool_calls": true, "previous_response_id": true, "prompt_cache_key": true,
	"safety_identifier": true, "store": true, "temperature": true, "top_logprobs": true, "top_p": true,
	"user": true, "context_management": true, "conversation": true, "include": true, "metadata": true,
	"moderation": true, "prompt": true, "prompt_cache_retention": true, "service_tier": true,
	"stream_options": true, "truncation": true, "input": true, "model": true, "reasoning": true,
	"text": true, "tool_choice": true, "tools": true, "stream": true,
}

// parseResponsesRequest is the Responses API's request validation, at its
// strictest (docs/RESPONSES.md §4): an unknown top-level parameter is a 400
// "Unknown parameter: 'x'." with code unknown_parameter, and
// max_output_tokens below 16 a 400 integer_below_min_value.
func parseResponsesRequest(body []byte) (*llm.Request, error) {
	req, err := responses.ParseRequest(body)
	if err != nil {
		return nil, err
	}
	for k := range req.Extra {
		if !responsesParams[k] {
			return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: k, Code: "unknown_parameter",
				Message: fmt.Sprintf("Unknown parameter: '%s'.", k)}
		}
	}
	if req.HasMaxTokens && req.MaxTokens < responses.MinMaxOutputTokens {
		return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, Param: "max_output_tokens", Code: "integer_below_min_value",
			Message: fmt.Sprintf("Invalid 'max_output_tokens': integer below minimum value. Expected a value >= %d, but got %d instead.", responses.MinMaxOutputTokens, req.MaxTokens)}
	}
	return req, nil
}

// maxStored bounds the responses the fleet keeps for previous_response_id;
// the oldest is forgotten first.
const maxStored = 1024

// storedResponses is what the fleet keeps of the Responses answers it gave
// with store on (OpenAI's default): each one's whole conversation, so a
// follow-up naming it by previous_response_id continues it.
type storedResponses struct {
	mu    sync.Mutex // guards following
	byID  map[string][]llm.Message
	order []string
}

// expand prepends the conversation of req's previous_response_id to its
// messages, or returns the 404 OpenAI answers for an id it does not have
// ("Previous response with id '…' not found.", docs/RESPONSES.md §4).
func (s *storedResponses) expand(req *llm.Request) *llm.APIError {
	id := responses.PreviousResponseID(req)
	if id == "" {
		return nil
	}
	s.mu.Lock()
	prev, ok := s.byID[id]
	s.mu.Unlock()
	if !ok {
		return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Param: "previous_response_id", Code: "previous_response_not_found",
			Message: fmt.Sprintf("Previous response with id '%s' not found.", id)}
	}
	req.Messages = append(append([]llm.Message(nil), prev...), req.Messages...)
	return nil
}

// keep stores the conversation of an answer given with store on.
func (s *storedResponses) keep(req *llm.Request, id string, resp *llm.Response) {
	if v, ok := req.Extra["store"]; ok && string(v) == "false" {
		return
	}
	conv := append(append([]llm.Message(nil), req.Messages...), llm.Message{Role: llm.RoleAssistant, Content: resp.Content})
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byID == nil {
		s.byID = make(map[string][]llm.Message)
	}
	if _, ok := s.byID[id]; !ok {
		s.order = append(s.order, id)
	}
	s.byID[id] = conv
	if len(s.order) > maxStored {
		delete(s.byID, s.order[0])
		s.order = s.order[1:]
	}
}

// customToolSchema is what a custom (freeform) tool's call is generated
// from: its input is one text, as OpenAI's custom_tool_call carries it.
var customToolSchema = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string"}},"required":["input"]}`)

// withCustomToolSchemas returns req with its custom tools given
// customToolSchema, so that the generator's calls of them hold a text.
func withCustomToolSchemas(req *llm.Request) *llm.Request {
	var tools []llm.Tool
	for i, t := range req.Tools {
		if t.Type == "custom" && t.InputSchema == nil {
			if tools == nil {
				tools = slices.Clone(req.Tools)
			}
			tools[i].InputSchema = customToolSchema
		}
	}
	if tools == nil {
		return req
	}
	out := *req
	out.Tools = tools
	return &out
}

// markCustomCalls marks the answer's calls of custom tools, which the
// Responses API answers as custom_tool_call items (docs/RESPONSES.md §5).
func (a *answer) markCustomCalls(req *llm.Request) {
	for i := range a.blocks {
		b := &a.blocks[i]
		for _, t := range req.Tools {
			if b.tool && t.Type == "custom" && t.Name == b.name {
				b.custom = true
			}
		}
	}
}

// customRaw is the Raw of a custom tool's call block: the Responses
// codec's mark; nil for any other block.
func (b *genBlock) customRaw() json.RawMessage {
	if !b.custom {
		return nil
	}
	return json.RawMessage(responses.CustomCallMarker)
}
