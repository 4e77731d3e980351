// Package wire is the table of wire formats: one Codec per llm.Format, the
// only place outside the format packages (wire/anthropic, wire/openai,
// wire/responses, wire/gemini)
// that knows how a format is spelled — its parse and encode of requests,
// answers, errors and streams, its request and probe paths, its auth
// headers and API version, and the per-endpoint preparation of a request
// (sampling parameters an API version rejects, a required max_tokens, the
// usage chunk of a stream). Server, provider and engine ask For(format)
// instead of switching on it.
package wire

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/internal/wire/responses"
)

// DefaultAnthropicVersion is the anthropic-version sent upstream when
// neither the endpoint nor the client names one.
const DefaultAnthropicVersion = "2023-06-01"

// AnthropicVersionNoSampling is the API version that rejects temperature,
// top_p and top_k outright (PROTOCOLS §0.1).
const AnthropicVersionNoSampling = "2026-10-21"

// DefaultMaxTokens is the max_tokens sent to an API that requires one
// (Anthropic) when the client's request has none.
const DefaultMaxTokens = 4096

// StreamReader yields a stream's canonical events; Next returns io.EOF
// after the wire's terminator.
type StreamReader interface {
	Next() (*llm.Event, error)
}

// Recycler is implemented by a StreamReader that takes back an event its
// caller is done with (written on, nothing of it kept): the reader reuses
// its memory for a later event, so a stream in its steady state does not
// allocate an event per event. The caller must not touch ev afterwards.
// A reader takes back only the kinds of event it knows hold nothing shared
// (deltas, block stops, pings) and ignores the rest.
type Recycler interface {
	Recycle(ev *llm.Event)
}

// Pending is implemented by a StreamReader that can tell whether its next
// event is decoded already (one upstream chunk gave several), so that
// Next returns it without reading: a writer then need not flush between
// the two.
type Pending interface {
	Pending() bool
}

// StreamWriter writes canonical events in a wire format.
type StreamWriter interface {
	Write(ev *llm.Event) error
}

// StreamOptions tune a client-facing stream writer.
type StreamOptions struct {
	// IncludeUsage: the client asked for the usage chunk (OpenAI
	// stream_options.include_usage).
	IncludeUsage bool
}

// Codec is one wire format.
type Codec interface {
	Format() llm.Format

	// ParseRequest reads a client's request body, which it takes over:
	// the result may alias body, so the caller must not modify body
	// afterwards (the server reads each body into a buffer of its own).
	ParseRequest(body []byte) (*llm.Request, error)
	// EncodeRequest writes a request in this format (after
	// PrepareUpstream for an upstream call).
	EncodeRequest(r *llm.Request) ([]byte, error)
	// ParseResponse reads an upstream's answer, which it takes over as
	// ParseRequest does its body: the caller must not modify body
	// afterwards (the provider reads each answer into a buffer of its own
	// and keeps it as the answer's Raw).
	ParseResponse(body []byte) (*llm.Response, error)
	EncodeResponse(r *llm.Response) ([]byte, error)
	ParseError(status int, h http.Header, body []byte) *llm.APIError
	EncodeError(e *llm.APIError) []byte
	NewStreamReader(r io.Reader) StreamReader
	NewStreamWriter(w *sse.Writer, o StreamOptions) StreamWriter

	// Path is the API path of a model call from a server's root, as
	// Keel serves it ("/v1/messages", "/v1/chat/completions").
	Path() string
	// Serves reports whether a request path is this format's model call:
	// Path exactly, or (embedded, where the SDK's base URL prefix stays)
	// any path ending in its tail.
	Serves(path string, embedded bool) bool
	// RequestIDHeader names the header an answer carries the upstream's
	// request id in.
	RequestIDHeader() string
	// EncodeModels writes the models list (GET /v1/models) in this
	// format's shape.
	EncodeModels(models []Model) []byte
	// RequestURL is the endpoint URL of a model call under base (the
	// provider base: https://api.anthropic.com, https://api.openai.com/v1).
	RequestURL(base string) string
	// ProbeURL is the models list under base: a GET any server of the
	// format answers without cost.
	ProbeURL(base string) string
	// SetAuth sets the request headers of a call with key (none when key
	// is empty) and the API version (ignored by formats without one).
	SetAuth(set func(k, v string), key, version string)
	// PassHeaders are the client request headers passed on to an
	// upstream of this format (canonical names).
	PassHeaders() []string
	// APIVersion is the version an upstream call sends: the endpoint's
	// own, else the client's header, else the default; "" for formats
	// without versions.
	APIVersion(endpoint string, client http.Header) string
	// PrepareUpstream adapts r, a copy owned by the caller, to what this
	// API accepts at version, and names the parameters it dropped.
	PrepareUpstream(r *llm.Request, version string) (dropped []string)
	// Continues reports whether a trailing assistant message is continued
	// by this format's reference API (Anthropic: yes; OpenAI: no, it
	// starts a new answer).
	Continues() bool
	// JSONMode reports whether the API has a JSON mode that asks for any
	// JSON object (OpenAI response_format json_object: yes; the Anthropic
	// Messages API: no, it rejects response_format as an extra input).
	JSONMode() bool
	// MaxTemperature is the top of the API's temperature range
	// (Anthropic 1, OpenAI 2).
	MaxTemperature() float64
	// KeyEnv names the environment variable holding this format's
	// provider key when Keel runs without a config.
	KeyEnv() string
	// Stateful reports whether the API keeps conversations by response
	// id (store, previous_response_id: the Responses API), which the
	// front then keeps itself (internal/convstate).
	Stateful() bool
	// InputParam names the request member that holds the conversation,
	// for errors about it: "messages"; the Responses API's "input".
	InputParam() string
	// NoInput reports a parsed request with nothing to answer that this
	// API refuses although its parser let it through (the Responses API:
	// no input items, no previous_response_id, no prompt); the other
	// parsers refuse an empty messages list themselves.
	NoInput(r *llm.Request) bool
}

var codecs = [...]Codec{llm.FormatAnthropic: anthropicCodec{}, llm.FormatOpenAI: openaiCodec{}, llm.FormatResponses: responsesCodec{}, llm.FormatGemini: geminiCodec{}}

// For returns f's codec; an unknown format gets OpenAI's (the format of
// every OpenAI-compatible server).
func For(f llm.Format) Codec {
	if int(f) < len(codecs) && codecs[f] != nil {
		return codecs[f]
	}
	return codecs[llm.FormatOpenAI]
}

// Codecs lists the codecs of the formats Keel serves to clients (the
// Gemini API is an upstream format only).
func Codecs() []Codec {
	return []Codec{codecs[llm.FormatAnthropic], codecs[llm.FormatOpenAI], codecs[llm.FormatResponses]}
}

// Model is one entry of the models list.
type Model struct {
	ID            string
	Alias         bool
	Capability    int
	ContextWindow int
	Regions       []string
	// Kind is "embedding" for an embedding model, "" for a chat model.
	Kind string
}

// FromHeader is the format of a request to a route that has none of its
// own (the models list, errors of unknown routes): Anthropic's when the
// client sent anthropic-version, as the Anthropic SDK always does,
// OpenAI's otherwise.
func FromHeader(h http.Header) Codec {
	if llm.HeaderValue(h, "Anthropic-Version") != "" {
		return codecs[llm.FormatAnthropic]
	}
	return codecs[llm.FormatOpenAI]
}

func trimBase(base string) string { return strings.TrimRight(base, "/") }

type anthropicCodec struct{}

// anthropicPass: beta features the client opted into (anthropic-beta).
var anthropicPass = []string{"Anthropic-Beta"}

func (anthropicCodec) Format() llm.Format { return llm.FormatAnthropic }
func (anthropicCodec) ParseRequest(b []byte) (*llm.Request, error) {
	return anthropic.ParseRequestOwned(b)
}
func (anthropicCodec) EncodeRequest(r *llm.Request) ([]byte, error) {
	return anthropic.EncodeRequest(r)
}
func (anthropicCodec) ParseResponse(b []byte) (*llm.Response, error) {
	return anthropic.ParseResponseOwned(b)
}
func (anthropicCodec) EncodeResponse(r *llm.Response) ([]byte, error) {
	return anthropic.EncodeResponse(r)
}
func (anthropicCodec) EncodeError(e *llm.APIError) []byte       { return anthropic.EncodeError(e) }
func (anthropicCodec) NewStreamReader(r io.Reader) StreamReader { return anthropic.NewStreamReader(r) }
func (anthropicCodec) RequestURL(base string) string            { return trimBase(base) + "/v1/messages" }
func (anthropicCodec) ProbeURL(base string) string              { return trimBase(base) + "/v1/models" }
func (anthropicCodec) Continues() bool                          { return true }
func (anthropicCodec) JSONMode() bool                           { return false }
func (anthropicCodec) PassHeaders() []string                    { return anthropicPass }
func (anthropicCodec) MaxTemperature() float64                  { return 1 }
func (anthropicCodec) Path() string                             { return "/v1/messages" }
func (anthropicCodec) RequestIDHeader() string                  { return "Request-Id" }
func (anthropicCodec) Serves(path string, embedded bool) bool {
	return path == "/v1/messages" || embedded && strings.HasSuffix(path, "/v1/messages")
}

func (anthropicCodec) EncodeModels(models []Model) []byte {
	data := make([]anthropicModel, 0, len(models))
	for _, m := range models {
		data = append(data, anthropicModelOf(m))
	}
	first, last := "", ""
	if len(data) > 0 {
		first, last = data[0].ID, data[len(data)-1].ID
	}
	b, _ := json.Marshal(map[string]any{"data": data, "has_more": false, "first_id": first, "last_id": last})
	return b
}

func (anthropicCodec) KeyEnv() string            { return "ANTHROPIC_API_KEY" }
func (anthropicCodec) Stateful() bool            { return false }
func (anthropicCodec) InputParam() string        { return "messages" }
func (anthropicCodec) NoInput(*llm.Request) bool { return false }

func (anthropicCodec) ParseError(status int, h http.Header, b []byte) *llm.APIError {
	return anthropic.ParseError(status, h, b)
}

func (anthropicCodec) NewStreamWriter(w *sse.Writer, _ StreamOptions) StreamWriter {
	return anthropic.NewStreamWriter(w, anthropic.StreamOptions{})
}

func (anthropicCodec) SetAuth(set func(k, v string), key, version string) {
	set("Anthropic-Version", version)
	if key != "" {
		set("X-Api-Key", key)
	}
}

func (anthropicCodec) APIVersion(endpoint string, client http.Header) string {
	if endpoint != "" {
		return endpoint
	}
	if client != nil {
		// The canonical name looked up as is: Get would canonicalise the
		// constant again on every call.
		if v := client["Anthropic-Version"]; len(v) > 0 && v[0] != "" {
			return v[0]
		}
	}
	return DefaultAnthropicVersion
}

func (anthropicCodec) PrepareUpstream(r *llm.Request, version string) []string {
	var dropped []string
	if version == AnthropicVersionNoSampling {
		if r.Temperature != nil {
			dropped, r.Temperature = append(dropped, "temperature"), nil
		}
		if r.TopP != nil {
			dropped, r.TopP = append(dropped, "top_p"), nil
		}
		if r.TopK != nil {
			dropped, r.TopK = append(dropped, "top_k"), nil
		}
	}
	if !r.HasMaxTokens {
		// An OpenAI-format client may omit it; Anthropic requires it.
		r.MaxTokens, r.HasMaxTokens = DefaultMaxTokens, true
	}
	return dropped
}

type openaiCodec struct{}

func (openaiCodec) Format() llm.Format                           { return llm.FormatOpenAI }
func (openaiCodec) ParseRequest(b []byte) (*llm.Request, error)  { return openai.ParseRequestOwned(b) }
func (openaiCodec) EncodeRequest(r *llm.Request) ([]byte, error) { return openai.EncodeRequest(r) }
func (openaiCodec) EncodeUpstreamRequest(r *llm.Request) ([]byte, error) {
	return openai.EncodeUpstreamRequest(r)
}
func (openaiCodec) ParseResponse(b []byte) (*llm.Response, error)  { return openai.ParseResponse(b) }
func (openaiCodec) EncodeResponse(r *llm.Response) ([]byte, error) { return openai.EncodeResponse(r) }
func (openaiCodec) EncodeError(e *llm.APIError) []byte             { return openai.EncodeError(e) }
func (openaiCodec) NewStreamReader(r io.Reader) StreamReader       { return openai.NewStreamReader(r) }
func (openaiCodec) RequestURL(base string) string                  { return trimBase(base) + "/chat/completions" }
func (openaiCodec) ProbeURL(base string) string                    { return trimBase(base) + "/models" }
func (openaiCodec) Continues() bool                                { return false }
func (openaiCodec) JSONMode() bool                                 { return true }
func (openaiCodec) PassHeaders() []string                          { return nil }
func (openaiCodec) MaxTemperature() float64                        { return 2 }
func (openaiCodec) Path() string                                   { return "/v1/chat/completions" }
func (openaiCodec) RequestIDHeader() string                        { return "X-Request-Id" }
func (openaiCodec) Serves(path string, embedded bool) bool {
	return path == "/v1/chat/completions" || embedded && strings.HasSuffix(path, "/chat/completions")
}

func (openaiCodec) EncodeModels(models []Model) []byte {
	data := make([]openaiModel, 0, len(models))
	for _, m := range models {
		data = append(data, openaiModelOf(m))
	}
	b, _ := json.Marshal(map[string]any{"object": "list", "data": data})
	return b
}

func (openaiCodec) KeyEnv() string                        { return "OPENAI_API_KEY" }
func (openaiCodec) Stateful() bool                        { return false }
func (openaiCodec) InputParam() string                    { return "messages" }
func (openaiCodec) NoInput(*llm.Request) bool             { return false }
func (openaiCodec) APIVersion(string, http.Header) string { return "" }

func (openaiCodec) ParseError(status int, h http.Header, b []byte) *llm.APIError {
	return openai.ParseError(status, h, b)
}

func (openaiCodec) NewStreamWriter(w *sse.Writer, o StreamOptions) StreamWriter {
	return openai.NewStreamWriter(w, openai.StreamOptions{IncludeUsage: o.IncludeUsage})
}

func (openaiCodec) SetAuth(set func(k, v string), key, _ string) {
	if key != "" {
		set("Authorization", "Bearer "+key)
	}
}

func (openaiCodec) PrepareUpstream(r *llm.Request, _ string) []string {
	if r.Stream {
		// Usage is only sent on streams that ask for it; the mesh needs it.
		r.IncludeUsage = true
	}
	return nil
}

// responsesCodec is the OpenAI Responses API: OpenAI's auth, errors, request
// ids and models list, its own requests, answers and streams.
type responsesCodec struct{ openaiCodec }

func (responsesCodec) Format() llm.Format { return llm.FormatResponses }
func (responsesCodec) ParseRequest(b []byte) (*llm.Request, error) {
	return responses.ParseRequestOwned(b)
}
func (responsesCodec) EncodeRequest(r *llm.Request) ([]byte, error) {
	return responses.EncodeRequest(r)
}
func (responsesCodec) ParseResponse(b []byte) (*llm.Response, error) {
	return responses.ParseResponseOwned(b)
}
func (responsesCodec) EncodeResponse(r *llm.Response) ([]byte, error) {
	return responses.EncodeResponse(r)
}
func (responsesCodec) NewStreamReader(r io.Reader) StreamReader {
	return responses.NewStreamReader(r)
}
func (responsesCodec) NewStreamWriter(w *sse.Writer, _ StreamOptions) StreamWriter {
	return responses.NewStreamWriter(w)
}
func (responsesCodec) RequestURL(base string) string { return trimBase(base) + "/responses" }
func (responsesCodec) Path() string                  { return "/v1/responses" }

// Serves: /v1/responses, and /responses as OpenAI-compatible servers
// accept it (base URLs without /v1). GET and DELETE of
// /v1/responses/{id} are other routes.
func (responsesCodec) Serves(path string, embedded bool) bool {
	return path == "/v1/responses" || path == "/responses" || embedded && strings.HasSuffix(path, "/responses")
}

// PrepareUpstream: the Responses API always reports usage, on streams
// too; nothing to add.
func (responsesCodec) PrepareUpstream(*llm.Request, string) []string { return nil }

// Stateful: the Responses API stores answers (store, on by default) and
// continues them by previous_response_id.
func (responsesCodec) Stateful() bool { return true }

// InputParam: a Responses client sends input items, not messages.
func (responsesCodec) InputParam() string { return "input" }

// NoInput: responses.NoInput (docs/RESPONSES.md §4).
func (responsesCodec) NoInput(r *llm.Request) bool { return responses.NoInput(r) }
