package attempt

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
)

// book books one attempt of x's primary pass, admitted by its breaker.
func book(t *testing.T, x *Exec) *Attempt {
	t.Helper()
	step := routePolicy(func(_ context.Context, x *Exec, t *try) (*Attempt, error) { return t.booked, x.Admit(t) })
	a, err := step(context.Background(), x, &try{req: x.req})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Settling an attempt decides on its typed failure kind: what the call
// keeps (its last failure, the record's fallback reason, a model's
// capacity refusals), whether the fleet marks the endpoint down, and the
// attempt event; an attempt is settled once.
func TestSettle(t *testing.T) {
	for _, c := range []struct {
		name string
		f    *policy.Failure
		// outcome is the record's and the event's; fallback the record's
		// reason; last whether the call keeps f; overloaded the model's
		// capacity refusals; down whether the endpoint was marked down.
		outcome, fallback string
		last              bool
		overloaded        int
		down              bool
	}{
		{name: "success", outcome: "ok"},
		{name: "capacity", f: &policy.Failure{Kind: policy.KindOverloaded, Reason: "overloaded", Decision: policy.DecideRetry, Capacity: true, Err: errors.New("529")},
			outcome: "overloaded", fallback: "overloaded", last: true, overloaded: 1},
		{name: "caller left", f: &policy.Failure{Kind: policy.KindCanceled, Reason: "canceled", Err: context.Canceled}, outcome: "canceled"},
		{name: "lost a race", f: &policy.Failure{Kind: policy.KindCancelledLoser, Reason: "cancelled_loser", Capacity: true, Err: context.Canceled},
			outcome: "cancelled_loser"},
		{name: "unreachable", f: &policy.Failure{Kind: policy.KindConnect, Reason: "connect_error", Decision: policy.DecideRetry, Unreachable: true, Err: errors.New("refused")},
			outcome: "connect_error", fallback: "connect_error", last: true, down: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var down []*fleet.Endpoint
			o := &observed{}
			r := testRunner(t, nil, Deps{MarkDown: func(ep *fleet.Endpoint) { down = append(down, ep) }}, o)
			x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(false))
			a := book(t, x)
			a.end = a.start.Add(time.Second)
			a.err = c.f
			a.settle(c.f)
			a.settle(nil) // once only
			a.cancel()
			if got := rec.Attempts[0].Outcome; got != c.outcome || rec.Fallback != c.fallback {
				t.Errorf("record: outcome %q, fallback %q, want %q, %q", got, rec.Fallback, c.outcome, c.fallback)
			}
			if (x.lastErr != nil) != c.last || x.picks.Overloaded["m"] != c.overloaded || (len(down) == 1) != c.down {
				t.Errorf("the call kept last %v, overloaded %d, down %d; want %v, %d, %v", x.lastErr, x.picks.Overloaded["m"], len(down), c.last, c.overloaded, c.down)
			}
			if len(o.attempts) != 1 || o.attempts[0].Outcome != c.outcome || o.attempts[0].Duration != time.Second || o.attempts[0].Kind != "primary" {
				t.Errorf("attempt events %+v, want one %q of 1s", o.attempts, c.outcome)
			}
		})
	}
}

// A sealed record takes no more outcomes: an attempt that ends after the
// call was handed to the observers still feeds health, not the record.
func TestSettleAfterSeal(t *testing.T) {
	o := &observed{}
	r := testRunner(t, nil, Deps{}, o)
	x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a")...), ask(false))
	a := book(t, x)
	x.Seal()
	a.end = a.start
	a.settle(&policy.Failure{Kind: policy.KindReset, Reason: "connection_reset", Decision: policy.DecideRetry, Err: errors.New("reset")})
	a.cancel()
	if got := rec.Attempts[0]; got.Outcome != "" || rec.Fallback != "" {
		t.Errorf("the sealed record took outcome %q, fallback %q", got.Outcome, rec.Fallback)
	}
	if len(o.attempts) != 1 {
		t.Errorf("%d attempt events, want 1", len(o.attempts))
	}
}

var errTestDeadline = errors.New("test deadline")

// ClientError: the call's deadline is a 504, the caller's leaving a 499,
// anything else the policies' verdict (policy.ClientError).
func TestClientError(t *testing.T) {
	exhausted := &policy.MeshError{Code: llm.MeshFallbackExhausted, Why: "every attempt failed"}
	for _, c := range []struct {
		name   string
		cause  error // the context's, nil: live
		status int
		code   string
	}{
		{name: "deadline", cause: errTestDeadline, status: http.StatusGatewayTimeout, code: llm.MeshTimeout},
		{name: "caller left", cause: context.Canceled, status: 499, code: llm.MeshTimeout},
		{name: "verdict", status: policy.ClientError(exhausted, 0).Status, code: llm.MeshFallbackExhausted},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := testRunner(t, nil, Deps{Deadline: errTestDeadline}, nil)
			x, _ := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a")...), ask(false))
			ctx, cancel := context.WithCancelCause(context.Background())
			if c.cause != nil {
				cancel(c.cause)
			}
			defer cancel(nil)
			ae := x.ClientError(ctx, exhausted)
			if ae.Status != c.status || ae.MeshCode != c.code {
				t.Errorf("got %d %s (%s), want %d %s", ae.Status, ae.MeshCode, ae.Message, c.status, c.code)
			}
		})
	}
}

// The hedge policy's hooks through the whole chain (synctest): the
// primary attempt's endpoint is slow, a hedge goes to the other one after
// the hedge delay and wins; the slow attempt is cancelled and recorded
// the loser, the hedge the winner, and the observers hear of the hedge.
func TestHedgeWinsThroughTheChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := upstreams{
			"a": {id: "a", text: "slow", delay: func(int) time.Duration { return time.Second }},
			"b": {id: "b", text: "fast"},
		}
		o := &observed{}
		r := testRunner(t, us, Deps{Hedge: resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: 50 * time.Millisecond}}, o)
		x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(false))
		start := time.Now()
		a, err := run(x)
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		a.Succeeded()
		synctest.Wait()
		x.Seal()
		if a.Endpoint().ID != "m/b/p" || a.Result().Response.Text() != "fast" || took != 50*time.Millisecond {
			t.Errorf("served by %s (%q) after %v, want m/b/p (\"fast\") after 50ms", a.Endpoint().ID, a.Result().Response.Text(), took)
		}
		if want := []string{"m/a/p primary cancelled_loser", "m/b/p hedge ok"}; !slices.Equal(kinds(rec), want) || rec.Hedges != 1 || !rec.HedgeWon ||
			!rec.Attempts[1].Winner || rec.Attempts[0].Winner {
			t.Errorf("record %q, hedges %d, won %v, want %q, 1, true", kinds(rec), rec.Hedges, rec.HedgeWon, want)
		}
		if len(o.hedges) != 1 || o.hedges[0].Endpoint != "m/a/p" || o.hedges[0].HedgeEndpoint != "m/b/p" || !o.hedges[0].Won || o.hedges[0].Delay != 50*time.Millisecond {
			t.Errorf("hedge events %+v, want a's hedge on b, won after 50ms", o.hedges)
		}
		if us["a"].count() != 1 || us["b"].count() != 1 {
			t.Errorf("upstream calls a %d, b %d, want 1 each", us["a"].count(), us["b"].count())
		}
	})
}

// A failed attempt (a 500: work done and lost, not a refusal) is retried
// on another endpoint through the chain, drawing a retry of work: the
// record keeps both, the failure's reason is the call's fallback reason.
func TestRetryElsewhereThroughTheChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := upstreams{"a": {id: "a", status: http.StatusInternalServerError}, "b": {id: "b", text: "fine"}}
		r := testRunner(t, us, Deps{HedgingOff: hedgingOff()}, nil)
		x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(false))
		a, err := run(x)
		if err != nil {
			t.Fatal(err)
		}
		a.Succeeded()
		x.Seal()
		if want := []string{"m/a/p primary status_500", "m/b/p retry ok"}; !slices.Equal(kinds(rec), want) || rec.Fallback != "status_500" || x.Retries().Count() != 1 {
			t.Errorf("record %q, fallback %q, retries %d, want %q, one retry", kinds(rec), rec.Fallback, x.Retries().Count(), want)
		}
	})
}

// hedgingOff is a switch with hedging off.
func hedgingOff() *atomic.Bool {
	var b atomic.Bool
	b.Store(true)
	return &b
}
