package sim

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/internal/wire/gemini"
)

// GeminiSpec makes the fleet serve Google's Gemini API beside its own
// routes (ai.google.dev/api/generate-content):
//
//	POST /v1beta/models/{model}:generateContent
//	POST /v1beta/models/{model}:streamGenerateContent?alt=sse
//
// each also under /r/{region}, for every model whose formats are empty or
// name "gemini". Its errors are Google's shape, its 429 a
// RESOURCE_EXHAUSTED with a RetryInfo detail and no retry-after header,
// its overload a 503 UNAVAILABLE, as the Gemini API answers
// (ai.google.dev/gemini-api/docs/troubleshooting).
type GeminiSpec struct {
	// APIKeys are the keys x-goog-api-key (or the key query parameter)
	// may carry; at least one.
	APIKeys []string `json:"api_keys"`
}

// The Gemini API's refusals of a call's key
// (ai.google.dev/gemini-api/docs/troubleshooting; googleapis/python-genai#…
// show the texts): none is a 403 PERMISSION_DENIED, a wrong one a 400
// INVALID_ARGUMENT.
const (
	geminiNoKey  = "Method doesn't allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API."
	geminiBadKey = "API key not valid. Please pass a valid API key."
	// geminiQuota is its 429's message.
	geminiQuota = "You exceeded your current quota, please check your plan and billing details. For more information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)

var geminiCodec = &codec{
	format:      llm.FormatGemini,
	parse:       gemini.ParseRequest,
	encode:      gemini.EncodeResponse,
	encodeError: gemini.EncodeError,
	stream: func(w *sse.Writer, _ *llm.Request) eventWriter {
		return gemini.NewStreamWriter(w)
	},
	gemini: true,
}

// serveGemini checks a Gemini call's key and method and serves it as the
// fleet's model call.
func (f *Fleet) serveGemini(prefixed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := geminiCodec
		g := f.cfg.Gemini
		model, method, _ := strings.Cut(r.PathValue("call"), ":")
		if g == nil || method != "generateContent" && method != "streamGenerateContent" {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, RawType: "NOT_FOUND",
				Message: fmt.Sprintf("Method not found: %s.", r.PathValue("call"))})
			return
		}
		key := r.Header.Get("X-Goog-Api-Key")
		if key == "" {
			key = r.URL.Query().Get("key")
		}
		switch {
		case key == "":
			writeAPIError(w, c, &llm.APIError{Status: http.StatusForbidden, Type: llm.ErrPermission, RawType: "PERMISSION_DENIED", Message: geminiNoKey})
			return
		case !slices.Contains(g.APIKeys, key):
			writeAPIError(w, c, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT", Message: geminiBadKey})
			return
		}
		stream := method == "streamGenerateContent"
		if stream && r.URL.Query().Get("alt") != "sse" {
			// Without alt=sse the API streams a JSON array, which the
			// fleet does not serve: say so rather than answer in a shape
			// no client of it expects.
			writeAPIError(w, c, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT",
				Message: "the simulator serves streamGenerateContent with alt=sse only"})
			return
		}
		region := ""
		if prefixed {
			region = r.PathValue("region")
		}
		f.serveAPI(w, r, region, c, &routeCall{gemini: true, model: strings.TrimPrefix(model, "models/"), stream: stream})
	}
}

// serveVertexGemini serves Gemini on Vertex AI: POST
// …/publishers/google/models/{model}:generateContent and
// :streamGenerateContent?alt=sse, the Gemini API's bodies with the
// OAuth2 access token of the fleet's token endpoint (401 UNAUTHENTICATED
// otherwise), errors in Google's shape
// (cloud.google.com/vertex-ai/generative-ai/docs/model-reference/inference).
func (f *Fleet) serveVertexGemini(prefixed bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !f.googleAuthorized(w, r) {
			return
		}
		c := geminiCodec
		model, method, _ := strings.Cut(r.PathValue("call"), ":")
		if method != "generateContent" && method != "streamGenerateContent" {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, RawType: "NOT_FOUND",
				Message: "The requested URL was not found on this server."})
			return
		}
		stream := method == "streamGenerateContent"
		if stream && r.URL.Query().Get("alt") != "sse" {
			writeAPIError(w, c, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, RawType: "INVALID_ARGUMENT",
				Message: "the simulator serves streamGenerateContent with alt=sse only"})
			return
		}
		region := ""
		if prefixed {
			region = r.PathValue("region")
		}
		f.serveAPI(w, r, region, c, &routeCall{gemini: true, model: model, stream: stream})
	}
}

// geminiBlocked writes the Gemini API's answer to a prompt its safety
// filters block: a 200 with promptFeedback.blockReason and no candidates
// (ai.google.dev/api/generate-content#PromptFeedback); on a stream, that
// answer as its only event.
func geminiBlocked(w http.ResponseWriter, rh *respHeader, model string, inputTokens int, stream bool) {
	b, _ := json.Marshal(map[string]any{
		"promptFeedback": map[string]any{"blockReason": "SAFETY", "safetyRatings": []map[string]string{
			{"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "HIGH"},
			{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "NEGLIGIBLE"},
			{"category": "HARM_CATEGORY_HARASSMENT", "probability": "NEGLIGIBLE"},
			{"category": "HARM_CATEGORY_SEXUALLY_EXPLICIT", "probability": "NEGLIGIBLE"},
		}},
		"usageMetadata": map[string]int{"promptTokenCount": inputTokens, "totalTokenCount": inputTokens},
		"modelVersion":  model,
	})
	if stream {
		rh.set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		sse.NewWriter(w, nil).WriteEvent("", b)
		return
	}
	rh.set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write(b)
}

// geminiRateLimit is the Gemini API's 429: RESOURCE_EXHAUSTED with the
// retry delay in a RetryInfo detail (ai.google.dev/gemini-api/docs/rate-limits).
func geminiRateLimit(ra time.Duration) *llm.APIError {
	return &llm.APIError{Status: http.StatusTooManyRequests, Type: llm.ErrRateLimit, RawType: "RESOURCE_EXHAUSTED", Message: geminiQuota, RetryAfter: ra}
}

// validate checks a GeminiSpec.
func (g *GeminiSpec) validate() error {
	if len(g.APIKeys) == 0 {
		return fmt.Errorf("gemini: api_keys: at least one key is required")
	}
	return nil
}
