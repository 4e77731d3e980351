package sim

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/keelmesh/keel/internal/llm"
)

// Fault kinds.
const (
	// KindRateLimit answers 429 with retry-after and rate-limit headers.
	KindRateLimit = "rate_limit"
	// KindOverloaded answers 529 overloaded_error (503 in the OpenAI format).
	KindOverloaded = "overloaded"
	// KindServerError answers Fault.Status: 500, 502 or 503 (default 500).
	KindServerError = "server_error"
	// KindReset resets the connection before any response.
	KindReset = "reset"
	// KindHang never answers; the call ends when the client gives up.
	KindHang = "hang"
	// KindStreamCut aborts a stream after AfterTokens tokens, with no terminator.
	KindStreamCut = "stream_cut"
	// KindStreamError sends the wire's error event after AfterTokens tokens.
	KindStreamError = "stream_error"
	// KindStall stops a stream after AfterTokens tokens and holds it open.
	KindStall = "stall"
	// KindNoTerminator ends a stream cleanly at the HTTP level after
	// AfterTokens tokens, without the wire's terminal event (no
	// message_stop; no finish chunk or [DONE]): what a client sees when an
	// upstream or a proxy in front of it closes a stream early (an idle
	// or max-duration timeout in a load balancer).
	KindNoTerminator = "no_terminator"
	// KindMalformedJSON corrupts a JSON-mode answer or a tool input.
	KindMalformedJSON = "malformed_json"
	// KindSlow makes the call Factor times slower (default: the endpoint's
	// TailFactor, or 10 when that is unset).
	KindSlow = "slow"
	// KindSlowStart makes the call's time to first token Factor times
	// longer (default 10) and leaves its output pace as it is: a provider
	// short of capacity that holds requests before it starts them, whose
	// first token comes late while the tokens then come at the model's
	// speed (time to first token and output speed are measured and vary
	// apart per provider: artificialanalysis.ai/models/claude-4-sonnet/providers).
	KindSlowStart = "slow_start"
	// KindContentFilter refuses the prompt as a provider's content filter
	// does: on Azure's routes (AzureSpec) a 400 with code content_filter
	// and each category's verdict
	// (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter);
	// on the Gemini API's (GeminiSpec) a 200 with
	// promptFeedback.blockReason SAFETY and no candidates. It matches only
	// calls on those routes: OpenAI's and Anthropic's APIs answer no such
	// thing.
	KindContentFilter = "content_filter"
	// KindModelNotReady answers Amazon Bedrock's ModelNotReadyException
	// (429: "The model specified in the request is not ready to serve
	// inference requests", API_runtime_InvokeModel.html); it matches calls
	// through the Bedrock front only. On Bedrock, rate_limit is a
	// ThrottlingException, overloaded a ServiceUnavailableException and
	// stream_error a modelStreamErrorException frame mid-stream; on Vertex
	// rate_limit is a 429 RESOURCE_EXHAUSTED.
	KindModelNotReady = "model_not_ready"
)

// kindRegionDown is the fault name recorded in Stats for calls to a region
// that is down.
const kindRegionDown = "region_down"

var faultKinds = map[string]bool{
	KindRateLimit: true, KindOverloaded: true, KindServerError: true, KindReset: true,
	KindHang: true, KindStreamCut: true, KindStreamError: true, KindStall: true, KindNoTerminator: true,
	KindMalformedJSON: true, KindSlow: true, KindSlowStart: true, KindContentFilter: true, KindModelNotReady: true,
	KindSlowStream: true,
}

// streamOnly kinds act inside a stream and never match a non-streaming call.
func streamOnly(kind string) bool {
	return kind == KindStreamCut || kind == KindStreamError || kind == KindStall || kind == KindNoTerminator || kind == KindSlowStream
}

// Fault injects a failure into matching calls. Empty Model, Region and
// Format match any; Stream, when set, matches only streaming (true) or
// non-streaming (false) calls. Stream-only kinds (stream_cut, stream_error,
// stall) match only streaming calls, and malformed_json only calls whose
// answer holds JSON (JSON mode or tool calls).
//
// A matching call is hit with probability Rate, drawn from the fleet's seeded
// generator; Rate 0 means every matching call. Count > 0 limits the fault to
// that many hits, after which it expires; so Rate 0 with Count N hits exactly
// the next N matching calls. When several faults match, the first one that
// hits wins.
type Fault struct {
	Kind  string  `json:"kind"`
	Rate  float64 `json:"rate,omitempty"`
	Count int     `json:"count,omitempty"`

	Model  string `json:"model,omitempty"`
	Region string `json:"region,omitempty"`
	// Format is "anthropic", "openai" or "responses".
	Format string `json:"format,omitempty"`
	Stream *bool  `json:"stream,omitempty"`

	// Status is the HTTP status of a server_error (500, 502 or 503).
	Status int `json:"status,omitempty"`
	// RetryAfter is sent as retry-after on rate_limit (default 1s) and
	// overloaded (when set).
	RetryAfter Duration `json:"retry_after,omitempty"`
	// AfterTokens is how many tokens a stream fault lets through first.
	AfterTokens int `json:"after_tokens,omitempty"`
	// Factor is the slowdown of a slow fault, and of each token after
	// AfterTokens of a slow_stream one.
	Factor float64 `json:"factor,omitempty"`
}

func (f *Fault) validate() error {
	if !faultKinds[f.Kind] {
		return fmt.Errorf("kind: unknown fault kind %q", f.Kind)
	}
	switch {
	case f.Rate < 0 || f.Rate > 1:
		return fmt.Errorf("rate: %g is outside [0, 1]", f.Rate)
	case f.Count < 0:
		return fmt.Errorf("count: %d is negative", f.Count)
	case f.AfterTokens < 0:
		return fmt.Errorf("after_tokens: %d is negative", f.AfterTokens)
	case f.RetryAfter < 0:
		return fmt.Errorf("retry_after: %s is negative", f.RetryAfter)
	case f.Factor < 0:
		return fmt.Errorf("factor: %g is negative", f.Factor)
	case f.Format != "" && llm.ParseFormat(f.Format) == llm.FormatUnknown:
		return fmt.Errorf("format: unknown format %q (want anthropic or openai)", f.Format)
	}
	if f.Kind == KindServerError && f.Status != 0 && (f.Status < 500 || f.Status > 599) {
		return fmt.Errorf("status: %d is not a 5xx status", f.Status)
	}
	if f.Kind != KindServerError && f.Status != 0 {
		return fmt.Errorf("status: only server_error takes a status")
	}
	return nil
}

// ParseFaults reads a JSON list of faults, rejecting unknown keys and kinds.
func ParseFaults(data []byte) ([]Fault, error) {
	var fs []Fault
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&fs); err != nil {
		return nil, fmt.Errorf("parsing faults: %w", err)
	}
	if dec.More() {
		return nil, fmt.Errorf("parsing faults: trailing data after the list")
	}
	for i := range fs {
		if err := fs[i].validate(); err != nil {
			return nil, fmt.Errorf("faults[%d]: %w", i, err)
		}
	}
	return fs, nil
}

// callInfo is what fault matching knows about a call.
type callInfo struct {
	model, region string
	format        llm.Format
	platform      string // "bedrock", "vertex", or "" for the formats' own APIs
	stream        bool
	hasJSON       bool
	azure         bool // served on an Azure route or a Gemini one

}

func (f *Fault) matches(c *callInfo) bool {
	if f.Model != "" && f.Model != c.model ||
		f.Region != "" && f.Region != c.region ||
		f.Format != "" && llm.ParseFormat(f.Format) != c.format ||
		f.Stream != nil && *f.Stream != c.stream {
		return false
	}
	if streamOnly(f.Kind) && !c.stream {
		return false
	}
	if f.Kind == KindMalformedJSON && !c.hasJSON {
		return false
	}
	if f.Kind == KindContentFilter && !c.azure {
		return false
	}
	if f.Kind == KindModelNotReady && c.platform != platformBedrock {
		return false
	}
	return true
}

// activeFault is a Fault with its remaining count.
type activeFault struct {
	Fault
	left int // remaining hits when Count > 0
}
