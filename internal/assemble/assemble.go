// Package assemble builds a running mesh from a config: the upstream
// endpoints, the shared state, the observers, the engine's stages and the
// HTTP front, and closes what it opened.
//
// Build runs its steps in an order the types enforce: each step takes what
// an earlier one returned (the upstreams, the shared store, the observers,
// the engine) and nothing reads what another step set aside. It keeps no
// process-wide state: two meshes built from two configs do not affect each
// other. A Mesh is safe for concurrent use; Build and Close block (files,
// Redis).
package assemble

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/shadow"
	redisstore "github.com/keelmesh/keel/internal/store/redis"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/telemetry/alert"
	"github.com/keelmesh/keel/internal/telemetry/tracing"
)

// Options are what the caller of keel.New injects; zero values are the
// defaults.
type Options struct {
	// Logger receives the mesh's logs; nil discards.
	Logger *slog.Logger
	// Upstream, when set, carries every upstream attempt instead of Keel's
	// own tuned transport.
	Upstream http.RoundTripper
	// Observer receives a record of every finished call; it must not block.
	Observer callrec.Observer
	// Now is the engine's clock (nil: time.Now).
	Now func() time.Time
	// Rand is the engine's random choice, a uniform int in [0, n) (nil:
	// math/rand/v2); it must be safe for concurrent use.
	Rand func(n int) int
}

// Mesh is a built engine and HTTP front, with everything they opened.
type Mesh struct {
	eng *engine.Engine
	srv *server.Server
	// upstream is nil when an upstream RoundTripper was injected.
	upstream interface {
		http.RoundTripper
		CloseIdleConnections()
	}
	smetrics *structured.Metrics
	// platforms are the Bedrock and Vertex providers' (CheckCredentials).
	platforms []namedPlatform

	tracer   *tracing.Tracer
	reqlog   *sqlite.Log
	shadows  *sqlite.ShadowStore
	audit    *sqlite.Audit
	keys     *keys.Manager
	keyStore *sqlite.KeyStore
	// convDB holds the Responses API's conversations when they are kept
	// in the request log's file.
	convDB   *sqlite.Conversations
	convWB   *convstate.WriteBehind // in front of convDB
	shared   *redisstore.Store
	alert    *alert.Webhook
	closeOne sync.Once
}

// Build builds a mesh from a validated config. On error, what it opened
// is closed.
func Build(cfg *config.Config, o Options) (_ *Mesh, err error) {
	ups, err := resolveUpstreams(cfg)
	if err != nil {
		return nil, err
	}
	m := &Mesh{smetrics: &structured.Metrics{}}
	rt := o.Upstream
	if rt == nil {
		m.upstream = upstreamTransport(cfg, ups)
		rt = m.upstream
	}
	if m.platforms, err = ups.attachPlatforms(cfg, rt); err != nil {
		return nil, err
	}
	clf, err := classifier(cfg)
	if err != nil {
		return nil, err
	}
	sh, err := openShared(cfg, o.Logger)
	if err != nil {
		return nil, err
	}
	m.shared = sh.store
	defer func() {
		if err != nil {
			m.Close()
		}
	}()
	cals, err := calibrations(cfg.Normalization.CalibrationDB, sh, o.Logger)
	if err != nil {
		return nil, err
	}
	obs, err := m.observe(cfg, sh, o)
	if err != nil {
		return nil, err
	}
	prices := pricing.New(cfg.Pricing)
	warnUnpriced(ups.routed, o.Logger)
	piiOpts, err := piiOptions(cfg, obs.audit)
	if err != nil {
		return nil, err
	}
	cs, err := openCaches(cfg, ups.routed, sh, rt, o.Now)
	if err != nil {
		return nil, err
	}
	als, err := aliases(cfg, clf.Complexity, ups.routed)
	if err != nil {
		return nil, err
	}
	shadows, err := shadowRoutes(cfg, als, ups.routed)
	if err != nil {
		return nil, err
	}
	st, err := chain.Build(chain.Config{PII: piiOpts, Cache: cs.exact, CachePolicy: cfg.Cache.Policy, Semantic: cs.semantic,
		Structured: cfg.StructuredOutput.Settings(), Metrics: m.smetrics, Fragment: cfg.Fragmentation.Settings(), Log: o.Logger,
		Rollout: cfg.Resilience.Rollout.Rollout(), Valve: cfg.Resilience.SafetyValve.ValveConfig})
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	m.eng, err = engine.New(engine.Options{Stages: st, Shared: sh.engineState(), Prices: prices.Lookup,
		Endpoints: ups.routed, Aliases: als, Client: provider.NewClient(rt), Logger: o.Logger, Rand: o.Rand,
		Passthrough: ups.passthrough, Resilience: resilienceOptions(cfg.Resilience), Calibrations: cals, ParamPolicy: cfg.Normalization.ParameterPolicy,
		DisableNormalization: cfg.Normalization.Enabled != nil && !*cfg.Normalization.Enabled,
		Shadows:              shadows, Shadow: shadow.PoolOptions{Workers: cfg.Shadow.Workers, Queue: cfg.Shadow.Queue, ShedInflight: cfg.Shadow.ShedInflight, Timeout: cfg.Shadow.Timeout.Std()},
		Observer: obs.observer, Now: o.Now, Classify: clf.Domain})
	if err != nil {
		return nil, err
	}
	sh.waitLinked(cfg.Redis)
	if m.srv, err = m.serve(cfg, m.eng, sh, obs, o); err != nil {
		return nil, err
	}
	return m, nil
}

// warnUnpriced logs each model without a price once: its calls cost $0.
func warnUnpriced(eps []*provider.Endpoint, log *slog.Logger) {
	if log == nil {
		return
	}
	unpriced := map[string]bool{}
	for _, ep := range eps {
		if ep.Price.IsZero() && !unpriced[ep.Model] {
			unpriced[ep.Model] = true
			log.Warn("keel: model has no price: its calls cost $0 in X-Mesh-Cost, spend and budgets; set models[].price or a pricing entry", "model", ep.Model, "upstream_model", ep.UpstreamModel)
		}
	}
}

// Engine is the mesh's engine.
func (m *Mesh) Engine() *engine.Engine { return m.eng }

// Server is the mesh's HTTP front.
func (m *Mesh) Server() *server.Server { return m.srv }

// FlushRequestLog waits until every Record the request log has queued is
// written (nil when the log is off): BenchmarkRequestLogPerCall charges the
// writer's CPU to the calls that caused it.
func (m *Mesh) FlushRequestLog(ctx context.Context) error {
	if m.reqlog == nil {
		return nil
	}
	return m.reqlog.Flush(ctx)
}

// liveEndpoints is every endpoint's live state, none before the engine is
// built (the metrics and the dashboard are built before it).
func (m *Mesh) liveEndpoints() []fleet.Status {
	if m.eng == nil {
		return nil
	}
	return m.eng.Endpoints()
}

// Close releases what the mesh opened, the engine first (its shadow
// workers stop before their store closes). In-flight calls are not
// interrupted. It is idempotent.
func (m *Mesh) Close() error {
	var err error
	m.closeOne.Do(func() {
		if m.eng != nil {
			m.eng.Close()
		}
		if m.keys != nil {
			m.keys.Close() // writes the spend not yet written (to Redis too)
		}
		if m.shared != nil {
			m.shared.Close()
		}
		if m.keyStore != nil {
			m.keyStore.Close()
		}
		if m.convWB != nil {
			m.convWB.Close() // writes what is queued, before the file closes
		}
		if m.convDB != nil {
			m.convDB.Close()
		}
		err = m.closeObservers()
		if m.upstream != nil {
			m.upstream.CloseIdleConnections()
		}
	})
	return err
}

// closeObservers closes the logs and flushes the exporters, after the
// engine: nothing records into them any more.
func (m *Mesh) closeObservers() error {
	var err error
	if m.reqlog != nil {
		err = m.reqlog.Close()
	}
	if m.shadows != nil {
		err = errors.Join(err, m.shadows.Close())
	}
	if m.audit != nil {
		err = errors.Join(err, m.audit.Close())
	}
	if m.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m.tracer.Shutdown(ctx)
		cancel()
	}
	if m.alert != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		m.alert.Shutdown(ctx)
		cancel()
	}
	return err
}
