package engine

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
)

// Engine.Price is what a key's reservation is priced at: the dearest of
// the endpoints a name may be served by, kind by kind; an endpoint without
// a price of its own (a passthrough one) is priced by Options.Prices.
func TestPrice(t *testing.T) {
	a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("x"))}
	b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicJSON("x"))}
	h := newHarness(t, a, b)
	cheap := h.endpoints("cheap", "a")
	dear := h.endpoints("dear", "b")
	unpriced := h.endpoints("unpriced", "a")
	cheap[0].Price = pricing.Price{InputPerMTok: 1, OutputPerMTok: 5, CacheReadPerMTok: 0.1}
	dear[0].Price = pricing.Price{InputPerMTok: 3, OutputPerMTok: 4}
	table := func(model string) (pricing.Price, bool) {
		if model == "unpriced" || model == "gpt-x" {
			return pricing.Price{InputPerMTok: 7, OutputPerMTok: 7}, true
		}
		return pricing.Price{}, false
	}
	e := h.engine(Options{Aliases: map[string]Alias{"both": {Models: []string{"cheap", "dear"}}}, Prices: table,
		Passthrough: []*provider.Endpoint{{Provider: "p", Format: llm.FormatOpenAI, BaseURL: "http://a.test/v1"}}},
		append(append(cheap, dear...), unpriced...)...)
	for _, c := range []struct {
		name string
		want pricing.Price
		ok   bool
	}{
		{"cheap", pricing.Price{InputPerMTok: 1, OutputPerMTok: 5, CacheReadPerMTok: 0.1, CacheWritePerMTok: 1}, true},
		{"both", pricing.Price{InputPerMTok: 3, OutputPerMTok: 5, CacheReadPerMTok: 3, CacheWritePerMTok: 3}, true},
		{"unpriced", pricing.Price{InputPerMTok: 7, OutputPerMTok: 7, CacheReadPerMTok: 7, CacheWritePerMTok: 7}, true},
		{"gpt-x", pricing.Price{InputPerMTok: 7, OutputPerMTok: 7}, true}, // passthrough
		{"gpt-y", pricing.Price{}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := e.Price(c.name)
			if got != c.want || ok != c.ok {
				t.Errorf("Price(%q) (-got +want)\n-%+v %v\n+%+v %v", c.name, got, ok, c.want, c.ok)
			}
		})
	}
}
