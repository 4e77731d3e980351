package policy

import (
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/keelmesh/keel/internal/pricing"
)

// sonnet is Anthropic's list price for Claude Sonnet 4.5 (pricing.Builtin).
var sonnet = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15, CacheReadPerMTok: 0.3, CacheWritePerMTok: 3.75, CacheWrite1hPerMTok: 6}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestColdCost(t *testing.T) {
	// A hedge of a 100k-token prompt: $0.375 written cold with a
	// breakpoint, $0.30 as plain input.
	if got := ColdCost(sonnet, 100_000, true); !near(got, 0.375) {
		t.Errorf("ColdCost(write) = %v, want 0.375", got)
	}
	if got := ColdCost(sonnet, 100_000, false); !near(got, 0.30) {
		t.Errorf("ColdCost(input) = %v, want 0.30", got)
	}
	// Moving 100k cached tokens: written again ($0.375) instead of read ($0.03).
	if got := RecacheCost(sonnet, 100_000, true); !near(got, 0.345) {
		t.Errorf("RecacheCost = %v, want 0.345", got)
	}
	// OpenAI: no write premium; cached input at a quarter (gpt-4.1).
	gpt := pricing.Price{InputPerMTok: 2, OutputPerMTok: 8, CacheReadPerMTok: 0.5, CacheWritePerMTok: 2}
	if got := RecacheCost(gpt, 100_000, false); !near(got, 0.15) {
		t.Errorf("RecacheCost(gpt-4.1) = %v, want 0.15", got)
	}
}

func TestColdSpendBudget(t *testing.T) {
	s, err := NewColdSpend(ColdSpendConfig{BurstUSD: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	// Above max_hedge_usd ($0.50): refused, nothing withdrawn.
	if s.Hedge(0.6) {
		t.Error("a $0.60 hedge was allowed under the $0.50 cap")
	}
	if !near(s.Available(), 0.5) {
		t.Errorf("Available = %v after a refused hedge, want 0.5", s.Available())
	}
	for i := range 5 {
		if !s.Hedge(0.1) {
			t.Fatalf("hedge %d of $0.10 refused with $%.2f left", i+1, s.Available())
		}
	}
	if s.Hedge(0.01) {
		t.Error("an empty budget paid")
	}
	// Each call deposits 10 % of its prompt's input price.
	s.Deposit(0.3)
	if !near(s.Available(), 0.03) {
		t.Errorf("Available = %v after a $0.30 prompt, want 0.03", s.Available())
	}
	if !s.Hedge(0.02) {
		t.Error("a $0.02 hedge refused with $0.03")
	}
	// A forced move is charged down to zero, never refused.
	s.Charge(1)
	if s.Available() != 0 {
		t.Errorf("Available = %v after a charge past the content, want 0", s.Available())
	}
	for range 100 {
		s.Deposit(100)
	}
	if !near(s.Available(), 0.5) {
		t.Errorf("Available = %v, want the burst 0.5", s.Available())
	}
}

func TestColdSpendDisabledAndConcurrent(t *testing.T) {
	off, err := NewColdSpend(ColdSpendConfig{Disabled: true})
	if err != nil || off != nil {
		t.Fatalf("disabled: %v, %v; want nil, nil", off, err)
	}
	if !off.Hedge(100) || !math.IsInf(off.Available(), 1) {
		t.Error("a disabled budget refused")
	}
	off.Charge(1)
	off.Deposit(1)

	s, _ := NewColdSpend(ColdSpendConfig{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	paid := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if s.Hedge(0.01) {
					mu.Lock()
					paid++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if paid != 100 { // $1 at $0.01 each
		t.Errorf("%d hedges of $0.01 paid from $1, want 100", paid)
	}
}

func TestColdSpendConfigValidate(t *testing.T) {
	for _, c := range []ColdSpendConfig{{MaxHedgeUSD: -1}, {Ratio: math.NaN()}, {BurstUSD: 2e6}} {
		if _, err := NewColdSpend(c); !errors.Is(err, ErrColdSpendConfig) {
			t.Errorf("NewColdSpend(%+v) = %v, want ErrColdSpendConfig", c, err)
		}
	}
}
