package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/keelmesh/keel/internal/attempt"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// callState is one client call in the engine: the pipeline's Call, the
// engine's Call (Done), the Record the finish reports, and what the
// resolve stage and the core decided for it.
type callState struct {
	pc   pipeline.Call
	call Call
	rec  Record

	// rs is the route the call runs on (after tiering); tiers the tiered
	// alias it named (nil otherwise) and tier the index of the route its
	// attempts run on (escalate moves it up); semThreshold the named
	// route's semantic-cache threshold.
	rs           *routeState
	tiers        *tiers
	tier         int
	semThreshold float32
	// primaryCap is the capability of the route's first model: a call
	// served by a weaker one was downgraded (the valve counts those).
	primaryCap int

	// x is the call's attempts (nil before the core ran); relay its
	// stream when it streams from an upstream; fused is set for a fused
	// (fragmented) answer, which no cache stores; cancel ends the call's
	// deadline.
	x      *exec
	relay  *relay
	fused  bool
	cancel context.CancelFunc
	// structured is the structured-output stage's part (nil when no
	// contract applied), reask the call's re-ask path and frag its
	// fragment replicas.
	structured *structured.Part
	reask      *reasker
	frag       *replicas
	// reasked is the endpoint whose re-asked answer replaced the first
	// (the structured stage): the one credited with the answer.
	reasked *endpoint
	// served is the endpoint credited with the answer and err the client's
	// error: set by the core (by a stream at its Close) and read by the
	// finish.
	served *endpoint
	err    *llm.APIError

	// shadow is the shadow stage's part (nil without shadows);
	// shadowRun marks a shadow call itself (never finished), shadowLegacy
	// one on the legacy path.
	shadow                  *shadow.Part
	shadowRun, shadowLegacy bool

	// out is the call's Outcome and ans the first answer the core made,
	// inside the call's allocation (the Outcome's Record keeps it anyway);
	// later answers are allocated, so none is reused.
	out     Outcome
	ans     pipeline.Answer
	ansUsed bool
}

// callOf is the engine's state of a pipeline call.
func callOf(pc *pipeline.Call) *callState { return pc.Record.(*callState) }

func (e *Engine) newCall(req *llm.Request, call Call) *callState {
	c := &callState{call: call}
	c.rec = Record{Call: callPart(req, call, e.now()), Result: callrec.Result{Request: req}}
	c.pc = pipeline.Call{Request: req, ID: call.RequestID, Header: call.ClientHeader, Behavior: call.Behavior, Timeout: call.Timeout,
		TraceParent: call.TraceParent, KeyID: call.KeyID, Team: call.Team, Record: c}
	return c
}

// callPart is the record's identity of a call of req started at start.
func callPart(req *llm.Request, call Call, start time.Time) callrec.Call {
	return callrec.Call{RequestID: call.RequestID, Start: start, Format: req.Format, Model: req.Model, Stream: req.Stream, Behavior: call.Behavior,
		TraceParent: call.TraceParent, KeyID: call.KeyID, Team: call.Team}
}

// outcome is the client's Outcome of the chain's answer, or nil with c.err
// set.
func (e *Engine) outcome(c *callState, ans *pipeline.Answer, err error) *Outcome {
	if err != nil {
		c.served, c.err = nil, asAPIError(err)
		return nil
	}
	out := &c.out
	*out = Outcome{Endpoint: ans.Endpoint, Header: ans.Header, Record: &c.rec, Response: ans.Response}
	if ans.Events != nil {
		out.Response = nil
		out.Stream = &Stream{ev: ans.Events, c: c, ans: ans, e: e}
	}
	return out
}

// asAPIError is err as the client's error: stages return *llm.APIError.
func asAPIError(err error) *llm.APIError {
	var ae *llm.APIError
	if errors.As(err, &ae) {
		return ae
	}
	return &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: err.Error()}
}

// Stream is a streamed answer as the client receives it: the chain's
// events (restored, stored, relayed), finished when closed. A Stream is
// used by one goroutine; Close must be called.
type Stream struct {
	ev     pipeline.Events
	c      *callState
	ans    *pipeline.Answer
	e      *Engine
	closed bool
}

// Next returns the next event for the client; io.EOF after message_stop.
// After an error event Next returns io.EOF. The event is the caller's
// until the next call to Next: it must copy what it keeps of it.
func (s *Stream) Next() (*llm.Event, error) {
	if s.closed {
		return nil, io.EOF
	}
	return s.ev.Next()
}

// Ready reports whether Next returns an event without waiting on an
// upstream (events already read, a replayed answer, the rest of an
// upstream chunk). A writer need not flush before a ready event.
func (s *Stream) Ready() bool { return !s.closed && pipeline.Ready(s.ev) }

// Close ends the stream, cancels the upstream and finishes the call: the
// chain's events are closed (each stage's wrapper, then the relay), then
// the call is finished, once.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.ev.Close()
	s.e.finishCall(s.c)
	return err
}

// Record returns the call's record; final after Close.
func (s *Stream) Record() *Record { return &s.c.rec }

// Served is the endpoint serving the stream now.
func (s *Stream) Served() *provider.Endpoint { return s.ans.ServedBy() }

// SchemaValid reports, for a relaxed structured stream after its end,
// whether the answer was valid; ok is false when no schema applied.
func (s *Stream) SchemaValid() (valid, ok bool) { return s.c.structured.SchemaValid() }

// The engine's call as the stages' hooks see it (chain.Call).

func (c *callState) Record() *Record                { return &c.rec }
func (c *callState) ShadowRun() bool                { return c.shadowRun }
func (c *callState) ShadowLegacy() bool             { return c.shadowLegacy }
func (c *callState) Threshold() float32             { return c.semThreshold }
func (c *callState) Legacy() bool                   { return c.x.Legacy }
func (c *callState) SetLegacy()                     { c.x.Legacy, c.rec.Legacy = true, true }
func (c *callState) Fused() bool                    { return c.fused }
func (c *callState) FusedBy(ep *provider.Endpoint)  { c.served, c.fused = c.frag.eps[ep], true }
func (c *callState) Contract() *structured.Part     { return c.structured }
func (c *callState) SetContract(p *structured.Part) { c.structured, c.x.Spec = p, p.Upstream }
func (c *callState) CreditReask()                   { c.reasked, c.served = c.reask.ep, c.reask.ep }
func (c *callState) OutputTool() bool               { return c.relay != nil && c.relay.Tool() }
func (c *callState) Fail(ctx context.Context, err error) error {
	return c.x.ClientError(ctx, err)
}

func (c *callState) Reasker() structured.Reasker {
	c.reask = &reasker{c: c}
	return c.reask
}

func (c *callState) Replicas() fragment.Replicas {
	c.frag = &replicas{x: c.x, eps: map[*provider.Endpoint]*endpoint{}}
	return c.frag
}

// compose builds the call pipeline once, outermost first (ARCHITECTURE.md):
// personal data and shadow sampling face the client; below them, the part
// a shadow call runs too: route resolution, the caches, the call's
// admission (deadline, budgets, calibration), the rollout stage and valve,
// structured output, fragmentation, then the core (the attempt chain and
// the stream relay). A stage that is off is nil and costs nothing.
func (e *Engine) compose() {
	outer, inner := e.stages()
	e.inner = pipeline.Chain(pipeline.HandlerFunc(e.core), inner...)
	e.handler = pipeline.Chain(e.inner, outer...)
}

// stages lists the pipeline's stages, outermost first: those that face the
// client, and those a shadow call runs too.
func (e *Engine) stages() (outer, inner []pipeline.Stage) {
	s := &e.st
	return []pipeline.Stage{s.PII, e.shadowStage()},
		[]pipeline.Stage{e.resolveStage, s.Exact, s.Semantic, e.admit, s.Rollout, s.Structured, s.Fragment}
}

// resolveStage finds the call's route (its domain, the model or alias,
// the tier) and, on the way back, keeps a non-streamed answer in the
// record as the stages below gave it (placeholders, never the values).
func (e *Engine) resolveStage(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
		c := callOf(pc)
		if ae := e.resolve(c, pc.Request); ae != nil {
			return nil, ae
		}
		ans, err := next.Serve(ctx, pc)
		if err == nil && ans.Events == nil {
			c.rec.Response = ans.Response
		}
		return ans, err
	})
}

// resolve sets the call's route, tier and domain.
func (e *Engine) resolve(c *callState, req *llm.Request) *llm.APIError {
	rec := &c.rec
	if e.classify != nil {
		rec.Domain = e.classify(promptText(req))
	}
	rs, _, ae := e.lookup(req.Model, req.Format, false)
	if ae != nil {
		return ae
	}
	c.semThreshold = rs.semThreshold
	if rs.tiers != nil {
		c.tiers = rs.tiers
		rs, c.tier = e.tierRoute(rs, promptText(req), rec)
	}
	c.rs = rs
	rec.PrimaryModel, c.primaryCap = rs.cands[0].Model, rs.cands[0].Capability
	return nil
}

// lookup finds the route serving model for a client of format (an
// embedding model's when embedding): a configured one, else, when
// passthrough is on, the passthrough route. A name it does not serve is a
// 404, also when no passthrough provider speaks format (noProvider set).
func (e *Engine) lookup(model string, format llm.Format, embedding bool) (rs *routeState, noProvider bool, ae *llm.APIError) {
	rs = e.routes[model]
	if embedding {
		rs = e.embed[model]
	}
	if rs == nil && len(e.fleet.Templates) > 0 && model != "" {
		var err error
		if rs, err = e.fleet.Passthrough(model, format); errors.Is(err, fleet.ErrNoProvider) {
			return nil, true, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Code: codeModelNotFound, Message: "model " + model + ": " + err.Error()}
		} else if err != nil {
			return nil, false, &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: llm.MeshFallbackExhausted,
				Message: "model " + model + ": " + err.Error()}
		}
	}
	if rs == nil {
		what := "model"
		if embedding {
			what = "embedding model"
		}
		return nil, false, &llm.APIError{Status: http.StatusNotFound, Type: llm.ErrNotFound, Code: codeModelNotFound, Message: e.notServed(what, model)}
	}
	return rs, false, nil
}

// admit starts the call's attempts: its deadline, its route's budgets,
// its calibration, its exec. A call that ends below (an error, a
// response) has its deadline cancelled and its record sealed here; a
// stream does both when it is closed.
func (e *Engine) admit(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
		c := callOf(pc)
		c.cancel = func() {}
		timeout := e.timeout
		if c.call.Timeout > 0 {
			timeout = c.call.Timeout
		}
		if timeout > 0 {
			ctx, c.cancel = context.WithTimeoutCause(ctx, timeout, errDeadline)
		}
		ans, err := e.admitted(ctx, c, pc, next)
		if err != nil || ans.Events == nil || c.fused {
			// A fused stream is made: its attempts all ended.
			c.cancel()
			if c.x != nil {
				c.x.Seal()
			}
		}
		return ans, err
	})
}

func (e *Engine) admitted(ctx context.Context, c *callState, pc *pipeline.Call, next pipeline.Handler) (*pipeline.Answer, error) {
	rec, rs, call := &c.rec, c.rs, c.call
	if !c.shadowRun {
		rs.retries.OnRequest()
		rs.hedges.OnRequest()
	}
	if b := call.Behavior; b != nil && b.CalibrationID != "" {
		if _, ok := e.cals.ByID(b.CalibrationID); e.cals == nil || !ok {
			return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "mesh_behavior.calibration_id",
				Message: fmt.Sprintf("mesh_behavior.calibration_id: no calibration %q (keel calibrate stores them)", b.CalibrationID)}
		}
	}
	x := e.newExec(rs, pc.Request, call, rec)
	c.x = x
	x.Policy = e.policy(rs, call.Behavior)
	x.Policy.Domain = rec.Domain
	x.Shadow = c.shadowRun
	return next.Serve(ctx, pc)
}

// core runs the admitted call on its route: the attempt chain.
func (e *Engine) core(ctx context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
	c := callOf(pc)
	rec, x, req := &c.rec, c.x, pc.Request
	won, err := x.Run(ctx, req, policy.AttemptPrimary)
	if err != nil {
		return nil, x.ClientError(ctx, err)
	}
	rec.Drop(won.Result().Dropped)
	if won.Result().Stream == nil {
		return e.answer(c, won), nil
	}
	return e.stream(ctx, c, won, c.cancel), nil
}

// answer is a non-streamed winner's answer, a forced output tool folded
// into text.
func (e *Engine) answer(c *callState, won *attempt.Attempt) *pipeline.Answer {
	won.Succeeded()
	resp := won.Result().Response
	c.rec.Usage = resp.Usage
	if won.Tool() {
		translate.FoldOutputTool(resp)
	}
	c.served = won.Endpoint()
	var a *pipeline.Answer
	if c.ansUsed {
		a = new(pipeline.Answer)
	} else {
		c.ansUsed, a = true, &c.ans
	}
	*a = pipeline.Answer{Endpoint: c.served.Endpoint, Header: won.Result().Header, Response: resp}
	return a
}

// stream is a streamed winner's answer: the relay.
func (e *Engine) stream(ctx context.Context, c *callState, won *attempt.Attempt, cancel context.CancelFunc) *pipeline.Answer {
	st := attempt.NewRelay(ctx, cancel, c, won)
	c.relay = st
	return &pipeline.Answer{Endpoint: won.Endpoint().Endpoint, Header: won.Result().Header, Events: st, Served: st.Served}
}
