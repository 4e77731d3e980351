package attempt

import (
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// Price is ep's price: its own, else Deps.Prices for its upstream model
// (passthrough endpoints carry none of their own).
func (r *Runner) Price(ep *fleet.Endpoint) pricing.Price {
	if !ep.Price.IsZero() || r.d.Prices == nil {
		return ep.Price
	}
	p, _ := r.d.Prices(ep.UpstreamModel)
	return p
}

// Cost is u at ep's price, in USD: every kind of token at its own price
// (cache reads, 5-minute and 1-hour writes, reasoning inside output).
func (r *Runner) Cost(ep *fleet.Endpoint, u llm.Usage) float64 {
	return r.Price(ep).Bill(billed(u)).Total
}

// billed is u by the kinds a price bills.
func billed(u llm.Usage) pricing.Tokens {
	w1h := u.CacheWrite1h()
	return pricing.Tokens{Input: u.InputTokens, CacheRead: u.CacheReadTokens, CacheWrite5m: u.CacheWriteTokens - w1h,
		CacheWrite1h: w1h, Output: u.OutputTokens, Reasoning: u.ReasoningTokens}
}
