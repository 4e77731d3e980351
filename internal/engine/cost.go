package engine

import (
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// priceOf is ep's price: its own, else Options.Prices for its upstream
// model (passthrough endpoints carry none of their own).
func (e *Engine) priceOf(ep *endpoint) pricing.Price {
	if !ep.Price.IsZero() || e.prices == nil {
		return ep.Price
	}
	p, _ := e.prices(ep.UpstreamModel)
	return p
}

// cost is u at ep's price, in USD: every kind of token at its own price
// (cache reads, 5-minute and 1-hour writes, reasoning inside output).
func (e *Engine) cost(ep *endpoint, u llm.Usage) float64 {
	return e.priceOf(ep).Bill(billed(u)).Total
}

// billed is u by the kinds a price bills.
func billed(u llm.Usage) pricing.Tokens {
	w1h := u.CacheWrite1h()
	return pricing.Tokens{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite5m: u.CacheWriteTokens - w1h,
		CacheWrite1h: w1h, Output: u.OutputTokens, Reasoning: u.ReasoningTokens}
}

// Price is the dearest price, kind by kind, among the endpoints a call
// for model (a model or alias name) may be served by; ok is false for a
// name the mesh does not serve or no endpoint of which is priced. A
// passthrough name is priced by Options.Prices. Key accounting reserves
// a call's cost at this price before it is sent. It never blocks.
func (e *Engine) Price(model string) (p pricing.Price, ok bool) {
	rs := e.routes[model]
	if rs == nil {
		if len(e.fleet.Templates) == 0 || e.prices == nil {
			return pricing.Price{}, false
		}
		return e.prices(model)
	}
	for _, ep := range rs.cands {
		if q := e.priceOf(ep); !q.IsZero() {
			p, ok = p.Max(q), true
		}
	}
	return p, ok
}
