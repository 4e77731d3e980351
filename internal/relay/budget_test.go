package relay

import (
	"errors"
	"testing"

	"github.com/keelmesh/keel/internal/resilience"
)

// Each route has its own bucket: the burst at start, then the ratio of
// each stream; a bad config is refused as the resilience budgets' are.
func TestRaceBudgets(t *testing.T) {
	b, err := NewRaceBudgets(resilience.BudgetConfig{Ratio: 0.5, Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !b.TryWithdraw("a") || b.TryWithdraw("a") {
		t.Fatal("route a: want its one token, then none")
	}
	if !b.TryWithdraw("b") {
		t.Fatal("route b: want its own token")
	}
	b.OnStream("a")
	if b.TryWithdraw("a") {
		t.Fatal("route a after one stream at ratio 0.5: want no whole token")
	}
	b.OnStream("a")
	if !b.TryWithdraw("a") {
		t.Fatal("route a after two streams at ratio 0.5: want a token")
	}
	var none *RaceBudgets
	none.OnStream("a")
	if none.TryWithdraw("a") {
		t.Error("a nil budget allowed a race")
	}
	if _, err := NewRaceBudgets(resilience.BudgetConfig{Burst: 0.5}); !errors.Is(err, resilience.ErrInvalidConfig) {
		t.Errorf("burst 0.5: err %v, want ErrInvalidConfig", err)
	}
	d, _ := NewRaceBudgets(resilience.BudgetConfig{})
	if d.cfg.Ratio != DefaultRaceRatio {
		t.Errorf("default ratio %v, want %v", d.cfg.Ratio, DefaultRaceRatio)
	}
}
