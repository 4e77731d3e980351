package resilience

import (
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBudget(t *testing.T) {
	tests := []struct {
		name          string
		cfg           BudgetConfig
		requests      int // deposited before withdrawing
		wantWithdraws int // successful withdrawals until refusal
		wantLeft      float64
	}{
		{name: "starts full at default burst", wantWithdraws: 10, wantLeft: 0},
		{name: "deposits do not exceed burst", requests: 100, wantWithdraws: 10, wantLeft: 0},
		{name: "custom burst", cfg: BudgetConfig{Burst: 3}, wantWithdraws: 3},
		{name: "fractional burst keeps remainder", cfg: BudgetConfig{Burst: 2.5}, wantWithdraws: 2, wantLeft: 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBudget(tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			for range tt.requests {
				b.OnRequest()
			}
			n := 0
			for b.TryWithdraw() {
				n++
			}
			if n != tt.wantWithdraws {
				t.Errorf("withdrawals (-got +want):\n-%d\n+%d", n, tt.wantWithdraws)
			}
			if got := b.Available(); math.Abs(got-tt.wantLeft) > 1e-9 {
				t.Errorf("Available() (-got +want):\n-%v\n+%v", got, tt.wantLeft)
			}
		})
	}
}

func TestBudgetRefillsAtRatio(t *testing.T) {
	for _, tt := range []struct {
		name     string
		ratio    float64
		requests int // needed per token
	}{
		{"retries 0.2", 0.2, 5},
		{"hedges 0.1", 0.1, 10},
		{"a third rounds down", 1.0 / 3, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b, err := NewBudget(BudgetConfig{Ratio: tt.ratio})
			if err != nil {
				t.Fatal(err)
			}
			for b.TryWithdraw() {
			}
			for i := 1; i < tt.requests; i++ {
				b.OnRequest()
				if b.TryWithdraw() {
					t.Fatalf("withdrawal allowed after %d requests, want after %d", i, tt.requests)
				}
			}
			b.OnRequest()
			if !b.TryWithdraw() {
				t.Errorf("withdrawal refused after %d requests", tt.requests)
			}
		})
	}
}

// TestBudgetBoundProperty checks, over long random runs, that withdrawals
// never exceed Ratio × requests + Burst at any prefix of the run, and that
// a caller who always retries gets close to that bound (the budget is not
// needlessly stingy).
func TestBudgetBoundProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	for trial := range 200 {
		ratio := 0.001 + r.Float64()*0.999
		burst := 1 + r.Float64()*50
		retryProb := r.Float64()
		b, err := NewBudget(BudgetConfig{Ratio: ratio, Burst: burst})
		if err != nil {
			t.Fatal(err)
		}
		requests, withdrawals := 0, 0
		for range 5000 {
			b.OnRequest()
			requests++
			for r.Float64() < retryProb {
				if !b.TryWithdraw() {
					break
				}
				withdrawals++
			}
			if bound := ratio*float64(requests) + burst; float64(withdrawals) > bound+1e-6 {
				t.Fatalf("trial %d (ratio %v, burst %v): %d withdrawals after %d requests exceed %v", trial, ratio, burst, withdrawals, requests, bound)
			}
		}
		if retryProb > 0.99 {
			// A greedy caller should get nearly the whole allowance.
			if want := ratio*float64(requests) + burst - 2; float64(withdrawals) < want-0.001*float64(requests) {
				t.Errorf("trial %d: greedy caller got %d withdrawals, want about %v", trial, withdrawals, want)
			}
		}
	}
}

// TestBudgetConcurrent hammers one Budget from many goroutines and checks
// the same bound; run it with -race.
func TestBudgetConcurrent(t *testing.T) {
	b, err := NewBudget(BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	const workers, perWorker = 8, 5000
	var withdrawals atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range perWorker {
				b.OnRequest()
				for range 3 {
					if b.TryWithdraw() {
						withdrawals.Add(1)
					}
				}
			}
		})
	}
	wg.Wait()
	bound := 0.2*workers*perWorker + 10
	if got := float64(withdrawals.Load()); got > bound || got < bound-3 {
		t.Errorf("withdrawals = %v, want within 3 below %v", got, bound)
	}
	if got := b.Available(); got < 0 || got >= 1 {
		t.Errorf("Available() = %v, want in [0, 1)", got)
	}
}

func BenchmarkBudget(b *testing.B) {
	bu, err := NewBudget(BudgetConfig{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			bu.OnRequest()
			bu.TryWithdraw()
		}
	})
}

func TestNewHedgeBudgetDefaultRatio(t *testing.T) {
	b, err := NewHedgeBudget(BudgetConfig{Burst: 1})
	if err != nil {
		t.Fatal(err)
	}
	b.TryWithdraw() // empty the burst
	for range 9 {
		b.OnRequest()
	}
	if b.TryWithdraw() {
		t.Fatal("9 requests at the default hedge ratio 0.1 paid for a hedge")
	}
	b.OnRequest()
	if !b.TryWithdraw() {
		t.Fatal("10 requests at the default hedge ratio 0.1 did not pay for a hedge")
	}
}
