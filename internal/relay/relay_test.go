package relay

import (
	"io"
	"slices"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
)

// TestDropEcho: a continuation's start that repeats the prefill sent is
// dropped however the server splits it into deltas; one that departs from
// it, or ends inside it, is forwarded whole, nothing lost.
func TestDropEcho(t *testing.T) {
	const echo = "Forty dozen result"
	delta := func(s string) *llm.Event {
		return &llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: s}
	}
	cases := []struct {
		name string
		in   []*llm.Event
		want []string // the deltas forwarded ("<stop>" for the block stop)
	}{
		{"llama-server: prefill and first token in one delta", []*llm.Event{delta(echo + " either"), delta(" forty")}, []string{" either", " forty"}},
		{"echo alone, then the answer", []*llm.Event{delta(echo), delta(" either")}, []string{" either"}},
		{"echo over several deltas", []*llm.Event{delta("Forty"), delta(" dozen"), delta(" result either")}, []string{" either"}},
		{"no echo", []*llm.Event{delta(" either"), delta(" forty")}, []string{" either", " forty"}},
		{"departs from the prefill", []*llm.Event{delta("Forty"), delta(" apples")}, []string{"Forty apples"}},
		{"ends inside the prefill", []*llm.Event{delta("Forty"), {Type: llm.EventBlockStop}}, []string{"Forty", "<stop>"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &Relay{echo: echo}
			var got []string
			in := tc.in
			for len(in) > 0 || len(s.back) > 0 {
				var ev *llm.Event
				if len(s.back) > 0 {
					ev, s.back = s.back[0], s.back[1:]
				} else {
					ev, in = in[0], in[1:]
				}
				if s.echo == "" && s.held == "" {
					got = append(got, render(ev))
					continue
				}
				out, drop := s.dropEcho(ev)
				if !drop {
					got = append(got, render(out))
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("forwarded %q, want %q", got, tc.want)
			}
		})
	}
}

func render(ev *llm.Event) string {
	if ev.Type == llm.EventBlockStop {
		return "<stop>"
	}
	return ev.Delta
}

// fakeUp is a scripted Upstream: legs of events; Continue moves to the
// next leg (refuse makes Stop say no, fail makes Continue fail); it is the
// call's Retries too (retryErr refuses a retry, taken counts those taken).
type fakeUp struct {
	legs     [][]*llm.Event
	kinds    []Leg
	refuse   *llm.APIError
	fail     *llm.APIError
	cuts     []Cut
	usages   []llm.Usage
	ended    []bool
	diverged int
	lent     int
	retryErr error
	taken    int
	attempts int
}

func (f *fakeUp) Next() (*llm.Event, error) {
	if len(f.legs[0]) == 0 {
		return nil, io.EOF
	}
	ev := f.legs[0][0]
	f.legs[0] = f.legs[0][1:]
	return ev, nil
}
func (f *fakeUp) Ready() bool                   { return len(f.legs[0]) > 0 }
func (f *fakeUp) EndpointID() string            { return "ep" }
func (f *fakeUp) Lend(*llm.Event)               { f.lent++ }
func (f *fakeUp) Recycle()                      {}
func (f *fakeUp) Diverged(u llm.Usage, _ error) { f.diverged++; f.usages = append(f.usages, u) }
func (f *fakeUp) End(u llm.Usage, finished bool) {
	f.usages = append(f.usages, u)
	f.ended = append(f.ended, finished)
}
func (f *fakeUp) Stop(_ error, u llm.Usage) (string, *llm.APIError) {
	f.usages = append(f.usages, u)
	return "stream_cut", f.refuse
}
func (f *fakeUp) Continue(cut Cut) (Leg, *llm.APIError) {
	f.cuts = append(f.cuts, cut)
	if f.fail != nil {
		return Leg{}, f.fail
	}
	if len(f.legs) < 2 {
		return Leg{}, &llm.APIError{Status: 503, Message: "no other endpoint"}
	}
	f.legs = f.legs[1:]
	k := f.kinds[0]
	f.kinds = f.kinds[1:]
	return k, nil
}
func (f *fakeUp) TakeRetry() error {
	if f.retryErr != nil {
		return f.retryErr
	}
	f.taken++
	return nil
}
func (f *fakeUp) Attempts() int { return f.attempts }

func start(in int) *llm.Event {
	return &llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{Usage: llm.Usage{InputTokens: in}}}
}
func textStart(i int) *llm.Event {
	return &llm.Event{Type: llm.EventBlockStart, Index: i, Block: &llm.Block{Type: llm.BlockText}}
}
func td(i int, s string) *llm.Event {
	return &llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaText, Delta: s}
}
func ending(out int) []*llm.Event {
	return []*llm.Event{{Type: llm.EventBlockStop, Index: 0}, {Type: llm.EventMessageDelta, StopReason: "end_turn", Usage: &llm.Usage{OutputTokens: out}}, {Type: llm.EventMessageStop}}
}

// client reads s to its end: the text, the event types and the last error.
func client(t *testing.T, s *Relay) (text string, types []llm.EventType, errEv *llm.APIError) {
	t.Helper()
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, ev.Type)
		switch ev.Type {
		case llm.EventBlockDelta:
			if ev.Index != 0 {
				t.Fatalf("delta at client index %d", ev.Index)
			}
			text += ev.Delta
		case llm.EventError:
			errEv = ev.Err
		}
	}
}

// TestRelayContinues: a leg cut mid-answer is continued by prefill (the
// continuation's start and its repeated whitespace dropped) or by a
// re-ask spliced on after the text the client has: the client sees one
// message, one block, the answer once, and the usage of the whole answer;
// each leg is settled with its own usage.
func TestRelayContinues(t *testing.T) {
	for _, tc := range []struct {
		name string
		leg2 []*llm.Event
		kind Leg
	}{
		{"prefill", append([]*llm.Event{start(9), textStart(0), td(0, " world.")}, ending(2)...), Leg{Echo: "Hello"}},
		{"re-ask spliced", append([]*llm.Event{start(5), textStart(0), td(0, "Hel"), td(0, "lo world.")}, ending(4)...), Leg{Splice: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			up := &fakeUp{legs: [][]*llm.Event{{start(5), textStart(0), td(0, "Hello"), td(0, " ")}, tc.leg2}, kinds: []Leg{tc.kind}}
			s := relayOf(up)
			text, types, errEv := client(t, s)
			if errEv != nil || text != "Hello world." {
				t.Fatalf("text %q, error %v", text, errEv)
			}
			starts := 0
			for _, ty := range types {
				if ty == llm.EventMessageStart || ty == llm.EventBlockStart {
					starts++
				}
			}
			if starts != 2 {
				t.Fatalf("events %v: want one message and one block", types)
			}
			if c := up.cuts[0]; c.Delivered != "Hello " || c.Output != 2 || c.Blocker != "" {
				t.Fatalf("cut %+v", c)
			}
			s.Close()
			u, _ := s.Usage()
			if want := 2 + 2; tc.kind.Splice && u.OutputTokens != 4 || !tc.kind.Splice && u.OutputTokens != want || u.InputTokens != 5 {
				t.Fatalf("client usage %+v", u)
			}
			if up.usages[0].OutputTokens != 2 || len(up.ended) != 1 || !up.ended[0] {
				t.Fatalf("legs settled with %+v, ended %v", up.usages, up.ended)
			}
			if up.taken != 1 {
				t.Fatalf("the continuation took %d retries, want 1", up.taken)
			}
		})
	}
}

// TestRelayEndsWithAnErrorEvent: when the leg cannot be continued (the
// attempt path refuses, or a re-ask diverges), the client gets the wire's
// error event and then io.EOF, never a clean finish, and Close settles
// nothing more.
func TestRelayEndsWithAnErrorEvent(t *testing.T) {
	refused := &fakeUp{legs: [][]*llm.Event{{start(5), textStart(0), td(0, "Hello")}}, refuse: &llm.APIError{Status: 200, Message: "no"}}
	s := relayOf(refused)
	if _, _, errEv := client(t, s); errEv == nil || errEv.Message != "no" {
		t.Fatalf("error event %v", errEv)
	}
	s.Close()
	if len(refused.ended) != 0 {
		t.Fatal("a failed stream's leg was settled again at Close")
	}
	diverging := &fakeUp{legs: [][]*llm.Event{{start(5), textStart(0), td(0, "Hello")}, {start(5), textStart(0), td(0, "Goodbye")}}, kinds: []Leg{{Splice: true}}}
	s = relayOf(diverging)
	if _, _, errEv := client(t, s); errEv == nil || diverging.diverged != 1 {
		t.Fatalf("error event %v, diverged %d", errEv, diverging.diverged)
	}
	if failed, _ := s.Failed(); !failed {
		t.Fatal("not failed")
	}
}

// TestRelayContinuationIsARetry: a continuation is a retry of work taken
// from the call's Retries after the upstream allows it and only when no
// block stands in the way; each refusal is the stream's error event with
// the failure's reason, and nothing is continued.
func TestRelayContinuationIsARetry(t *testing.T) {
	cutText := [][]*llm.Event{{start(5), textStart(0), td(0, "Hello")}, {start(5), textStart(0), td(0, " world.")}}
	cutTool := [][]*llm.Event{{start(5), {Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockToolUse}}}, {start(5)}}
	for _, tc := range []struct {
		name      string
		up        *fakeUp
		status    int
		meshCode  string
		message   string
		taken     int
		continued bool
	}{
		{"attempts spent", &fakeUp{legs: cutText, retryErr: policy.ErrAttemptsSpent, attempts: 3},
			200, llm.MeshFallbackExhausted, "upstream stream failed (stream_cut) and 3 attempts were made", 0, false},
		{"budget exhausted", &fakeUp{legs: cutText, retryErr: policy.ErrBudgetExhausted},
			200, llm.MeshBudgetExhausted, "upstream stream failed (stream_cut) and the retry budget is exhausted", 0, false},
		{"a tool block before any retry", &fakeUp{legs: cutTool},
			200, llm.MeshFallbackExhausted, "upstream stream failed (stream_cut) and a tool_use block cannot be continued", 0, false},
		{"the upstream refuses before any retry", &fakeUp{legs: cutText, refuse: &llm.APIError{Status: 200, MeshCode: llm.MeshTimeout, Message: "past its deadline"}},
			200, llm.MeshTimeout, "past its deadline", 0, false},
		{"the continuation fails", &fakeUp{legs: cutText, fail: &llm.APIError{Status: 503, MeshCode: llm.MeshFallbackExhausted, Message: "no endpoint"}},
			200, llm.MeshFallbackExhausted, "upstream stream failed (stream_cut) and could not be continued: no endpoint", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := relayOf(tc.up)
			_, _, errEv := client(t, s)
			if errEv == nil || errEv.Status != tc.status || errEv.MeshCode != tc.meshCode || errEv.Message != tc.message {
				t.Fatalf("error event %+v, want status %d, %s, %q", errEv, tc.status, tc.meshCode, tc.message)
			}
			if tc.up.taken != tc.taken || (len(tc.up.cuts) > 0) != tc.continued {
				t.Fatalf("retries taken %d (want %d), continued %v (want %v)", tc.up.taken, tc.taken, len(tc.up.cuts) > 0, tc.continued)
			}
			if failed, _ := s.Failed(); !failed {
				t.Fatal("not failed")
			}
		})
	}
}

// TestRelayClientLeaves: closed before its end, the leg is settled as not
// finished, with the output it sent counted a token per delta.
func TestRelayClientLeaves(t *testing.T) {
	up := &fakeUp{legs: [][]*llm.Event{{start(5), textStart(0), td(0, "a"), td(0, "b"), td(0, "c")}}}
	s := relayOf(up)
	for range 4 {
		s.Next()
	}
	s.Close()
	s.Close()
	if len(up.ended) != 1 || up.ended[0] || up.usages[0].OutputTokens != 2 || up.usages[0].InputTokens != 5 {
		t.Fatalf("ended %v usages %+v", up.ended, up.usages)
	}
	if up.lent == 0 {
		t.Fatal("no event was lent unchanged")
	}
}

// relayOf relays up's answer.
func relayOf(up *fakeUp) *Relay {
	s := &Relay{}
	s.Init(up, up)
	return s
}
