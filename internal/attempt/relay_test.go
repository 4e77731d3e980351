package attempt

import (
	"context"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
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
