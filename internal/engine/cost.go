package engine

import (
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// priceOf is ep's price: its own, else Options.Prices for its upstream
// model (attempt.Runner.Price).
func (e *Engine) priceOf(ep *endpoint) pricing.Price { return e.attempts.Price(ep) }

// cost is u at ep's price, in USD (attempt.Runner.Cost).
func (e *Engine) cost(ep *endpoint, u llm.Usage) float64 { return e.attempts.Cost(ep, u) }

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
