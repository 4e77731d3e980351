// Package attempt is the attempt lifecycle of one client call: the
// call's attempts (Exec) run through the attempt policies of
// internal/policy (fallback → retry → hedge → route → breaker → send), each
// attempt booked on an endpoint its picks chose (internal/pick), sent
// upstream adapted to that endpoint, settled into health, the breaker and
// the call's record (internal/outcome), and, for a stream, relayed to the
// client with its continuations and slow-stream races (internal/relay).
//
// The engine builds one Runner from Deps (the provider client, the clock,
// the attempt cap and budgets' policies, the observers' attempt and hedge
// events, the fleet's prober) and hands each admitted call an Exec on its
// route. The package never imports the engine.
//
// A Runner is immutable and safe for concurrent use. An Exec is one call's:
// the call's goroutine runs its policy chain, hedge goroutines book their
// attempts through its lock; a Relay is used by one goroutine.
package attempt

import (
	"net/http"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/cacheroute"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	rl "github.com/keelmesh/keel/internal/relay"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
)

// Deps is what the attempt lifecycle needs of the mesh, built once by the
// engine: nothing here changes after New but the switches the engine
// flips at run time (HedgingOff, RecoveryOff). Client, Now, Rand, Retry,
// MaxAttempts and CacheRoute are required; the others may be left zero.
type Deps struct {
	// Client sends the attempts (model calls, a Side call's posts).
	Client *provider.Client
	// Now is the clock; Rand a uniform int in [0, n) (the router's ties).
	Now  func() time.Time
	Rand func(n int) int
	// Retry is the retry policy (its backoff and clock); MaxAttempts
	// bounds a call's attempts, retries and hedges included.
	Retry       *policy.Retry
	MaxAttempts int
	// Hedge bounds the adaptive hedge delay; HedgingOff and RecoveryOff
	// switch hedging and mid-stream recovery off (nil: on).
	Hedge                   resilience.HedgePolicy
	HedgingOff, RecoveryOff *atomic.Bool
	// SlowStreamOff and SlowStream are slow-stream hedging's switch and
	// threshold (slowstream.go).
	SlowStreamOff bool
	SlowStream    health.PacePolicy
	// Races are the slow-stream races' budgets, one per Route.Key (nil:
	// no race is sent).
	Races *rl.RaceBudgets
	// CacheRoute is cache-aware routing (cacheroute.go).
	CacheRoute *cacheroute.Router
	// Prices prices an endpoint without a price of its own by its
	// upstream model (nil: unpriced).
	Prices func(model string) (pricing.Price, bool)
	// MarkDown takes an endpoint found unreachable out of rotation until
	// a probe reaches it (the fleet's prober).
	MarkDown func(ep *fleet.Endpoint)
	// OnAttempt and OnHedge report each settled attempt and each decided
	// hedge to the observers; nil when none listens.
	OnAttempt func(observe.AttemptEvent)
	OnHedge   func(observe.HedgeEvent)
	// Calibrations, ParamPolicy and NormalizationOff adapt each request
	// to its endpoint (normalize).
	Calibrations     *normalize.Set
	ParamPolicy      normalize.Policy
	NormalizationOff bool
	// RelaxedStreams: a streamed contract is asked upstream in its relaxed
	// form (structured.Settings.RelaxedStreams).
	RelaxedStreams bool
	// Deadline is the cause of the call's deadline (its context's): a call
	// past it gets 504.
	Deadline error
}

// Runner runs calls' attempts over Deps, with the policy chain folded
// once. It is immutable and safe for concurrent use.
type Runner struct {
	d     Deps
	chain step
}

// New folds the attempt policies around the send (newChain) over d.
func New(d Deps) *Runner {
	return &Runner{d: d, chain: newChain(d.Retry)}
}

// Route is the route a call's attempts run on: its candidates and
// strategy, the budgets shared by every call on it, and Key, the route's
// identity (cache-aware routing keys its cold-spend budget by it).
type Route struct {
	Name        string
	Translation string
	Cands       []*fleet.Endpoint
	Strategy    route.Strategy
	Retries     *resilience.Budget
	Hedges      *resilience.Budget
	Key         any
}

// Call is what the attempts read of the client's call.
type Call struct {
	RequestID string
	Header    http.Header
	Behavior  *pipeline.Behavior
}

// Side is a call beside the model call (a token count, embeddings) whose
// attempt replaces the model call: Request is what it posts to ep, Answer
// reads a 200 answer's body, Latency says whether the answer's latency
// tells how fast the endpoint answers.
type Side struct {
	Request func(ep *provider.Endpoint) (url string, body []byte)
	Answer  func(body []byte) (llm.Usage, error)
	Latency bool
}

// off reports a run-time switch set.
func off(b *atomic.Bool) bool { return b != nil && b.Load() }
