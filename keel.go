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
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/inproc"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/server"
)

// Mesh is a running Keel engine with its HTTP front and embedded transport.
type Mesh struct {
	eng       *engine.Engine
	srv       *server.Server
	transport http.RoundTripper
	client    *http.Client
	upstream  *http.Transport // nil when an upstream RoundTripper was injected
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
	rt := o.upstream
	if rt == nil {
		topt := provider.TransportOptions{}
		for _, p := range cfg.Providers {
			topt.ConnectTimeout = max(topt.ConnectTimeout, time.Duration(p.Timeouts.Connect))
			topt.MaxIdleConnsPerHost = max(topt.MaxIdleConnsPerHost, p.MaxIdleConnsPerHost)
			topt.MaxConnsPerHost = max(topt.MaxConnsPerHost, p.MaxConnsPerHost)
		}
		m.upstream = provider.NewTransport(topt)
		rt = m.upstream
	}
	eps, err := Endpoints(cfg)
	if err != nil {
		return nil, err
	}
	aliases := map[string]engine.Alias{}
	for _, a := range cfg.Aliases {
		aliases[a.Name] = engine.Alias{Models: a.Models, Strategy: a.Strategy}
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
			pass = append(pass, &provider.Endpoint{
				Region: "default", Provider: p.Name, Format: llm.ParseFormat(p.Type), BaseURL: p.BaseURL, APIKey: key,
				AnthropicVersion:      p.AnthropicVersion,
				ResponseHeaderTimeout: time.Duration(p.Timeouts.ResponseHeader),
				StreamIdleTimeout:     time.Duration(p.Timeouts.StreamIdle),
				RequestTimeout:        time.Duration(p.Timeouts.Request),
				Header:                headerOf(p.Headers),
			})
		}
	}
	m.eng, err = engine.New(engine.Options{Endpoints: eps, Aliases: aliases, Client: provider.NewClient(rt), Logger: o.logger,
		Passthrough: pass, Resilience: resilienceOptions(cfg.Resilience), Observer: o.observer, Now: o.now})
	if err != nil {
		return nil, err
	}
	m.srv = server.New(server.Options{Engine: m.eng, Logger: o.logger, MaxBodyBytes: cfg.Server.MaxBodyBytes, AdminToken: cfg.Server.AdminToken.Value()})
	m.transport = &inproc.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.srv.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), server.EmbeddedContextKey, true)))
	})}
	m.client = &http.Client{Transport: m.transport}
	return m, nil
}

// Endpoints resolves the config's models into upstream endpoints, reading
// API keys from the environment now.
func Endpoints(cfg *config.Config) ([]*provider.Endpoint, error) {
	var eps []*provider.Endpoint
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
			ep := &provider.Endpoint{
				ID:                    e.ID(mdl.Name),
				Model:                 mdl.Name,
				UpstreamModel:         e.UpstreamModel,
				Region:                e.Region,
				Provider:              p.Name,
				Format:                llm.ParseFormat(p.Type),
				BaseURL:               p.BaseURL,
				APIKey:                key,
				AnthropicVersion:      p.AnthropicVersion,
				ResponseHeaderTimeout: time.Duration(p.Timeouts.ResponseHeader),
				StreamIdleTimeout:     time.Duration(p.Timeouts.StreamIdle),
				RequestTimeout:        time.Duration(p.Timeouts.Request),
				Capability:            mdl.Capability,
				ContextWindow:         mdl.ContextWindow,
				InputPrice:            mdl.Price.InputPerMTok,
				OutputPrice:           mdl.Price.OutputPerMTok,
			}
			if ep.UpstreamModel == "" {
				ep.UpstreamModel = mdl.Name
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

// Close releases idle upstream connections. In-flight calls are not
// interrupted.
func (m *Mesh) Close() error {
	m.eng.Close()
	if m.upstream != nil {
		m.upstream.CloseIdleConnections()
	}
	return nil
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

// resilienceOptions maps the config section onto the engine's options.
func resilienceOptions(c config.Resilience) engine.Resilience {
	r := engine.Resilience{
		MaxAttempts:     c.MaxAttempts,
		Timeout:         time.Duration(c.Timeout),
		RetryBudget:     resilience.BudgetConfig{Ratio: c.RetryBudget.Ratio, Burst: c.RetryBudget.Burst},
		HedgeBudget:     resilience.BudgetConfig{Ratio: c.HedgeBudget.Ratio, Burst: c.HedgeBudget.Burst},
		Hedge:           resilience.HedgePolicy{Floor: time.Duration(c.HedgeFloor), Ceiling: time.Duration(c.HedgeCeiling)},
		DisableHedging:  c.Hedging != nil && !*c.Hedging,
		DisableRecovery: c.Recovery != nil && !*c.Recovery,
		ProbeInterval:   time.Duration(c.ProbeInterval),
		Breaker: resilience.BreakerConfig{
			FailureRate: c.Breaker.FailureRate, MinRequests: c.Breaker.MinRequests,
			ConsecutiveFailures: c.Breaker.ConsecutiveFailures, Window: time.Duration(c.Breaker.Window),
			OpenFor: time.Duration(c.Breaker.OpenFor), HalfOpenProbes: c.Breaker.HalfOpenProbes,
			SuccessesToClose: c.Breaker.SuccessesToClose,
		},
		Valve: engine.ValveConfig{
			Disabled: c.SafetyValve.Disabled, Threshold: c.SafetyValve.Threshold, Window: time.Duration(c.SafetyValve.Window),
			MinRequests: c.SafetyValve.MinRequests, Hold: time.Duration(c.SafetyValve.Hold), Webhook: c.SafetyValve.Webhook,
		},
	}
	return r
}
