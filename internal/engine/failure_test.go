package engine

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/sim"
)

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
					e, err := newEngine(Options{Endpoints: eps, Client: provider.NewClient(fleet.Transport()),
						Aliases:    map[string]Alias{"local": {Models: []string{"llama-small", "llama-big"}, Strategy: "ordered"}},
						Resilience: Resilience{DisableHedging: true}, Stages: stages(t, chain.Config{})})
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
