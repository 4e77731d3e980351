package wire

import (
	"encoding/json"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
)

// anthropicModel is a model as Anthropic's Models API shows one
// (docs.anthropic.com/en/api/models; anthropic-sdk-go v2 ModelInfo):
// max_input_tokens is its context window, left out when Keel does not
// know it.
type anthropicModel struct {
	Type           string `json:"type"`
	ID             string `json:"id"`
	DisplayName    string `json:"display_name"`
	CreatedAt      string `json:"created_at"`
	MaxInputTokens int    `json:"max_input_tokens,omitempty"`
}

func anthropicModelOf(m Model) anthropicModel {
	return anthropicModel{Type: "model", ID: m.ID, DisplayName: m.ID, CreatedAt: "2026-01-01T00:00:00Z", MaxInputTokens: m.ContextWindow}
}

// openaiModel is a model as OpenAI's Models API shows one
// (platform.openai.com/docs/api-reference/models/object), with Keel's
// own members after the four of OpenAI's.
type openaiModel struct {
	ID            string   `json:"id"`
	Object        string   `json:"object"`
	Created       int64    `json:"created"`
	OwnedBy       string   `json:"owned_by"`
	Alias         bool     `json:"alias,omitempty"`
	Capability    int      `json:"capability,omitempty"`
	ContextWindow int      `json:"context_window,omitempty"`
	Regions       []string `json:"regions,omitempty"`
	Kind          string   `json:"kind,omitempty"`
}

func openaiModelOf(m Model) openaiModel {
	return openaiModel{ID: m.ID, Object: "model", Created: 1767225600, OwnedBy: "keel", Alias: m.Alias, Capability: m.Capability,
		ContextWindow: m.ContextWindow, Regions: m.Regions, Kind: m.Kind}
}

// EncodeModel writes one model (GET /v1/models/{id}) as c's models list
// writes each entry: Anthropic's shape for the Anthropic codec, OpenAI's
// for any other.
func EncodeModel(c Codec, m Model) []byte {
	var v any = openaiModelOf(m)
	if c.Format() == llm.FormatAnthropic {
		v = anthropicModelOf(m)
	}
	b, _ := json.Marshal(v)
	return b
}

// ModelNotFound is the 404 a provider answers GET /v1/models/{id} with
// for a model it does not have: Anthropic's not_found_error ("model:
// ID"), or OpenAI's invalid_request_error with code model_not_found
// (what api.openai.com answers).
func ModelNotFound(c Codec, id string) *llm.APIError {
	if c.Format() == llm.FormatAnthropic {
		return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Message: "model: " + id}
	}
	return &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrInvalidRequest, Param: "model", Code: "model_not_found",
		Message: "The model '" + id + "' does not exist"}
}
