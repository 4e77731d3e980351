package relay

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// A pump delivers a prepended buffer, then its source, then the source's
// ending error — also to reads after its channel closed.
func TestPumpPrependsAndKeepsTheEnd(t *testing.T) {
	a, b, c := &llm.Event{Type: llm.EventBlockDelta}, &llm.Event{Type: llm.EventBlockDelta}, &llm.Event{Type: llm.EventMessageStop}
	src := []*llm.Event{b, c}
	p := NewPump(Prepend([]*llm.Event{a}, func() (*llm.Event, error) {
		if len(src) == 0 {
			return nil, io.EOF
		}
		ev := src[0]
		src = src[1:]
		return ev, nil
	}))
	for i, want := range []*llm.Event{a, b, c} {
		if ev, err := p.Next(); ev != want || err != nil {
			t.Fatalf("read %d: %v, %v; want the %d-th event", i, ev, err, i)
		}
	}
	for range 2 {
		if ev, err := p.Next(); ev != nil || !errors.Is(err, io.EOF) {
			t.Fatalf("after the end: %v, %v; want io.EOF", ev, err)
		}
	}
}

// End cancels the leg and returns only once the pump's goroutine did,
// even when the pump's channel is full.
func TestPumpEndWaitsForItsGoroutine(t *testing.T) {
	cancelled := make(chan struct{})
	p := NewPump(func() (*llm.Event, error) {
		select {
		case <-cancelled:
			return nil, errors.New("cancelled")
		default:
			return &llm.Event{Type: llm.EventBlockDelta}, nil
		}
	})
	if _, err := p.Next(); err != nil {
		t.Fatal(err)
	}
	p.End(func() { close(cancelled) })
	select {
	case <-p.done:
	default:
		t.Fatal("End returned before the pump's goroutine")
	}
}

// Patience: the base until the continuation is made, and for a spliced
// one the time to repeat the client's text twice over at its pace.
func TestPatience(t *testing.T) {
	base := 100 * time.Millisecond
	for _, tc := range []struct {
		made, splice bool
		want         time.Duration
	}{{false, true, base}, {true, false, base}, {true, true, base + 2*11*time.Millisecond}} {
		if got := Patience(base, tc.made, tc.splice, 10, time.Millisecond); got != tc.want {
			t.Errorf("made %v splice %v: %v, want %v", tc.made, tc.splice, got, tc.want)
		}
	}
}

// A contest's continuation, once made, is read from its first events on
// and given back by Lose; one made after the race was lost is dropped.
func TestContest(t *testing.T) {
	never := func() (*llm.Event, error) { select {} }
	first, next := &llm.Event{Type: llm.EventBlockDelta}, &llm.Event{Type: llm.EventBlockDelta}
	c := StartContest(NewPump(func() (*llm.Event, error) { return nil, io.EOF }), func() (Made[string], error) {
		return Made[string]{Attempt: "b", Leg: Leg{Splice: true}, First: []*llm.Event{first}, Next: func() (*llm.Event, error) { return next, nil }}, nil
	}, func(string) { t.Error("dropped a continuation made before the race was lost") })
	for _, want := range []*llm.Event{first, next} {
		if it := <-c.Hedge(); it.Ev != want || it.Err != nil {
			t.Fatalf("hedge read %+v, want %v", it, want)
		}
	}
	if b, leg, made := c.Continuation(); b != "b" || !leg.Splice || !made || !c.Leg().Splice {
		t.Fatalf("continuation %q %+v made %v", b, leg, made)
	}
	if b, made := c.Lose(func() {}); b != "b" || !made {
		t.Fatalf("Lose: %q, %v", b, made)
	}

	release := make(chan struct{})
	dropped := make(chan string, 1)
	late := StartContest(NewPump(func() (*llm.Event, error) { return nil, io.EOF }), func() (Made[string], error) {
		<-release
		return Made[string]{Attempt: "late", Next: never}, nil
	}, func(b string) { dropped <- b })
	if _, made := late.Lose(func() { close(release) }); made {
		t.Fatal("Lose says made before the attempt returned")
	}
	if b := <-dropped; b != "late" {
		t.Fatalf("dropped %q, want late", b)
	}
}
