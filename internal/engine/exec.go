package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
)

// exec is one client call's attempts: which endpoints were tried, the
// budgets spent, the failures seen. It is used by one goroutine at a time:
// the call's, or the hedge timer's while the call's goroutine is inside an
// inline attempt (hedger.mu hands it over); hedge goroutines only report
// through a channel.
type exec struct {
	e      *Engine
	rs     *routeState
	req    *llm.Request
	call   Call
	rec    *Record
	policy route.Policy

	// legacy is the safety valve's pass-through: one attempt to the
	// route's primary endpoint, nothing else.
	legacy   bool
	tried    []bool
	attempts int
	waits    int
	// fragServed is the endpoint credited with a fused answer.
	fragServed *endpoint
	retries    int
	lastErr    error
	firstPick  bool

	cands     []route.Candidate
	decisions []route.Decision
}

// attempt is one upstream attempt in flight or done.
type attempt struct {
	x      *exec
	ep     *endpoint
	kind   string
	start  time.Time
	ctx    context.Context
	cancel context.CancelFunc
	req    *llm.Request // normalised for ep
	nerr   error        // normalisation refused the request
	hdone  func(health.Outcome)
	bdone  func(ok bool)
	recIdx int

	res *provider.Result
	err error
	// first holds the events read before the first content event.
	first []*llm.Event
	ttft  time.Duration
	end   time.Time
}

// action is what the classification table says to do after a failure.
type action uint8

const (
	actFail     action = iota // the request itself is at fault: answer the client now
	actRetry                  // another endpoint (or the same, after a backoff) may succeed
	actFallback               // only another model may succeed (context window)
)

// classify is the one table that maps a failed attempt to a reason and an
// action. Reasons label metrics, the request log and the debug trace.
func classify(err error) (reason string, act action) {
	var pe *provider.Error
	if !errors.As(err, &pe) {
		if errors.Is(err, errEmptyStream) {
			return "empty_stream", actRetry
		}
		return "internal", actFail
	}
	switch pe.Kind {
	case provider.KindCanceled:
		return "canceled", actFail
	case provider.KindConnect:
		return "connect_error", actRetry
	case provider.KindReset:
		return "connection_reset", actRetry
	case provider.KindTimeout:
		return "timeout", actRetry
	case provider.KindProtocol:
		return "protocol_error", actRetry
	}
	if pe.API == nil {
		return "unknown", actFail
	}
	a := pe.API
	switch s := a.Status; {
	case s == http.StatusTooManyRequests:
		if a.Code == "insufficient_quota" || a.Code == "credit_balance_exhausted" {
			return "quota_exhausted", actRetry // not transient here, but another provider may serve
		}
		return "rate_limited", actRetry
	case s == 529 || a.Type == llm.ErrOverloaded:
		return "overloaded", actRetry
	case s == http.StatusRequestTimeout, s == http.StatusConflict:
		return fmt.Sprintf("status_%d", s), actRetry
	case s >= 500:
		return fmt.Sprintf("status_%d", s), actRetry
	case s == http.StatusOK:
		// An error event inside a 200 stream (typically overloaded_error).
		return "stream_error", actRetry
	case isContextExceeded(a):
		return "context_length_exceeded", actFallback
	case s == http.StatusUnauthorized, s == http.StatusForbidden:
		return fmt.Sprintf("auth_%d", s), actFail
	case s == http.StatusNotFound:
		return "not_found", actFail
	}
	return fmt.Sprintf("status_%d", a.Status), actFail
}

// isContextExceeded recognises both providers' "prompt too long" errors.
func isContextExceeded(a *llm.APIError) bool {
	if a.Status != http.StatusBadRequest && a.Status != http.StatusRequestEntityTooLarge {
		return false
	}
	if a.Code == "context_length_exceeded" {
		return true
	}
	m := strings.ToLower(a.Message)
	return strings.Contains(m, "prompt is too long") || strings.Contains(m, "context length") ||
		strings.Contains(m, "context window") || strings.Contains(m, "maximum context")
}

// pick chooses the next endpoint; allowTried lets endpoints already tried
// in this call compete again (a retry on a one-endpoint route).
func (x *exec) pick(allowTried bool) (int, error) {
	if x.cands == nil {
		x.cands = make([]route.Candidate, 0, len(x.rs.cands))
	}
	x.cands = x.cands[:0]
	warmBest := time.Duration(0)
	for _, ep := range x.rs.cands {
		if !ep.health.Cold() {
			if d := ep.health.ExpectedLatency(); warmBest == 0 || d < warmBest {
				warmBest = d
			}
		}
	}
	for i, ep := range x.rs.cands {
		c := route.Candidate{
			ID: ep.ID, Model: ep.Model, Region: ep.Region, Order: i,
			Capability: ep.Capability, ContextWindow: ep.ContextWindow, Domains: ep.Domains,
			ExpectedLatency: ep.health.ExpectedLatency(), InFlight: ep.health.InFlight(),
			Available: true,
		}
		if warmBest > 0 && ep.health.Cold() {
			// Optimistic start: an endpoint with no success yet ties with
			// the best warm one, so it gets tried and learns its latency.
			c.ExpectedLatency = warmBest
		}
		if x.legacy && ep.Model != x.rs.cands[0].Model {
			c.Available, c.Unavailable = false, "safety_valve"
		}
		switch {
		case x.tried[i] && !allowTried:
			c.Available, c.Unavailable = false, "tried"
		case ep.down.Load():
			c.Available, c.Unavailable = false, "unreachable"
		case ep.health.Unavailable() != "":
			c.Available, c.Unavailable = false, ep.health.Unavailable()
		case ep.breaker.State() == resilience.Open:
			c.Available, c.Unavailable = false, "breaker_open"
		}
		x.cands = append(x.cands, c)
	}
	ch, err := route.PickAppend(x.decisions, x.cands, x.policy, x.e.rnd)
	if err != nil && errors.Is(err, route.ErrAllUnavailable) {
		// Panic routing, as Envoy does past its panic threshold: when every
		// otherwise suitable endpoint is only ejected as an outlier,
		// ejection says nothing about which is better; send anyway (the
		// retry budget still caps the load) rather than fail every call.
		relaxed := false
		for i := range x.cands {
			if x.cands[i].Unavailable == "ejected" {
				x.cands[i].Available, x.cands[i].Unavailable = true, ""
				relaxed = true
			}
		}
		if relaxed {
			ch, err = route.PickAppend(x.decisions, x.cands, x.policy, x.e.rnd)
		}
	}
	x.decisions = ch.Decisions
	if !x.firstPick {
		x.firstPick = true
		x.rec.Candidates = make([]Candidate, 0, len(ch.Decisions))
		for i, d := range ch.Decisions {
			x.rec.Candidates = append(x.rec.Candidates, Candidate{Endpoint: d.ID, ExpectedMS: d.Score,
				InFlight: x.cands[i].InFlight, Chosen: d.Reason == route.ReasonChosen, Reason: reasonText(d)})
		}
	}
	if err != nil {
		return -1, err
	}
	return ch.Index, nil
}

func reasonText(d route.Decision) string {
	if d.Detail != "" {
		return string(d.Reason) + ": " + d.Detail
	}
	return string(d.Reason)
}

// prepare books an attempt on candidate i (breaker, health, record) without
// starting it; nil when the breaker refuses.
func (x *exec) prepare(ctx context.Context, req *llm.Request, i int, kind string, wait time.Duration) *attempt {
	ep := x.rs.cands[i]
	x.tried[i] = true
	bdone, err := ep.breaker.Allow()
	if err != nil {
		return nil
	}
	x.attempts++
	a := &attempt{x: x, ep: ep, kind: kind, start: x.e.now(), bdone: bdone, hdone: ep.health.Begin(), recIdx: len(x.rec.Attempts)}
	x.rec.Attempts = append(x.rec.Attempts, Attempt{Endpoint: ep.ID, Model: ep.Model, Region: ep.Region, Start: a.start, Kind: kind, Wait: wait})
	a.ctx, a.cancel = context.WithCancel(ctx)
	a.req, a.nerr = x.normalize(req, ep)
	return a
}

// do sends the attempt and waits for its answer (for a stream, up to its
// first content). It touches only a's own fields.
func (a *attempt) do() {
	x := a.x
	if a.nerr != nil {
		a.err, a.end = a.nerr, x.e.now()
		return
	}
	res, err := x.e.client.Do(a.ctx, a.ep.Endpoint, a.req, provider.Call{ClientHeader: x.call.ClientHeader, Translation: x.rs.translation})
	if err == nil && res.Stream != nil {
		err = a.peekContent(res)
	}
	a.res, a.err = res, err
	a.end = x.e.now()
}

// launch starts an attempt on candidate i in its own goroutine; it reports
// on results. hg, when set, is the hedger whose inline attempt it races.
func (x *exec) launch(ctx context.Context, req *llm.Request, i int, kind string, wait time.Duration, results chan<- *attempt, hg *hedger) *attempt {
	a := x.prepare(ctx, req, i, kind, wait)
	if a == nil {
		return nil
	}
	go func() {
		a.do()
		if a.err == nil && hg != nil {
			hg.won(a)
		}
		results <- a
	}()
	return a
}

// hedger is a call's hedge timer. Attempts run on the call's goroutine
// when nothing else is in flight (no goroutine hand-off when, as almost
// always, the first attempt answers), so the timer cannot wait for the
// call's loop: when it fires during such an inline attempt it launches the
// hedge itself, and a hedge that answers first cancels the inline attempt
// so the call comes back for the hedge's answer. When it fires between
// attempts it signals fired and the loop decides, as for any hedge.
//
// mu guards the fields below and, while an inline attempt runs, the exec
// state the timer's launch touches (the call's goroutine is inside do).
type hedger struct {
	x       *exec
	ctx     context.Context
	req     *llm.Request
	results chan<- *attempt
	t       *time.Timer

	mu      sync.Mutex
	running *attempt // the inline attempt now running
	hedge   *attempt // the hedge launched against running
	raced   *attempt // the attempt hedge races
	lost    bool     // hedge answered first; running was cancelled
}

func (hg *hedger) fire() {
	hg.mu.Lock()
	defer hg.mu.Unlock()
	if hg.running == nil {
		return // between attempts (a backoff): nothing to hedge
	}
	x := hg.x
	if x.attempts >= x.e.maxAttempts || !x.rs.hedges.TryWithdraw() {
		return
	}
	i, err := x.pick(false)
	if err != nil {
		return
	}
	if h := x.launch(hg.ctx, hg.req, i, "hedge", 0, hg.results, hg); h != nil {
		hg.hedge, hg.raced = h, hg.running
		x.rec.Hedges++
	}
}

// won is called by a hedge's goroutine that succeeded.
func (hg *hedger) won(h *attempt) {
	hg.mu.Lock()
	if hg.hedge == h && hg.running != nil && hg.running == hg.raced && !hg.lost {
		hg.lost = true
		hg.running.cancel()
	}
	hg.mu.Unlock()
}

func (hg *hedger) stop() {
	if hg != nil {
		hg.t.Stop()
	}
}

// inline runs a on the call's goroutine. It returns the hedge launched
// meanwhile, if any, and whether a lost to it.
func (x *exec) inline(a *attempt, hg *hedger) (h *attempt, lost bool) {
	if hg == nil {
		a.do()
		return nil, false
	}
	hg.mu.Lock()
	hg.running, hg.hedge, hg.raced, hg.lost = a, nil, nil, false
	hg.mu.Unlock()
	a.do()
	hg.mu.Lock()
	h, lost = hg.hedge, hg.lost
	hg.running, hg.hedge, hg.raced, hg.lost = nil, nil, nil, false
	hg.mu.Unlock()
	return h, lost
}

var errEmptyStream = errors.New("stream ended before any event")

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
				return errEmptyStream
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

// settle records a finished attempt's health and breaker outcome.
// For a committed stream it is called when the stream ends.
func (a *attempt) settle(err error, reason string) {
	o := health.Outcome{Latency: a.end.Sub(a.start), TTFT: a.ttft}
	if a.res != nil {
		o.Status, o.Header = a.res.Status, a.res.Header
	}
	ok := true
	if err != nil {
		var pe *provider.Error
		if errors.As(err, &pe) {
			switch pe.Kind {
			case provider.KindConnect:
				o.Kind = health.KindConnect
			case provider.KindReset:
				o.Kind = health.KindReset
			case provider.KindTimeout:
				o.Kind = health.KindTimeout
			default:
				o.Kind = reason
			}
			if pe.API != nil {
				o.Status = pe.API.Status
				o.RetryAfter = pe.API.RetryAfter
			}
		}
		_, act := classify(err)
		// Only faults of the endpoint count against it, not the caller's bad request.
		o.Failure = act != actFail && reason != "canceled"
		ok = !o.Failure
		if reason == "rate_limited" || reason == "overloaded" || reason == "quota_exhausted" {
			// Capacity signals, not faults: retry-after cooldowns and the
			// retry budget handle them. Opening a breaker on a 429/529 burst
			// would keep the endpoint out long after the burst ended.
			ok = true
		}
	}
	var pe *provider.Error
	unreachable := errors.As(err, &pe) && pe.BeforeResponse && (pe.Kind == provider.KindConnect || pe.Kind == provider.KindReset)
	if unreachable {
		// The endpoint's server could not be reached at all: take it out
		// of rotation now and let a probe bring it back. Reachability is
		// the prober's business, not the breaker's, so the breaker does
		// not hold a recovered region out for its open interval.
		ok = true
	}
	a.hdone(o)
	a.bdone(ok)
	if unreachable {
		a.x.e.markDown(a.ep)
	}
	r := &a.x.rec.Attempts[a.recIdx]
	r.End = a.end
	r.Status = o.Status
	if err == nil {
		r.Outcome = "ok"
	} else {
		r.Outcome = reason
	}
}

// discard cancels a losing or abandoned attempt and releases what it holds.
func (a *attempt) discard() {
	a.cancel()
	if a.err == nil && a.res != nil && a.res.Stream != nil {
		a.res.Stream.Close()
	}
	// A loser was cancelled, not failed: it counts neither way for health.
	// Its record entry was written when it was abandoned.
	a.hdone(health.Outcome{Latency: a.end.Sub(a.start)})
	a.bdone(true)
}

// release frees a finished non-streaming winner.
func (a *attempt) release() { a.cancel() }

// run sends req until one attempt succeeds, the failures say stop, or ctx
// ends. kind labels the first attempt ("primary" or "continuation").
func (x *exec) run(ctx context.Context, req *llm.Request, kind string) (*attempt, error) {
	e := x.e
	var inflight []*attempt
	var hg *hedger
	var results chan *attempt // made with the hedger: only hedges run in goroutines
	defer func() { hg.stop() }()
	abandon := func() {
		now := e.now()
		for _, a := range inflight {
			a.cancel()
			// Written here, on the call's goroutine: the record is handed
			// to observers before the losers' goroutines report.
			r := &x.rec.Attempts[a.recIdx]
			r.End, r.Outcome = now, "cancelled_loser"
		}
		n := len(inflight)
		inflight = nil
		if n > 0 {
			go func() {
				for range n {
					(<-results).discard()
				}
			}()
		}
	}
	hedging := !e.hedgingOff.Load() && kind == "primary" && !x.legacy &&
		(x.call.Behavior == nil || x.call.Behavior.Hedge == nil || *x.call.Behavior.Hedge)

	next := kind
	var wait time.Duration
	for {
		var done *attempt
		if len(inflight) == 0 {
			if x.attempts+x.waits >= e.maxAttempts {
				return nil, x.exhausted(llm.MeshFallbackExhausted, fmt.Sprintf("gave up after %d attempts", x.attempts))
			}
			if x.attempts > 0 && !x.rs.retries.TryWithdraw() {
				return nil, x.exhausted(llm.MeshBudgetExhausted, "retry budget exhausted")
			}
			i, err := x.pick(false)
			if err != nil && !errors.Is(err, route.ErrAllFiltered) && (x.attempts > 0 || x.cooldownLeft() > 0) {
				// Every untried endpoint is out: retry one already tried (or
				// wait out the retry-after of every one), after a backoff
				// that honours the retry-after. A wait costs a retry token
				// and an attempt slot, so a perpetual storm ends.
				if x.attempts == 0 && !x.rs.retries.TryWithdraw() {
					return nil, x.exhausted(llm.MeshBudgetExhausted, "retry budget exhausted while every endpoint is cooling down")
				}
				d := e.backoff.Delay(x.retries, x.cooldownLeft())
				if dl, ok := ctx.Deadline(); ok && e.now().Add(d).After(dl) {
					return nil, x.exhausted(llm.MeshTimeout, "no endpoint can be tried again before the deadline")
				}
				if err := sleep(ctx, d); err != nil {
					return nil, err
				}
				x.rec.QueueWait += d
				wait += d
				i, err = x.pick(true)
				if err != nil && x.cooldownLeft() > 0 {
					x.waits++ // still cooling (another call's 429): wait again
					continue
				}
			}
			if err != nil {
				return nil, x.noCandidate(err)
			}
			if x.attempts > 0 {
				x.retries++
				x.rec.Retries++
				if next == "primary" {
					next = "retry"
				}
			}
			a := x.prepare(ctx, req, i, next, wait)
			if a == nil {
				continue // the breaker refused at the last moment; pick again
			}
			wait = 0
			if hedging && hg == nil && x.attempts == 1 {
				if d, ok := x.hedgeDelay(i); ok {
					results = make(chan *attempt, e.maxAttempts+2)
					hg = &hedger{x: x, ctx: ctx, req: req, results: results}
					hg.t = time.AfterFunc(d, hg.fire)
				}
			}
			// Nothing else is in flight: the attempt runs on this goroutine.
			h, lost := x.inline(a, hg)
			if h != nil {
				inflight = append(inflight, h)
			}
			if lost {
				// A hedge answered first; its result is on its way.
				r := &x.rec.Attempts[a.recIdx]
				r.End, r.Outcome = e.now(), "cancelled_loser"
				a.discard()
				continue
			}
			done = a
		} else {
			select {
			case done = <-results:
				inflight = remove(inflight, done)
			case <-ctx.Done():
				abandon()
				return nil, ctx.Err()
			}
		}
		a := done
		if a.err == nil {
			a.x.rec.Attempts[a.recIdx].Winner = true
			if a.kind == "hedge" {
				x.rec.HedgeWon = true
			}
			abandon()
			return a, nil
		}
		reason, act := classify(a.err)
		a.settle(a.err, reason)
		x.lastErr = a.err
		if x.rec.Fallback == "" && reason != "canceled" {
			x.rec.Fallback = reason
		}
		e.log.LogAttrs(ctx, slog.LevelDebug, "attempt failed", slog.String("endpoint", a.ep.ID), slog.String("reason", reason))
		switch act {
		case actFail:
			if len(inflight) == 0 || ctx.Err() != nil {
				abandon()
				return nil, a.err
			}
		case actFallback:
			// Only a model with a larger window can serve.
			if a.ep.ContextWindow >= x.policy.MinContextWindow {
				x.policy.MinContextWindow = a.ep.ContextWindow + 1
			}
		}
		if ctx.Err() != nil {
			abandon()
			return nil, ctx.Err()
		}
		if next == "primary" {
			next = "retry"
		}
	}
}

func remove(s []*attempt, a *attempt) []*attempt {
	for i, b := range s {
		if b == a {
			return append(s[:i], s[i+1:]...)
		}
	}
	return s
}

// hedgeDelay is the adaptive delay before a hedge: the primary endpoint's
// live p95 (time to first token for streams), clamped by the policy.
func (x *exec) hedgeDelay(i int) (time.Duration, bool) {
	if len(x.rs.cands) < 2 {
		return 0, false
	}
	return x.e.hedge.Delay(x.rs.cands[i].health.P95(x.req.Stream)), true
}

// cooldownLeft is how long until the soonest cooling endpoint may be used again.
func (x *exec) cooldownLeft() time.Duration {
	now := x.e.now()
	var best time.Duration
	for _, ep := range x.rs.cands {
		s := ep.health.Snapshot()
		if s.Cooling {
			if d := s.CoolingUntil.Sub(now); best == 0 || d < best {
				best = d
			}
		}
	}
	if best == 0 {
		var pe *provider.Error
		if errors.As(x.lastErr, &pe) && pe.API != nil {
			best = pe.API.RetryAfter
		}
	}
	return best
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// exhausted builds the error for "no more attempts", keeping the last
// upstream error's status and type so SDKs classify it as they would have.
func (x *exec) exhausted(code, why string) error {
	return &meshError{code: code, why: why, last: x.lastErr, attempts: x.attempts}
}

func (x *exec) noCandidate(err error) error {
	switch {
	case errors.Is(err, route.ErrAllFiltered) && x.attempts == 0:
		return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest,
			Message: "no endpoint of " + x.rs.name + " meets the request's constraints: " + err.Error()}
	case errors.Is(err, route.ErrAllFiltered):
		return x.exhausted(llm.MeshFallbackExhausted, "no other model can serve the request: "+err.Error())
	case strings.Contains(err.Error(), "breaker_open") && x.attempts == 0:
		return &meshError{code: llm.MeshCircuitOpen, why: err.Error(), last: x.lastErr}
	}
	return x.exhausted(llm.MeshFallbackExhausted, err.Error())
}

// meshError is a failure Keel decided.
type meshError struct {
	code     string
	why      string
	last     error
	attempts int
}

func (m *meshError) Error() string { return m.code + ": " + m.why }
func (m *meshError) Unwrap() error { return m.last }

// clientError turns a failed call into the client's error.
func (x *exec) clientError(ctx context.Context, err error) *llm.APIError {
	if errors.Is(context.Cause(ctx), errDeadline) {
		return &llm.APIError{Status: http.StatusGatewayTimeout, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout,
			Message: fmt.Sprintf("deadline passed after %d attempts", x.attempts)}
	}
	if ctx.Err() != nil {
		return &llm.APIError{Status: 499, Type: llm.ErrAPI, MeshCode: llm.MeshTimeout, Message: "request cancelled: " + context.Cause(ctx).Error()}
	}
	var ae *llm.APIError
	var me *meshError
	if errors.As(err, &me) {
		out := &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: me.code}
		if me.code == llm.MeshTimeout {
			out.Status, out.Type = http.StatusGatewayTimeout, llm.ErrTimeout
		}
		var pe *provider.Error
		if errors.As(me.last, &pe) && pe.API != nil {
			out.Status, out.Type, out.Code, out.Param, out.RawType = pe.API.Status, pe.API.Type, pe.API.Code, pe.API.Param, pe.API.RawType
			if out.Status == http.StatusOK {
				out.Status = llm.TypeStatus(out.Type)
			}
		} else if me.last != nil && me.code != llm.MeshTimeout {
			out.Status, out.Type = http.StatusBadGateway, llm.ErrAPI
		}
		out.Message = fmt.Sprintf("%s after %d attempts", me.why, x.attempts)
		if me.last != nil {
			out.Message += "; last: " + me.last.Error()
		}
		return out
	}
	if errors.As(err, &ae) {
		return ae
	}
	var pe *provider.Error
	if errors.As(err, &pe) && pe.API != nil {
		out := *pe.API // a non-retryable upstream answer passes through unchanged
		return &out
	}
	return &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: err.Error()}
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
			x.rec.NormalizationOffset = off
			x.rec.Calibrated = true
		}
	}
	version := ""
	if ep.Format == llm.FormatAnthropic {
		version = ep.AnthropicVersion
		if version == "" && x.call.ClientHeader != nil {
			version = x.call.ClientHeader.Get("anthropic-version")
		}
		if version == "" {
			version = provider.DefaultAnthropicVersion
		}
	}
	out, actions, err := normalize.Params(req, normalize.Target{Format: ep.Format, Model: ep.UpstreamModel, APIVersion: version}, e.paramPol)
	if err != nil {
		return nil, err
	}
	if len(actions) > 0 {
		x.rec.Normalized = normalize.Header(actions)
		for _, d := range normalize.DroppedParams(actions) {
			if !slices.Contains(x.rec.Dropped, d) {
				x.rec.Dropped = append(x.rec.Dropped, d)
			}
		}
	}
	return out, nil
}
