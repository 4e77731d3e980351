package policy

import (
	"fmt"
	"math"
	"sync/atomic"

	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/resilience"
)

// ColdSpendConfig is resilience.cold_spend: what hedges may spend on cold
// prompts, in US dollars, beside what moved conversations are charged. The zero value is the
// documented default: on, $0.50 per hedge, a budget of 10 % of the
// prompts' price plus $1.
type ColdSpendConfig struct {
	// Disabled lets hedges spend without a dollar limit (the hedge
	// budget in calls still applies).
	Disabled bool `yaml:"disabled"`
	// MaxHedgeUSD is the most one hedge's prompt may cost at the price of
	// a cold cache (ColdCost); a dearer hedge is not sent. 0 means 0.50.
	MaxHedgeUSD float64 `yaml:"max_hedge_usd"`
	// Ratio is the share of each served call's prompt, priced as input,
	// deposited into the route's dollar budget. 0 means 0.1.
	Ratio float64 `yaml:"ratio"`
	// BurstUSD is the budget's capacity, and its content at start. 0
	// means 1.
	BurstUSD float64 `yaml:"burst_usd"`
}

// Defaults of ColdSpendConfig's zero fields.
const (
	DefaultMaxHedgeUSD    = 0.50
	DefaultColdSpendRatio = 0.1
	DefaultColdBurstUSD   = 1.0
)

// ErrColdSpendConfig is wrapped by NewColdSpend's and Validate's errors:
// the resilience package's, so that config reports it as it reports the
// other policies'.
var ErrColdSpendConfig = resilience.ErrInvalidConfig

// ColdSpend is one route's dollar budget for cold prompts: the second
// half, with the hedge budget in calls, of what a hedge must get before it
// is sent. Every served call deposits Ratio × its prompt's price as input
// (up to BurstUSD); a hedge withdraws its ColdCost and is refused above
// MaxHedgeUSD or beyond the budget. A conversation moved off its warm
// endpoint (unavailable, or slower than the affinity rule allows) is
// charged its RecacheCost (Charge), never refused — a call stuck on a
// failing or degraded endpoint would be worse than direct — so moves
// leave less for hedges. The dollars hedges spend on cold prompts stay
// below Ratio × the prompts' price + BurstUSD.
//
// A nil *ColdSpend (Disabled) allows everything. Lock-free (an atomic
// count of micro-dollars), safe for concurrent use, never blocks.
type ColdSpend struct {
	maxHedge float64
	ratio    float64
	burst    int64 // micro-dollars
	micro    atomic.Int64
}

// NewColdSpend validates cfg and returns a full budget, or nil when cfg is
// Disabled.
func NewColdSpend(cfg ColdSpendConfig) (*ColdSpend, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Disabled {
		return nil, nil
	}
	s := &ColdSpend{maxHedge: cmpOr(cfg.MaxHedgeUSD, DefaultMaxHedgeUSD), ratio: cmpOr(cfg.Ratio, DefaultColdSpendRatio)}
	s.burst = micro(cmpOr(cfg.BurstUSD, DefaultColdBurstUSD))
	s.micro.Store(s.burst)
	return s, nil
}

// Validate reports a figure outside its range.
func (c ColdSpendConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
		max  float64
	}{{"max hedge", c.MaxHedgeUSD, 1e6}, {"ratio", c.Ratio, 1000}, {"burst", c.BurstUSD, 1e6}} {
		if f.v != 0 && !(f.v > 0 && f.v <= f.max) {
			return fmt.Errorf("cold spend %s %v outside (0, %g]: %w", f.name, f.v, f.max, ErrColdSpendConfig)
		}
	}
	return nil
}

func cmpOr(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

func micro(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// Deposit adds Ratio × promptUSD, what a served call's prompt costs as
// input, up to the burst.
func (s *ColdSpend) Deposit(promptUSD float64) {
	if s == nil || !(promptUSD > 0) {
		return
	}
	d := micro(s.ratio * promptUSD)
	for {
		cur := s.micro.Load()
		if cur >= s.burst {
			return
		}
		if s.micro.CompareAndSwap(cur, min(cur+d, s.burst)) {
			return
		}
	}
}

// Hedge reports whether a hedge whose cold prompt costs usd may be sent,
// and withdraws it: false above MaxHedgeUSD or beyond the budget.
func (s *ColdSpend) Hedge(usd float64) bool {
	if s == nil {
		return true
	}
	return usd <= s.maxHedge && s.withdraw(micro(usd))
}

// Charge withdraws usd, down to an empty budget: a moved conversation's
// re-caching is paid for, never refused.
func (s *ColdSpend) Charge(usd float64) {
	if s == nil {
		return
	}
	d := micro(usd)
	for {
		cur := s.micro.Load()
		if s.micro.CompareAndSwap(cur, max(cur-d, 0)) {
			return
		}
	}
}

func (s *ColdSpend) withdraw(d int64) bool {
	for {
		cur := s.micro.Load()
		if cur < d {
			return false
		}
		if s.micro.CompareAndSwap(cur, cur-d) {
			return true
		}
	}
}

// Available is the budget's content in US dollars.
func (s *ColdSpend) Available() float64 {
	if s == nil {
		return math.Inf(1)
	}
	return float64(s.micro.Load()) / 1e6
}

// ColdCost is what a prompt of tokens costs sent where no cache holds it,
// at p: written to the cache at the 5-minute write price when the request
// marks a breakpoint (Anthropic; write), else as input (OpenAI writes
// cost nothing extra). A hedge pays it in full, whoever wins.
func ColdCost(p pricing.Price, tokens int, write bool) float64 {
	t := pricing.Tokens{Input: tokens}
	if write {
		t = pricing.Tokens{CacheWrite5m: tokens}
	}
	return p.Bill(t).Total
}

// RecacheCost is what moving a conversation whose warm cache holds cached
// of its tokens costs over staying, at p: those tokens sent cold
// (ColdCost) less their price read from the cache. The rest of the prompt
// costs the same either way.
func RecacheCost(p pricing.Price, cached int, write bool) float64 {
	return ColdCost(p, cached, write) - p.Bill(pricing.Tokens{CacheRead: cached}).Total
}
