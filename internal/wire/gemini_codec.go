package wire

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/gemini"
)

// geminiCodec is Google's Gemini API, an upstream format only: Keel
// translates its clients' requests to it and its answers back, and serves
// no Gemini route (Path is empty, Serves is false). Its model call's URL
// names the model and whether it streams, so endpoints of this format are
// addressed by a host (internal/provider) that builds it.
type geminiCodec struct{}

func (geminiCodec) Format() llm.Format                            { return llm.FormatGemini }
func (geminiCodec) ParseRequest(b []byte) (*llm.Request, error)   { return gemini.ParseRequest(b) }
func (geminiCodec) EncodeRequest(r *llm.Request) ([]byte, error)  { return gemini.EncodeRequest(r) }
func (geminiCodec) ParseResponse(b []byte) (*llm.Response, error) { return gemini.ParseResponse(b) }
func (geminiCodec) EncodeResponse(r *llm.Response) ([]byte, error) {
	return gemini.EncodeResponse(r)
}
func (geminiCodec) ParseError(status int, h http.Header, b []byte) *llm.APIError {
	return gemini.ParseError(status, h, b)
}
func (geminiCodec) EncodeError(e *llm.APIError) []byte       { return gemini.EncodeError(e) }
func (geminiCodec) NewStreamReader(r io.Reader) StreamReader { return gemini.NewStreamReader(r) }
func (geminiCodec) NewStreamWriter(w *sse.Writer, _ StreamOptions) StreamWriter {
	return gemini.NewStreamWriter(w)
}

// Path: Keel serves no Gemini route.
func (geminiCodec) Path() string                          { return "" }
func (geminiCodec) Serves(string, bool) bool              { return false }
func (geminiCodec) RequestIDHeader() string               { return "" }
func (geminiCodec) PassHeaders() []string                 { return nil }
func (geminiCodec) Continues() bool                       { return false }
func (geminiCodec) JSONMode() bool                        { return true } // responseMimeType application/json
func (geminiCodec) MaxTemperature() float64               { return 2 }
func (geminiCodec) KeyEnv() string                        { return "GEMINI_API_KEY" }
func (geminiCodec) Stateful() bool                        { return false }
func (geminiCodec) InputParam() string                    { return "contents" }
func (geminiCodec) NoInput(*llm.Request) bool             { return false }
func (geminiCodec) APIVersion(string, http.Header) string { return "" }

// PrepareUpstream: nothing to add; the Gemini API reports usage on every
// stream chunk and needs no max tokens.
func (geminiCodec) PrepareUpstream(*llm.Request, string) []string { return nil }

// RequestURL is the models collection under base; a call's URL adds
// /{model}:generateContent (the host builds it).
func (geminiCodec) RequestURL(base string) string { return trimBase(base) + "/v1beta/models" }
func (geminiCodec) ProbeURL(base string) string   { return trimBase(base) + "/v1beta/models" }

// SetAuth: the API key in x-goog-api-key (ai.google.dev/api#authentication).
func (geminiCodec) SetAuth(set func(k, v string), key, _ string) {
	if key != "" {
		set("X-Goog-Api-Key", key)
	}
}

// EncodeModels writes the Gemini API's models list shape.
func (geminiCodec) EncodeModels(models []Model) []byte {
	type model struct {
		Name             string   `json:"name"`
		InputTokenLimit  int      `json:"inputTokenLimit,omitempty"`
		SupportedMethods []string `json:"supportedGenerationMethods"`
	}
	out := make([]model, 0, len(models))
	for _, m := range models {
		out = append(out, model{Name: "models/" + strings.TrimPrefix(m.ID, "models/"), InputTokenLimit: m.ContextWindow,
			SupportedMethods: []string{"generateContent", "streamGenerateContent"}})
	}
	b, _ := json.Marshal(map[string]any{"models": out})
	return b
}
