package relay

import (
	"sync"

	"github.com/keelmesh/keel/internal/resilience"
)

// DefaultRaceRatio is a race budget's ratio when its config leaves it
// zero: slow-stream races stay below 5 % of the streams relayed (plus the
// burst).
const DefaultRaceRatio = 0.05

// RaceBudgets are the slow-stream races' own budgets, one token bucket per
// route (resilience.slow_stream_budget): every stream relayed on a route
// deposits the ratio, every race withdraws a token. Races kept apart from
// the hedge budget do not starve the time-to-first-token hedges, nor are
// starved by them: when the two shared one bucket, a slow stream met
// while the hedges had emptied it crawled to its end, as direct (the
// p99.9 of slow streams stayed at 0.92× direct). A nil *RaceBudgets
// allows nothing. Safe for concurrent use; never blocks.
type RaceBudgets struct {
	cfg resilience.BudgetConfig
	// m holds each route's *resilience.Budget, built on first use.
	m sync.Map
}

// NewRaceBudgets checks cfg (a zero Ratio means DefaultRaceRatio, a zero
// Burst 10) and returns the budgets, every route's full at start.
func NewRaceBudgets(cfg resilience.BudgetConfig) (*RaceBudgets, error) {
	if cfg.Ratio == 0 {
		cfg.Ratio = DefaultRaceRatio
	}
	if _, err := resilience.NewBudget(cfg); err != nil {
		return nil, err
	}
	return &RaceBudgets{cfg: cfg}, nil
}

func (b *RaceBudgets) of(route any) *resilience.Budget {
	if v, ok := b.m.Load(route); ok {
		return v.(*resilience.Budget)
	}
	nb, _ := resilience.NewBudget(b.cfg) // validated in NewRaceBudgets
	v, _ := b.m.LoadOrStore(route, nb)
	return v.(*resilience.Budget)
}

// OnStream deposits one stream's share into route's budget (route is
// the caller's key for it; comparable).
func (b *RaceBudgets) OnStream(route any) {
	if b != nil {
		b.of(route).OnRequest()
	}
}

// TryWithdraw takes a token of route's budget for a race: false when it
// is empty.
func (b *RaceBudgets) TryWithdraw(route any) bool {
	return b != nil && b.of(route).TryWithdraw()
}
