package cacheroute

import (
	"net/http"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/route"
)

var t0 = time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)

// conversation is one turn of a conversation named by X-Mesh-Session.
func conversation() (*llm.Request, http.Header) {
	req := &llm.Request{Format: llm.FormatAnthropic, Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}}}
	return req, http.Header{affinity.SessionHeader: {"s-1"}}
}

func cands(lat ...time.Duration) []route.Candidate {
	out := make([]route.Candidate, len(lat))
	for i, l := range lat {
		out[i] = route.Candidate{ID: string(rune('a' + i)), Model: "m", ExpectedLatency: l, Available: true}
	}
	return out
}

// A served turn makes its endpoint warm; the next turn's pick keeps to it
// while Stay holds, leaving the others out as "cache_affinity", and a turn
// served elsewhere is a move "from->to".
func TestWarmEndpointKeptThenMoved(t *testing.T) {
	r, err := New(affinity.Config{}, policy.ColdSpendConfig{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	req, h := conversation()
	ids := []string{"a", "b", "c"}
	id := func(i int) string { return ids[i] }
	var first Call
	r.Start(&first, true, false, "m", req, h, 3, id, t0)
	if moved := r.Served(&first, "rt", "m", 1, "b", pricing.Price{}, false, t0); moved != "" {
		t.Fatalf("first turn moved %q, want no move (nothing was warm)", moved)
	}

	var next Call
	r.Start(&next, true, false, "m", req, h, 3, id, t0.Add(time.Second))
	cs := cands(20*time.Millisecond, 30*time.Millisecond, 25*time.Millisecond)
	r.PreferWarm(&next, cs, false, route.Policy{}, func(int) int { return 0 })
	if !cs[1].Available || cs[0].Available || cs[0].Unavailable != "cache_affinity" || cs[2].Unavailable != "cache_affinity" {
		t.Fatalf("candidates %+v, want only the warm b available, the others out by cache_affinity", cs)
	}
	if moved := r.Served(&next, "rt", "m", 0, "a", pricing.Price{}, false, t0.Add(time.Second)); moved != "b->a" {
		t.Fatalf("moved %q, want b->a", moved)
	}
}

// A warm endpoint much slower than the best (beyond Stay's 3×), or one the
// call's preferred region excludes, leaves the pick to latency.
func TestWarmYields(t *testing.T) {
	r, err := New(affinity.Config{}, policy.ColdSpendConfig{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	req, h := conversation()
	id := func(i int) string { return string(rune('a' + i)) }
	var c Call
	r.Start(&c, true, false, "m", req, h, 2, id, t0)
	r.Served(&c, "rt", "m", 1, "b", pricing.Price{}, false, t0)
	for name, tc := range map[string]struct {
		cs  []route.Candidate
		pol route.Policy
	}{
		"slow":   {cands(10*time.Millisecond, 100*time.Millisecond), route.Policy{}},
		"region": {cands(10*time.Millisecond, 10*time.Millisecond), route.Policy{PreferredRegion: "eu"}},
	} {
		var next Call
		r.Start(&next, true, false, "m", req, h, 2, id, t0.Add(time.Second))
		r.PreferWarm(&next, tc.cs, false, tc.pol, func(int) int { return 0 })
		if !tc.cs[0].Available || !tc.cs[1].Available {
			t.Errorf("%s: candidates %+v, want both left to the router", name, tc.cs)
		}
	}
}

// A call off the primary pass (on false) or on the legacy path has no
// warm endpoint, and cold hedges are free when cold_spend is disabled.
func TestOffAndLegacy(t *testing.T) {
	r, err := New(affinity.Config{}, policy.ColdSpendConfig{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	req, h := conversation()
	id := func(int) string { return "a" }
	var c Call
	r.Start(&c, true, false, "m", req, h, 1, id, t0)
	r.Served(&c, "rt", "m", 0, "a", pricing.Price{}, false, t0)
	for _, tc := range []struct{ on, legacy bool }{{false, false}, {true, true}} {
		var next Call
		r.Start(&next, tc.on, tc.legacy, "m", req, h, 1, id, t0)
		if next.warm != -1 {
			t.Errorf("on %v legacy %v: warm %d, want -1", tc.on, tc.legacy, next.warm)
		}
		if !r.ColdHedge(&next, "rt", func() pricing.Price { t.Fatal("priced with cold_spend disabled"); return pricing.Price{} }) {
			t.Errorf("on %v legacy %v: cold hedge refused with cold_spend disabled", tc.on, tc.legacy)
		}
	}
}

// A continuation that takes a stream over makes its endpoint the warm
// one: the next turn keeps to it, and nothing is said as a move.
func TestContinuedMovesTheTable(t *testing.T) {
	r, err := New(affinity.Config{}, policy.ColdSpendConfig{Disabled: true})
	if err != nil {
		t.Fatal(err)
	}
	req, h := conversation()
	ids := []string{"a", "b", "c"}
	id := func(i int) string { return ids[i] }
	var turn Call
	r.Start(&turn, true, false, "m", req, h, 3, id, t0)
	if moved := r.Served(&turn, "rt", "m", 0, "a", pricing.Price{}, false, t0); moved != "" {
		t.Fatalf("first turn moved %q", moved)
	}
	r.Continued(&turn, "m", 2, "c", t0.Add(time.Second))
	var next Call
	r.Start(&next, true, false, "m", req, h, 3, id, t0.Add(2*time.Second))
	cs := cands(20*time.Millisecond, 20*time.Millisecond, 25*time.Millisecond)
	r.PreferWarm(&next, cs, false, route.Policy{}, func(int) int { return 0 })
	if !cs[2].Available || cs[0].Available || cs[1].Available {
		t.Fatalf("candidates %+v, want only c (where the continuation finished the answer) available", cs)
	}
	if moved := r.Served(&next, "rt", "m", 2, "c", pricing.Price{}, false, t0.Add(2*time.Second)); moved != "" {
		t.Errorf("next turn on c said moved %q, want nothing", moved)
	}
	var off Call // not a model call's primary pass: no effect
	r.Start(&off, false, false, "m", req, h, 3, id, t0)
	r.Continued(&off, "m", 0, "a", t0.Add(3*time.Second))
	if e, _ := r.Table().Get("m", affinity.KeyOf(req, h), t0.Add(3*time.Second)); e.Endpoint != "c" {
		t.Errorf("warm endpoint %q after a side call's continuation, want c", e.Endpoint)
	}
}
