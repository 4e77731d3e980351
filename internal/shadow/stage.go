package shadow

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Shadow traffic in the call pipeline: a share of an alias's calls (sticky
// by key) is also sent on a shadow path — another model, another alias, or
// the plain legacy path — after the client has its answer, and the two
// answers are diffed (Compare) and reported (Result).
//
// The client never waits for a shadow and its answer never changes: the
// call is queued when the client's call finishes (Pool.Finish: a
// non-blocking send to a bounded queue; a full queue drops it,
// OutcomeDropped) and run by a fixed pool of workers. Under load shadows
// go first: when the client calls in flight exceed
// PoolOptions.ShedInflight, every queued or running shadow is cancelled
// (OutcomeShed). What a shadow call may spend (no cache, no budgets, one
// attempt) is the runner's to enforce (the engine's).

// PoolOptions size the shadow pool. Zero values are the defaults.
type PoolOptions struct {
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

// The causes a shadow is cancelled with.
var (
	// ErrShed: client calls in flight went above the threshold.
	ErrShed = errors.New("shadow shed: client calls in flight above shadow.shed_inflight")
	// ErrClosed: the pool (the engine) is closing.
	ErrClosed = errors.New("shadow cancelled: the engine is closing")
)

// Route is an alias's shadow policy, resolved; immutable.
type Route struct {
	alias string
	cfg   Config
	rule  *Rule
	// Target is the model or alias name the shadow asks for; Legacy runs
	// it (the alias itself) on the plain path.
	Target string
	Legacy bool
	// cut is Percent in hundredths: a key whose hash mod 10,000 is below
	// it is shadowed.
	cut uint64
}

// NewRoute resolves alias's policy c.
func NewRoute(alias string, c Config) (*Route, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	r := &Route{alias: alias, cfg: c, cut: uint64(c.Percent*100 + 0.5)}
	if c.DecisionRule != "" {
		r.rule, _ = ParseRule(c.DecisionRule) // Validate parsed it
	}
	switch t := c.Target; {
	case t.Legacy:
		r.Target, r.Legacy = alias, true
	case t.Alias != "":
		r.Target = t.Alias
	default:
		r.Target = t.Model
	}
	return r, nil
}

// NewRoutes resolves the shadow policy of each alias that has one
// (configs by alias; nil: none); known reports whether a shadow target is
// a configured model or alias. It returns nil when no alias has a shadow.
func NewRoutes(configs map[string]*Config, known func(name string) bool) (map[string]*Route, error) {
	names := make([]string, 0, len(configs))
	for name, c := range configs {
		if c != nil {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var out map[string]*Route
	for _, name := range names {
		r, err := NewRoute(name, *configs[name])
		if err != nil {
			return nil, fmt.Errorf("alias %q: %w", name, err)
		}
		if !known(r.Target) {
			return nil, fmt.Errorf("alias %q: shadow target %s is not a configured model or alias", name, configs[name].Target)
		}
		if out == nil {
			out = map[string]*Route{}
		}
		out[name] = r
	}
	return out, nil
}

// Sampled reports whether the call with this key is shadowed.
func (r *Route) Sampled(key string) bool {
	if r.cut == 0 {
		return false
	}
	h := fnv.New64a()
	h.Write([]byte(r.alias))
	h.Write([]byte{0})
	h.Write([]byte(key))
	return h.Sum64()%10000 < r.cut
}

// Key is what a call's sampling is sticky by: the virtual key, else the
// client's credential (x-api-key, Authorization), else the end user id,
// else the request id (then not sticky).
func Key(c *pipeline.Call) string {
	if c.KeyID != "" {
		return "key:" + c.KeyID
	}
	if h := c.Header; h != nil {
		if v := h.Get("X-Api-Key"); v != "" {
			return "cred:" + v
		}
		if v := h.Get("Authorization"); v != "" {
			return "cred:" + v
		}
	}
	if c.Request != nil && c.Request.UserID != "" {
		return "user:" + c.Request.UserID
	}
	return "req:" + c.ID
}

// Part is the stage's part of a client call: whether it is counted in
// flight, and the shadow it gets, if sampled.
type Part struct {
	counted bool
	route   *Route
	call    pipeline.Call
}

// Primary is what the shadow of a finished client call compares against.
type Primary struct {
	RequestID string
	// Request is the request as the record keeps it (nil: not shadowed);
	// Response the answer the client got (nil on error).
	Request  *llm.Request
	Response *llm.Response
	Failed   bool
	Model    string
	Cost     float64
}

// Run sends a shadow call (c.Request names the target) on its path — the
// legacy path when legacy — and says what came back.
type Run func(ctx context.Context, c *pipeline.Call, legacy bool) Ran

// Ran is a shadow call's result: its answer or error, its cost, the model
// that answered and how long it took.
type Ran struct {
	Response *llm.Response
	Err      error
	Cost     float64
	Model    string
	Took     time.Duration
}

// Pool runs shadow calls on a fixed set of workers. It is safe for
// concurrent use.
type Pool struct {
	jobs    chan *job
	workers int
	shedAt  int64
	timeout time.Duration
	run     Run
	observe func(Result)
	now     func() time.Time
	// inflight counts client calls in flight; running the shadows a worker
	// has taken the generation for: a client call over the threshold
	// sheds only when one is (so sustained load takes no lock per call).
	inflight atomic.Int64
	running  atomic.Int64
	closed   atomic.Bool
	stop     chan struct{}
	wg       sync.WaitGroup

	mu sync.Mutex // guards following
	// ctx is the current generation: shed cancels it and starts another.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// pending counts shadows queued or running; idle holds the channels
	// Drain waits on, closed when it drops to zero.
	pending int
	idle    []chan struct{}
}

type job struct {
	part    *Part
	primary Primary
	queued  time.Time
}

// NewPool starts a pool's workers: run sends each shadow, observe gets
// every result (it must not block), now is the clock.
func NewPool(o PoolOptions, run Run, observe func(Result), now func() time.Time) *Pool {
	p := &Pool{workers: o.Workers, shedAt: int64(o.ShedInflight), timeout: o.Timeout, run: run, observe: observe, now: now, stop: make(chan struct{})}
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
	p.jobs = make(chan *job, q)
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.wg.Add(p.workers)
	for range p.workers {
		go p.worker()
	}
	return p
}

// Stage is the pool's pipeline stage: it counts the client call in flight,
// sheds shadows when too many are, and samples the call (by its route's
// policy: route returns nil for a name without one). record is told the
// call's part, which the finish hands back to Finish.
func (p *Pool) Stage(route func(model string) *Route, record func(*pipeline.Call, *Part)) pipeline.Stage {
	return func(next pipeline.Handler) pipeline.Handler {
		return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
			if n := p.inflight.Add(1); n > p.shedAt && p.running.Load() > 0 {
				// A worker counts itself running before it reads the
				// generation and then the calls in flight: either it sees
				// this call, or this call sees it and cancels the
				// generation it read.
				p.shed(ErrShed)
			}
			part := &Part{counted: true}
			if r := route(c.Request.Model); r != nil && r.Sampled(Key(c)) {
				part.route, part.call = r, *c
				part.call.Record = nil
			}
			record(c, part)
			return next.Serve(ctx, c)
		})
	}
}

// Finish is called once a client call is finished and reported: it queues
// the shadow of a shadowed call that succeeded.
func (p *Pool) Finish(part *Part, primary Primary) {
	if part == nil {
		return
	}
	if part.counted {
		p.inflight.Add(-1)
	}
	if part.route == nil || primary.Failed || primary.Response == nil || primary.Request == nil || p.closed.Load() {
		return
	}
	j := &job{part: part, primary: primary, queued: p.now()}
	p.add(1)
	select {
	case p.jobs <- j:
	default:
		p.add(-1)
		p.observe(p.result(j, OutcomeDropped))
	}
}

func (p *Pool) add(n int) {
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

// Drain waits until no shadow call is queued or running, or ctx ends.
// Calls that finish meanwhile may queue more.
func (p *Pool) Drain(ctx context.Context) error {
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

// Close cancels every shadow and stops the workers; it waits for them.
func (p *Pool) Close() {
	if p.closed.CompareAndSwap(false, true) {
		close(p.stop)
		p.shed(ErrClosed)
	}
	p.wg.Wait()
}

// shed cancels every running shadow with cause and starts a new
// generation for those that come after.
func (p *Pool) shed(cause error) {
	p.mu.Lock()
	p.cancel(cause)
	p.ctx, p.cancel = context.WithCancelCause(context.Background())
	p.mu.Unlock()
}

func (p *Pool) generation() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctx
}

func (p *Pool) result(j *job, outcome string) Result {
	r := j.part.route
	return Result{Time: j.queued, RequestID: j.primary.RequestID, Alias: r.alias, Target: r.cfg.Target.String(),
		PrimaryModel: j.primary.Model, Outcome: outcome, PrimaryCost: j.primary.Cost, Rule: r.cfg.DecisionRule}
}

func (p *Pool) worker() {
	defer p.wg.Done()
	for {
		select {
		case <-p.stop:
			return
		case j := <-p.jobs:
			if p.closed.Load() {
				p.add(-1)
				return
			}
			p.running.Add(1)
			gen := p.generation()
			if p.inflight.Load() > p.shedAt {
				p.observe(p.result(j, OutcomeShed))
			} else {
				p.observe(p.runJob(gen, j))
			}
			p.running.Add(-1)
			p.add(-1)
		}
	}
}

// runJob sends j's request on its shadow path, under the pool's
// generation gen, and compares the answers.
func (p *Pool) runJob(gen context.Context, j *job) Result {
	res := p.result(j, OutcomeCompared)
	if p.closed.Load() {
		// Close sets closed before it cancels the generation: a worker that
		// took the new one after that sees closed here.
		res.Outcome, res.Error = OutcomeShed, ErrClosed.Error()
		return res
	}
	ctx, cancel := context.WithTimeout(gen, p.timeout)
	defer cancel()
	req := *j.primary.Request
	req.Model, req.Stream = j.part.route.Target, false
	c := j.part.call
	c.Request = &req
	c.ID = j.primary.RequestID + "/shadow"
	c.Timeout = 0
	ran := p.run(ctx, &c, j.part.route.Legacy)
	res.ShadowTime, res.ShadowCost, res.ShadowModel = ran.Took, ran.Cost, ran.Model
	if ran.Err != nil || ran.Response == nil {
		res.Outcome = OutcomeError
		if errors.Is(context.Cause(gen), ErrShed) {
			res.Outcome = OutcomeShed
		}
		if ran.Err != nil {
			res.Error = ran.Err.Error()
		}
		return res
	}
	res.Comparison = Compare(answerText(j.primary.Response), answerText(ran.Response), j.part.route.rule)
	return res
}

// answerText is what comparison reads of an answer: its text blocks
// joined, or, when it has none, its first tool call's input.
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
