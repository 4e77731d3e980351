package engine

import (
	"encoding/json"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/fragment"

	"github.com/keelmesh/keel/internal/llm"
)

// Issue 13: a fragment whose replicas all answered, but none with a JSON
// object, is lost: FragmentsOK does not count it (it did, so the header said
// "4/4" beside X-Mesh-Fragments-Lost), LostRanges names it and its
// callrec.FragmentDetail says "invalid".
func TestFragmentAnsweredWithoutJSONIsLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answer := func(n int, body map[string]any) reply {
			b, _ := json.Marshal(body)
			if strings.Contains(string(b), "[Part 1 of") {
				return anthropicJSON(`{"status":"ok"}`)
			}
			return anthropicJSON("I cannot answer that in JSON.")
		}
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: answer}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: answer}
		h := newHarness(t, a, b)
		e := h.engine(Options{Stages: stages(t, chain.Config{Fragment: fragment.Settings{TargetTokens: 200, Redundancy: 2}}),
			Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, h.endpoints("m", "a", "b")...)
		out := fragmentedCall(t, e)
		rec := out.Record
		if rec.Fragments == nil {
			t.Fatal("the record has no fragments part")
		}
		if rec.Fragments.Count < 3 {
			t.Fatalf("%d fragments, want ≥ 3", rec.Fragments.Count)
		}
		if rec.Fragments.OK != 1 || len(rec.Fragments.LostRanges) != rec.Fragments.Count-1 {
			t.Errorf("FragmentsOK %d, %d lost ranges of %d fragments: want 1 answered, %d lost", rec.Fragments.OK, len(rec.Fragments.LostRanges), rec.Fragments.Count, rec.Fragments.Count-1)
		}
		if len(rec.Fragments.Details) != rec.Fragments.Count {
			t.Fatalf("%d fragment details for %d fragments", len(rec.Fragments.Details), rec.Fragments.Count)
		}
		for i, d := range rec.Fragments.Details {
			want := callrec.FragmentInvalid
			if i == 0 {
				want = callrec.FragmentOK
			}
			if d.Outcome != want || len(d.Endpoints) == 0 {
				t.Errorf("fragment %d: outcome %q, endpoints %v; want %q and the endpoints tried", i, d.Outcome, d.Endpoints, want)
			}
		}
	})
}

// A fragment's replicas start on distinct endpoints: the first attempt of
// each replica goes where the fragment's dispatch chose (the replica's run
// picked again and could land on another replica's endpoint).
func TestFragmentReplicasStartOnDistinctEndpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ok := always(anthropicJSON(`{"status":"ok"}`))
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: ok}
		b := &scripted{id: "b", format: llm.FormatAnthropic, script: ok}
		c := &scripted{id: "c", format: llm.FormatAnthropic, script: ok}
		h := newHarness(t, a, b, c)
		e := h.engine(Options{Stages: stages(t, chain.Config{Fragment: fragment.Settings{TargetTokens: 200, Redundancy: 2}}), Rand: func(n int) int { return n - 1 },
			Aliases: map[string]Alias{"al": {Models: []string{"m"}}}}, h.endpoints("m", "a", "b", "c")...)
		out := fragmentedCall(t, e)
		for i, d := range out.Record.Fragments.Details {
			if len(d.Endpoints) != 2 || d.Endpoints[0] == d.Endpoints[1] {
				t.Errorf("fragment %d: replicas on %v, want two distinct endpoints", i, d.Endpoints)
			}
		}
	})
}

// longDoc is a document of 120 short paragraphs: several fragments at a
// 200-token target.
func longDoc() string {
	var doc strings.Builder
	for i := range 120 {
		doc.WriteString("Paragraph ")
		doc.WriteString(strings.Repeat("x", i%7+1))
		doc.WriteString(" says the region report is fine and nothing else happened today.\n\n")
	}
	return doc.String()
}

// fragmentedCall sends longDoc to alias "al" with fragmentation on and a
// one-field output schema.
func fragmentedCall(t *testing.T, e *Engine) *Outcome {
	t.Helper()
	req := ask(llm.FormatAnthropic, "al", false)
	req.Messages[0].Content[0].Text = longDoc()
	on := true
	schema := json.RawMessage(`{"type":"object","properties":{"status":{"type":"string"}}}`)
	out, err := e.Do(t.Context(), req, Call{RequestID: "t", Behavior: &Behavior{Fragment: &on, OutputSchema: schema}})
	if err != nil {
		t.Fatalf("fragmented call: %v", err)
	}
	return out
}
