package engine

import (
	"fmt"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
	"github.com/keelmesh/keel/sim"
)

// TestContextErrorsByProvider: each provider's "prompt too long" answer,
// as it arrives on the wire and as Keel's parser for that wire reads it, is
// a fallback to a model with a bigger window; other 400s that mention
// tokens are not. Sources are cited at contextErrors.
func TestContextErrorsByProvider(t *testing.T) {
	cases := []struct {
		name     string
		format   llm.Format // the wire the answer came on
		status   int
		header   http.Header
		body     string
		fallback bool
	}{
		{name: "openai", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			fallback: true},
		{name: "azure openai", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9100 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`,
			fallback: true},
		{name: "anthropic", format: llm.FormatAnthropic, status: 400,
			body:     `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"},"request_id":"req_011"}`,
			fallback: true},
		{name: "claude on vertex", format: llm.FormatAnthropic, status: 400,
			body:     `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 201544 tokens > 200000 maximum"}}`,
			fallback: true},
		{name: "llama.cpp chat completions", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"code":400,"message":"request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1441,"n_ctx":1024}}`,
			fallback: true},
		{name: "llama.cpp messages", format: llm.FormatAnthropic, status: 400,
			body:     `{"error":{"code":400,"message":"request (1441 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":1441,"n_ctx":1024}}`,
			fallback: true},
		{name: "vllm", format: llm.FormatOpenAI, status: 400,
			body:     `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 122946 tokens (112946 in the messages, 10000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`,
			fallback: true},
		{name: "vllm error object", format: llm.FormatOpenAI, status: 400,
			body:     `{"error":{"message":"This model's maximum context length is 2048 tokens. However, your request has 2049 input tokens. Please reduce the length of the input messages.","type":"BadRequestError","param":null,"code":400}}`,
			fallback: true},
		{name: "bedrock", format: llm.FormatOpenAI, status: 400,
			header:   http.Header{"X-Amzn-Errortype": {"ValidationException:http://internal.amazon.com/coral/com.amazon.bedrock/"}},
			body:     `{"message":"Input is too long for requested model."}`,
			fallback: true},
		{name: "gemini", format: llm.FormatOpenAI, status: 400,
			body:     `[{"error":{"code":400,"message":"The input token count (1200293) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}]`,
			fallback: true},

		// Not a context error: the request is at fault whatever the model.
		{name: "openai max_tokens too large", format: llm.FormatOpenAI, status: 400,
			body: `{"error":{"message":"max_tokens is too large: 500000. This model supports at most 16384 completion tokens, whereas you provided 500000.","type":"invalid_request_error","param":"max_tokens","code":"invalid_value"}}`},
		{name: "vllm max_tokens negative", format: llm.FormatOpenAI, status: 400,
			body: `{"object":"error","message":"max_tokens must be at least 1, got -186.","type":"BadRequestError","param":null,"code":400}`},
		{name: "anthropic other invalid request", format: llm.FormatAnthropic, status: 400,
			body: `{"type":"error","error":{"type":"invalid_request_error","message":"messages: the context window of this conversation has an empty message"}}`},
		{name: "bedrock other validation", format: llm.FormatOpenAI, status: 400,
			header: http.Header{"X-Amzn-Errortype": {"ValidationException"}},
			body:   `{"message":"Malformed input request: expected maxLength: 42000, actual: 46735, please reformat your input and try again."}`},
		{name: "gemini other invalid argument", format: llm.FormatOpenAI, status: 400,
			body: `{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			var ae *llm.APIError
			if tc.format == llm.FormatOpenAI {
				ae = openai.ParseError(tc.status, h, []byte(tc.body))
			} else {
				ae = anthropic.ParseError(tc.status, h, []byte(tc.body))
			}
			f := policy.Classify(&provider.Error{Kind: provider.KindStatus, Endpoint: "e", API: ae})
			if got := f.Decision == policy.DecideFallback && f.Kind == policy.KindContextExceeded && f.Reason == "context_length_exceeded"; got != tc.fallback {
				t.Errorf("parsed %+v: decision %v kind %v reason %q, want a context fallback %v", *ae, f.Decision, f.Kind, f.Reason, tc.fallback)
			}
		})
	}
}

// Must show (issue 25): llama.cpp's context error (its own type, in the
// OpenAI shape on both endpoints; PROTOCOLS.md §6.2) makes an alias whose
// next model has the bigger window fall back to it, as Anthropic's and
// OpenAI's own errors do.
func TestLlamaCppContextErrorFallsBack(t *testing.T) {
	for _, shape := range []string{sim.ContextErrorLlamaCpp, ""} {
		for _, upstream := range []llm.Format{llm.FormatOpenAI, llm.FormatAnthropic} {
			t.Run(fmt.Sprintf("shape %q/%s endpoint", shape, upstream), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					cfg := sim.ZeroLatency()
					small, big := cfg.Models[2], cfg.Models[1]
					small.Name, small.ContextWindow, small.ContextError = "llama-small", 12, shape
					big.Name, big.ContextWindow = "llama-big", 4096
					small.Formats, big.Formats = []string{upstream.String()}, []string{upstream.String()}
					small.Regions, big.Regions = cfg.Models[0].Regions[:1], cfg.Models[0].Regions[:1]
					cfg.Models = []sim.ModelSpec{small, big}
					fleet, err := sim.New(cfg)
					if err != nil {
						t.Fatal(err)
					}
					// The configured windows: the small server was started with
					// a smaller context (llama-server -c) than its entry says.
					windows := map[string]int{"llama-small": 1024, "llama-big": 8192}
					var eps []*provider.Endpoint
					for _, m := range cfg.Models {
						eps = append(eps, &provider.Endpoint{ID: m.Name, Model: m.Name, UpstreamModel: m.Name, Region: m.Regions[0], Provider: "llamacpp",
							Format: upstream, BaseURL: fleet.BaseURL(m.Regions[0], upstream), Capability: 3, ContextWindow: windows[m.Name],
							StreamIdleTimeout: 30 * time.Second})
					}
					e, err := New(Options{Endpoints: eps, Client: provider.NewClient(fleet.Transport()),
						Aliases:    map[string]Alias{"local": {Models: []string{"llama-small", "llama-big"}, Strategy: "ordered"}},
						Resilience: Resilience{DisableHedging: true, Valve: ValveConfig{Disabled: true}}})
					if err != nil {
						t.Fatal(err)
					}
					defer e.Close()
					for _, stream := range []bool{false, true} {
						req := ask(llm.FormatOpenAI, "local", stream)
						req.Messages[0].Content[0].Text = "Summarise the keeper's log of the long winter storm for the harbour master please."
						r := call(t, e, req)
						if r.err != nil || r.text == "" {
							t.Fatalf("stream %v: error %v, text %q", stream, r.err, r.text)
						}
						if r.rec.ServedModel != "llama-big" || r.rec.Fallback != "context_length_exceeded" {
							t.Errorf("stream %v: served by %s, fallback %q; want llama-big after context_length_exceeded", stream, r.rec.ServedModel, r.rec.Fallback)
						}
					}
				})
			})
		}
	}
}
