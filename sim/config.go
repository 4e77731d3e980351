package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/keelmesh/keel/internal/llm"
)

// Duration is a time.Duration written as a Go duration string ("300ms", "2s")
// in YAML and JSON. A bare JSON number is read as nanoseconds.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"300ms\")", b)
	}
	*d = Duration(v)
	return nil
}

// UnmarshalJSON accepts a duration string or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		return d.UnmarshalText([]byte(s))
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return fmt.Errorf("invalid duration %s (want e.g. \"300ms\")", b)
	}
	*d = Duration(n)
	return nil
}

// Format is a wire format; the constants name the two the fleet speaks.
type Format = llm.Format

// The wire formats a fleet endpoint can serve.
const (
	FormatAnthropic = llm.FormatAnthropic
	FormatOpenAI    = llm.FormatOpenAI
)

// Config describes a fleet. The zero value is not valid (it has no models);
// start from DefaultConfig or ZeroLatency. A Config is plain data: New copies
// it, so changing a Config after New has no effect on the fleet.
type Config struct {
	// Seed makes answers, latencies and fault draws reproducible.
	Seed int64 `json:"seed"`
	// RequestDraws draws each call's latency (time to first token, the
	// heavy tail) from a generator seeded by
	// the call itself — the fleet's seed, the endpoint, the conversation
	// and how many times the endpoint has had that conversation before —
	// instead of from one generator per endpoint taken in arrival order.
	// Calls that arrive at the same instant (goroutines woken together in
	// a testing/synctest bubble run in the scheduler's order) then draw
	// the same whatever their order, so a run is the same run every time.
	// A real provider's latency is no function of the request; this only
	// fixes which draw a call gets. False, the default, keeps the
	// per-endpoint generators.
	RequestDraws bool         `json:"request_draws,omitempty"`
	Models       []ModelSpec  `json:"models"`
	Regions      []RegionSpec `json:"regions"`
	// Faults are active from the start; see Fleet.SetFaults.
	Faults []Fault `json:"faults,omitempty"`
	// Azure, when set, serves Azure OpenAI's routes too (see AzureSpec).
	Azure *AzureSpec `json:"azure,omitempty"`
	// Gemini, when set, serves the Gemini API's routes too (see
	// GeminiSpec).
	Gemini *GeminiSpec `json:"gemini,omitempty"`
	// Auth is what the Amazon Bedrock and Google Vertex AI fronts accept
	// (none: they refuse every call, as the real ones refuse an
	// unauthenticated one).
	Auth Auth `json:"auth,omitzero"`
}

// ModelSpec is one simulated model.
type ModelSpec struct {
	Name string `json:"name"`
	// Capability ranks models from 1 (weakest) to 5 (strongest).
	Capability int `json:"capability"`
	// ContextWindow bounds input tokens; a longer prompt is a 400.
	ContextWindow int   `json:"context_window"`
	Price         Price `json:"price"`
	// Regions serving the model; the first one serves the unprefixed URLs.
	Regions []string `json:"regions"`
	// Formats lists the wire formats ("anthropic", "openai") that serve the
	// model; empty means both.
	Formats []string `json:"formats,omitempty"`
	// Latency overrides, field by non-zero field, the latency of each region
	// for this model.
	Latency LatencySpec `json:"latency"`
	// TemperatureScale is the model's temperature sensitivity: a request at
	// temperature T samples as the reference sampler does at the effective
	// temperature T × TemperatureScale (see WordChangeProbability). A model
	// with scale 7/3 at T = 0.3 behaves like a model with scale 1 at T = 0.7.
	// 0 means 1.
	TemperatureScale float64 `json:"temperature_scale,omitempty"`
	// ExtractionErrorRate is the probability, drawn per call and per field,
	// that a field-extraction answer gives a wrong value for a field (see
	// Answer). 0, the default, means always correct.
	ExtractionErrorRate float64 `json:"extraction_error_rate,omitempty"`
	// ExtractionErrorPerKTok adds, per thousand input tokens, to
	// ExtractionErrorRate (the sum capped at 1): a model errs more on a
	// longer input, and a weaker model's error grows faster, as measured for
	// real models ("Lost in the Middle", Liu et al., TACL 2024; the
	// long-context extraction results of the Claude and GPT model cards,
	// where smaller tiers fall off sooner). 0, the default, adds nothing.
	// TierQuality sets it with ExtractionErrorRate for the three tiers.
	ExtractionErrorPerKTok float64 `json:"extraction_error_per_ktok,omitempty"`
	// Continuation is how the model's OpenAI-format endpoints treat a
	// trailing assistant message: none (the default: history, a new answer
	// starts, as OpenAI does), prefill, continue_final_message or prefix
	// (see Continuation). Anthropic-format endpoints always continue it.
	Continuation Continuation `json:"continuation,omitempty"`
	// EchoPrefill makes an endpoint that continues a trailing assistant
	// message repeat it at the start of its answer, as llama.cpp's
	// llama-server does (PROTOCOLS.md §0.13, §6.2): a non-streamed answer's
	// text starts with the prefill, and a stream's first text delta is the
	// prefill plus the first new token. max_tokens and output_tokens count
	// the new tokens only. False, the default, continues without the echo
	// (the Anthropic Messages API, vLLM, DeepSeek).
	EchoPrefill bool `json:"echo_prefill,omitempty"`
	// ContextError is how the model says a prompt exceeds ContextWindow:
	// "" (the default) as each wire's provider does — over the Anthropic
	// format Anthropic's 400 invalid_request_error "prompt is too long: N
	// tokens > M maximum" (platform.claude.com/docs/en/api/errors), over the
	// OpenAI format OpenAI's 400 invalid_request_error with code
	// context_length_exceeded (developers.openai.com/docs/guides/error-codes)
	// — or ContextErrorLlamaCpp.
	ContextError string `json:"context_error,omitempty"`
	// StructuredOutputs is how the model treats a json_schema output format
	// (Anthropic output_config.format, OpenAI response_format), each wire
	// reading only its own field as the real APIs do: "" or "native" (the
	// default: it answers a value of the schema, as OpenAI
	// gpt-4o-2024-08-06+ and Claude Sonnet 4.5+ / Opus 4.1+ do),
	// "unsupported" (a 400 invalid_request_error, as gpt-3.5-turbo and
	// Claude models before structured outputs answer) or "ignored" (accepted
	// and ignored, as llama.cpp's server has done). See StructuredNative,
	// StructuredUnsupported and StructuredIgnored.
	StructuredOutputs string `json:"structured_outputs,omitempty"`
	// MaxMessages caps the messages of one request; more are a 400 in the
	// wire's error format. 0, the default, is each wire's real cap: 100,000
	// over the Anthropic format (its documented limit) and 2,048 over the
	// OpenAI format (OpenAI's array_above_max_length); a positive value
	// replaces both, e.g. for an OpenAI-compatible server such as vLLM that
	// has no such cap. The 32 MiB body limit holds either way.
	MaxMessages int `json:"max_messages,omitempty"`
	// Drift, when set, perturbs one numeric field of a share of the
	// model's JSON answers by a bounded amount, as a newer version of a
	// model does (see Drift). Nil, the default, leaves answers exact.
	Drift *Drift `json:"drift,omitempty"`
	// PromptCache, when set, makes the model's endpoints cache prompt
	// prefixes as Anthropic (over its format) and OpenAI (over theirs) do,
	// with the usage counts and the shorter time to first token of a hit
	// (see PromptCache; WithPromptCache turns it on for every model). Nil,
	// the default, caches nothing: every prompt token is input.
	PromptCache *PromptCache `json:"prompt_cache,omitempty"`
}

// Price is in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
}

// RegionSpec is one simulated region.
type RegionSpec struct {
	Name    string      `json:"name"`
	Latency LatencySpec `json:"latency"`
}

// LatencySpec shapes the latency of an endpoint (a model in a region).
// The zero value means no added latency and unlimited concurrency.
type LatencySpec struct {
	// Concurrency is the number of calls an endpoint serves at once; more
	// wait in FIFO order. 0 means unlimited.
	Concurrency int `json:"concurrency"`
	// TTFT is the median time to the first token; TTFTSigma the sigma of
	// the lognormal distribution around it (0 = always the median).
	TTFT      Duration `json:"ttft"`
	TTFTSigma float64  `json:"ttft_sigma"`
	// PerToken is the time per output token after the first.
	PerToken Duration `json:"per_token"`
	// PrefillPerKTok is added to the time to first token for each
	// thousand prompt tokens not read from the prompt cache (prefill grows
	// with the prompt; a cache hit skips it for the tokens read). 0, the
	// default, adds nothing.
	PrefillPerKTok Duration `json:"prefill_per_ktok,omitempty"`
	// With probability TailProb a call is TailFactor times slower.
	TailProb   float64 `json:"tail_prob"`
	TailFactor float64 `json:"tail_factor"`
}

// merge returns l with every non-zero field of o applied over it.
func (l LatencySpec) merge(o LatencySpec) LatencySpec {
	if o.Concurrency != 0 {
		l.Concurrency = o.Concurrency
	}
	if o.TTFT != 0 {
		l.TTFT = o.TTFT
	}
	if o.TTFTSigma != 0 {
		l.TTFTSigma = o.TTFTSigma
	}
	if o.PerToken != 0 {
		l.PerToken = o.PerToken
	}
	if o.TailProb != 0 {
		l.TailProb = o.TailProb
	}
	if o.TailFactor != 0 {
		l.TailFactor = o.TailFactor
	}
	if o.PrefillPerKTok != 0 {
		l.PrefillPerKTok = o.PrefillPerKTok
	}
	return l
}

func (l LatencySpec) validate() error {
	switch {
	case l.Concurrency < 0:
		return fmt.Errorf("concurrency: %d is negative", l.Concurrency)
	case l.TTFT < 0:
		return fmt.Errorf("ttft: %s is negative", l.TTFT)
	case l.TTFTSigma < 0:
		return fmt.Errorf("ttft_sigma: %g is negative", l.TTFTSigma)
	case l.PerToken < 0:
		return fmt.Errorf("per_token: %s is negative", l.PerToken)
	case l.PrefillPerKTok < 0:
		return fmt.Errorf("prefill_per_ktok: %s is negative", l.PrefillPerKTok)
	case l.TailProb < 0 || l.TailProb > 1:
		return fmt.Errorf("tail_prob: %g is outside [0, 1]", l.TailProb)
	case l.TailFactor < 0:
		return fmt.Errorf("tail_factor: %g is negative", l.TailFactor)
	case l.TailProb > 0 && l.TailFactor < 1:
		return fmt.Errorf("tail_factor: %g must be at least 1 when tail_prob is set", l.TailFactor)
	}
	return nil
}

// DefaultConfig returns a fleet of three model tiers (sim-opus, sim-sonnet,
// sim-haiku) in three regions (us-east, eu-west, ap-south), served in both
// wire formats, plus sim-llama (OpenAI format only) and sim-claude
// (Anthropic format only) in two regions each, with modest
// latency: TTFT median 30ms, 2ms per token, 64 concurrent calls per endpoint.
// Their temperature sensitivities differ, as real model generations do:
// TemperatureScale 1 (sim-opus), 1.25 (sim-sonnet) and 1.5 (sim-haiku).
func DefaultConfig() Config {
	lat := LatencySpec{
		Concurrency: 64,
		TTFT:        Duration(30 * time.Millisecond),
		TTFTSigma:   0.25,
		PerToken:    Duration(2 * time.Millisecond),
	}
	regions := []string{"us-east", "eu-west", "ap-south"}
	return Config{
		Seed: 1,
		Models: []ModelSpec{
			{Name: "sim-opus", Capability: 5, ContextWindow: 200_000, Price: Price{15, 75}, Regions: slices.Clone(regions), TemperatureScale: 1},
			{Name: "sim-sonnet", Capability: 3, ContextWindow: 200_000, Price: Price{3, 15}, Regions: slices.Clone(regions), TemperatureScale: 1.25},
			{Name: "sim-haiku", Capability: 1, ContextWindow: 200_000, Price: Price{0.8, 4}, Regions: slices.Clone(regions), TemperatureScale: 1.5},
			// Served in one wire format only, like a local Llama behind an
			// OpenAI-compatible server or a Claude model behind the Messages
			// API: a mesh reaches them from either client format by translation.
			{Name: "sim-llama", Capability: 2, ContextWindow: 128_000, Price: Price{0.2, 0.6}, Regions: []string{"us-east", "eu-west"}, Formats: []string{"openai"}, TemperatureScale: 1.1},
			{Name: "sim-claude", Capability: 4, ContextWindow: 200_000, Price: Price{3, 15}, Regions: []string{"us-east", "ap-south"}, Formats: []string{"anthropic"}, TemperatureScale: 1},
		},
		Regions: []RegionSpec{
			{Name: "us-east", Latency: lat},
			{Name: "eu-west", Latency: lat},
			{Name: "ap-south", Latency: lat},
		},
	}
}

// TierQuality returns c with the extraction quality of the three default
// tiers set apart, per field: sim-haiku errs with probability 0.2 % plus
// 15 % per thousand input tokens, sim-sonnet 0.1 % plus 3 %, sim-opus
// 0.05 % plus 0.5 %. So on a 50-token question with two fields sim-haiku
// gets 98.1 % of the answers right and sim-opus 99.8 %; on an 800-token
// document with eight fields 35 % and 96.4 %. The figures are chosen to
// rank the tiers as real ones rank, not calibrated against a real model.
// Other models are unchanged. The tiering benchmark runs on it; the
// default fleet stays exact.
func TierQuality(c Config) Config {
	c.Models = slices.Clone(c.Models)
	for i := range c.Models {
		m := &c.Models[i]
		switch m.Name {
		case "sim-haiku":
			m.ExtractionErrorRate, m.ExtractionErrorPerKTok = 0.002, 0.15
		case "sim-sonnet":
			m.ExtractionErrorRate, m.ExtractionErrorPerKTok = 0.001, 0.03
		case "sim-opus":
			m.ExtractionErrorRate, m.ExtractionErrorPerKTok = 0.0005, 0.005
		}
	}
	return c
}

// ZeroLatency returns DefaultConfig with every latency removed and
// concurrency unlimited: for measuring the overhead of what sits in front.
func ZeroLatency() Config {
	c := DefaultConfig()
	for i := range c.Regions {
		c.Regions[i].Latency = LatencySpec{}
	}
	return c
}

// ParseConfig reads a Config from YAML (JSON is YAML too). Unknown keys are
// errors that name their line.
func ParseConfig(data []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalWithOptions(data, &c, yaml.Strict()); err != nil {
		return Config{}, fmt.Errorf("parsing sim config: %w", err)
	}
	return c, nil
}

// Validate reports the first problem in c, naming the offending field.
func (c *Config) Validate() error {
	if len(c.Models) == 0 {
		return errors.New("sim config: models: at least one model is required")
	}
	if len(c.Regions) == 0 {
		return errors.New("sim config: regions: at least one region is required")
	}
	regions := map[string]bool{}
	for i, r := range c.Regions {
		if err := validName(r.Name); err != nil {
			return fmt.Errorf("sim config: regions[%d].name: %w", i, err)
		}
		if regions[r.Name] {
			return fmt.Errorf("sim config: regions[%d].name: duplicate region %q", i, r.Name)
		}
		regions[r.Name] = true
		if err := r.Latency.validate(); err != nil {
			return fmt.Errorf("sim config: regions[%d].latency.%w", i, err)
		}
	}
	models := map[string]bool{}
	for i, m := range c.Models {
		p := fmt.Sprintf("sim config: models[%d]", i)
		if err := validName(m.Name); err != nil {
			return fmt.Errorf("%s.name: %w", p, err)
		}
		if models[m.Name] {
			return fmt.Errorf("%s.name: duplicate model %q", p, m.Name)
		}
		models[m.Name] = true
		if m.Capability < 1 || m.Capability > 5 {
			return fmt.Errorf("%s.capability: %d is outside [1, 5]", p, m.Capability)
		}
		if m.ContextWindow < 0 {
			return fmt.Errorf("%s.context_window: %d is negative", p, m.ContextWindow)
		}
		if m.Price.InputPerMTok < 0 || m.Price.OutputPerMTok < 0 {
			return fmt.Errorf("%s.price: negative price", p)
		}
		if len(m.Regions) == 0 {
			return fmt.Errorf("%s.regions: at least one region is required", p)
		}
		seen := map[string]bool{}
		for j, r := range m.Regions {
			if !regions[r] {
				return fmt.Errorf("%s.regions[%d]: unknown region %q", p, j, r)
			}
			if seen[r] {
				return fmt.Errorf("%s.regions[%d]: duplicate region %q", p, j, r)
			}
			seen[r] = true
		}
		for j, f := range m.Formats {
			if llm.ParseFormat(f) == llm.FormatUnknown {
				return fmt.Errorf("%s.formats[%d]: unknown format %q (want anthropic or openai)", p, j, f)
			}
		}
		if err := m.Latency.validate(); err != nil {
			return fmt.Errorf("%s.latency.%w", p, err)
		}
		if !(m.TemperatureScale >= 0) || math.IsInf(m.TemperatureScale, 0) {
			return fmt.Errorf("%s.temperature_scale: %g must be a finite number ≥ 0", p, m.TemperatureScale)
		}
		if !(m.ExtractionErrorPerKTok >= 0 && m.ExtractionErrorPerKTok <= 1000) {
			return fmt.Errorf("%s.extraction_error_per_ktok: %g is outside [0, 1000]", p, m.ExtractionErrorPerKTok)
		}
		if !(m.ExtractionErrorRate >= 0 && m.ExtractionErrorRate <= 1) {
			return fmt.Errorf("%s.extraction_error_rate: %g is outside [0, 1]", p, m.ExtractionErrorRate)
		}
		if m.ContextError != "" && m.ContextError != ContextErrorLlamaCpp {
			return fmt.Errorf("%s.context_error: unknown shape %q (want %q or none)", p, m.ContextError, ContextErrorLlamaCpp)
		}
		if err := m.Continuation.validate(); err != nil {
			return fmt.Errorf("%s.continuation: %w", p, err)
		}
		if m.MaxMessages < 0 {
			return fmt.Errorf("%s.max_messages: %d is negative", p, m.MaxMessages)
		}
		if m.Drift != nil {
			if err := m.Drift.validate(); err != nil {
				return fmt.Errorf("%s.drift.%w", p, err)
			}
		}
		if m.PromptCache != nil {
			if err := m.PromptCache.validate(); err != nil {
				return fmt.Errorf("%s.prompt_cache.%w", p, err)
			}
		}
		if err := validStructuredOutputs(m.StructuredOutputs); err != nil {
			return fmt.Errorf("%s.structured_outputs: %w", p, err)
		}
		if m.Continuation != "" && !m.serves(llm.FormatOpenAI) {
			return fmt.Errorf("%s.continuation: applies to the openai format, which the model is not served in", p)
		}
	}
	for i := range c.Faults {
		if err := c.Faults[i].validate(); err != nil {
			return fmt.Errorf("sim config: faults[%d]: %w", i, err)
		}
	}
	if c.Azure != nil {
		if err := c.Azure.validate(models); err != nil {
			return fmt.Errorf("sim config: %w", err)
		}
	}
	if c.Gemini != nil {
		if err := c.Gemini.validate(); err != nil {
			return fmt.Errorf("sim config: %w", err)
		}
	}
	return nil
}

// validName accepts names that fit in a URL path segment unescaped.
func validName(s string) error {
	if s == "" {
		return errors.New("empty name")
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:", c)) {
			return fmt.Errorf("%q: only letters, digits and - _ . : are allowed", s)
		}
	}
	return nil
}

// serves reports whether m is served in format f.
func (m *ModelSpec) serves(f llm.Format) bool {
	if len(m.Formats) == 0 {
		return true
	}
	for _, s := range m.Formats {
		// a model served in "openai" is served by both OpenAI APIs, as
		// OpenAI's own are; one listed as "responses" only by that API
		if g := llm.ParseFormat(s); g == f || g == llm.FormatOpenAI && f == llm.FormatResponses {
			return true
		}
	}
	return false
}
