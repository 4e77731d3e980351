package attempt

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/route"
)

// TestHedgeAfterTheCallEndedBooksNothing: a hedge whose timer fired as the
// call ended reached the route policy after the record was sealed and
// appended an attempt while the observers read it (a data race the CI's
// -race run found in cmd/keel). A sealed call books no attempt.
func TestHedgeAfterTheCallEndedBooksNothing(t *testing.T) {
	r := testRunner(t, nil, Deps{}, nil)
	x, rec := newCall(r, testRoute(t, route.LatencyOptimal, endpoints(t, "r0", "r1", "r2")...), ask(false))
	x.Seal()
	sent := false
	step := routePolicy(func(context.Context, *Exec, *try) (*Attempt, error) {
		sent = true
		return nil, errors.New("not reached")
	})
	a, err := step(context.Background(), x, &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptHedge}})
	if a != nil || !errors.Is(err, errSealed) || sent {
		t.Errorf("after the seal: attempt %v, error %v, sent %v; want none, errSealed, not sent", a, err, sent)
	}
	if len(rec.Attempts) != 0 || x.attempts != 0 {
		t.Errorf("the sealed record took %d attempts (exec counted %d)", len(rec.Attempts), x.attempts)
	}
}

// The route policy books each pass's attempt on the endpoint the picks
// chose: an ordered route's first untried endpoint, recorded with its
// kind and the wait before it (reset once booked), counted once the
// breaker admits it; past the call's attempt cap it books nothing.
func TestRoutePolicyBooksInOrder(t *testing.T) {
	r := testRunner(t, nil, Deps{MaxAttempts: 3}, nil)
	x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b", "c")...), ask(false))
	step := routePolicy(func(_ context.Context, x *Exec, t *try) (*Attempt, error) {
		if err := x.Admit(t); err != nil {
			return nil, err
		}
		return t.booked, nil
	})
	ctx := context.Background()
	for i, want := range []string{"m/a/p", "m/b/p", "m/c/p"} {
		tr := &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptRetry, Wait: time.Duration(i) * time.Millisecond}}
		a, err := step(ctx, x, tr)
		if err != nil {
			t.Fatalf("booking %d: %v", i, err)
		}
		defer a.discard()
		if a.Endpoint().ID != want || a.Index() != i || tr.pass.Wait != 0 {
			t.Errorf("booking %d: %s at %d (wait left %v), want %s at %d", i, a.Endpoint().ID, a.Index(), tr.pass.Wait, want, i)
		}
		if got := rec.Attempts[i]; got.Endpoint != want || got.Kind != "retry" || got.Wait != time.Duration(i)*time.Millisecond {
			t.Errorf("record %d: %+v", i, got)
		}
		if x.Attempts() != i+1 {
			t.Errorf("after booking %d: %d attempts counted", i, x.Attempts())
		}
	}
	_, err := step(ctx, x, &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptRetry, AllowTried: true}})
	var nc *policy.NoCandidate
	if !errors.As(err, &nc) || !nc.Exhausted || len(rec.Attempts) != 3 {
		t.Fatalf("past the cap: %v (%d attempts recorded), want an exhausted NoCandidate", err, len(rec.Attempts))
	}
	var me *policy.MeshError
	if !errors.As(x.NoCandidate(nc), &me) || me.Code != llm.MeshFallbackExhausted || me.Attempts != 3 {
		t.Errorf("the call's error: %v, want %s after 3 attempts", x.NoCandidate(nc), llm.MeshFallbackExhausted)
	}
}

// Every endpoint tried (and tried ones not allowed): the pass finds no
// candidate, not exhausted; a route whose every endpoint the call's
// constraints filter out is the client's 400 before any attempt.
func TestRoutePolicyNoCandidate(t *testing.T) {
	r := testRunner(t, nil, Deps{}, nil)
	x, _ := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a")...), ask(false))
	step := routePolicy(func(_ context.Context, x *Exec, t *try) (*Attempt, error) { return t.booked, x.Admit(t) })
	ctx := context.Background()
	a, err := step(ctx, x, &try{req: x.req})
	if err != nil {
		t.Fatal(err)
	}
	defer a.discard()
	_, err = step(ctx, x, &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptRetry}})
	var nc *policy.NoCandidate
	if !errors.As(err, &nc) || nc.Exhausted || nc.Err == nil {
		t.Fatalf("all tried: %v, want a NoCandidate naming why", err)
	}

	y, _ := newCall(r, testRoute(t, route.Ordered, endpoints(t, "b")...), ask(false))
	y.Policy.MinCapability = 5 // the endpoints are capability 3
	_, err = step(ctx, y, &try{req: y.req})
	if !errors.As(err, &nc) || !nc.Filtered {
		t.Fatalf("filtered: %v, want a filtered NoCandidate", err)
	}
	var ae *llm.APIError
	if !errors.As(y.NoCandidate(nc), &ae) || ae.Status != http.StatusBadRequest || ae.MeshCode != llm.MeshBadRequest {
		t.Errorf("filtered before any attempt: %v, want 400 %s", y.NoCandidate(nc), llm.MeshBadRequest)
	}
}

// PinFirst starts each call of a fan-out on the first endpoint no earlier
// one started on, and the booking honours the pin once.
func TestPinFirst(t *testing.T) {
	r := testRunner(t, nil, Deps{}, nil)
	x, _ := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b", "c")...), ask(false))
	step := routePolicy(func(_ context.Context, x *Exec, t *try) (*Attempt, error) { return t.booked, x.Admit(t) })
	used := make([]bool, x.Width())
	var got []string
	for range 3 {
		rx := x.Fork(x.req)
		rx.Policy = x.Policy
		rx.PinFirst(used)
		a, err := step(context.Background(), rx, &try{req: rx.req})
		if err != nil {
			t.Fatal(err)
		}
		defer a.discard()
		got = append(got, a.Endpoint().ID)
	}
	if want := []string{"m/a/p", "m/b/p", "m/c/p"}; !slices.Equal(got, want) || !slices.Equal(used, []bool{true, true, true}) {
		t.Errorf("replicas started on %v (used %v), want %v", got, used, want)
	}
}

// BookHedge reserves a hedge only with room in the call's attempts, an
// endpoint available, a token of the route's hedge budget and a call not
// ended; a booked hedge is counted on the record.
func TestBookHedge(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, x *Exec, rt Route)
		want  bool
	}{
		{name: "booked", want: true},
		{name: "attempt cap", setup: func(_ *testing.T, x *Exec, _ Route) { x.attempts = 4 }},
		{name: "call ended", setup: func(_ *testing.T, x *Exec, _ Route) { x.Seal() }},
		{name: "hedge budget spent", setup: func(_ *testing.T, _ *Exec, rt Route) {
			for rt.Hedges.TryWithdraw() {
			}
		}},
		{name: "no endpoint available", setup: func(_ *testing.T, _ *Exec, rt Route) {
			for _, ep := range rt.Cands {
				ep.MarkDown()
				ep.Publish()
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := testRunner(t, nil, Deps{}, nil)
			rt := testRoute(t, route.Ordered, endpoints(t, "a", "b")...)
			x, rec := newCall(r, rt, ask(false))
			if c.setup != nil {
				c.setup(t, x, rt)
			}
			if got := x.BookHedge(); got != c.want || rec.Hedges != map[bool]int{true: 1}[c.want] {
				t.Errorf("BookHedge = %v with %d hedges recorded, want %v", got, rec.Hedges, c.want)
			}
		})
	}
}
