package attempt

import (
	"context"
	"net/http"

	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/wire"
)

// Relay is a streamed call's innermost Events: the stream relay
// (internal/relay) over the call's attempts (legs). Close settles the last
// attempt, completes the record's stream fields and tells the call how
// the stream ended; it does not finish the call (the engine's finish does,
// once the outermost stream is closed). A Relay is used by one goroutine.
type Relay struct {
	r      rl.Relay
	legs   legs
	c      Streamed
	cancel context.CancelFunc
	closed bool
}

// Streamed is the call a Relay streams for: the endpoint credited with a
// re-asked answer, and where the stream's end is told.
type Streamed interface {
	// Reasked is the endpoint whose re-asked answer replaced the first
	// (the structured stage's strict streams); nil when none did.
	Reasked() *fleet.Endpoint
	// Ended says how the stream ended: the endpoint credited with the
	// answer (nil when it failed) and the client's error (nil when it
	// completed).
	Ended(served *fleet.Endpoint, ae *llm.APIError)
}

// NewRelay relays the answer of the winning attempt a of c; cancel is the
// call's deadline's.
func NewRelay(ctx context.Context, cancel context.CancelFunc, c Streamed, a *Attempt) *Relay {
	s := &Relay{legs: legs{ctx: ctx, x: a.x, cur: a, buf: a.first}, c: c, cancel: cancel}
	s.r.Init(&s.legs, a.x)
	a.x.r.d.Races.OnStream(a.x.route.Key)
	return s
}

// Tool reports that the current leg forced the output tool (its call is
// folded back into text).
func (s *Relay) Tool() bool { return s.legs.cur.tool }

// Next returns the next event for the client; io.EOF after its end.
func (s *Relay) Next() (*llm.Event, error) { return s.r.Next() }

// Ready reports whether Next returns without waiting on an upstream.
func (s *Relay) Ready() bool { return s.r.Ready() }

// Served is the endpoint serving the stream now.
func (s *Relay) Served() *provider.Endpoint { return s.served().Endpoint }

// served is the endpoint credited with the answer: the one whose re-asked
// answer replaced the first (the structured stage's strict streams), else
// the current.
func (s *Relay) served() *fleet.Endpoint {
	if ep := s.c.Reasked(); ep != nil {
		return ep
	}
	return s.legs.cur.ep
}

// Close ends the stream, cancels the upstream, settles the attempt and
// completes the record's stream fields; it tells end how the stream ended.
func (s *Relay) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.r.Close()
	cur, x := s.legs.cur, s.legs.x
	cur.cancel()
	if p := s.legs.pump; p != nil {
		p.End(cur.cancel)
	}
	if cur.res != nil && cur.res.Stream != nil {
		cur.res.Stream.Close()
	}
	s.cancel()
	x.Seal()
	rec := x.rec
	if u, ok := s.r.Usage(); ok {
		rec.Usage = u
	}
	rec.TTFT = cur.ttft
	failed, endErr := s.r.Failed()
	if !failed {
		// The answer as the client received it, for the request log.
		rec.Response = s.r.Received()
	}
	switch {
	case failed:
		s.c.Ended(nil, endErr)
	case !s.r.Finished():
		s.c.Ended(s.served(), &llm.APIError{Status: 499, Type: llm.ErrAPI, Message: "client closed the stream"})
	default:
		s.c.Ended(s.served(), nil)
	}
	return nil
}

// legs is the attempt side of a relayed stream (relay.Upstream): the
// current attempt, settled and costed as the relay says, and
// continuations through the call's attempt chain.
type legs struct {
	ctx context.Context
	x   *Exec
	cur *Attempt
	buf []*llm.Event
	// lent is the event the client got last unchanged and lentFrom the
	// upstream stream it came from: once the client is done with it, the
	// upstream's reader may reuse it (wire.Recycler).
	lent     *llm.Event
	lentFrom provider.Stream
	// pump, when set, reads cur (since a slow-stream race: slowstream.go).
	pump *rl.Pump
}

func (l *legs) Next() (*llm.Event, error) {
	if l.pump != nil {
		return l.pump.Next()
	}
	if len(l.buf) > 0 {
		ev := l.buf[0]
		l.buf = l.buf[1:]
		return ev, nil
	}
	return l.cur.res.Stream.Next()
}

func (l *legs) Ready() bool {
	if l.pump != nil {
		return l.pump.Ready()
	}
	if len(l.buf) > 0 {
		return true
	}
	p, ok := l.cur.res.Stream.(wire.Pending)
	return ok && p.Pending()
}

func (l *legs) EndpointID() string { return l.cur.ep.ID }

func (l *legs) Lend(ev *llm.Event) {
	if l.pump != nil {
		return // its reader runs on the pump's goroutine: no recycling
	}
	l.lent, l.lentFrom = ev, l.cur.res.Stream
}

func (l *legs) Recycle() {
	if l.lent != nil {
		if r, ok := l.lentFrom.(wire.Recycler); ok {
			r.Recycle(l.lent)
		}
		l.lent, l.lentFrom = nil, nil
	}
}

func (l *legs) Diverged(u llm.Usage, err error) {
	l.cur.end = l.x.r.d.Now()
	l.cost(u)
	l.cur.settle(policy.Diverged(err))
}

func (l *legs) End(u llm.Usage, finished bool) {
	x := l.x
	l.cur.end = x.r.d.Now()
	l.cost(u)
	if finished {
		l.cur.settle(nil)
		return
	}
	// The client left before the end: not the endpoint's fault.
	x.mu.Lock()
	r := &x.rec.Attempts[l.cur.recIdx]
	r.End, r.Outcome = l.cur.end, "client_gone"
	x.mu.Unlock()
	if l.pump != nil {
		l.pump.End(l.cur.cancel)
	}
	l.cur.discard()
}

// Stop settles the current attempt after cause and names the failure;
// its error says why the answer cannot be continued (the caller left or
// the deadline passed, the failure is not retryable, recovery is off).
func (l *legs) Stop(cause error, u llm.Usage) (string, *llm.APIError) {
	x := l.x
	f := policy.Classify(cause)
	l.cur.end = x.r.d.Now()
	l.cost(u)
	l.cur.settle(f)
	l.cur.cancel()
	if l.pump != nil {
		l.pump.End(l.cur.cancel)
	}
	l.cur.res.Stream.Close()
	switch {
	case l.ctx.Err() != nil:
		return f.Reason, &llm.APIError{Status: http.StatusOK, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout, Message: "stream cancelled or past its deadline"}
	case f.Decision == policy.DecideFail:
		return f.Reason, rl.CannotContinue(f.Reason, "the failure is not retryable")
	case off(x.r.d.RecoveryOff) || x.Legacy:
		return f.Reason, rl.CannotContinue(f.Reason, "mid-stream recovery is off")
	}
	return f.Reason, nil
}

// Continue continues the answer from cut on another endpoint (the relay
// took the retry). The endpoint that failed the stream is not used again
// while another exists. Each endpoint gets the continuation its kind
// allows (relay.ContinueRequest); one that cannot continue is re-asked for the
// whole answer, which is spliced on only if it starts with exactly the
// text the client has.
func (l *legs) Continue(cut rl.Cut) (rl.Leg, *llm.APIError) {
	x := l.x
	x.mu.Lock()
	x.picks.Avoid[l.cur.idx] = true
	clear(x.picks.Tried)
	x.mu.Unlock()
	delivered := cut.Delivered
	a, err := x.runTry(l.ctx, &try{req: x.req, pass: policy.Pass{Kind: policy.AttemptContinuation}, cont: &delivered, contOut: cut.Output})
	if err != nil {
		return rl.Leg{}, x.ClientError(l.ctx, err)
	}
	x.rec.Recovered++
	l.cur, l.buf, l.pump = a, a.first, nil
	x.cacheContinued(a)
	leg := rl.Leg{Splice: a.splice}
	if n := len(a.req.Messages); !a.splice && n > 0 && a.req.Messages[n-1].Role == llm.RoleAssistant {
		leg.Echo = a.req.Messages[n-1].Text()
	}
	return leg, nil
}

// cost writes the current attempt's own usage and its cost into its
// record, once.
func (l *legs) cost(u llm.Usage) { l.costOf(l.cur, u) }

// costOf writes a's own usage u and its cost into its record.
func (l *legs) costOf(a *Attempt, u llm.Usage) {
	x := l.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sealed || u.PromptTokens()+u.OutputTokens == 0 {
		return
	}
	r := &x.rec.Attempts[a.recIdx]
	r.InputTokens, r.OutputTokens = u.PromptTokens(), u.OutputTokens
	r.Cost = x.r.Cost(a.ep, u)
}
