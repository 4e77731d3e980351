package chain

import (
	"fmt"
	"log/slog"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/structured"
)

// Config is the feature stages' configuration, each part its stage
// package's own type (internal/assemble fills it from the config file).
// The zero value turns personal data and the caches off and runs
// structured output and fragmentation with their defaults.
type Config struct {
	// PII turns personal-data detection on; a nil Detector leaves it off.
	PII pii.Options
	// Cache, when set, is the exact response cache; CachePolicy says
	// which requests are safe to cache.
	Cache       cache.Store
	CachePolicy cache.Policy
	// Semantic, when set with Cache, is the semantic cache of the aliases
	// that set a threshold.
	Semantic *semcache.Semantic
	// Structured tunes structured-output validation and repair; Metrics
	// receives its counters (nil: Build makes its own).
	Structured structured.Settings
	Metrics    *structured.Metrics
	// Fragment tunes long-input fragmentation and fusion.
	Fragment fragment.Settings
	// Rollout sends a share of the traffic through a reduced stage; Valve
	// is the mesh-aware safety valve (the zero value: its defaults, on).
	Rollout rollout.Rollout
	Valve   resilience.ValveConfig
	// Log receives the stages' warnings (nil: discard).
	Log *slog.Logger
}

// Stages are the feature stages built once per mesh, each nil when off,
// for the engine to put in their places (ARCHITECTURE.md). They keep no
// process-wide state: each Build compiles schemas with its own Compiler
// under its own limits.
type Stages struct {
	PII, Exact, Semantic, Rollout, Structured, Fragment pipeline.Stage
	// Plan and Valve are the rollout stage's: the admin API switches the
	// plan at run time, and the engine counts every finished call toward
	// the valve.
	Plan  *rollout.Plan
	Valve *rollout.Valve
	// Schemas compiles the clients' schemas for the structured stage,
	// under this mesh's limits and with its own compile slots.
	Schemas *structured.Compiler
	// RelaxedStreams is structured output's setting the attempts read
	// when they ask an endpoint for the contract (structured.Spec.Ask).
	RelaxedStreams bool
}

// Build builds the stages of c.
func Build(c Config) (Stages, error) {
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := c.Valve.Validate(); err != nil {
		return Stages{}, fmt.Errorf("safety valve threshold: %w", err)
	}
	var s Stages
	var err error
	if s.Plan, err = rollout.NewPlan(c.Rollout); err != nil {
		return Stages{}, err
	}
	s.Valve = rollout.NewValve(c.Valve)
	s.Rollout = Rollout(s.Plan, s.Valve)
	if s.PII, err = PII(c.PII, log); err != nil {
		return Stages{}, err
	}
	s.Exact, s.Semantic = Caches(c.Cache, c.CachePolicy, c.Semantic, log)
	m := c.Metrics
	if m == nil {
		m = &structured.Metrics{}
	}
	s.Schemas = structured.NewCompiler(c.Structured.Limits)
	s.Structured = Structured(c.Structured, s.Schemas, m)
	s.Fragment = Fragment(c.Fragment, c.Structured)
	s.RelaxedStreams = c.Structured.RelaxedStreams
	return s, nil
}
