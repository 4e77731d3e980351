package cache

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
)

// mapStore is a Store in a map.
type mapStore map[string]*Entry

func (m mapStore) Get(k string) (*Entry, bool)     { e, ok := m[k]; return e, ok }
func (m mapStore) Put(k string, e *Entry, _ int64) { m[k] = e }

var ep = &provider.Endpoint{ID: "a", Model: "m"}

func zeroTemp(stream bool) *llm.Request {
	t := 0.0
	return &llm.Request{Model: "m", Temperature: &t, Stream: stream,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hello"}}}}}
}

func answer() *llm.Response {
	return &llm.Response{StopReason: "end_turn", Content: []llm.Block{{Type: llm.BlockText, Text: "hi there"}}}
}

// events is a stream below the stage; closed says it was closed.
type events struct {
	evs    []*llm.Event
	closed bool
}

func (e *events) Next() (*llm.Event, error) {
	if len(e.evs) == 0 {
		return nil, io.EOF
	}
	ev := e.evs[0]
	e.evs = e.evs[1:]
	return ev, nil
}
func (e *events) Close() error { e.closed = true; return nil }

func streamed(complete bool) []*llm.Event {
	evs := []*llm.Event{
		{Type: llm.EventMessageStart, Message: &llm.Response{}},
		{Type: llm.EventBlockStart, Index: 0, Block: &llm.Block{Type: llm.BlockText}},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaText, Delta: "hi "},
		{Type: llm.EventBlockDelta, Index: 0, DeltaType: llm.DeltaText, Delta: "there"},
		{Type: llm.EventBlockStop, Index: 0},
	}
	if complete {
		evs = append(evs, &llm.Event{Type: llm.EventMessageDelta, StopReason: "end_turn"}, &llm.Event{Type: llm.EventMessageStop})
	}
	return evs
}

type harness struct {
	store    mapStore
	parts    []Part
	calls    int
	storable bool
	below    func(req *llm.Request) *pipeline.Answer
	h        pipeline.Handler
}

func newHarness(pol Policy) *harness {
	hs := &harness{store: mapStore{}, storable: true}
	hs.below = func(*llm.Request) *pipeline.Answer { return &pipeline.Answer{Response: answer(), Endpoint: ep} }
	stage := NewStage(hs.store, pol, Hooks{
		Record:   func(_ *pipeline.Call, p Part) { hs.parts = append(hs.parts, p) },
		Storable: func(*pipeline.Call) bool { return hs.storable },
		Replay: func(r *llm.Response) pipeline.Events {
			return &events{evs: []*llm.Event{{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: r.Text()}, {Type: llm.EventMessageStop}}}
		},
	})
	hs.h = stage(pipeline.HandlerFunc(func(_ context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		hs.calls++
		return hs.below(c.Request), nil
	}))
	return hs
}

func (hs *harness) serve(t *testing.T, req *llm.Request, header http.Header) *pipeline.Answer {
	t.Helper()
	ans, err := hs.h.Serve(context.Background(), &pipeline.Call{Request: req, Header: header})
	if err != nil {
		t.Fatal(err)
	}
	return ans
}

func (hs *harness) last() Part { return hs.parts[len(hs.parts)-1] }

// TestStageMissStoresThenHits: a miss goes below and stores the complete
// answer; the same request again is answered from the store (next not
// called, Replayed, the entry in the part); a stream asking the same gets
// it replayed as events.
func TestStageMissStoresThenHits(t *testing.T) {
	hs := newHarness(Policy{})
	hs.serve(t, zeroTemp(false), nil)
	if hs.calls != 1 || hs.last().Status != Miss || len(hs.store) != 1 {
		t.Fatalf("first: calls %d, part %+v, stored %d", hs.calls, hs.last(), len(hs.store))
	}
	ans := hs.serve(t, zeroTemp(false), nil)
	if hs.calls != 1 || !ans.Replayed || ans.Response.Text() != "hi there" || ans.Endpoint != ep || hs.last().Status != Hit || hs.last().Entry == nil {
		t.Fatalf("second: calls %d, answer %+v, part %+v", hs.calls, ans, hs.last())
	}
	st := hs.serve(t, zeroTemp(true), nil)
	if hs.calls != 1 || st.Events == nil || !st.Replayed {
		t.Fatalf("stream: calls %d, answer %+v", hs.calls, st)
	}
	if ev, _ := st.Events.Next(); ev.Delta != "hi there" {
		t.Fatalf("replayed %q", ev.Delta)
	}
}

// TestStageStoresAStreamAtItsEnd: a streamed answer is stored when its
// message_stop passes, before the stream is closed; an incomplete one
// is never stored; closing the stage's stream closes the one below.
func TestStageStoresAStreamAtItsEnd(t *testing.T) {
	for _, complete := range []bool{true, false} {
		hs := newHarness(Policy{})
		below := &events{evs: streamed(complete)}
		hs.below = func(*llm.Request) *pipeline.Answer { return &pipeline.Answer{Events: below, Endpoint: ep} }
		ans := hs.serve(t, zeroTemp(true), nil)
		for {
			ev, err := ans.Events.Next()
			if err == io.EOF {
				break
			}
			if ev.Type == llm.EventMessageStop && len(hs.store) != 1 {
				t.Fatal("message_stop passed and nothing was stored")
			}
		}
		if complete != (len(hs.store) == 1) {
			t.Fatalf("complete %v: stored %d", complete, len(hs.store))
		}
		ans.Events.Close()
		if !below.closed {
			t.Fatal("the stream below was left open")
		}
		if complete {
			for _, e := range hs.store {
				if e.Response.Text() != "hi there" || e.Response.StopReason != "end_turn" || e.Endpoint != ep {
					t.Fatalf("stored %+v", e)
				}
			}
		}
	}
}

// TestStageDecisions: what is read, written and recorded per request.
func TestStageDecisions(t *testing.T) {
	f := false
	for _, tc := range []struct {
		name     string
		req      func() *llm.Request
		header   http.Header
		behavior *pipeline.Behavior
		storable bool
		replayed bool
		status   string
		stored   bool
	}{
		{name: "sampled temperature", req: func() *llm.Request { r := zeroTemp(false); r.Temperature = nil; return r }, storable: true, status: Bypass},
		{name: "client says no", req: func() *llm.Request { return zeroTemp(false) }, behavior: &pipeline.Behavior{Cache: &f}, storable: true, status: Bypass},
		{name: "no-store", req: func() *llm.Request { return zeroTemp(false) }, header: http.Header{"Cache-Control": {"no-store"}}, storable: true, status: Bypass},
		{name: "no-cache stores", req: func() *llm.Request { return zeroTemp(false) }, header: http.Header{"Cache-Control": {"No-Cache"}}, storable: true, status: Bypass, stored: true},
		{name: "not storable", req: func() *llm.Request { return zeroTemp(false) }, status: Miss},
		{name: "replayed below", req: func() *llm.Request { return zeroTemp(false) }, storable: true, replayed: true, status: Miss},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hs := newHarness(Policy{})
			hs.storable = tc.storable
			hs.below = func(*llm.Request) *pipeline.Answer {
				return &pipeline.Answer{Response: answer(), Endpoint: ep, Replayed: tc.replayed}
			}
			if _, err := hs.h.Serve(context.Background(), &pipeline.Call{Request: tc.req(), Header: tc.header, Behavior: tc.behavior}); err != nil {
				t.Fatal(err)
			}
			if hs.calls != 1 || hs.last().Status != tc.status || (len(hs.store) == 1) != tc.stored {
				t.Fatalf("calls %d, part %+v, stored %d; want status %s, stored %v", hs.calls, hs.last(), len(hs.store), tc.status, tc.stored)
			}
		})
	}
}

// TestKeyIgnoresSpelling: the stream flag and how content was spelled do
// not change the key; the virtual key does unless shared.
func TestKeyIgnoresSpelling(t *testing.T) {
	a, b := zeroTemp(false), zeroTemp(true)
	b.Messages[0].ContentIsString = true
	ka, _ := Key(a, &pipeline.Call{}, Policy{})
	kb, _ := Key(b, &pipeline.Call{}, Policy{})
	if ka != kb {
		t.Fatal("stream flag or content spelling changed the key")
	}
	if !b.Messages[0].ContentIsString {
		t.Fatal("Key modified the request")
	}
	k1, _ := Key(a, &pipeline.Call{KeyID: "k1"}, Policy{})
	k2, _ := Key(a, &pipeline.Call{KeyID: "k2"}, Policy{})
	s1, _ := Key(a, &pipeline.Call{KeyID: "k1"}, Policy{SharedAcrossKeys: true})
	s2, _ := Key(a, &pipeline.Call{KeyID: "k2"}, Policy{SharedAcrossKeys: true})
	if k1 == k2 || s1 != s2 {
		t.Fatal("virtual keys: own spaces unless shared")
	}
}
