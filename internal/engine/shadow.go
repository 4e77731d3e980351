package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/shadow"
)

// Shadow comparison: a share of an alias's calls (Alias.Shadow, sticky by
// key) is also sent on a shadow path — another model, another alias, or
// the plain legacy path — after the client has its answer, and the two
// answers are diffed (package shadow) and reported to a ShadowObserver.
//
// The client never waits for a shadow and its answer never changes: the
// call is queued when the client's call finishes (a non-blocking send to a
// bounded queue; a full queue drops it, OutcomeDropped) and run by a fixed
// pool of workers. Under load shadows go first: when the client calls in
// flight exceed ShadowOptions.ShedInflight, every queued or running shadow
// is cancelled (OutcomeShed).
//
// A shadow call never spends what the client's calls have: it reads and
// writes no response cache, deposits into and draws from no retry or hedge
// budget, is never retried, hedged or continued (one attempt, failover to
// another endpoint included in "never"), and feeds neither the safety
// valve, nor key accounting, nor the request log, nor the per-call
// observers (RequestDone). Its attempts do feed the health and breakers
// of the endpoints they reach, and the attempt events: they are real
// traffic on those endpoints, and the router should know what it saw. Its
// cost is reported in ShadowResult.ShadowCost, apart from the client's.

// ShadowObserver is told about every shadowed call: compared, failed,
// dropped or shed. It runs on a shadow worker (or, for a drop, the
// client's goroutine) and must not block.
type ShadowObserver interface {
	OnShadow(shadow.Result)
}

// ShadowOptions size the shadow pool. Zero values are the defaults.
type ShadowOptions struct {
	// Workers run shadow calls; default 2.
	Workers int
	// Queue bounds the shadow calls waiting for a worker; default 64.
	Queue int
	// ShedInflight: while more client calls than this are in flight,
	// shadows are cancelled and none starts; default 64.
	ShedInflight int
	// Timeout is each shadow call's deadline; default 30s.
	Timeout time.Duration
}

// errShed and errShadowClosed are the causes a shadow is cancelled with.
var (
	errShed         = errors.New("shadow shed: client calls in flight above shadow.shed_inflight")
	errShadowClosed = errors.New("shadow cancelled: the engine is closing")
)

// shadowRoute is an alias's shadow policy, resolved at New.
type shadowRoute struct {
	alias  string
	cfg    shadow.Config
	rule   *shadow.Rule
	target string // the model or alias name the shadow asks for
	// legacy runs the target (the alias itself) on the plain path.
	legacy bool
	// cut is Percent in hundredths: a key whose hash mod 10,000 is below
	// it is shadowed.
	cut uint64
}

// sampled reports whether the call with this key is shadowed.
func (s *shadowRoute) sampled(key string) bool {
	if s.cut == 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(s.alias))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()%10000 < s.cut
}

// shadowKey is what a call's shadow sampling is sticky by: the virtual
// key, else the client's credential (x-api-key, Authorization), else the
// end user id, else the request id (then not sticky).
func shadowKey(req *llm.Request, call Call) string {
	if call.KeyID != "" {
		return "key:" + call.KeyID
	}
	if h := call.ClientHeader; h != nil {
		if v := h.Get("X-Api-Key"); v != "" {
			return "cred:" + v
		}
		if v := h.Get("Authorization"); v != "" {
			return "cred:" + v
		}
	}
	if req.UserID != "" {
		return "user:" + req.UserID
	}
	return "req:" + call.RequestID
}

// shadowJob is one queued shadow call.
type shadowJob struct {
	sr      *shadowRoute
	req     *llm.Request // the client's request
	call    Call
	primary *Record
	queued  time.Time
}

// shadowPool runs shadow calls on a fixed set of workers.
type shadowPool struct {
	jobs    chan *shadowJob
	workers int
	shedAt  int64
	timeout time.Duration
	// running counts shadows a worker has taken the generation for: a
	// client call over the threshold sheds only when one is (so sustained
	// load takes no lock per call).
	running atomic.Int64

	mu sync.Mutex // guards following
	// ctx is the current generation: shed cancels it and starts another.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// pending counts shadows queued or running; idle holds the channels
	// DrainShadows waits on, closed when it drops to zero.
	pending int
	idle    []chan struct{}
}

func (p *shadowPool) add(n int) {
	p.mu.Lock()
	p.pending += n
	if p.pending == 0 {
		for _, ch := range p.idle {
			close(ch)
		}
		p.idle = nil
	}
	p.mu.Unlock()
}

// DrainShadows waits until no shadow call is queued or running, or ctx
// ends. Calls that finish meanwhile may queue more.
func (e *Engine) DrainShadows(ctx context.Context) error {
	p := e.shadows
	if p == nil {
		return nil
	}
	p.mu.Lock()
	if p.pending == 0 {
		p.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	p.idle = append(p.idle, ch)
	p.mu.Unlock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func newShadowPool(o ShadowOptions) *shadowPool {
	p := &shadowPool{workers: o.Workers, shedAt: int64(o.ShedInflight), timeout: o.Timeout}
	if p.workers <= 0 {
		p.workers = 2
	}
	q := o.Queue
	if q <= 0 {
		q = 64
	}
	if p.shedAt <= 0 {
		p.shedAt = 64
	}
	if p.timeout <= 0 {
		p.timeout = 30 * time.Second
	}
	p.jobs = make(chan *shadowJob, q)
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	return p
}

// shed cancels every running shadow with cause and starts a new
// generation for those that come after.
func (p *shadowPool) shed(cause error) {
	p.mu.Lock()
	p.cancel(cause)
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.mu.Unlock()
}

func (p *shadowPool) generation() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctx
}

// newShadows resolves each alias's shadow policy; it runs in New after
// every route exists.
func (e *Engine) newShadows(aliases map[string]Alias, o ShadowOptions) error {
	for name, a := range aliases {
		c := a.Shadow
		if c == nil {
			continue
		}
		if err := c.Validate(); err != nil {
			return fmt.Errorf("engine: alias %q: %w", name, err)
		}
		sr := &shadowRoute{alias: name, cfg: *c, cut: uint64(c.Percent*100 + 0.5)}
		if c.DecisionRule != "" {
			sr.rule, _ = shadow.ParseRule(c.DecisionRule) // Validate parsed it
		}
		switch t := c.Target; {
		case t.Legacy:
			sr.target, sr.legacy = name, true
		case t.Alias != "":
			sr.target = t.Alias
		default:
			sr.target = t.Model
		}
		if e.routes[sr.target] == nil {
			return fmt.Errorf("engine: alias %q: shadow target %s is not a configured model or alias", name, c.Target)
		}
		e.routes[name].shadow = sr
	}
	for _, rs := range e.routes {
		if rs.shadow != nil {
			e.shadows = newShadowPool(o)
			for range e.shadows.workers {
				e.probes.Add(1)
				go e.shadowWorker()
			}
			return nil
		}
	}
	return nil
}

// shadowStage counts the client calls in flight and samples the calls to
// shadow (their shadow is queued by the finish, once the client has its
// answer). Nil when no alias has a shadow.
func (e *Engine) shadowStage() pipeline.Stage {
	if e.shadows == nil {
		return nil
	}
	return func(next pipeline.Handler) pipeline.Handler {
		return pipeline.HandlerFunc(func(ctx context.Context, pc *pipeline.Call) (*pipeline.Answer, error) {
			c := callOf(pc)
			e.shadowStart(pc.Request, c.call, &c.rec)
			return next.Serve(ctx, pc)
		})
	}
}

// shadowStart is called as a client call starts: it counts the call in
// flight, sheds shadows when too many are, and says whether this call is
// shadowed (recorded in rec).
func (e *Engine) shadowStart(req *llm.Request, call Call, rec *Record) {
	if n := e.inflight.Add(1); n > e.shadows.shedAt && e.shadows.running.Load() > 0 {
		// A worker counts itself running before it reads the generation
		// and then the calls in flight: either it sees this call, or this
		// call sees it and cancels the generation it read.
		e.shadows.shed(errShed)
	}
	rec.inflight = true
	if rs := e.routes[req.Model]; rs != nil && rs.shadow != nil && rs.shadow.sampled(shadowKey(req, call)) {
		rec.shadowOf = rs.shadow
		rec.shadowCall = call
		rec.shadowCall.Done = nil
	}
}

// shadowFinish is called once the client call is finished and reported:
// it queues the shadow of a shadowed call that succeeded.
func (e *Engine) shadowFinish(rec *Record) {
	if rec.inflight {
		e.inflight.Add(-1)
	}
	sr := rec.shadowOf
	if sr == nil || rec.Err != nil || rec.Response == nil || rec.Request == nil || e.closed.Load() {
		return
	}
	j := &shadowJob{sr: sr, req: rec.Request, call: rec.shadowCall, primary: rec, queued: e.now()}
	e.shadows.add(1)
	select {
	case e.shadows.jobs <- j:
	default:
		e.shadows.add(-1)
		e.events.shadow(e.shadowResult(j, shadow.OutcomeDropped))
	}
}

func (e *Engine) shadowResult(j *shadowJob, outcome string) shadow.Result {
	return shadow.Result{Time: j.queued, RequestID: j.primary.RequestID, Alias: j.sr.alias, Target: j.sr.cfg.Target.String(),
		PrimaryModel: j.primary.ServedModel, Outcome: outcome, PrimaryCost: j.primary.Cost, Rule: j.sr.cfg.DecisionRule}
}

func (e *Engine) shadowWorker() {
	defer e.probes.Done()
	for {
		select {
		case <-e.stop:
			return
		case j := <-e.shadows.jobs:
			if e.closed.Load() {
				e.shadows.add(-1)
				return
			}
			p := e.shadows
			p.running.Add(1)
			gen := p.generation()
			if e.inflight.Load() > p.shedAt {
				e.events.shadow(e.shadowResult(j, shadow.OutcomeShed))
			} else {
				e.events.shadow(e.runShadow(gen, j))
			}
			p.running.Add(-1)
			p.add(-1)
		}
	}
}

// runShadow sends j's request on its shadow path, under the pool's
// generation gen, and compares the answers.
func (e *Engine) runShadow(gen context.Context, j *shadowJob) shadow.Result {
	res := e.shadowResult(j, shadow.OutcomeCompared)
	if e.closed.Load() {
		// Close sets closed before it cancels the generation: a worker that
		// took the new one after that sees closed here.
		res.Outcome, res.Error = shadow.OutcomeShed, errShadowClosed.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(gen, e.shadows.timeout)
	defer cancel()
	req := *j.req
	req.Model, req.Stream = j.sr.target, false
	call := j.call
	call.RequestID = j.primary.RequestID + "/shadow"
	call.Timeout = 0
	c := e.newCall(&req, call)
	c.rec.Stream, c.rec.TraceParent, c.rec.done = false, "", nil
	c.rec.shadowRun, c.rec.shadowLegacy = true, j.sr.legacy
	_, err := e.inner.Serve(ctx, &c.pc)
	rec, served := &c.rec, c.served
	var ae *llm.APIError
	if err != nil {
		ae, served = asAPIError(err), nil
	}
	res.ShadowTime = e.now().Sub(rec.Start)
	res.ShadowCost = e.callCost(rec, served)
	if served != nil {
		res.ShadowModel = served.Model
	}
	if ae != nil || rec.Response == nil {
		res.Outcome = shadow.OutcomeError
		if errors.Is(context.Cause(gen), errShed) {
			res.Outcome = shadow.OutcomeShed
		}
		if ae != nil {
			res.Error = ae.Error()
		}
		return res
	}
	res.Comparison = shadow.Compare(answerText(j.primary.Response), answerText(rec.Response), j.sr.rule)
	return res
}

// answerText is what shadow comparison reads of an answer: its text
// blocks joined, or, when it has none, its first tool call's input.
func answerText(r *llm.Response) string {
	var b strings.Builder
	for _, bl := range r.Content {
		if bl.Type == llm.BlockText {
			b.WriteString(bl.Text)
		}
	}
	if b.Len() == 0 {
		for _, bl := range r.Content {
			if bl.Type == llm.BlockToolUse {
				return string(bl.Input)
			}
		}
	}
	return b.String()
}
