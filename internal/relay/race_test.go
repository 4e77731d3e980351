package relay

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func raceTextStart() *llm.Event {
	return &llm.Event{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockText}}
}

func raceDelta(s string) *llm.Event {
	return &llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: s}
}

// The race's judge of a continuation: what extends the client's text wins,
// what cannot be spliced on loses, the rest is undecided.
func TestExtension(t *testing.T) {
	tests := []struct {
		name string
		want string
		leg  Leg
		evs  []*llm.Event
		out  verdict
	}{
		{name: "prefill continuation's first text", want: "Once upon", leg: Leg{Echo: "Once upon"},
			evs: []*llm.Event{{Type: llm.EventMessageStart}, raceTextStart(), raceDelta(" a time")}, out: extends},
		{name: "continuation without an echo to fear", want: "Once upon",
			evs: []*llm.Event{raceTextStart(), raceDelta(" a")}, out: extends},
		{name: "echoing server still inside the prefill", want: "Once upon", leg: Leg{Echo: "Once upon"},
			evs: []*llm.Event{raceTextStart(), raceDelta("Once")}, out: undecided},
		{name: "echoing server past the prefill", want: "Once upon", leg: Leg{Echo: "Once upon"},
			evs: []*llm.Event{raceTextStart(), raceDelta("Once "), raceDelta("upon a")}, out: extends},
		{name: "re-ask repeating the text", want: "Once upon", leg: Leg{Splice: true},
			evs: []*llm.Event{raceTextStart(), raceDelta("Once"), raceDelta(" upon")}, out: undecided},
		{name: "re-ask going beyond the text", want: "Once upon", leg: Leg{Splice: true},
			evs: []*llm.Event{raceTextStart(), raceDelta("Once"), raceDelta(" upon a")}, out: extends},
		{name: "re-ask departing from the text", want: "Once upon", leg: Leg{Splice: true},
			evs: []*llm.Event{raceTextStart(), raceDelta("Twice")}, out: departs},
		{name: "re-ask ending at the text", want: "Once upon", leg: Leg{Splice: true},
			evs: []*llm.Event{raceTextStart(), raceDelta("Once upon"), {Type: llm.EventBlockStop}}, out: departs},
		{name: "a tool block first", want: "Once upon",
			evs: []*llm.Event{{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockToolUse}}}, out: departs},
		{name: "a thinking delta", want: "Once upon",
			evs: []*llm.Event{raceTextStart(), {Type: llm.EventBlockDelta, DeltaType: llm.DeltaThinking, Delta: "hm"}}, out: departs},
		{name: "ended without text", want: "Once upon",
			evs: []*llm.Event{raceTextStart(), {Type: llm.EventMessageDelta}}, out: departs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := extension{want: tt.want}
			got := undecided
			for _, ev := range tt.evs {
				if got = m.feed(ev, tt.leg); got != undecided {
					break
				}
			}
			if got != tt.out {
				t.Errorf("verdict %d, want %d", got, tt.out)
			}
		})
	}
}
