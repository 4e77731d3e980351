package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/cacheroute"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/outcome"
	"github.com/keelmesh/keel/internal/pick"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/route"
)

// exec is one client call's attempts: which endpoints were tried, the
// failures seen, the record they are written into. The call's goroutine
// runs the policy chain; hedge goroutines book their attempts through mu.
// The policies keep their own state (policy.RetryState, policy.Retries, a
// policy.Hedger per hedged pass, the route policy's picks) and see the
// call only through the interfaces they declare (policy.RetryCall,
// HedgeCall, FallbackCall, BreakerCall), which exec implements here and
// in hedge.go.
type exec struct {
	e      *Engine
	rs     *routeState
	req    *llm.Request
	call   Call
	rec    *Record
	policy route.Policy

	// legacy is the safety valve's pass-through: the route's primary
	// model only, no hedge, no continuation.
	legacy bool
	// shadow marks a shadow call: one attempt, never retried, failed over
	// or hedged (shadow.go).
	shadow bool
	// side, when set, is the Side call whose attempt replaces the model
	// call (side.go).
	side *Side
	// spec, when set, is the schema sent upstream with each attempt
	// (askSchema): one the client named outside its wire format, or
	// implied by its system prompt.
	spec *outputSpec

	// retry is the retry policy's state; retries the call's retries of
	// work (the route's retry budget), shared with continuations and
	// re-asks. Each guards itself.
	retry   policy.RetryState
	retries policy.Retries

	mu       sync.Mutex // guards following (and rec.Attempts while hedges run)
	attempts int
	lastErr  error
	// sealed is set when the record is handed to observers: attempts
	// still finishing (drained losers) no longer write into it.
	sealed bool
	// picks is the route policy's state.
	picks pick.State

	// cache is the call's part in cache-aware routing (cacheroute.go).
	cache cacheroute.Call
}

// try is one pass through the policy chain: what to send and how.
type try struct {
	req *llm.Request
	// pass is what the policies steer: the attempt kind, whether tried
	// endpoints may compete again, the wait before the attempt.
	pass policy.Pass
	// cont, when set, is the text the client already has: each endpoint
	// gets a continuation request of its own kind (relay.ContinueRequest).
	cont *string
	// contOut is the output tokens the client already has (see
	// relay.ContinueRequest).
	contOut int
	// hg is the pass's hedger while the hedge policy runs.
	hg policy.Booker[*attempt]
	// booked is the attempt the route policy booked for the inner steps.
	booked *attempt
}

// Pass is what the policies steer (policy.Try).
func (t *try) Pass() *policy.Pass { return &t.pass }

// attempt is one upstream attempt in flight or done.
type attempt struct {
	x      *exec
	ep     *endpoint
	idx    int
	kind   policy.AttemptKind
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	req    *llm.Request // what was sent: normalised for ep
	hdone  func(health.Outcome)
	bdone  func(ok bool)
	recIdx int
	// splice: ep was re-asked for the whole answer (it cannot continue
	// one); only what follows the text the client has may be forwarded.
	splice bool
	// settled is set once health and breaker have the outcome.
	settled bool
	// tool: the request forced the output tool (SchemaTool); its call is
	// folded back into text.
	tool bool
	// bytes counts the response body read from the upstream.
	bytes atomic.Int64

	res  *provider.Result
	err  error
	fail *policy.Failure
	// first holds the events read before the first content event.
	first []*llm.Event
	ttft  time.Duration
	end   time.Time
}

// step runs the rest of the chain (failsafe-go's executor). The chain is
// folded once per engine, outermost first: fallback → retry → hedge →
// route → breaker → send (newChain). The per-attempt timeouts (response
// header, adaptive stream idle, request) are the provider client's, per
// endpoint; the route policy gives each attempt its own context, cancelled
// when it is discarded.
type step = policy.Step[*exec, *try, *attempt]

// newChain folds the attempt policies around send.
func newChain(r *policy.Retry) step {
	return policy.Chain(send,
		policy.Fallback[*exec, *try, *attempt],
		policy.RetryPolicy[*exec, *try, *attempt](r),
		policy.Hedge[*exec, *try, *attempt],
		routePolicy,
		policy.Breaker[*exec, *try, *attempt])
}

func newExec(e *Engine, rs *routeState, req *llm.Request, call Call, rec *Record) *exec {
	x := &exec{e: e, rs: rs, req: req, call: call, rec: rec, picks: pick.New(rs.cands, req)}
	x.retries.Init(rs.retries, e.maxAttempts)
	return x
}

// errSealed is what an attempt asked for after its call ended gets.
var errSealed = errors.New("the call has ended")

// seal hands the record over: nothing writes into it after this.
func (x *exec) seal() {
	x.mu.Lock()
	x.sealed = true
	x.mu.Unlock()
}

// run sends req through the chain until one attempt succeeds, the
// failures say stop, or ctx ends.
func (x *exec) run(ctx context.Context, req *llm.Request, kind policy.AttemptKind) (*attempt, error) {
	if kind != policy.AttemptPrimary {
		return x.runTry(ctx, &try{req: req, pass: policy.Pass{Kind: kind}})
	}
	// Cache-aware routing (cacheroute.go): where the conversation is
	// warm before the pass, and where it was served after it.
	x.cacheStart()
	a, err := x.runTry(ctx, &try{req: req, pass: policy.Pass{Kind: kind}})
	if err == nil {
		x.cacheServed(a)
	}
	return a, err
}

func (x *exec) runTry(ctx context.Context, t *try) (*attempt, error) {
	return x.e.chain(ctx, x, t)
}

// Outgrow makes the call's routing ask for a bigger context window than
// a's endpoint has (the fallback policy, after a context error).
func (x *exec) Outgrow(a *attempt) {
	x.mu.Lock()
	if a.ep.ContextWindow >= x.policy.MinContextWindow {
		x.policy.MinContextWindow = a.ep.ContextWindow + 1
	}
	x.mu.Unlock()
}

// The retry policy's view of the call (policy.RetryCall).

func (x *exec) RetryState() *policy.RetryState { return &x.retry }
func (x *exec) Retries() *policy.Retries       { return &x.retries }
func (x *exec) OneShot() bool                  { return x.shadow }
func (x *exec) Waited(d time.Duration) {
	x.mu.Lock()
	x.rec.QueueWait += d
	x.mu.Unlock()
}

// Attempts is the attempts made so far.
func (x *exec) Attempts() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.attempts
}

// TakeRetry takes a retry of work (policy.Retries.Take: the call's
// attempt cap, the route's retry budget) and counts it in the record.
func (x *exec) TakeRetry() error {
	if err := x.retries.Take(x.Attempts()); err != nil {
		return err
	}
	x.mu.Lock()
	x.rec.Retries++
	x.mu.Unlock()
	return nil
}

// Admit asks the breaker of the endpoint booked for t (policy.Breaker):
// a refusal is recorded on the attempt; an admitted attempt is counted
// and its outcome callbacks taken.
func (x *exec) Admit(t *try) error {
	a := t.booked
	bdone, err := a.ep.Breaker.Allow()
	if err != nil {
		x.mu.Lock()
		x.rec.Attempts[a.recIdx].Outcome = "breaker_open"
		x.rec.Attempts[a.recIdx].End = a.start
		x.mu.Unlock()
		return fmt.Errorf("endpoint %s: %w", a.ep.ID, err)
	}
	x.mu.Lock()
	x.attempts++
	x.mu.Unlock()
	a.bdone = bdone
	a.hdone = a.ep.Health.Begin()
	return nil
}

// send makes the attempt: the request adapted to the endpoint, the call,
// and for a stream the read up to its first content (or, for a Side
// call, its own attempt).
func send(ctx context.Context, x *exec, t *try) (*attempt, error) {
	a := t.booked
	if x.side != nil {
		a.res, a.err = x.sideSend(a)
	} else {
		a.res, a.err = x.modelCall(a, t)
	}
	a.end = x.e.now()
	if a.err != nil {
		a.fail = policy.Classify(a.err)
		if a.fail.Kind == policy.KindCanceled && a.ctx.Err() != nil && (ctx.Err() == nil || context.Cause(ctx) == errLostRace) {
			// Cancelled because another attempt won, not by the caller.
			a.fail = policy.Loser(a.fail)
		}
		a.settle(a.fail)
		return a, a.fail
	}
	return a, nil
}

// modelCall sends t's request, adapted to a's endpoint, as a model call.
func (x *exec) modelCall(a *attempt, t *try) (*provider.Result, error) {
	req := t.req
	if t.cont != nil {
		req, a.splice = rl.ContinueRequest(x.req, a.ep.ContinuationKind(), *t.cont, t.contOut)
	} else if x.spec != nil {
		if r2, tool := x.askSchema(req, a.ep, t.pass.Kind); r2 != req {
			req, a.tool = r2, tool
			x.mu.Lock()
			if !x.sealed && x.rec.Structured != nil && x.rec.Structured.Contract != nil { // a fragment's replica has no Structured
				x.rec.Structured.Contract.Sent = true
			}
			x.mu.Unlock()
		}
	}
	nreq, err := x.normalize(req, a.ep)
	a.req = nreq
	if err != nil {
		return nil, err
	}
	pc := provider.Call{ClientHeader: x.call.ClientHeader, Translation: x.rs.translation, Received: &a.bytes}
	if b := x.call.Behavior; b != nil && b.Debug {
		pc.Sent = a.noteSent
	}
	res, err := x.e.client.Do(a.ctx, a.ep.Endpoint, nreq, pc)
	if err == nil && res.Stream != nil {
		err = a.peekContent(res)
	}
	return res, err
}

// peekContent reads a stream up to its first content event, so that a
// stream failing before content (an error event inside a 200, a cut, a
// silent upstream) is still a retryable failure and hedged streams race on
// time to first token.
func (a *attempt) peekContent(res *provider.Result) error {
	for {
		ev, err := res.Stream.Next()
		if err == io.EOF {
			if len(a.first) == 0 {
				res.Stream.Close()
				return policy.ErrEmptyStream
			}
			return nil // a complete answer without content
		}
		if err != nil {
			res.Stream.Close()
			return err
		}
		if ev.Type == llm.EventError {
			res.Stream.Close()
			return &provider.Error{Kind: provider.KindStatus, Endpoint: a.ep.ID, API: ev.Err}
		}
		a.first = append(a.first, ev)
		if ev.Type == llm.EventBlockDelta || ev.Type == llm.EventMessageStop {
			a.ttft = a.x.e.now().Sub(a.start)
			return nil
		}
	}
}

// settle gives health and the breaker the attempt's outcome (f nil for a
// success) and writes it into the call's record unless the record was
// handed over. A failure is settled when it happens (on whichever
// goroutine ran the attempt), a success when the answer is delivered (for
// a stream, when it ends). Every attempt is settled or discarded once.
func (a *attempt) settle(f *policy.Failure) {
	x := a.x
	x.mu.Lock()
	if a.settled {
		x.mu.Unlock()
		return
	}
	a.settled = true
	x.mu.Unlock()
	o, ok := outcome.Of(a.ended(a.end), f)
	a.hdone(o)
	a.bdone(ok)
	if f != nil && f.Unreachable {
		x.e.markDown(a.ep)
	}
	a.ep.Publish()
	if x.e.events.attemptObs != nil {
		ev := AttemptEvent{RequestID: x.call.RequestID, Endpoint: a.ep.ID, Model: a.ep.Model, Region: a.ep.Region, Kind: a.kind.String(),
			Outcome: "ok", Status: o.Status, Duration: a.end.Sub(a.start), Shadow: x.shadow}
		if f != nil {
			ev.Outcome, ev.RetryAfter = f.Reason, f.RetryAfter
		}
		x.e.events.attempt(ev)
	}
	x.noteOutcome(a, f, o.Status)
}

// ended is what a's outcome is read from (internal/outcome), its end at
// end.
func (a *attempt) ended(end time.Time) outcome.Attempt {
	x := a.x
	return outcome.Attempt{Latency: end.Sub(a.start), TTFT: a.ttft, Stream: x.req.Stream && x.side == nil,
		NoLatency: x.side != nil && !x.side.Latency, Result: a.res}
}

// noteOutcome keeps what the call learns from a's outcome (its last
// failure, a model's capacity refusals) and writes the outcome into the
// record unless it was handed over.
func (x *exec) noteOutcome(a *attempt, f *policy.Failure, status int) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if f != nil && f.Kind != policy.KindCancelledLoser {
		if f.Kind != policy.KindCanceled {
			x.lastErr = f
			if x.rec.Fallback == "" && !x.sealed {
				x.rec.Fallback = f.Reason
			}
		}
		if f.Capacity {
			if x.picks.Overloaded == nil {
				x.picks.Overloaded = map[string]int{}
			}
			x.picks.Overloaded[a.ep.Model]++
		}
	}
	if x.sealed {
		return
	}
	r := &x.rec.Attempts[a.recIdx]
	r.End = a.end
	r.Status = status
	if f == nil {
		r.Outcome = "ok"
	} else {
		r.Outcome = f.Reason
	}
	a.noteUsage(r)
}

// noteSent keeps the request body as sent, for the debug trace.
func (a *attempt) noteSent(body []byte) {
	if p := a.x.rec.PII; p != nil && p.RawUpstream {
		return // it holds personal data (pii action log, or fail_open)
	}
	cut := []byte(cutUTF8(string(body[:min(len(body), maxUpstreamRequest+512)]), maxUpstreamRequest+512))
	text := cutUTF8(redactSecrets(cut, a.ep.APIKey), maxUpstreamRequest)
	x := a.x
	x.mu.Lock()
	if !x.sealed {
		x.rec.Attempts[a.recIdx].UpstreamRequest = text
	}
	x.mu.Unlock()
}

// noteUsage writes the bytes read, and the usage and cost of the
// attempt's complete answer if it got one, into its record r.
func (a *attempt) noteUsage(r *Attempt) {
	r.Bytes = a.bytes.Load()
	if a.err != nil || a.res == nil || a.res.Response == nil {
		return
	}
	u := a.res.Response.Usage
	r.InputTokens, r.OutputTokens = u.PromptTokens(), u.OutputTokens
	r.Cost = a.x.e.cost(a.ep, u)
}

// discard cancels an abandoned attempt that had not failed (a hedge
// race's loser, a client gone) and releases what it holds; its truncated
// flight counts neither way. A failure is settled where it happens, so a
// 429 a losing hedge saw puts its endpoint in cooldown like any other.
func (a *attempt) discard() {
	a.cancel()
	if a.err == nil && a.res != nil && a.res.Stream != nil {
		a.res.Stream.Close()
	}
	x := a.x
	x.mu.Lock()
	if a.settled {
		x.mu.Unlock()
		return
	}
	a.settled = true
	if !x.sealed {
		// A loser that completed its answer was billed for it.
		a.noteUsage(&x.rec.Attempts[a.recIdx])
	}
	x.mu.Unlock()
	now := x.e.now()
	a.hdone(outcome.Cancelled(a.ended(now), now.Sub(a.start)))
	a.bdone(true)
	a.ep.Publish()
}

// release frees a finished non-streaming winner.
func (a *attempt) release() { a.cancel() }

// Exhausted builds the error for "no more attempts", keeping the last
// upstream error's status and type so SDKs classify it as they would have.
func (x *exec) Exhausted(code, why string) error {
	return &policy.MeshError{Code: code, Why: why, Last: x.lastErr, Attempts: x.attempts}
}

// clientError turns a failed call into the client's error: its deadline
// or its caller's leaving, else policy.ClientError.
func (x *exec) clientError(ctx context.Context, err error) *llm.APIError {
	attempts := x.Attempts()
	if errors.Is(context.Cause(ctx), errDeadline) {
		return &llm.APIError{Status: http.StatusGatewayTimeout, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout,
			Message: fmt.Sprintf("deadline passed after %d attempts", attempts)}
	}
	if ctx.Err() != nil {
		return &llm.APIError{Status: 499, Type: llm.ErrAPI, MeshCode: llm.MeshTimeout, Message: "request cancelled: " + context.Cause(ctx).Error()}
	}
	return policy.ClientError(err, attempts)
}

// normalize adapts req to ep: a calibrated temperature when ep's model
// differs from the one the caller named (or a calibration_id asks), and
// the sampling parameters ep's model and API version accept. What it did
// is recorded (X-Mesh-Normalization-Offset, X-Mesh-Normalized,
// X-Mesh-Dropped).
func (x *exec) normalize(req *llm.Request, ep *endpoint) (*llm.Request, error) {
	e := x.e
	b := x.call.Behavior
	if e.normOff || b != nil && b.DisableNormalization {
		return req, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if req.Temperature != nil && e.cals != nil {
		id := ""
		if b != nil {
			id = b.CalibrationID
		}
		requested := x.rs.cands[0].Model
		if cal, err := e.cals.Resolve(id, requested, ep.Model); err == nil && cal != nil {
			t, off := cal.Apply(*req.Temperature)
			cp := *req
			cp.Temperature = &t
			req = &cp
			n := x.rec.AddNormalization()
			n.Offset, n.Calibrated = off, true
		}
	}
	version := ep.APIVersion(x.call.ClientHeader)
	out, actions, err := normalize.Params(req, normalize.Target{Format: ep.Format, Model: ep.UpstreamModel, APIVersion: version}, e.paramPol)
	if err != nil {
		return nil, err
	}
	if len(actions) > 0 {
		x.rec.AddNormalization().Normalized = normalize.Header(actions)
		x.rec.Drop(normalize.DroppedParams(actions))
	}
	return out, nil
}
