package attempt

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
)

// stream is an upstream stream that has ended; closed counts its closes.
type stream struct{ closed int }

func (s *stream) Next() (*llm.Event, error) { return nil, io.EOF }
func (s *stream) Close() error              { s.closed++; return nil }

// streamLegs is a relay's legs over one booked streaming attempt of x.
func streamLegs(t *testing.T, ctx context.Context, x *Exec) (*legs, *stream) {
	t.Helper()
	a := book(t, x)
	s := &stream{}
	a.res = &provider.Result{Stream: s}
	return &legs{ctx: ctx, x: x, cur: a}, s
}

// Stop decides from the failure's typed kind and the call's switches
// whether the answer may be continued: never after the caller left, nor
// after a failure that is not retryable, nor with recovery off or on the
// safety valve's plain path. It settles and closes the leg either way.
func TestLegsStop(t *testing.T) {
	reset := &provider.Error{Kind: provider.KindReset, Endpoint: "m/a/p", Err: io.ErrUnexpectedEOF}
	badRequest := &provider.Error{Kind: provider.KindStatus, Endpoint: "m/a/p",
		API: &llm.APIError{Status: 400, Type: llm.ErrInvalidRequest, Message: "bad"}}
	for _, c := range []struct {
		name     string
		cause    error
		recovery bool // off
		legacy   bool
		gone     bool // the caller's context ended
		// why is in the client's error; "" when the answer may continue.
		reason, why string
	}{
		{name: "continues", cause: reset, reason: "connection_reset"},
		{name: "not retryable", cause: badRequest, reason: "status_400", why: "not retryable"},
		{name: "recovery off", cause: reset, recovery: true, reason: "connection_reset", why: "recovery is off"},
		{name: "plain path", cause: reset, legacy: true, reason: "connection_reset", why: "recovery is off"},
		{name: "caller left", cause: reset, gone: true, reason: "connection_reset", why: "cancelled or past its deadline"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var recoveryOff atomic.Bool
			recoveryOff.Store(c.recovery)
			r := testRunner(t, nil, Deps{RecoveryOff: &recoveryOff, HedgingOff: new(atomic.Bool)}, nil)
			x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(true))
			x.Legacy = c.legacy
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if c.gone {
				cancel()
			}
			l, s := streamLegs(t, ctx, x)
			reason, ae := l.Stop(c.cause, llm.Usage{OutputTokens: 2})
			if reason != rec.Attempts[0].Outcome || s.closed != 1 || rec.Attempts[0].OutputTokens != 2 {
				t.Errorf("reason %q, outcome %q, closes %d, output tokens %d; want the reason recorded, one close, 2 tokens", reason, rec.Attempts[0].Outcome, s.closed, rec.Attempts[0].OutputTokens)
			}
			if !strings.HasPrefix(reason, c.reason) {
				t.Errorf("reason %q, want %q", reason, c.reason)
			}
			switch {
			case c.why == "" && ae != nil:
				t.Errorf("error %v, want the answer continued", ae)
			case c.why != "" && (ae == nil || !strings.Contains(ae.Message, c.why)):
				t.Errorf("error %v, want one saying %q", ae, c.why)
			}
		})
	}
}

// SlowGap judges a leg slow only where the call may hedge, slow-stream
// hedging is on and its endpoint's pace is known.
func TestSlowGap(t *testing.T) {
	for _, c := range []struct {
		name    string
		d       Deps
		one     bool // a one-endpoint route
		legacy  bool
		unpaced bool
		judged  bool
	}{
		{name: "judged", judged: true},
		{name: "slow-stream hedging off", d: Deps{SlowStreamOff: true}},
		{name: "hedging off", d: Deps{HedgingOff: hedgingOff(), RecoveryOff: new(atomic.Bool)}},
		{name: "one endpoint", one: true},
		{name: "plain path", legacy: true},
		{name: "pace unknown", unpaced: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := testRunner(t, nil, c.d, nil)
			eps := endpoints(t, "a", "b")
			if c.one {
				eps = eps[:1]
			}
			x, _ := newCall(r, testRoute(t, route.Ordered, eps...), ask(true))
			x.Legacy = c.legacy
			l, _ := streamLegs(t, context.Background(), x)
			defer l.cur.discard()
			if !c.unpaced {
				for range 50 {
					l.Paced(10 * time.Millisecond)
				}
			}
			want := time.Duration(0)
			if c.judged {
				want = health.PacePolicy{}.SlowGap(l.cur.ep.Pace.Gap())
			}
			if got := l.SlowGap(); got != want || c.judged && got == 0 {
				t.Errorf("SlowGap %v, want %v", got, want)
			}
		})
	}
}

// streamed is the call a Relay tells how its stream ended.
type streamed struct {
	served *fleet.Endpoint
	err    *llm.APIError
	ended  int
}

func (s *streamed) Reasked() *fleet.Endpoint { return nil }
func (s *streamed) Ended(served *fleet.Endpoint, ae *llm.APIError) {
	s.served, s.err = served, ae
	s.ended++
}

// read reads the relay to its end: the text the client got, and whether
// the message ended.
func read(t *testing.T, r *Relay) (string, bool) {
	t.Helper()
	var b strings.Builder
	stopped := false
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return b.String(), stopped
		}
		if err != nil {
			t.Fatalf("relay: %v", err)
		}
		switch ev.Type {
		case llm.EventBlockDelta:
			b.WriteString(ev.Delta)
		case llm.EventMessageStop:
			stopped = true
		case llm.EventError:
			t.Fatalf("error event: %v", ev.Err)
		}
	}
}

// A stream cut mid-way is continued through the chain on another
// endpoint (the one that failed avoided): the client gets the whole
// answer once, the record both attempts, a recovery, and the call is
// told the continuation served it.
func TestRelayContinuesElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := upstreams{
			"a": {id: "a", words: []string{"Once ", "upon "}, cut: true},
			"b": {id: "b", words: []string{"a ", "time."}},
		}
		r := testRunner(t, us, Deps{HedgingOff: hedgingOff(), RecoveryOff: new(atomic.Bool)}, nil)
		x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(true))
		ctx, cancel := context.WithCancel(context.Background())
		a, err := x.Run(ctx, x.req, policy.AttemptPrimary)
		if err != nil {
			t.Fatal(err)
		}
		c := &streamed{}
		rel := NewRelay(ctx, cancel, c, a)
		text, stopped := read(t, rel)
		rel.Close()
		rel.Close() // once only
		if text != "Once upon a time." || !stopped {
			t.Errorf("client got %q (stopped %v), want \"Once upon a time.\" ended", text, stopped)
		}
		if want := []string{"m/a/p primary connection_reset", "m/b/p continuation ok"}; !slices.Equal(kinds(rec), want) || rec.Recovered != 1 {
			t.Errorf("record %q, recovered %d, want %q, 1", kinds(rec), rec.Recovered, want)
		}
		if c.ended != 1 || c.err != nil || c.served == nil || c.served.ID != "m/b/p" || rel.Served().ID != "m/b/p" {
			t.Errorf("ended %d times, served by %v, error %v; want once, m/b/p, none", c.ended, c.served, c.err)
		}
		if us["a"].count() != 1 || us["b"].count() != 1 {
			t.Errorf("upstream calls a %d, b %d, want 1 each", us["a"].count(), us["b"].count())
		}
	})
}

// With recovery off the cut stream ends with the wire's error for the
// client, and the call is told it failed.
func TestRelayRecoveryOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		us := upstreams{"a": {id: "a", words: []string{"Once "}, cut: true}, "b": {id: "b", words: []string{"never"}}}
		var recoveryOff atomic.Bool
		recoveryOff.Store(true)
		r := testRunner(t, us, Deps{HedgingOff: hedgingOff(), RecoveryOff: &recoveryOff}, nil)
		x, rec := newCall(r, testRoute(t, route.Ordered, endpoints(t, "a", "b")...), ask(true))
		ctx, cancel := context.WithCancel(context.Background())
		a, err := x.Run(ctx, x.req, policy.AttemptPrimary)
		if err != nil {
			t.Fatal(err)
		}
		c := &streamed{}
		rel := NewRelay(ctx, cancel, c, a)
		var last *llm.Event
		for {
			ev, err := rel.Next()
			if err != nil {
				break
			}
			last = ev
		}
		rel.Close()
		if last == nil || last.Type != llm.EventError || c.err == nil || c.served != nil || us["b"].count() != 0 || len(rec.Attempts) != 1 {
			t.Errorf("last event %+v, call error %v, served %v, b called %d, %d attempts; want an error event, the call failed, b never called",
				last, c.err, c.served, us["b"].count(), len(rec.Attempts))
		}
	})
}

// A slow-stream race books a hedge only when the call keeps an attempt
// for a recovery after it and the hedge gates (BookHedge's, with the
// route's race budget in place of its hedge budget) pass; refused, the
// slow leg goes on alone and nothing is recorded. (That a spent hedge
// budget does not stop a race: the engine's
// TestSlowStreamRacesKeepTheirOwnBudget.)
func TestRaceGates(t *testing.T) {
	for _, c := range []struct {
		name  string
		setup func(x *Exec, rt Route)
	}{
		{name: "the last attempt is a recovery's", setup: func(x *Exec, _ Route) { x.attempts = 3 }},
		{name: "race budget spent", setup: func(x *Exec, rt Route) {
			for x.r.d.Races.TryWithdraw(rt.Key) {
			}
		}},
		{name: "no race budget", setup: func(x *Exec, _ Route) { x.r.d.Races = nil }},
		{name: "call ended", setup: func(x *Exec, _ Route) { x.Seal() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			races, err := rl.NewRaceBudgets(resilience.BudgetConfig{})
			if err != nil {
				t.Fatal(err)
			}
			r := testRunner(t, nil, Deps{Races: races}, nil)
			rt := testRoute(t, route.Ordered, endpoints(t, "a", "b")...)
			x, rec := newCall(r, rt, ask(true))
			l, _ := streamLegs(t, context.Background(), x)
			defer l.cur.discard()
			c.setup(x, rt)
			if race := l.Race(rl.Cut{Delivered: "Once ", Output: 1}); race != nil || rec.Hedges != 0 || len(rec.Attempts) != 1 || l.pump != nil {
				t.Errorf("race %v, %d hedges, %d attempts, pump %v; want no race and nothing recorded", race, rec.Hedges, len(rec.Attempts), l.pump)
			}
		})
	}
}
