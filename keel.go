// Package keel is a transparent routing and resilience layer for LLM APIs.
//
// A Mesh built by New runs Keel's engine in-process. Use it embedded, by
// handing HTTPClient() to the official SDKs:
//
//	m, _ := keel.New(cfg)
//	client := anthropic.NewClient(option.WithHTTPClient(m.HTTPClient()))
//
// or as a proxy, by serving Handler() (what `keel serve` does). Both paths
// run the same engine. A Mesh is safe for concurrent use.
package keel

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/classify"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/inproc"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/server"
	redisstore "github.com/keelmesh/keel/internal/store/redis"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/telemetry"
	"github.com/keelmesh/keel/internal/telemetry/alert"
	"github.com/keelmesh/keel/internal/telemetry/dashboard"
	"github.com/keelmesh/keel/internal/telemetry/debugtrace"
	"github.com/keelmesh/keel/internal/telemetry/metrics"
	"github.com/keelmesh/keel/internal/telemetry/tracing"
	"github.com/keelmesh/keel/internal/wire"
)

// Mesh is a running Keel engine with its HTTP front and embedded transport.
type Mesh struct {
	eng       *engine.Engine
	srv       *server.Server
	transport http.RoundTripper
	client    *http.Client
	// upstream is nil when an upstream RoundTripper was injected.
	upstream interface {
		http.RoundTripper
		CloseIdleConnections()
	}

	metrics  *metrics.Metrics
	tracer   *tracing.Tracer
	debug    *debugtrace.Store
	dash     *dashboard.Dashboard
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
	smetrics *structured.Metrics
	closeOne sync.Once
}

type options struct {
	logger   *slog.Logger
	upstream http.RoundTripper
	observer engine.Observer
	now      func() time.Time
}

// Option configures New.
type Option func(*options)

// WithLogger sets the logger; nil (the default) discards.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithUpstream sends every upstream attempt through rt instead of Keel's own
// tuned transport — for example the simulator's in-memory transport in tests.
func WithUpstream(rt http.RoundTripper) Option { return func(o *options) { o.upstream = rt } }

// WithObserver receives a record of every finished call (metrics, request
// log, tests). It must not block.
func WithObserver(o engine.Observer) Option { return func(op *options) { op.observer = o } }

// WithClock injects the engine's clock (tests).
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// New builds a Mesh from a validated config.
func New(cfg *config.Config, opts ...Option) (*Mesh, error) {
	var o options
	for _, f := range opts {
		f(&o)
	}
	m := &Mesh{}
	eps, err := Endpoints(cfg)
	if err != nil {
		return nil, err
	}
	rt := o.upstream
	if rt == nil {
		topt := provider.TransportOptions{}
		standard := map[string]bool{}
		for _, p := range cfg.Providers {
			topt.ConnectTimeout = max(topt.ConnectTimeout, time.Duration(p.Timeouts.Connect))
			topt.MaxIdleConnsPerHost = max(topt.MaxIdleConnsPerHost, p.MaxIdleConnsPerHost)
			topt.MaxConnsPerHost = max(topt.MaxConnsPerHost, p.MaxConnsPerHost)
			standard[p.Name] = p.HTTPClient == "standard"
		}
		for _, ep := range eps {
			if standard[ep.Provider] {
				if topt.Standard == nil {
					topt.Standard = map[string]bool{}
				}
				topt.Standard[hostPort(ep.BaseURL)] = true
			}
		}
		m.upstream = provider.NewUpstreamTransport(topt)
		rt = m.upstream
	}
	aliases := map[string]engine.Alias{}
	for _, a := range cfg.Aliases {
		ea := engine.Alias{Models: a.Models, Strategy: a.Strategy, Translation: a.Translation, Tiering: engineTiering(a.Tiering), Shadow: a.Shadow}
		if sc := a.SemanticCache; sc != nil && sc.Enabled {
			ea.SemanticThreshold = sc.ThresholdOrDefault()
		}
		aliases[a.Name] = ea
	}
	if t := autoTiering(cfg); t != nil {
		aliases[config.AutoAlias] = engine.Alias{Tiering: engineTiering(t)}
	}
	var pass []*provider.Endpoint
	if len(cfg.Models) == 0 {
		// No models declared: every provider serves whatever model name the
		// client asks for, in its own format.
		for _, p := range cfg.Providers {
			key, err := p.Key()
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			cont, err := provider.ParseContinuation(p.Continuation)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			pass = append(pass, &provider.Endpoint{
				Region: "default", Provider: p.Name, Format: llm.ParseFormat(p.WireFormat()), BaseURL: p.BaseURL, APIKey: key,
				Continuation:          cont,
				AnthropicVersion:      p.AnthropicVersion,
				ResponseHeaderTimeout: time.Duration(p.Timeouts.ResponseHeader),
				StreamIdleTimeout:     time.Duration(p.Timeouts.StreamIdle),
				RequestTimeout:        time.Duration(p.Timeouts.Request),
				Header:                headerOf(p.Headers),
			})
		}
	}
	m.smetrics = &structured.Metrics{}
	sopts := structuredOptions(cfg.StructuredOutput)
	clf := classify.Default()
	if len(cfg.Classifier.Lexicons) > 0 {
		var copts []classify.Option
		for d, terms := range cfg.Classifier.Lexicons {
			copts = append(copts, classify.WithLexicon(d, terms))
		}
		if clf, err = classify.New(copts...); err != nil {
			return nil, fmt.Errorf("classifier.lexicons: %w", err)
		}
	}
	var shared engine.SharedState
	if cfg.Redis.On() {
		if m.shared, err = redisstore.New(cfg.Redis, o.logger); err != nil {
			return nil, err
		}
		shared = m.shared
	}
	cals, err := m.calibrations(cfg.Normalization.CalibrationDB, o.logger)
	if err != nil {
		m.Close()
		return nil, err
	}
	observer, routes, err := m.observability(cfg, o)
	if err != nil {
		m.Close()
		return nil, err
	}
	prices := pricing.New(cfg.Pricing)
	unpriced := map[string]bool{}
	for _, ep := range eps {
		if ep.Price.IsZero() && !unpriced[ep.Model] {
			unpriced[ep.Model] = true
			if o.logger != nil {
				o.logger.Warn("keel: model has no price: its calls cost $0 in X-Mesh-Cost, spend and budgets; set models[].price or a pricing entry", "model", ep.Model, "upstream_model", ep.UpstreamModel)
			}
		}
	}
	piiOpts, err := m.piiOptions(cfg)
	if err != nil {
		m.Close()
		return nil, err
	}
	var rcache engine.Cache
	if cfg.Cache.Enabled {
		lru, err := cache.New[*engine.CacheEntry](cfg.Cache.Config, o.now)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("cache: %w", err)
		}
		rcache = lru
		if cfg.CacheStore() == config.CacheStoreRedis {
			byID := make(map[string]*provider.Endpoint, len(eps))
			for _, ep := range eps {
				byID[ep.ID] = ep
			}
			rcache = m.shared.Cache(lru, func(id string) *provider.Endpoint { return byID[id] })
		}
	}
	sem, err := semanticCache(cfg, rt, o.now)
	if err != nil {
		m.Close()
		return nil, fmt.Errorf("cache: %w", err)
	}
	m.eng, err = engine.New(engine.Options{Cache: rcache, CachePolicy: cfg.Cache.Policy, Semantic: sem, Shared: shared, Prices: prices.Lookup, Endpoints: eps, Aliases: aliases, Client: provider.NewClient(rt), Logger: o.logger,
		Passthrough: pass, Resilience: resilienceOptions(cfg.Resilience), Structured: sopts,
		Fragment: fragmentOptions(cfg.Fragmentation), StructuredMetrics: m.smetrics, Calibrations: cals, ParamPolicy: normalize.Policy(cfg.Normalization.ParameterPolicy),
		DisableNormalization: cfg.Normalization.Enabled != nil && !*cfg.Normalization.Enabled,
		Shadow:               engine.ShadowOptions{Workers: cfg.Shadow.Workers, Queue: cfg.Shadow.Queue, ShedInflight: cfg.Shadow.ShedInflight, Timeout: cfg.Shadow.Timeout.Std()},
		Observer:             observer, Now: o.now,
		Classify: clf.Domain, Complexity: clf.Complexity, PII: piiOpts})
	if err != nil {
		m.Close()
		return nil, err
	}
	if m.shared != nil {
		// Start with the fleet's view: wait for the first sync with
		// Redis, a few milliseconds when it answers; when it does not,
		// serve on local state after a bounded wait.
		t := time.NewTimer(sharedStartWait(cfg.Redis))
		select {
		case <-m.shared.Linked():
		case <-t.C:
		}
		t.Stop()
	}
	sc := cfg.Server
	so := server.Options{Engine: m.eng, Logger: o.logger, MaxBodyBytes: sc.MaxBodyBytes,
		BodyReadTimeout: time.Duration(sc.BodyReadTimeout), MinBodyRate: sc.MinBodyRateBytesPerSec, MaxInflightBodyBytes: sc.MaxInflightBodyBytes,
		MaxMessages: sc.MaxMessages, MaxHeaderBytes: sc.MaxHeaderBytes, ListenAddr: sc.Listen, AllowedHosts: sc.AllowedHosts, AllowedOrigins: sc.AllowedOrigins,
		AdminToken: sc.AdminToken.Value(), ReadToken: sc.ReadToken.Value(), Routes: routes}
	if m.metrics != nil {
		so.OnUnknownRoute = m.metrics.UnknownRoute
	}
	if so.Conversations, err = m.conversations(cfg, o); err != nil {
		m.Close()
		return nil, err
	}
	if cfg.KeysOn() {
		if err := m.openKeys(cfg, o, &so); err != nil {
			m.Close()
			return nil, err
		}
	}
	m.srv = server.New(so)
	m.transport = &inproc.Transport{
		Handler: m.srv,
		Context: func(ctx context.Context) context.Context {
			return context.WithValue(ctx, server.EmbeddedContextKey, true)
		},
		// A call that does not stream is served on the caller's goroutine.
		Buffered: func(r *http.Request, body []byte) bool {
			return r.Method == http.MethodPost && !wire.MayStream(body)
		},
	}
	m.client = &http.Client{Transport: m.transport}
	return m, nil
}

// piiOptions builds the engine's personal-data options from the pii
// section and the models' and aliases' overrides; off unless pii.enabled.
// The audit log, when open, supplies the hash key unless the config does.
func (m *Mesh) piiOptions(cfg *config.Config) (engine.PIIOptions, error) {
	p := cfg.PII
	if !p.Enabled {
		return engine.PIIOptions{}, nil
	}
	d, err := pii.New(p.Config)
	if err != nil {
		return engine.PIIOptions{}, fmt.Errorf("pii: %w", err)
	}
	o := engine.PIIOptions{
		Detector: engine.PIIDetectorFunc(func(ctx context.Context, text string) ([]pii.Match, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return d.Find(text), nil
		}),
		Action: p.Action, FailOpen: p.FailOpen, TimeBudget: time.Duration(p.TimeBudget),
		HashKey: []byte(p.Audit.HashKey.Value()), Routes: map[string]engine.PIIRoute{},
	}
	if len(o.HashKey) == 0 && m.audit != nil {
		o.HashKey = m.audit.HashKey()
	}
	for _, md := range cfg.Models {
		if r := md.PII; r != nil {
			o.Routes[md.Name] = engine.PIIRoute{Action: r.Action, FailOpen: r.FailOpen}
		}
	}
	for _, a := range cfg.Aliases {
		if r := a.PII; r != nil {
			o.Routes[a.Name] = engine.PIIRoute{Action: r.Action, FailOpen: r.FailOpen}
		}
	}
	return o, nil
}

// openKeys opens the virtual-key store and its accounting, and plugs them
// into the server: authentication on the API routes, /admin/keys behind
// the admin token.
func (m *Mesh) openKeys(cfg *config.Config, o options, so *server.Options) error {
	var st keys.Store
	var ledger keys.Ledger
	if cfg.KeysStore() == config.KeysStoreRedis {
		// Every replica reads the same keys and enforces each key's
		// limits on the fleet's counters.
		rk := m.shared.Keys()
		st, ledger = rk, rk
	} else {
		path := cfg.Keys.Path
		if path == "" {
			path = config.DefaultKeysPath
		}
		sq, err := sqlite.OpenKeys(path)
		if err != nil {
			return fmt.Errorf("keys.path: %w", err)
		}
		m.keyStore, st = sq, sq
	}
	eng := m.eng
	km, err := keys.Open(context.Background(), keys.Options{Store: st, Ledger: ledger, LedgerTimeout: time.Duration(cfg.Redis.Timeout),
		Require: cfg.Server.RequireKeys, Refresh: cfg.Keys.RefreshInterval.Std(), Price: eng.Price, Now: o.now, Logger: o.logger})
	if err != nil {
		return err
	}
	m.keys = km
	so.Authenticate = func(r *http.Request) (server.Caller, *llm.APIError) {
		c, ae := km.Authenticate(r)
		if c == nil {
			return nil, ae // no typed nil in the interface
		}
		return c, nil
	}
	so.AdminRoutes = append(so.AdminRoutes, server.Route{Path: keys.AdminPath, Prefix: true, Handler: km.AdminHandler()})
	return nil
}

// conversations opens the store of the Responses API's conversations in
// the backend responses.store names (ResponsesStore: Redis, the request
// log's file, or memory).
func (m *Mesh) conversations(cfg *config.Config, o options) (*convstate.Store, error) {
	rc := cfg.Responses
	var b convstate.Backend
	switch cfg.ResponsesStore() {
	case convstate.StoreRedis:
		if m.shared == nil {
			return nil, errors.New("responses.store: redis needs the redis section (redis.url)")
		}
		b = m.shared.Conversations(rc.Bounds())
	case convstate.StoreSQLite:
		if !cfg.RequestLog.On() {
			return nil, errors.New("responses.store: sqlite keeps the conversations in the request log's file: it needs the request log (request_log.path)")
		}
		path := cfg.RequestLog.Path
		if path == "" {
			path = sqlite.DefaultPath
		}
		db, err := sqlite.OpenConversations(path, rc.Bounds())
		if err != nil {
			return nil, fmt.Errorf("responses.store: %w", err)
		}
		// The answer is kept in memory at once and written to the file
		// behind the call (convstate.WriteBehind): no transaction on the
		// request path.
		m.convDB = db
		m.convWB = convstate.NewWriteBehind(db, rc.Bounds(), 0, o.logger)
		b = m.convWB
	default:
		b = convstate.NewMemory(rc.Bounds())
	}
	return convstate.New(b, convstate.Options{Config: rc, Now: o.now, Logger: o.logger}), nil
}

// sharedStartWait bounds how long New waits for the first sync with Redis:
// four command timeouts (1s by default).
func sharedStartWait(r config.Redis) time.Duration {
	d := time.Duration(r.Timeout)
	if d <= 0 {
		d = time.Duration(config.DefaultRedisTimeout)
	}
	return 4 * d
}

// Endpoints resolves the config's models into upstream endpoints, reading
// API keys from the environment now. Each endpoint's price is its model's
// price, else the pricing section's or the built-in table's entry for its
// upstream model, else for the model's name (zero when none has one).
func Endpoints(cfg *config.Config) ([]*provider.Endpoint, error) {
	var eps []*provider.Endpoint
	prices := pricing.New(cfg.Pricing)
	for _, mdl := range cfg.Models {
		for _, e := range mdl.Endpoints {
			p := cfg.Provider(e.Provider)
			if p == nil {
				return nil, fmt.Errorf("model %s: unknown provider %q", mdl.Name, e.Provider)
			}
			key, err := p.Key()
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			cont, err := provider.ParseContinuation(p.Continuation)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			sm, err := provider.ParseSchemaMode(mdl.StructuredOutputs)
			if err != nil {
				return nil, fmt.Errorf("model %s: %w", mdl.Name, err)
			}
			ep := &provider.Endpoint{
				StructuredOutputs:     sm,
				ID:                    e.ID(mdl.Name),
				Model:                 mdl.Name,
				UpstreamModel:         e.UpstreamModel,
				Region:                e.Region,
				Provider:              p.Name,
				Format:                llm.ParseFormat(p.WireFormat()),
				BaseURL:               p.BaseURL,
				APIKey:                key,
				Continuation:          cont,
				AnthropicVersion:      p.AnthropicVersion,
				ResponseHeaderTimeout: time.Duration(p.Timeouts.ResponseHeader),
				StreamIdleTimeout:     time.Duration(p.Timeouts.StreamIdle),
				RequestTimeout:        time.Duration(p.Timeouts.Request),
				Translation:           mdl.Translation,
				Capability:            mdl.Capability,
				Domains:               mdl.Domains,
				ContextWindow:         mdl.ContextWindow,
				Price:                 mdl.Price,
				Embedding:             mdl.Kind == config.KindEmbedding,
			}
			if ep.UpstreamModel == "" {
				ep.UpstreamModel = mdl.Name
			}
			if ep.Price.IsZero() {
				ep.Price, _ = prices.Lookup(ep.UpstreamModel)
			}
			if ep.Price.IsZero() {
				ep.Price, _ = prices.Lookup(mdl.Name)
			}
			if e.BaseURL != "" {
				ep.BaseURL = e.BaseURL
			}
			ep.Header = headerOf(p.Headers)
			eps = append(eps, ep)
		}
	}
	return eps, nil
}

// Handler returns the proxy's HTTP handler (the Anthropic and OpenAI APIs,
// /v1/models, /healthz and /readyz).
func (m *Mesh) Handler() http.Handler { return m.srv }

// Transport returns the embedded RoundTripper: requests the official SDKs
// send through it are served by the engine in-process, whatever host they
// name. It never modifies the caller's request and always closes bodies.
func (m *Mesh) Transport() http.RoundTripper { return m.transport }

// HTTPClient returns an *http.Client over Transport(), for
// option.WithHTTPClient in anthropic-sdk-go and openai-go.
func (m *Mesh) HTTPClient() *http.Client { return m.client }

// Endpoints returns every upstream endpoint's live state: health,
// breaker, ejection.
func (m *Mesh) Endpoints() []engine.EndpointStatus { return m.eng.Endpoints() }

// Engine returns the mesh's engine (for telemetry wiring and tests).
func (m *Mesh) Engine() *engine.Engine { return m.eng }

// SetReady flips the proxy's /readyz (false while draining).
func (m *Mesh) SetReady(ready bool) { m.srv.SetReady(ready) }

// ErrShuttingDown, as the cause of a request context's cancellation, ends
// the call served by Handler with the wire's shutdown error: a stream gets
// the wire's error event (overloaded_error), a call not yet answered a 503.
// Cancel the base context of the http.Server (BaseContext) with it when a
// graceful shutdown runs out of time, as `keel serve` does.
var ErrShuttingDown = server.ErrShuttingDown

// Close releases idle upstream connections. In-flight calls are not
// interrupted.
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
		if m.reqlog != nil {
			err = m.reqlog.Close()
		}
		if m.shadows != nil {
			// After the engine: its shadow workers have stopped.
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
		if m.upstream != nil {
			m.upstream.CloseIdleConnections()
		}
	})
	return err
}

// observability builds the observers (metrics, tracing, debug traces,
// dashboard, request log, the safety valve's alert webhook, the caller's)
// and the HTTP routes that show them.
func (m *Mesh) observability(cfg *config.Config, o options) (engine.Observer, []server.Route, error) {
	t := cfg.Telemetry
	on := func(b *bool) bool { return b == nil || *b }
	endpoints := func() []engine.EndpointStatus {
		if m.eng == nil {
			return nil
		}
		return m.eng.Endpoints()
	}
	pn := map[string]string{}
	for _, p := range cfg.Providers {
		pn[p.Name] = p.Type
	}
	var obs []engine.Observer
	var routes []server.Route
	if on(t.Metrics) {
		var models, regions []string
		for _, md := range cfg.Models {
			models = append(models, md.Name)
			for _, e := range md.Endpoints {
				if !slices.Contains(regions, e.Region) {
					regions = append(regions, e.Region)
				}
			}
		}
		for _, a := range cfg.Aliases {
			models = append(models, a.Name)
		}
		if autoTiering(cfg) != nil {
			models = append(models, config.AutoAlias)
		}
		mo := metrics.Options{Models: models, Regions: regions, ProviderNames: pn, Endpoints: endpoints, Structured: m.smetrics}
		if m.shared != nil {
			mo.SharedStateUp, mo.SharedStateDropped = m.shared.Up, m.shared.Dropped
		}
		mt, err := metrics.New(mo)
		if err != nil {
			return nil, nil, err
		}
		m.metrics = mt
		obs = append(obs, mt)
		routes = append(routes, server.Route{Path: "/metrics", Handler: mt.Handler()})
	}
	if t.OTLPEndpoint != "" {
		hdr := map[string]string{}
		for k, v := range t.OTLPHeaders {
			hdr[k] = v.Value()
		}
		tr, err := tracing.New(context.Background(), tracing.Options{OTLPEndpoint: t.OTLPEndpoint, Headers: hdr, ServiceName: t.ServiceName, ProviderNames: pn})
		if err != nil {
			return nil, nil, err
		}
		m.tracer = tr
		obs = append(obs, tr)
	}
	dbg, err := debugtrace.NewStore(t.DebugTraces)
	if err != nil {
		return nil, nil, err
	}
	m.debug = dbg
	obs = append(obs, dbg)
	routes = append(routes, server.Route{Path: "/debug/traces", Prefix: true, Handler: dbg.Handler()})
	if on(t.Dashboard) {
		d, err := dashboard.New(dashboard.Options{Endpoints: endpoints})
		if err != nil {
			return nil, nil, err
		}
		m.dash = d
		obs = append(obs, d)
		routes = append(routes, server.Route{Path: "/dashboard", Prefix: true, Handler: d.Handler()})
	}
	if rl := cfg.RequestLog; rl.On() {
		l, err := sqlite.Open(sqlite.Config{Path: rl.Path, RetentionDays: rl.RetentionDays, QueueSize: rl.QueueSize,
			BatchSize: rl.BatchSize, FlushInterval: time.Duration(rl.FlushInterval), LogBodies: rl.LogBodies, Bodies: recordBodies, Logger: o.logger})
		if err != nil {
			return nil, nil, err
		}
		m.reqlog = l
		obs = append(obs, l)
	}
	if s := cfg.Shadow; s.Store != "" {
		st, err := sqlite.OpenShadow(sqlite.ShadowConfig{Path: s.Store, RetentionDays: s.RetentionDays, Logger: o.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("shadow.store: %w", err)
		}
		m.shadows = st
		obs = append(obs, st)
	}
	if p := cfg.PII; p.Enabled && p.Audit.Path != "" {
		a, err := sqlite.OpenAudit(sqlite.AuditConfig{Path: p.Audit.Path, RetentionDays: p.Audit.RetentionDays,
			HashKey: []byte(p.Audit.HashKey.Value()), Logger: o.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("pii.audit: %w", err)
		}
		m.audit = a
		obs = append(obs, a)
	}
	if v := cfg.Resilience.SafetyValve; v.Webhook != "" && !v.Disabled {
		a, err := alert.New(alert.Options{URL: v.Webhook, Logger: o.logger})
		if err != nil {
			return nil, nil, fmt.Errorf("resilience.safety_valve.webhook: %w", err)
		}
		m.alert = a
		obs = append(obs, a)
	}
	if o.observer != nil {
		obs = append(obs, o.observer)
	}
	return telemetry.Multi(obs...), routes, nil
}

// MaxLoggedBody bounds each body the request log stores with
// request_log.log_bodies: a longer one is cut there and ends with a note
// saying how many bytes were cut.
const MaxLoggedBody = 64 << 10

// recordBodies is the request log's Bodies: the client's request and the
// answer it received, in the client's wire format (a stream's answer as
// the equivalent non-streaming body), each cut at MaxLoggedBody. It runs on
// the log's writer goroutine, off the request path.
func recordBodies(r *engine.Record) (prompt, answer string) {
	enc := func(f func() ([]byte, error)) string {
		b, err := f()
		if err != nil {
			return ""
		}
		if len(b) > MaxLoggedBody {
			n := MaxLoggedBody
			for n > 0 && !utf8.RuneStart(b[n]) {
				n-- // never split a character
			}
			return string(b[:n]) + fmt.Sprintf("…[cut: %d more bytes]", len(b)-n)
		}
		return string(b)
	}
	if r.Request != nil {
		prompt = enc(func() ([]byte, error) { return wire.For(r.Format).EncodeRequest(r.Request) })
	}
	if r.Response != nil {
		answer = enc(func() ([]byte, error) { return wire.For(r.Format).EncodeResponse(r.Response) })
	}
	return prompt, answer
}

func headerOf(m map[string]config.Secret) http.Header {
	if len(m) == 0 {
		return nil
	}
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v.Value())
	}
	return h
}

// resilienceOptions maps the config section onto the engine's options. The
// budgets, hedge bounds, breaker and safety valve are the resilience
// package's own config structs and pass straight through; their
// constructors (for the valve, ValveConfig.WithDefaults) fill the defaults.
func resilienceOptions(c config.Resilience) engine.Resilience {
	return engine.Resilience{
		MaxAttempts:     c.MaxAttempts,
		Timeout:         c.Timeout.Std(),
		RetryBudget:     c.RetryBudget,
		HedgeBudget:     c.HedgeBudget,
		Hedge:           c.Hedge,
		Breaker:         c.Breaker,
		DisableHedging:  c.Hedging != nil && !*c.Hedging,
		DisableRecovery: c.Recovery != nil && !*c.Recovery,
		ProbeInterval:   c.ProbeInterval.Std(),
		Rollout:         rollout(c.Rollout),
		Valve:           c.SafetyValve.ValveConfig,
	}
}

// structuredOptions maps the config section onto the engine's options.
func structuredOptions(c config.StructuredOutput) engine.StructuredOptions {
	o := engine.StructuredOptions{
		RelaxedStreams: c.StreamMode == "relaxed",
		PassViolations: c.OnViolation == "pass",
		DisableReask:   c.Reask != nil && !*c.Reask,
		DisableImplied: c.ImpliedSchemas != nil && !*c.ImpliedSchemas || c.Implied == "off",
		StrictImplied:  c.Implied == "strict",
		Limits: structured.Limits{MaxDepth: c.MaxSchemaDepth, MaxBytes: c.MaxSchemaBytes, MaxProperties: c.MaxSchemaProperties,
			MaxSubschemas: c.MaxSchemaSubschemas, MaxRefs: c.MaxSchemaRefs, MaxEnumValues: c.MaxSchemaEnumValues,
			MaxPatternSize: c.MaxSchemaPatternSize, MaxExpansion: c.MaxSchemaExpansion, MaxConcurrentCompiles: c.MaxConcurrentSchemaCompiles},
	}
	for _, d := range c.Derive {
		t := map[string]any{}
		for k, v := range d.Table {
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				x = v // not JSON: the string itself
			}
			t[k] = x
		}
		o.Derive = append(o.Derive, structured.Derivation{At: d.At, Field: d.Field, From: d.From, Table: t})
	}
	return o
}

func rollout(c config.Rollout) engine.Rollout {
	r := engine.Rollout{Stage: c.Stage, Percent: 100}
	if r.Stage == "" {
		r.Stage = engine.StageFull
	}
	if c.Percent != nil {
		r.Percent = *c.Percent
	}
	return r
}

func fragmentOptions(c config.Fragmentation) engine.FragmentOptions {
	q := 0.5
	if c.ListQuorum != nil {
		q = *c.ListQuorum
	}
	return engine.FragmentOptions{ThresholdTokens: c.ThresholdTokens, TargetTokens: c.TargetTokens,
		OverlapBudget: c.OverlapBudget, Redundancy: c.Redundancy, ListQuorum: q, MergeCall: c.MergeCall}
}

// calibrations are the ones `keel calibrate` stored in the file at path
// and, when the mesh shares state through Redis, the fleet's: this
// replica's are published and every replica's read back, and for one id
// the calibration created last wins (this replica's on a tie). With Redis
// unreachable, this replica's alone, and a warning. Start and reload only.
func (m *Mesh) calibrations(path string, log *slog.Logger) (*normalize.Set, error) {
	local, err := loadCalibrations(path)
	if err != nil {
		return nil, err
	}
	all := local
	if m.shared != nil {
		fleet, err := m.shared.ShareCalibrations(context.Background(), local)
		if err != nil && log != nil {
			log.Warn("shared calibrations: cannot reach Redis; serving with this replica's own calibrations until the next start or reload", "err", err)
		}
		all = append(fleet, local...) // local last: NewSet keeps it on a tie
	}
	if len(all) == 0 {
		return nil, nil
	}
	set, err := normalize.NewSet(all...)
	if err != nil {
		return nil, fmt.Errorf("normalization.calibration_db: %w", err)
	}
	return set, nil
}

// loadCalibrations reads the calibrations `keel calibrate` stored, when
// the file exists (a missing file means none), and validates them.
func loadCalibrations(path string) ([]*normalize.Calibration, error) {
	if path == "" {
		path = calstore.DefaultPath
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil
	}
	st, err := calstore.Open(path)
	if err != nil {
		return nil, fmt.Errorf("normalization.calibration_db: %w", err)
	}
	defer st.Close()
	all, err := st.All(context.Background())
	if err != nil {
		return nil, fmt.Errorf("normalization.calibration_db: %w", err)
	}
	for _, c := range all {
		if err := c.Validate(); err != nil {
			return nil, fmt.Errorf("normalization.calibration_db: calibration %q: %w", c.ID, err)
		}
	}
	return all, nil
}

// hostPort is base's "host:port", the upstream transport's pool key.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	return u.Host
}

func engineTiering(t *config.Tiering) *engine.Tiering {
	if t == nil {
		return nil
	}
	return &engine.Tiering{Cheap: t.Tiers.Cheap, Middle: t.Tiers.Middle, Strong: t.Tiers.Strong, Escalate: t.Escalate}
}

// autoTiering is the built-in alias auto's tiering, or nil when a model or
// alias is named auto or the models do not differ in capability: the cheap
// tier is the least capable model, the strong tier the most capable, the
// middle tier the one nearest midway between them; a tie goes to the lower
// list price, then to the model listed first. It escalates.
func autoTiering(cfg *config.Config) *config.Tiering {
	if cfg.Model(config.AutoAlias) != nil || cfg.Alias(config.AutoAlias) != nil || len(cfg.Models) == 0 {
		return nil
	}
	price := func(m *config.Model) float64 { return m.Price.InputPerMTok + m.Price.OutputPerMTok }
	// pick returns the chat model minimising dist, ties to the cheaper.
	pick := func(dist func(c int) int) *config.Model {
		var best *config.Model
		for i := range cfg.Models {
			m := &cfg.Models[i]
			if m.Kind == config.KindEmbedding {
				continue
			}
			if best == nil || dist(m.Capability) < dist(best.Capability) ||
				dist(m.Capability) == dist(best.Capability) && price(m) < price(best) {
				best = m
			}
		}
		return best
	}
	cheap := pick(func(c int) int { return c })
	strong := pick(func(c int) int { return -c })
	if cheap == nil || cheap.Capability == strong.Capability {
		return nil
	}
	mid := cheap.Capability + strong.Capability // twice the midpoint
	middle := pick(func(c int) int { return max(2*c-mid, mid-2*c) })
	return &config.Tiering{Tiers: config.Tiers{Cheap: cheap.Name, Middle: middle.Name, Strong: strong.Name}, Escalate: true}
}

// semanticCache builds the semantic cache when an alias turns it on: an
// index bounded by cache.semantic_max_entries with the exact cache's TTL,
// and a client of cache.embeddings sending through rt.
func semanticCache(cfg *config.Config, rt http.RoundTripper, now func() time.Time) (*engine.Semantic, error) {
	on := false
	for _, a := range cfg.Aliases {
		on = on || a.SemanticCache != nil && a.SemanticCache.Enabled
	}
	if !on || !cfg.Cache.Enabled || cfg.Cache.Embeddings == nil {
		return nil, nil
	}
	idx, err := semcache.New[*engine.CacheEntry](semcache.Config{TTL: cfg.Cache.TTL, MaxEntries: cfg.Cache.SemanticMaxEntries}, now)
	if err != nil {
		return nil, err
	}
	e := cfg.Cache.Embeddings
	c, err := semcache.NewClient(semcache.ClientConfig{BaseURL: e.BaseURL, APIKey: e.APIKey.Value(), Model: e.Model, Dimensions: e.Dimensions, Timeout: e.Timeout.Std()}, rt)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	return &engine.Semantic{Embed: c.Embed, Index: idx}, nil
}
