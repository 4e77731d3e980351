package attempt

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
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/outcome"
	"github.com/keelmesh/keel/internal/pick"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/structured"
)

// Exec is one client call's attempts: which endpoints were tried, the
// failures seen, the record they are written into. The call's goroutine
// runs the policy chain; hedge goroutines book their attempts through mu.
// The policies keep their own state (policy.RetryState, policy.Retries, a
// policy.Hedger per hedged pass, the route policy's picks) and see the
// call only through the interfaces they declare (policy.RetryCall,
// HedgeCall, FallbackCall, BreakerCall), which Exec implements here and
// in hedge.go. The exported fields are set before the first Run.
type Exec struct {
	r     *Runner
	route Route
	req   *llm.Request
	call  Call
	rec   *callrec.Record
	// Policy is what the router weighs (strategy, capability floor,
	// region, domain); the fallback policy raises its context window.
	Policy route.Policy

	// Legacy is the safety valve's pass-through: the route's primary
	// model only, no hedge, no continuation.
	Legacy bool
	// Shadow marks a shadow call: one attempt, never retried, failed over
	// or hedged.
	Shadow bool
	// Side, when set, is the Side call whose attempt replaces the model
	// call (side.go).
	Side *Side
	// Spec, when set, is the schema sent upstream with each attempt
	// (askSchema): one the client named outside its wire format, or
	// implied by its system prompt.
	Spec *structured.Spec

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

	// try0 is the first pass Run makes and att0 the first attempt booked
	// (under mu), inside the call's allocation; later ones are allocated,
	// so none is ever reused.
	try0, att0   bool
	firstTry     try
	firstAttempt Attempt
}

// newTry is a pass sending req as kind.
func (x *Exec) newTry(req *llm.Request, kind policy.AttemptKind) *try {
	if !x.try0 {
		x.try0 = true
		x.firstTry = try{req: req, pass: policy.Pass{Kind: kind}}
		return &x.firstTry
	}
	return &try{req: req, pass: policy.Pass{Kind: kind}}
}

// newAttempt is a fresh Attempt, zero. Called with x.mu held.
func (x *Exec) newAttempt() *Attempt {
	if !x.att0 {
		x.att0 = true
		return &x.firstAttempt
	}
	return new(Attempt)
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
	hg policy.Booker[*Attempt]
	// booked is the attempt the route policy booked for the inner steps.
	booked *Attempt
}

// Pass is what the policies steer (policy.Try).
func (t *try) Pass() *policy.Pass { return &t.pass }

// Attempt is one upstream attempt in flight or done.
type Attempt struct {
	x     *Exec
	ep    *fleet.Endpoint
	idx   int
	kind  policy.AttemptKind
	start time.Time
	// ctx is the attempt's own context; cancelCause cancels it. The
	// provider uses the pair for its timeouts (provider.Call.Cancel)
	// instead of deriving a context of its own.
	ctx         context.Context
	cancelCause context.CancelCauseFunc
	req         *llm.Request // what was sent: normalised for ep
	hdone       func(health.Outcome)
	bdone       func(ok bool)
	recIdx      int
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
// folded once per Runner, outermost first: fallback → retry → hedge →
// route → breaker → send (newChain). The per-attempt timeouts (response
// header, adaptive stream idle, request) are the provider client's, per
// endpoint; the route policy gives each attempt its own context, cancelled
// when it is discarded.
type step = policy.Step[*Exec, *try, *Attempt]

// newChain folds the attempt policies around send.
func newChain(r *policy.Retry) step {
	return policy.Chain(send,
		policy.Fallback[*Exec, *try, *Attempt],
		policy.RetryPolicy[*Exec, *try, *Attempt](r),
		policy.Hedge[*Exec, *try, *Attempt],
		routePolicy,
		policy.Breaker[*Exec, *try, *Attempt])
}

// NewExec starts a call's attempts on rt: req as the client sent it (after
// the stages above), its record rec.
func (r *Runner) NewExec(rt Route, req *llm.Request, call Call, rec *callrec.Record) *Exec {
	x := &Exec{r: r, route: rt, req: req, call: call, rec: rec}
	x.picks.Init(rt.Cands, req)
	x.retries.Init(rt.Retries, r.d.MaxAttempts)
	return x
}

// Fork is a call of its own on x's route for req (a fragment's replica,
// the fragments' merge): its own attempts and record, x's call.
func (x *Exec) Fork(req *llm.Request) *Exec {
	return x.r.NewExec(x.route, req, x.call, &callrec.Record{})
}

// Record is the call's record the attempts are written into.
func (x *Exec) Record() *callrec.Record { return x.rec }

// Width is the number of endpoints on the call's route.
func (x *Exec) Width() int { return len(x.route.Cands) }

// errSealed is what an attempt asked for after its call ended gets.
var errSealed = errors.New("the call has ended")

// Seal hands the record over: nothing writes into it after this.
func (x *Exec) Seal() {
	x.mu.Lock()
	x.sealed = true
	x.mu.Unlock()
}

// Run sends req through the chain until one attempt succeeds, the
// failures say stop, or ctx ends.
func (x *Exec) Run(ctx context.Context, req *llm.Request, kind policy.AttemptKind) (*Attempt, error) {
	if kind != policy.AttemptPrimary {
		return x.runTry(ctx, x.newTry(req, kind))
	}
	// Cache-aware routing (cacheroute.go): where the conversation is
	// warm before the pass, and where it was served after it.
	x.cacheStart()
	a, err := x.runTry(ctx, x.newTry(req, kind))
	if err == nil {
		x.cacheServed(a)
	}
	return a, err
}

func (x *Exec) runTry(ctx context.Context, t *try) (*Attempt, error) {
	return x.r.chain(ctx, x, t)
}

// Outgrow makes the call's routing ask for a bigger context window than
// a's endpoint has (the fallback policy, after a context error).
func (x *Exec) Outgrow(a *Attempt) {
	x.mu.Lock()
	if a.ep.ContextWindow >= x.Policy.MinContextWindow {
		x.Policy.MinContextWindow = a.ep.ContextWindow + 1
	}
	x.mu.Unlock()
}

// The retry policy's view of the call (policy.RetryCall).

func (x *Exec) RetryState() *policy.RetryState { return &x.retry }
func (x *Exec) Retries() *policy.Retries       { return &x.retries }
func (x *Exec) OneShot() bool                  { return x.Shadow }
func (x *Exec) Waited(d time.Duration) {
	x.mu.Lock()
	x.rec.QueueWait += d
	x.mu.Unlock()
}

// Attempts is the attempts made so far.
func (x *Exec) Attempts() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.attempts
}

// TakeRetry takes a retry of work (policy.Retries.Take: the call's
// attempt cap, the route's retry budget) and counts it in the record.
func (x *Exec) TakeRetry() error {
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
func (x *Exec) Admit(t *try) error {
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
func send(ctx context.Context, x *Exec, t *try) (*Attempt, error) {
	a := t.booked
	if x.Side != nil {
		a.res, a.err = x.sideSend(a)
	} else {
		a.res, a.err = x.modelCall(a, t)
	}
	a.end = x.r.d.Now()
	if a.err != nil {
		a.fail = policy.Classify(a.err)
		if a.fail.Kind == policy.KindCanceled && a.cancelled() && (ctx.Err() == nil || context.Cause(ctx) == errLostRace) {
			// Cancelled because another attempt won, not by the caller.
			a.fail = policy.Loser(a.fail)
		}
		a.settle(a.fail)
		return a, a.fail
	}
	return a, nil
}

// modelCall sends t's request, adapted to a's endpoint, as a model call.
func (x *Exec) modelCall(a *Attempt, t *try) (*provider.Result, error) {
	req := t.req
	if t.cont != nil {
		req, a.splice = rl.ContinueRequest(x.req, a.ep.ContinuationKind(), *t.cont, t.contOut)
	} else if x.Spec != nil {
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
	pc := provider.Call{ClientHeader: x.call.Header, Translation: x.route.Translation, Received: &a.bytes, Cancel: a.cancelCause}
	if b := x.call.Behavior; b != nil && b.Debug {
		pc.Sent = a.noteSent
	}
	res, err := x.r.d.Client.Do(a.ctx, a.ep.Endpoint, nreq, pc)
	if err == nil && res.Stream != nil {
		err = a.peekContent(res)
	}
	return res, err
}

// peekContent reads a stream up to its first content event, so that a
// stream failing before content (an error event inside a 200, a cut, a
// silent upstream) is still a retryable failure and hedged streams race on
// time to first token.
func (a *Attempt) peekContent(res *provider.Result) error {
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
			a.ttft = a.x.r.d.Now().Sub(a.start)
			return nil
		}
	}
}

// settle gives health and the breaker the attempt's outcome (f nil for a
// success) and writes it into the call's record unless the record was
// handed over. A failure is settled when it happens (on whichever
// goroutine ran the attempt), a success when the answer is delivered (for
// a stream, when it ends). Every attempt is settled or discarded once.
func (a *Attempt) settle(f *policy.Failure) {
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
	if f != nil && f.Unreachable && x.r.d.MarkDown != nil {
		x.r.d.MarkDown(a.ep)
	}
	a.ep.Publish()
	if on := x.r.d.OnAttempt; on != nil {
		ev := observe.AttemptEvent{RequestID: x.call.RequestID, Endpoint: a.ep.ID, Model: a.ep.Model, Region: a.ep.Region, Kind: a.kind.String(),
			Outcome: "ok", Status: o.Status, Duration: a.end.Sub(a.start), Shadow: x.Shadow}
		if f != nil {
			ev.Outcome, ev.RetryAfter = f.Reason, f.RetryAfter
		}
		on(ev)
	}
	x.noteOutcome(a, f, o.Status)
}

// ended is what a's outcome is read from (internal/outcome), its end at
// end.
func (a *Attempt) ended(end time.Time) outcome.Attempt {
	x := a.x
	return outcome.Attempt{Latency: end.Sub(a.start), TTFT: a.ttft, Stream: x.req.Stream && x.Side == nil,
		NoLatency: x.Side != nil && !x.Side.Latency, Result: a.res}
}

// noteOutcome keeps what the call learns from a's outcome (its last
// failure, a model's capacity refusals) and writes the outcome into the
// record unless it was handed over.
func (x *Exec) noteOutcome(a *Attempt, f *policy.Failure, status int) {
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
func (a *Attempt) noteSent(body []byte) {
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
func (a *Attempt) noteUsage(r *callrec.Attempt) {
	r.Bytes = a.bytes.Load()
	if a.err != nil || a.res == nil || a.res.Response == nil {
		return
	}
	u := a.res.Response.Usage
	r.InputTokens, r.OutputTokens = u.PromptTokens(), u.OutputTokens
	r.Cost = a.x.r.Cost(a.ep, u)
}

// discard cancels an abandoned attempt that had not failed (a hedge
// race's loser, a client gone) and releases what it holds; its truncated
// flight counts neither way. A failure is settled where it happens, so a
// 429 a losing hedge saw puts its endpoint in cooldown like any other.
func (a *Attempt) discard() {
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
	now := x.r.d.Now()
	a.hdone(outcome.Cancelled(a.ended(now), now.Sub(a.start)))
	a.bdone(true)
	a.ep.Publish()
}

// cancel cancels the attempt's context (a lost race, a released or
// abandoned attempt).
func (a *Attempt) cancel() { a.cancelCause(nil) }

// cancelled reports whether the attempt's context was cancelled by the
// engine or an ancestor, not by the provider's own timeouts or end
// (provider.OwnCause).
func (a *Attempt) cancelled() bool {
	return a.ctx.Err() != nil && !provider.OwnCause(context.Cause(a.ctx))
}

// release frees a finished non-streaming winner.
func (a *Attempt) release() { a.cancel() }

// Succeeded settles a non-streamed winner's success (health, the breaker,
// the record) and releases it.
func (a *Attempt) Succeeded() {
	a.settle(nil)
	a.release()
}

// Result is the attempt's result (nil when it failed before one).
func (a *Attempt) Result() *provider.Result { return a.res }

// Endpoint is the endpoint the attempt went to.
func (a *Attempt) Endpoint() *fleet.Endpoint { return a.ep }

// Tool reports that the request forced the output tool (SchemaTool): its
// call is to be folded back into text.
func (a *Attempt) Tool() bool { return a.tool }

// Index is the attempt's place in its call's Record.Attempts.
func (a *Attempt) Index() int { return a.recIdx }

// Exhausted builds the error for "no more attempts", keeping the last
// upstream error's status and type so SDKs classify it as they would have.
func (x *Exec) Exhausted(code, why string) error {
	return &policy.MeshError{Code: code, Why: why, Last: x.lastErr, Attempts: x.attempts}
}

// ClientError turns a failed call into the client's error: its deadline
// or its caller's leaving, else policy.ClientError.
func (x *Exec) ClientError(ctx context.Context, err error) *llm.APIError {
	attempts := x.Attempts()
	if d := x.r.d.Deadline; d != nil && errors.Is(context.Cause(ctx), d) {
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
func (x *Exec) normalize(req *llm.Request, ep *fleet.Endpoint) (*llm.Request, error) {
	d := &x.r.d
	b := x.call.Behavior
	if d.NormalizationOff || b != nil && b.DisableNormalization {
		return req, nil
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if req.Temperature != nil && d.Calibrations != nil {
		id := ""
		if b != nil {
			id = b.CalibrationID
		}
		requested := x.route.Cands[0].Model
		if cal, err := d.Calibrations.Resolve(id, requested, ep.Model); err == nil && cal != nil {
			t, off := cal.Apply(*req.Temperature)
			cp := *req
			cp.Temperature = &t
			req = &cp
			n := x.rec.AddNormalization()
			n.Offset, n.Calibrated = off, true
		}
	}
	version := ep.APIVersion(x.call.Header)
	out, actions, err := normalize.Params(req, normalize.Target{Format: ep.Format, Model: ep.UpstreamModel, APIVersion: version}, d.ParamPolicy)
	if err != nil {
		return nil, err
	}
	if len(actions) > 0 {
		x.rec.AddNormalization().Normalized = normalize.Header(actions)
		x.rec.Drop(normalize.DroppedParams(actions))
	}
	return out, nil
}
