package engine

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
)

// Issue 13, item 7: attempts carried no usage, so keel report priced every
// extra attempt as a guess. Each attempt that got a complete answer now
// records its own tokens and their cost at its endpoint's price.

func TestAttemptRecordsItsOwnUsage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(anthropicJSON("fine"))}
		h := newHarness(t, a)
		eps := h.endpoints("m", "a")
		eps[0].InputPrice, eps[0].OutputPrice = 3, 15
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
		eps[0].InputPrice, eps[0].OutputPrice = 3, 15
		eps[1].InputPrice, eps[1].OutputPrice = 1, 5
		e := h.engine(Options{Fragment: FragmentOptions{TargetTokens: 200, Redundancy: 2},
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
		if rec.Fragments < 2 || rec.FragmentsOK != rec.Fragments || len(rec.Attempts) != 2*rec.Fragments {
			t.Fatalf("%d fragments, %d answered, %d attempts: want >= 2 fragments, all answered by 2 replicas", rec.Fragments, rec.FragmentsOK, len(rec.Attempts))
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
		if winners != rec.Fragments {
			t.Errorf("%d winning attempts, want one per fragment (%d)", winners, rec.Fragments)
		}
	})
}
