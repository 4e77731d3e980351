package pipeline

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// TestChainOrder: stages see the call outermost first and the answer
// innermost first; a nil stage is skipped.
func TestChainOrder(t *testing.T) {
	var trail []string
	stage := func(name string) Stage {
		return func(next Handler) Handler {
			return HandlerFunc(func(ctx context.Context, c *Call) (*Answer, error) {
				trail = append(trail, "down "+name)
				a, err := next.Serve(ctx, c)
				trail = append(trail, "up "+name)
				return a, err
			})
		}
	}
	h := Chain(HandlerFunc(func(context.Context, *Call) (*Answer, error) {
		trail = append(trail, "core")
		return &Answer{Response: &llm.Response{}}, nil
	}), stage("a"), nil, stage("b"))
	if _, err := h.Serve(context.Background(), &Call{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"down a", "down b", "core", "up b", "up a"}
	if !slices.Equal(trail, want) {
		t.Fatalf("trail %v, want %v", trail, want)
	}
}

// fakeEvents is a stream below a wrapper: its events, whether it was
// closed and how often, and whether it says it is ready.
type fakeEvents struct {
	evs    []*llm.Event
	closed int
	ready  bool
}

func (f *fakeEvents) Next() (*llm.Event, error) {
	if len(f.evs) == 0 {
		return nil, io.EOF
	}
	ev := f.evs[0]
	f.evs = f.evs[1:]
	return ev, nil
}
func (f *fakeEvents) Close() error { f.closed++; return nil }
func (f *fakeEvents) Ready() bool  { return f.ready }

func deltas(ds ...string) []*llm.Event {
	var evs []*llm.Event
	for _, d := range ds {
		evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: d})
	}
	return evs
}

func drain(t *testing.T, ev Events) []string {
	t.Helper()
	var out []string
	for {
		e, err := ev.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e.Delta)
	}
}

func TestMapKeepsReadinessAndCloses(t *testing.T) {
	src := &fakeEvents{evs: deltas("a", "b"), ready: true}
	m := Map(src, func(ev *llm.Event) *llm.Event {
		cp := *ev
		cp.Delta += "!"
		return &cp
	})
	if !Ready(m) {
		t.Fatal("Map lost the readiness of its source")
	}
	if got := drain(t, m); !slices.Equal(got, []string{"a!", "b!"}) {
		t.Fatalf("got %v", got)
	}
	m.Close()
	if src.closed != 1 {
		t.Fatalf("source closed %d times, want 1", src.closed)
	}
}

// TestTransformHoldsAndReleases: a transform that holds a delta back until
// the next one releases both in order; held events make the stream not
// ready, queued ones ready.
func TestTransformHoldsAndReleases(t *testing.T) {
	src := &fakeEvents{evs: deltas("a", "b", "c"), ready: true}
	var held *llm.Event
	tr := Transform(src, func(ev *llm.Event, out []*llm.Event) []*llm.Event {
		if ev.Delta == "a" {
			held = ev
			return out
		}
		if held != nil {
			out = append(out, held)
			held = nil
		}
		return append(out, ev)
	})
	if Ready(tr) {
		t.Fatal("a transform with nothing queued says ready")
	}
	first, _ := tr.Next()
	if first.Delta != "a" || !Ready(tr) {
		t.Fatalf("first %q, ready %v; want a, and b queued", first.Delta, Ready(tr))
	}
	if got := drain(t, tr); !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("rest %v", got)
	}
}

// TestFinallyRunsOnce: f runs once, after the source is closed, whether
// the stream was read to its end or not; a second Close does nothing.
func TestFinallyRunsOnce(t *testing.T) {
	for _, read := range []bool{true, false} {
		src := &fakeEvents{evs: deltas("a")}
		n := 0
		f := Finally(src, func() {
			if src.closed != 1 {
				t.Errorf("f ran before the source was closed")
			}
			n++
		})
		if read {
			drain(t, f)
		}
		f.Close()
		f.Close()
		if n != 1 || src.closed != 1 {
			t.Fatalf("read %v: f ran %d times, source closed %d times; want 1 and 1", read, n, src.closed)
		}
		if _, err := f.Next(); err != io.EOF {
			t.Fatalf("Next after Close: %v, want io.EOF", err)
		}
	}
}

func TestSlice(t *testing.T) {
	s := Slice(deltas("x", "y"))
	if !Ready(s) {
		t.Fatal("a slice with events is ready")
	}
	if got := drain(t, s); !slices.Equal(got, []string{"x", "y"}) {
		t.Fatalf("got %v", got)
	}
	if Ready(s) {
		t.Fatal("an empty slice says ready")
	}
}
