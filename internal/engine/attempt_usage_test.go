package engine

import (
	"reflect"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// Issue 13, item 7: attempts carried no usage, so keel report priced every
// extra attempt as a guess. Each attempt that got a complete answer now
// records its own tokens and their cost at its endpoint's price.

func TestAttemptRecordsItsOwnUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("fine"))}
		h := newHarness(t, a)
		eps := h.endpoints("m", "a")
		eps[0].Price = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15}
		e := h.engine(Options{}, eps...)
		r := call(t, e, ask(llm.FormatAnthropic, "m", false))
		if r.err != nil || len(r.rec.Attempts) != 1 {
			t.Fatalf("err %v, %d attempts: want one served attempt", r.err, len(r.rec.Attempts))
		}
		at := r.rec.Attempts[0]
		if want := (7*3.0 + 3*15.0) / 1e6; at.InputTokens != 7 || at.OutputTokens != 3 || at.Cost != want {
			t.Errorf("attempt usage %d in, %d out, $%g; want 7, 3, $%g", at.InputTokens, at.OutputTokens, at.Cost, want)
		}
	})
}

// Fragment replicas: each records its own usage at its own endpoint's
// price, and exactly one replica per answered fragment is the winner (the
// others are the redundancy).
func TestFragmentReplicasRecordUsageAndOneWinnerPerFragment(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("part"))}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicJSON("part"))}
		h := newHarness(t, a, b)
		eps := h.endpoints("m", "a", "b")
		eps[0].Price = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15}
		eps[1].Price = pricing.Price{InputPerMTok: 1, OutputPerMTok: 5}
		e := h.engine(Options{Stages: stages(t, chain.Config{Fragment: fragment.Settings{TargetTokens: 200, Redundancy: 2}}),
			Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, eps...)
		req := ask(llm.FormatAnthropic, "al", false)
		var doc strings.Builder
		for i := range 120 {
			doc.WriteString("Paragraph ")
			doc.WriteString(strings.Repeat("x", i%7+1))
			doc.WriteString(" says the region report is fine and nothing else happened today.\n\n")
		}
		req.Messages[0].Content[0].Text = doc.String()
		on := true
		out, err := e.Do(t.Context(), req, Call{RequestID: "t", Behavior: &Behavior{Fragment: &on}})
		if err != nil {
			t.Fatalf("fragmented call: %v", err)
		}
		rec := out.Record
		if rec.Fragments == nil {
			t.Fatal("the record has no fragments part")
		}
		if rec.Fragments.Count < 2 || rec.Fragments.OK != rec.Fragments.Count || len(rec.Attempts) != 2*rec.Fragments.Count {
			t.Fatalf("%d fragments, %d answered, %d attempts: want >= 2 fragments, all answered by 2 replicas", rec.Fragments.Count, rec.Fragments.OK, len(rec.Attempts))
		}
		winners := 0
		for _, at := range rec.Attempts {
			price := map[string][2]float64{"a": {3, 15}, "b": {1, 5}}[at.Region]
			if want := (7*price[0] + 3*price[1]) / 1e6; at.InputTokens != 7 || at.OutputTokens != 3 || at.Cost != want {
				t.Errorf("attempt on %s: %d in, %d out, $%g; want 7, 3, $%g", at.Endpoint, at.InputTokens, at.OutputTokens, at.Cost, want)
			}
			if at.Winner {
				winners++
			}
		}
		if winners != rec.Fragments.Count {
			t.Errorf("%d winning attempts, want one per fragment (%d)", winners, rec.Fragments.Count)
		}
	})
}

// Issue 17 item 2: a stream's attempts carried no usage, so a stream
// continued elsewhere cost only what the client received at the serving
// endpoint's price: the cut leg's prompt and output, and the
// continuation's prompt (which holds the prefill), were free. Each leg now
// records what its upstream reported (a leg cut before its usage counts a
// token per content event) and the call costs their sum.
func TestStreamCostCountsEveryLeg(t *testing.T) {
	for _, c := range []struct {
		name  string
		cutA  bool
		wantA [2]int // attempt a's input and output tokens
		wantB [2]int
	}{
		{name: "whole stream", wantA: [2]int{7, len(story)}},
		{name: "cut and continued", cutA: true, wantA: [2]int{7, 3}, wantB: [2]int{7, len(story) - 3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				a := &scripted{id: "a", format: llm.FormatAnthropic, script: func(int, map[string]any) reply {
					if c.cutA {
						r := anthropicStream(story[:3], time.Millisecond, false)
						r.cut = true
						return r
					}
					return anthropicStream(story, time.Millisecond, true)
				}}
				b := &scripted{id: "b", format: llm.FormatAnthropic, script: always(anthropicStream(story[3:], time.Millisecond, true))}
				h := newHarness(t, a, b)
				eps := h.endpoints("m", "a", "b")
				eps[0].Price = pricing.Price{InputPerMTok: 3, OutputPerMTok: 15}
				eps[1].Price = pricing.Price{InputPerMTok: 1, OutputPerMTok: 5}
				e := h.engine(Options{Aliases: map[string]Alias{"al": {Models: []string{"m"}, Strategy: "ordered"}},
					Resilience: Resilience{DisableHedging: true}}, eps...)
				r := call(t, e, ask(llm.FormatAnthropic, "al", true))
				if r.text != strings.Join(story, "") || !r.stopped {
					t.Fatalf("text %q stopped %v, want the whole story", r.text, r.stopped)
				}
				var got [][2]int
				var gotCost float64
				for _, at := range r.rec.Attempts {
					got = append(got, [2]int{at.InputTokens, at.OutputTokens})
					gotCost += at.Cost
				}
				want := [][2]int{c.wantA}
				wantCost := (float64(c.wantA[0])*3 + float64(c.wantA[1])*15) / 1e6
				if c.cutA {
					want = append(want, c.wantB)
					wantCost += (float64(c.wantB[0])*1 + float64(c.wantB[1])*5) / 1e6
				}
				if !reflect.DeepEqual(got, want) || !nearUSD(gotCost, wantCost) || !nearUSD(r.rec.Cost, wantCost) {
					t.Errorf("attempt usage and cost (-got +want)\n-%v $%g (record $%g)\n+%v $%g", got, gotCost, r.rec.Cost, want, wantCost)
				}
			})
		})
	}
}

func nearUSD(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
