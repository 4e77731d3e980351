package route

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

const ms = time.Millisecond

// fleet is a nine-endpoint fleet: three tiers (1 haiku, 2 sonnet, 3 opus)
// in three regions, with expected latencies 100ms × capability + 30ms ×
// region index
// (no two within the default 10 % tie tolerance).
func fleet() []Candidate {
	var cs []Candidate
	for tier, model := range []string{"haiku", "sonnet", "opus"} {
		for r, region := range []string{"us", "eu", "ap"} {
			cs = append(cs, Candidate{
				ID:              model + "-" + region,
				Model:           model,
				Region:          region,
				Order:           len(cs),
				Capability:      tier + 1,
				ContextWindow:   200_000,
				Domains:         map[string]float64{"medical": 0.5 + 0.2*float64(tier)},
				ExpectedLatency: time.Duration(100*(tier+1)+30*r) * ms,
				Available:       true,
			})
		}
	}
	return cs
}

// tiedPair returns two candidates at 100ms and 110ms (tied at the default
// 10 % tolerance), the faster one busier.
func tiedPair() []Candidate {
	cs := fleet()[:2]
	cs[1].ExpectedLatency = 110 * ms
	cs[0].InFlight = 9
	return cs
}

func seeded() func(int) int {
	r := rand.New(rand.NewPCG(1, 1))
	return r.IntN
}

func TestPick(t *testing.T) {
	tests := []struct {
		name   string
		cands  func() []Candidate
		policy Policy
		want   string // chosen ID
	}{
		{name: "fastest overall", cands: fleet, want: "haiku-us"},
		{name: "min capability never routes below the floor", cands: fleet, policy: Policy{MinCapability: 2}, want: "sonnet-us"},
		{name: "domain threshold", cands: fleet, policy: Policy{Domain: "medical"}, want: "opus-us"},
		{name: "missing domain scores one", cands: fleet, policy: Policy{Domain: "legal"}, want: "haiku-us"},
		{name: "negative domain threshold accepts all", cands: fleet, policy: Policy{Domain: "medical", MinDomainScore: -1}, want: "haiku-us"},
		{name: "custom domain threshold", cands: fleet, policy: Policy{Domain: "medical", MinDomainScore: 0.65}, want: "sonnet-us"},
		{name: "context window", cands: func() []Candidate {
			cs := fleet()
			for i := range 6 {
				cs[i].ContextWindow = 8_000
			}
			return cs
		}, policy: Policy{MinContextWindow: 10_000}, want: "opus-us"},
		{name: "unavailable skipped", cands: func() []Candidate {
			cs := fleet()
			cs[0].Available, cs[0].Unavailable = false, "breaker_open"
			return cs
		}, want: "haiku-eu"},
		{name: "preferred region honoured while healthy", cands: fleet, policy: Policy{PreferredRegion: "ap"}, want: "haiku-ap"},
		{name: "preferred region with the floor", cands: fleet, policy: Policy{PreferredRegion: "eu", MinCapability: 3}, want: "opus-eu"},
		{name: "preferred region abandoned when unavailable", cands: func() []Candidate {
			cs := fleet()
			for i := range cs {
				if cs[i].Region == "ap" {
					cs[i].Available, cs[i].Unavailable = false, "ejected"
				}
			}
			return cs
		}, policy: Policy{PreferredRegion: "ap"}, want: "haiku-us"},
		{name: "unknown preferred region ignored", cands: fleet, policy: Policy{PreferredRegion: "mars"}, want: "haiku-us"},
		{name: "ordered takes the lowest order", cands: func() []Candidate {
			cs := fleet()
			cs[4].Order = -1 // sonnet-eu first, though slower
			return cs
		}, policy: Policy{Strategy: Ordered}, want: "sonnet-eu"},
		{name: "ordered ties by position", cands: func() []Candidate {
			cs := fleet()
			for i := range cs {
				cs[i].Order = 1
			}
			return cs
		}, policy: Policy{Strategy: Ordered, MinCapability: 2}, want: "sonnet-us"},
		{name: "ordered respects filters", cands: fleet, policy: Policy{Strategy: Ordered, MinCapability: 3, PreferredRegion: "ap"}, want: "opus-ap"},
		{name: "faster outside tolerance wins", cands: func() []Candidate {
			cs := fleet()
			cs[1].ExpectedLatency = 50 * ms
			cs[0].InFlight = 100
			return cs
		}, want: "haiku-eu"},
		{name: "tie broken by in-flight", cands: tiedPair, want: "haiku-eu"},
		{name: "negative tolerance means no tie", cands: tiedPair, policy: Policy{TieTolerance: -1}, want: "haiku-us"},
		{name: "narrow tolerance", cands: tiedPair, policy: Policy{TieTolerance: 0.05}, want: "haiku-us"},
		{name: "wide tolerance", cands: fleet, policy: Policy{TieTolerance: 0.35, PreferredRegion: "us"}, want: "haiku-us"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands := tt.cands()
			c, err := Pick(cands, tt.policy, seeded())
			if err != nil {
				t.Fatalf("Pick: %v", err)
			}
			if got := cands[c.Index].ID; got != tt.want {
				t.Errorf("chosen (-got +want):\n-%s\n+%s\ndecisions: %+v", got, tt.want, c.Decisions)
			}
		})
	}
}

// TestMinCapabilityProperty: whatever the latencies, the chosen candidate
// is never below the floor.
func TestMinCapabilityProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for range 2000 {
		cs := fleet()
		for i := range cs {
			cs[i].ExpectedLatency = time.Duration(r.IntN(1000)) * ms
			cs[i].InFlight = r.IntN(5)
			cs[i].Available = r.IntN(4) != 0
		}
		floor := 1 + r.IntN(3)
		c, err := Pick(cs, Policy{MinCapability: floor}, r.IntN)
		if err != nil {
			continue
		}
		if got := cs[c.Index].Capability; got < floor {
			t.Fatalf("chose %s of capability %d below floor %d", cs[c.Index].ID, got, floor)
		}
		if !cs[c.Index].Available {
			t.Fatalf("chose unavailable %s", cs[c.Index].ID)
		}
	}
}

func TestDecisions(t *testing.T) {
	cs := fleet()
	cs[1].Available, cs[1].Unavailable = false, "cooling" // haiku-eu
	cs[3].ContextWindow = 1000                            // sonnet-us
	cs[4].ExpectedLatency = 215 * ms                      // sonnet-eu: tied with sonnet-ap (220)
	cs[5].ExpectedLatency = 220 * ms                      // sonnet-ap
	cs[5].InFlight = 3
	c, err := Pick(cs, Policy{MinCapability: 2, Domain: "medical", MinDomainScore: 0.7, MinContextWindow: 2000, PreferredRegion: "eu"}, seeded())
	if err != nil {
		t.Fatal(err)
	}
	want := []Decision{
		{ID: "haiku-us", Score: 100, Reason: ReasonCapability},
		{ID: "haiku-eu", Score: 130, Reason: ReasonCapability},
		{ID: "haiku-ap", Score: 160, Reason: ReasonCapability},
		{ID: "sonnet-us", Score: 200, Reason: ReasonContext},
		{ID: "sonnet-eu", Score: 215, Reason: ReasonChosen},
		{ID: "sonnet-ap", Score: 220, Reason: ReasonOtherRegion},
		{ID: "opus-us", Score: 300, Reason: ReasonOtherRegion},
		{ID: "opus-eu", Score: 330, Reason: ReasonSlower},
		{ID: "opus-ap", Score: 360, Reason: ReasonOtherRegion},
	}
	if !slices.Equal(c.Decisions, want) {
		t.Errorf("decisions (-got +want):\n-%+v\n+%+v", c.Decisions, want)
	}

	// Without the region preference the two tied sonnets meet, and the
	// one with fewer requests in flight wins whichever pair is drawn.
	c, err = Pick(cs, Policy{MinCapability: 2, MinContextWindow: 2000}, seeded())
	if err != nil {
		t.Fatal(err)
	}
	wantReasons := []Reason{ReasonCapability, ReasonCapability, ReasonCapability, ReasonContext, ReasonChosen, ReasonTieLost, ReasonSlower, ReasonSlower, ReasonSlower}
	var got []Reason
	for _, d := range c.Decisions {
		got = append(got, d.Reason)
	}
	if !slices.Equal(got, wantReasons) {
		t.Errorf("reasons (-got +want):\n-%v\n+%v", got, wantReasons)
	}
	if c.Decisions[1].Detail != "" || c.Decisions[1].Reason != ReasonCapability {
		t.Errorf("a filtered candidate reports its filter, not its availability: %+v", c.Decisions[1])
	}
}

func TestOrderedScores(t *testing.T) {
	cs := fleet()[:3]
	c, err := Pick(cs, Policy{Strategy: Ordered}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []Decision{
		{ID: "haiku-us", Score: 0, Reason: ReasonChosen},
		{ID: "haiku-eu", Score: 1, Reason: ReasonLowerPriority},
		{ID: "haiku-ap", Score: 2, Reason: ReasonLowerPriority},
	}
	if !slices.Equal(c.Decisions, want) {
		t.Errorf("decisions (-got +want):\n-%+v\n+%+v", c.Decisions, want)
	}
}

func TestPickErrors(t *testing.T) {
	unavailable := func(cs []Candidate, why string) []Candidate {
		for i := range cs {
			cs[i].Available, cs[i].Unavailable = false, why
		}
		return cs
	}
	tests := []struct {
		name     string
		cands    []Candidate
		policy   Policy
		wantKind error // nil: only ErrNoCandidate
		wantText string
	}{
		{name: "no candidates", wantText: "no candidates"},
		{name: "all below capability", cands: fleet(), policy: Policy{MinCapability: 4}, wantKind: ErrAllFiltered, wantText: "opus-ap: below_min_capability"},
		{name: "all unavailable", cands: unavailable(fleet(), "breaker_open"), wantKind: ErrAllUnavailable, wantText: "haiku-us: unavailable (breaker_open)"},
		{name: "suitable ones unavailable", cands: func() []Candidate {
			cs := fleet()
			unavailable(cs[6:], "ejected")
			return cs
		}(), policy: Policy{MinCapability: 3}, wantKind: ErrAllUnavailable, wantText: "opus-eu: unavailable (ejected)"},
		{name: "filtered ones also unavailable", cands: unavailable(fleet(), "tried"), policy: Policy{MinContextWindow: 1 << 20}, wantKind: ErrAllFiltered, wantText: "haiku-us: context_window_too_small"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Pick(tt.cands, tt.policy, seeded())
			if !errors.Is(err, ErrNoCandidate) {
				t.Fatalf("error = %v, want ErrNoCandidate", err)
			}
			for _, kind := range []error{ErrAllFiltered, ErrAllUnavailable} {
				if got, want := errors.Is(err, kind), kind == tt.wantKind; got != want {
					t.Errorf("errors.Is(%v, %v) = %v, want %v", err, kind, got, want)
				}
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("error %q does not mention %q", err, tt.wantText)
			}
			if c.Index != -1 || len(c.Decisions) != len(tt.cands) {
				t.Errorf("choice = index %d with %d decisions, want -1 with %d", c.Index, len(c.Decisions), len(tt.cands))
			}
		})
	}
}

// TestP2CDistribution: equal candidates with equal load are chosen
// uniformly; with unequal load, power-of-two-choices favours the least
// loaded (with 3 tied candidates the least loaded wins 2 of 3 pairs and
// the most loaded never wins).
func TestP2CDistribution(t *testing.T) {
	tests := []struct {
		name     string
		inflight []int
		want     []float64 // expected share per candidate
	}{
		{name: "equal load", inflight: []int{2, 2, 2}, want: []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{name: "unequal load", inflight: []int{0, 5, 10}, want: []float64{2.0 / 3, 1.0 / 3, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs := make([]Candidate, len(tt.inflight))
			for i := range cs {
				cs[i] = Candidate{ID: fmt.Sprint(i), ExpectedLatency: 100 * ms, InFlight: tt.inflight[i], Available: true}
			}
			const n = 30000
			counts := make([]int, len(cs))
			rnd := seeded()
			for range n {
				c, err := Pick(cs, Policy{}, rnd)
				if err != nil {
					t.Fatal(err)
				}
				counts[c.Index]++
			}
			for i, want := range tt.want {
				// 30000 draws: the standard deviation of a share is at most
				// 0.003; allow five of them.
				if got := float64(counts[i]) / n; got < want-0.015 || got > want+0.015 {
					t.Errorf("candidate %d share (-got +want):\n-%.3f\n+%.3f", i, got, want)
				}
			}
		})
	}
}

// TestP2CSpreadsLoad runs a closed loop: each pick adds a request to the
// chosen candidate, and once about 40 are in flight a random request
// completes after each pick. Across equal candidates, power-of-two-choices
// keeps the in-flight counts far closer together than a uniformly random
// choice does, and still gives each candidate a fair share of picks.
func TestP2CSpreadsLoad(t *testing.T) {
	simulate := func(pick func(cs []Candidate, r *rand.Rand) int) (meanSpread float64, shares []float64) {
		r := rand.New(rand.NewPCG(4, 2))
		cs := make([]Candidate, 4)
		for i := range cs {
			cs[i] = Candidate{ID: fmt.Sprint(i), ExpectedLatency: time.Duration(100+i) * ms, Available: true}
		}
		const steps = 20000
		chosen := make([]int, len(cs))
		total, spreadSum := 0, 0
		for range steps {
			i := pick(cs, r)
			cs[i].InFlight++
			chosen[i]++
			total++
			if total > 40 {
				k := r.IntN(total)
				for i := range cs {
					if k < cs[i].InFlight {
						cs[i].InFlight--
						break
					}
					k -= cs[i].InFlight
				}
				total--
			}
			lo, hi := cs[0].InFlight, cs[0].InFlight
			for _, c := range cs[1:] {
				lo, hi = min(lo, c.InFlight), max(hi, c.InFlight)
			}
			spreadSum += hi - lo
		}
		for _, n := range chosen {
			shares = append(shares, float64(n)/steps)
		}
		return float64(spreadSum) / steps, shares
	}
	p2c, shares := simulate(func(cs []Candidate, r *rand.Rand) int {
		c, err := Pick(cs, Policy{}, r.IntN)
		if err != nil {
			t.Fatal(err)
		}
		return c.Index
	})
	random, _ := simulate(func(cs []Candidate, r *rand.Rand) int { return r.IntN(len(cs)) })
	if p2c > 0.5*random {
		t.Errorf("mean in-flight spread with P2C = %.2f, want under half of random choice's %.2f", p2c, random)
	}
	for i, share := range shares {
		if share < 0.23 || share > 0.27 {
			t.Errorf("candidate %d got %.3f of picks, want about 0.25", i, share)
		}
	}
	t.Logf("mean in-flight spread: P2C %.2f, random %.2f", p2c, random)
}

func TestPickAppendReusesBuffer(t *testing.T) {
	cs := fleet()
	buf := make([]Decision, 0, len(cs))
	rnd := seeded()
	allocs := testing.AllocsPerRun(100, func() {
		c, err := PickAppend(buf, cs, Policy{MinCapability: 2, Domain: "medical", MinDomainScore: 0.6}, rnd)
		if err != nil || c.Index < 0 {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("PickAppend allocated %v times per run, want 0", allocs)
	}
}

func TestStrategyString(t *testing.T) {
	for _, tt := range []struct {
		s    Strategy
		want string
	}{{LatencyOptimal, "latency_optimal"}, {Ordered, "ordered"}, {Strategy(7), "Strategy(7)"}} {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("String() (-got +want):\n-%s\n+%s", got, tt.want)
			}
		})
	}
}

func BenchmarkPick(b *testing.B) {
	cs := fleet()
	for i := range cs {
		cs[i].ExpectedLatency = 100 * ms // every candidate tied: the P2C path
	}
	p := Policy{MinCapability: 2, Domain: "medical", MinDomainScore: 0.6, PreferredRegion: "eu"}
	rnd := seeded()
	b.Run("Pick", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Pick(cs, p, rnd); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("PickAppend", func(b *testing.B) {
		buf := make([]Decision, 0, len(cs))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := PickAppend(buf, cs, p, rnd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Pick is PickAppend with a fresh decisions slice, the tests' shorthand.
func Pick(cands []Candidate, p Policy, rnd func(n int) int) (Choice, error) {
	return PickAppend(nil, cands, p, rnd)
}
