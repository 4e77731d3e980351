// Package engine is the core of the call pipeline (ARCHITECTURE.md): it
// composes the stages, handed to it built (Options.Stages: chain.Build,
// which internal/assemble calls) — personal data (internal/pii), shadow sampling
// (internal/shadow), route resolution, the exact and semantic caches
// (internal/cache, internal/semcache), then its core: the deadline,
// structured output, the rollout stage and valve, fragmentation, and the
// attempt chain (budgeted retries, per-endpoint breakers, hedging) whose
// streamed answer the relay (internal/relay) forwards and continues on
// another endpoint when it breaks mid-way — and finishes every call in one
// place (finishCall), whatever way it ends.
//
// An Engine is safe for concurrent use. Do blocks until an answer (or the
// first content event of a stream) arrives or ctx ends. The engine imports
// no metrics, storage or HTTP-front package: it reports each finished call
// to an Observer, and, when several replicas share state (Options.Shared,
// a SharedState such as store/redis), publishes what it observes of its
// endpoints and leases its retry and hedge budgets through it, never on a
// call's path (package fleet).
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/attempt"
	"github.com/keelmesh/keel/internal/cacheroute"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/route"
	"github.com/keelmesh/keel/internal/shadow"
)

// Alias is an ordered chain of model names served under one name.
type Alias struct {
	Models []string
	// Strategy is "ordered" or "latency" (the default).
	Strategy string
	// Tiers, on a tiered alias, are its tiers' models, cheapest first,
	// each in the order its route tries them (Tiering names the tiers).
	Tiers [][]string
	// Translation overrides the models' translation policy ("drop", "reject").
	Translation string
	// Tiering, when set with Tiers, routes each call by its prompt's
	// complexity (tiering.go).
	Tiering Tiering
	// SemanticThreshold, when > 0, turns the semantic cache on for the
	// alias: the lowest cosine similarity it serves. It needs
	// Options.Stages.Semantic.
	SemanticThreshold float64
}

// Options configure an Engine. Zero values are the documented defaults.
type Options struct {
	// Endpoints are every upstream, in config order.
	Endpoints []*provider.Endpoint
	Aliases   map[string]Alias
	Client    *provider.Client
	Logger    *slog.Logger
	Observer  Observer
	// Passthrough endpoints serve model names no model or alias claims: the
	// one whose Format matches the client's is used with its Model and
	// UpstreamModel set to the requested name; a client of a format none
	// speaks gets 404 naming the missing key (fleet.ErrNoProvider).
	Passthrough []*provider.Endpoint

	Resilience Resilience
	// Stages are the feature stages, built (chain.Build): the engine puts
	// them in their places in the chain (compose).
	Stages chain.Stages
	// Calibrations map requested temperatures between models (keel
	// calibrate); nil means none.
	Calibrations *normalize.Set
	// ParamPolicy says what happens to a sampling parameter the serving
	// model or API version does not accept: drop (default), map or reject.
	ParamPolicy normalize.Policy
	// DisableNormalization turns behaviour and parameter normalisation off.
	DisableNormalization bool
	// Classify returns the domain of a prompt (finance, medical, legal,
	// code, general); nil leaves Record.Domain empty.
	Classify func(text string) string
	// Now is the clock (nil = time.Now); tests inject one.
	Now func() time.Time
	// Rand returns a uniform int in [0, n) (nil = math/rand/v2).
	Rand func(n int) int
	// Shared, when set, shares endpoint observations and the retry and
	// hedge budgets with the mesh's other replicas (see SharedState); nil
	// keeps everything local.
	Shared SharedState
	// Prices prices an endpoint whose Price is zero (passthrough endpoints
	// above all) by its upstream model name; nil leaves them unpriced.
	Prices func(model string) (pricing.Price, bool)
	// Shadows are the aliases' shadow policies, resolved
	// (shadow.NewRoutes: their targets are configured models or aliases),
	// by alias; nil: none. Shadow sizes the pool that runs them.
	Shadows map[string]*shadow.Route
	Shadow  shadow.PoolOptions
}

// Resilience tunes retries, hedging, breakers and health.
type Resilience struct {
	// MaxAttempts bounds attempts (retries and hedges included) per call; default 4.
	MaxAttempts int
	// Timeout is the default overall deadline of a call; 0 means none.
	// A client's X-Mesh-Timeout header overrides it.
	Timeout time.Duration
	// RetryBudget caps retries per route (default ratio 0.2, burst 10).
	RetryBudget resilience.BudgetConfig
	// HedgeBudget caps hedges per route (default ratio 0.1, burst 10).
	HedgeBudget resilience.BudgetConfig
	// Hedge bounds the adaptive hedge delay (the endpoint's live p95).
	Hedge resilience.HedgePolicy
	// DisableHedging turns hedging off (a client may still turn it off
	// per request with mesh_behavior.hedge: false).
	DisableHedging bool
	Backoff        resilience.BackoffConfig
	Breaker        resilience.BreakerConfig
	Health         health.Config
	// DisableRecovery turns mid-stream continuation off.
	DisableRecovery bool
	// DisableSlowStreamHedging turns slow-stream hedging off (it is off
	// too wherever hedging is): a stream whose recent pace falls as far
	// below its endpoint's normal one as SlowStream says is raced against
	// a continuation on another endpoint, within SlowStreamBudget
	// (internal/attempt/slowstream.go, internal/relay/race.go).
	DisableSlowStreamHedging bool
	SlowStream               health.PacePolicy
	// SlowStreamBudget caps slow-stream races per route, apart from the
	// hedges (default ratio 0.05 of the streams, burst 10).
	SlowStreamBudget resilience.BudgetConfig
	// CacheAffinity keeps a conversation on the endpoint whose prompt
	// cache is warm (internal/cacheroute); ColdSpend is the dollar budget hedges
	// pay cold prompts from, and moved conversations are charged to.
	CacheAffinity affinity.Config
	ColdSpend     policy.ColdSpendConfig
	// ProbeInterval caps how often an endpoint found unreachable is probed
	// (an HTTP GET of its models list) until it answers: the first probe
	// comes 5ms after it went down, then the gap doubles up to
	// ProbeInterval; default 50ms, so traffic returns within about 50ms of
	// the endpoint answering again. While unreachable it gets no requests.
	ProbeInterval time.Duration
}

// Engine is the mesh's request pipeline.
type Engine struct {
	client   *provider.Client
	classify func(string) string
	cals     *normalize.Set
	paramPol normalize.Policy
	normOff  bool
	log      *slog.Logger
	obs      Observer
	events   events // obs under its optional interfaces (events.go)
	now      func() time.Time
	rnd      func(int) int
	prices   func(string) (pricing.Price, bool)
	// st are the feature stages, the rollout plan and the valve.
	st          chain.Stages
	maxAttempts int
	timeout     time.Duration
	hedge       resilience.HedgePolicy
	opts        Resilience
	hedgingOff  atomic.Bool
	// cacheRt is cache-aware routing (internal/cacheroute).
	cacheRt     *cacheroute.Router
	recoveryOff atomic.Bool
	// slowStreamOff and slowStream are slow-stream hedging's switch and
	// threshold (internal/attempt/slowstream.go), races the races'
	// budgets.
	slowStreamOff bool
	slowStream    health.PacePolicy
	races         *rl.RaceBudgets

	valve    *rollout.Valve
	rollout  *rollout.Plan
	stop     chan struct{}
	probes   sync.WaitGroup
	closed   atomic.Bool
	probeInt time.Duration

	routes map[string]*routeState
	shared SharedState
	// sharing joins the replicas' shared state (when shared is set).
	sharing fleet.Sharing
	// fleet holds every endpoint, passthrough routes included.
	fleet  fleet.Registry[*routeState]
	models []ModelInfo
	// attempts is the attempt lifecycle, its chain folded once.
	attempts *attempt.Runner
	// handler is the call pipeline, composed once (pipeline.go); inner is
	// its part below the client-facing stages, which a shadow call runs.
	handler, inner pipeline.Handler
	// shadows runs shadow calls; nil when no alias has a shadow.
	// shadowRoutes holds the aliases' shadow policies by name.
	shadows      *shadow.Pool
	shadowRoutes map[string]*shadow.Route
	// embed holds the embedding models' routes (Side calls only).
	embed map[string]*routeState
	// sideMu guards sides: each route's candidates that can serve a kind
	// of Side call, built on first use.
	sideMu sync.Mutex
	sides  map[sideKey]*routeState
}

// ModelInfo describes a name clients may call (fleet.ModelInfo).
type ModelInfo = fleet.ModelInfo

// New builds an Engine.
func New(o Options) (*Engine, error) {
	if o.Client == nil {
		return nil, errors.New("engine: nil provider client")
	}
	r := o.Resilience
	if r.MaxAttempts <= 0 {
		r.MaxAttempts = 4
	}
	if err := r.Hedge.Validate(); err != nil {
		return nil, fmt.Errorf("engine: hedge: %w", err)
	}
	if err := r.SlowStream.Validate(); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if o.Stages.Valve == nil || o.Stages.Plan == nil {
		return nil, errors.New("engine: Options.Stages not built (chain.Build)")
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	rnd := o.Rand
	if rnd == nil {
		rnd = rand.IntN
	}
	backoff, err := resilience.NewBackoff(r.Backoff)
	if err != nil {
		return nil, fmt.Errorf("engine: backoff: %w", err)
	}
	e := &Engine{stop: make(chan struct{}),
		client: o.Client, classify: o.Classify, st: o.Stages, cals: o.Calibrations, paramPol: o.ParamPolicy, normOff: o.DisableNormalization, log: log, obs: o.Observer, now: now, rnd: rnd, prices: o.Prices,
		maxAttempts: r.MaxAttempts, timeout: r.Timeout, hedge: r.Hedge, opts: r,
		routes: map[string]*routeState{}, shared: o.Shared,
	}
	e.fleet = fleet.Registry[*routeState]{Templates: o.Passthrough, Endpoint: e.newEndpoint,
		Route: func(model string, ep *endpoint) (*routeState, error) {
			return e.newRoute(model, []*endpoint{ep}, route.Ordered)
		}}
	e.sharing = fleet.Sharing{Shared: o.Shared, ByID: e.fleet.ByID, All: e.fleet.All, Budgets: e.budgets, Prober: e.prober, Log: log, Now: now,
		Stop: e.stop, Closed: e.closed.Load}
	e.valve, e.rollout, e.events = o.Stages.Valve, o.Stages.Plan, newEvents(o.Observer)
	e.probeInt = r.ProbeInterval
	if e.probeInt <= 0 {
		e.probeInt = defaultProbeInterval
	}
	if e.cacheRt, err = cacheroute.New(r.CacheAffinity, r.ColdSpend); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e.hedgingOff.Store(r.DisableHedging)
	e.slowStreamOff, e.slowStream = r.DisableSlowStreamHedging, r.SlowStream
	if e.races, err = rl.NewRaceBudgets(r.SlowStreamBudget); err != nil {
		return nil, fmt.Errorf("engine: slow stream budget: %w", err)
	}
	e.recoveryOff.Store(r.DisableRecovery)
	e.attempts = e.newRunner(&policy.Retry{MaxAttempts: r.MaxAttempts, Backoff: backoff, Now: now})

	if err := e.addRoutes(o); err != nil {
		return nil, err
	}
	e.start(o)
	return e, nil
}

// start composes the call pipeline once every route exists and starts the
// shadow pool and the replica sharing.
func (e *Engine) start(o Options) {
	if len(o.Shadows) > 0 {
		e.shadowRoutes = o.Shadows
		e.shadows = shadow.NewPool(o.Shadow, e.runShadow, e.events.shadow, e.now)
	}
	e.compose()
	if e.shared != nil {
		e.sharing.Start(&e.probes)
	}
}

// addRoutes adds the configured endpoints and a route per model (an
// embedding model's serves Side calls only) and per alias (fleet.Plan lays
// out their chains).
func (e *Engine) addRoutes(o Options) error {
	eps := make([]*endpoint, 0, len(o.Endpoints))
	for _, pe := range o.Endpoints {
		ep, err := e.newEndpoint(pe)
		if err != nil {
			return err
		}
		e.fleet.Add(ep)
		eps = append(eps, ep)
	}
	specs := make(map[string]fleet.AliasSpec, len(o.Aliases))
	for name, a := range o.Aliases {
		specs[name] = fleet.AliasSpec{Models: a.Models, Strategy: a.Strategy, Tiers: a.Tiers}
	}
	t, err := fleet.Plan(eps, specs)
	if err != nil {
		return err
	}
	e.models = t.List
	for _, m := range t.Models {
		rs, err := e.newRoute(m, t.ByModel[m], route.LatencyOptimal)
		if err != nil {
			return err
		}
		if t.ByModel[m][0].Embedding {
			if e.embed == nil {
				e.embed = map[string]*routeState{}
			}
			e.embed[m] = rs
		} else {
			e.routes[m] = rs
		}
	}
	for _, a := range t.Aliases {
		if err := e.addAlias(a, o.Aliases[a], t.ByAlias[a]); err != nil {
			return err
		}
	}
	return nil
}

// addAlias adds alias a's route over its chain c, and its tiers' routes.
func (e *Engine) addAlias(a string, spec Alias, c fleet.Chain) error {
	rs, err := e.newRoute(a, c.Cands, c.Strategy)
	if err != nil {
		return err
	}
	rs.translation = spec.Translation
	if spec.SemanticThreshold > 0 {
		if e.st.Semantic == nil {
			return fmt.Errorf("engine: alias %q: the semantic cache needs the exact cache and an embedder (chain.Config.Cache, .Semantic)", a)
		}
		rs.semThreshold = float32(spec.SemanticThreshold)
	}
	if spec.Tiering != nil {
		rs.tiers = &tiers{cfg: spec.Tiering, routes: make([]*routeState, len(c.Tiers))}
		for i, tc := range c.Tiers {
			if rs.tiers.routes[i], err = e.newRoute(a+"/"+spec.Tiering.Names()[i], tc.Cands, tc.Strategy); err != nil {
				return err
			}
			rs.tiers.routes[i].translation = spec.Translation
		}
	}
	e.routes[a] = rs
	return nil
}

// Models lists the names clients may call, sorted.
func (e *Engine) Models() []ModelInfo { return e.models }

// SetHedging switches hedging on or off for calls that start after it.
func (e *Engine) SetHedging(on bool) { e.hedgingOff.Store(!on) }

// Hedging reports whether hedging is on.
func (e *Engine) Hedging() bool { return !e.hedgingOff.Load() }

// SetRecovery switches mid-stream continuation on or off.
func (e *Engine) SetRecovery(on bool) { e.recoveryOff.Store(!on) }

// Recovery reports whether mid-stream continuation is on.
func (e *Engine) Recovery() bool { return !e.recoveryOff.Load() }

// Endpoints returns every endpoint's live state, for gauges and
// dashboards: the configured ones, then the passthrough ones created so far.
func (e *Engine) Endpoints() []fleet.Status { return fleet.Statuses(e.fleet.All(), e.now()) }

// Call carries what the front knows about a client call besides the request.
type Call struct {
	// RequestID is the mesh's id for the call.
	RequestID string
	// ClientHeader is the client's request header.
	ClientHeader http.Header
	// Behavior is the parsed mesh options (nil = defaults).
	Behavior *Behavior
	// Timeout overrides the configured overall deadline when > 0.
	Timeout time.Duration
	// TraceParent is the client's W3C traceparent header.
	TraceParent string
	// KeyID and Team name the virtual key the call was made with, for the
	// Record (metrics, request log); empty for an unmetered call.
	KeyID, Team string
	// Done, when set, is called once with the call's final Record, before
	// the observers, on the goroutine that finishes the call (for a
	// stream, the one that closes it). It must not block: the key
	// accounting settles a call's reservation here.
	Done func(*Record)
}

// Outcome is a served call.
type Outcome struct {
	Endpoint *provider.Endpoint
	// Response is set for a non-streaming call.
	Response *llm.Response
	// Stream is set for a streaming call; it starts with the events
	// already received and must be closed. Its Record is final only after
	// Close.
	Stream *Stream
	// Header is the serving upstream's response header.
	Header http.Header
	Record *Record
}

// Do serves req: one call through the composed chain (pipeline.go). Errors
// are *llm.APIError values ready for the client, with MeshCode set when
// Keel decided the outcome. The call is finished here, once: when Do
// returns an error or a response, or when the returned Stream is closed.
func (e *Engine) Do(ctx context.Context, req *llm.Request, call Call) (*Outcome, error) {
	c := e.newCall(req, call)
	ans, err := e.handler.Serve(ctx, &c.pc)
	out := e.outcome(c, ans, err)
	if out == nil || out.Stream == nil {
		e.finishCall(c) // a stream's Close finishes it
	}
	if out == nil {
		return nil, c.err
	}
	return out, nil
}

// codeModelNotFound is the error code of a call for a model the mesh does
// not serve: OpenAI's own for an unknown model (PROTOCOLS.md §6.1), which
// SDK users branch on.
const codeModelNotFound = "model_not_found"

var errDeadline = errors.New("the call's deadline (X-Mesh-Timeout or resilience timeout) passed")

func (e *Engine) policy(rs *routeState, b *Behavior) route.Policy {
	p := route.Policy{Strategy: rs.strategy}
	if b != nil {
		p.MinCapability = int(b.MinModelCapability)
		p.PreferredRegion = b.PreferredRegion
	}
	return p
}

// Refused records a call refused before it reached the engine (by its
// virtual key's model list, rate limits or budget): a Record with its
// status and error, no attempt and no cost, handed to the observer (the
// request log, metrics) like any other call. It does not count toward
// the safety valve, which watches what the fleet does.
func (e *Engine) Refused(req *llm.Request, call Call, ae *llm.APIError) {
	now := e.now()
	rec := &Record{Call: callPart(req, call, now), Result: callrec.Result{Request: req, Err: ae, Status: ae.Status}}
	if e.obs != nil {
		e.obs.RequestDone(rec)
	}
}

// finishCall is the one place a client call is finished, whatever way it
// ended: its attempts sealed, its record completed and handed to Done,
// the safety valve and the observers, then to the shadow pool. Do calls
// it when it returns an error or a response, the client's Stream when it
// is closed, Side when its call ends.
func (e *Engine) finishCall(c *callState) {
	if c.x != nil {
		c.x.Seal()
	}
	rec, served, ae := &c.rec, c.served, c.err
	rec.Duration = e.now().Sub(rec.Start)
	if served != nil {
		rec.ServedBy, rec.ServedModel, rec.ServedRegion, rec.ServedProvider = served.ID, served.Model, served.Region, served.Provider
		rec.ModelFallback = rec.PrimaryModel != "" && served.Model != rec.PrimaryModel
		rec.Downgraded = rec.ModelFallback && served.Capability < c.primaryCap
		if rec.Status == 0 {
			rec.Status = http.StatusOK
		}
	}
	if ae != nil {
		rec.Err = ae
		rec.Status = ae.Status
	}
	rec.Cost = e.callCost(rec, served)
	if done := c.call.Done; done != nil {
		done(rec)
	}
	e.countValve(rec)
	if e.obs != nil {
		e.obs.RequestDone(rec)
	}
	e.shadowFinish(c)
}

// callCost is what every attempt of rec that reported usage cost, or the
// serving endpoint's price for the usage the client got when more.
func (e *Engine) callCost(rec *Record, served *endpoint) float64 {
	var sum float64
	for _, a := range rec.Attempts {
		sum += a.Cost
	}
	if served != nil {
		return max(sum, e.cost(served, rec.Usage))
	}
	return sum
}

// Close stops the engine's background probers. Calls in flight finish.
func (e *Engine) Close() {
	if e.closed.CompareAndSwap(false, true) {
		close(e.stop)
		if e.shadows != nil {
			e.shadows.Close()
		}
	}
	e.probes.Wait()
}

// promptText is the text the domain classifier reads (llm.Request.PromptText).
func promptText(req *llm.Request) string { return req.PromptText() }
