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
	"log/slog"
	"net/http"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/assemble"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/inproc"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/wire"
)

// Mesh is a running Keel engine with its HTTP front and embedded transport.
type Mesh struct {
	built     *assemble.Mesh
	transport http.RoundTripper
	client    *http.Client
}

// Option configures New.
type Option func(*assemble.Options)

// WithLogger sets the logger; nil (the default) discards.
func WithLogger(l *slog.Logger) Option { return func(o *assemble.Options) { o.Logger = l } }

// WithUpstream sends every upstream attempt through rt instead of Keel's own
// tuned transport — for example the simulator's in-memory transport in tests.
func WithUpstream(rt http.RoundTripper) Option {
	return func(o *assemble.Options) { o.Upstream = rt }
}

// WithObserver receives a record of every finished call (metrics, request
// log, tests). It must not block.
func WithObserver(ob callrec.Observer) Option { return func(o *assemble.Options) { o.Observer = ob } }

// WithClock injects the engine's clock (tests).
func WithClock(now func() time.Time) Option { return func(o *assemble.Options) { o.Now = now } }

// WithRand injects the engine's random choice (tests that must give the
// same run twice): rnd(n) returns a uniform int in [0, n) and must be safe
// for concurrent use.
func WithRand(rnd func(n int) int) Option { return func(o *assemble.Options) { o.Rand = rnd } }

// New builds a Mesh from a validated config (internal/assemble does the
// building).
func New(cfg *config.Config, opts ...Option) (*Mesh, error) {
	var o assemble.Options
	for _, f := range opts {
		f(&o)
	}
	built, err := assemble.Build(cfg, o)
	if err != nil {
		return nil, err
	}
	m := &Mesh{built: built}
	m.transport = &inproc.Transport{
		Handler: built.Server(),
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

// Endpoints resolves the config's models into upstream endpoints, reading
// API keys from the environment now. Each endpoint's price is its model's
// price, else the pricing section's or the built-in table's entry for its
// upstream model, else for the model's name (zero when none has one).
func Endpoints(cfg *config.Config) ([]*provider.Endpoint, error) { return assemble.Endpoints(cfg) }

// MaxLoggedBody bounds each body the request log stores with
// request_log.log_bodies: a longer one is cut there and ends with a note
// saying how many bytes were cut.
const MaxLoggedBody = assemble.MaxLoggedBody

// Handler returns the proxy's HTTP handler (the Anthropic and OpenAI APIs,
// /v1/models, /healthz and /readyz).
func (m *Mesh) Handler() http.Handler { return m.built.Server() }

// Transport returns the embedded RoundTripper: requests the official SDKs
// send through it are served by the engine in-process, whatever host they
// name. It never modifies the caller's request and always closes bodies.
func (m *Mesh) Transport() http.RoundTripper { return m.transport }

// HTTPClient returns an *http.Client over Transport(), for
// option.WithHTTPClient in anthropic-sdk-go and openai-go.
func (m *Mesh) HTTPClient() *http.Client { return m.client }

// Endpoints returns every upstream endpoint's live state: health,
// breaker, ejection.
func (m *Mesh) Endpoints() []fleet.Status { return m.built.Engine().Endpoints() }

// Engine returns the mesh's engine (for telemetry wiring and tests).
func (m *Mesh) Engine() *engine.Engine { return m.built.Engine() }

// SetReady flips the proxy's /readyz (false while draining).
func (m *Mesh) SetReady(ready bool) { m.built.Server().SetReady(ready) }

// CheckCredentials gets the credentials of every Bedrock and Vertex
// provider, and of every azure provider with auth entra and gemini
// provider on Vertex, once (a credential fetch, no model call); the error
// names each provider that cannot authenticate. keel serve runs it at
// start.
func (m *Mesh) CheckCredentials(ctx context.Context) error { return m.built.CheckCredentials(ctx) }

// ErrShuttingDown, as the cause of a request context's cancellation, ends
// the call served by Handler with the wire's shutdown error: a stream gets
// the wire's error event (overloaded_error), a call not yet answered a 503.
// Cancel the base context of the http.Server (BaseContext) with it when a
// graceful shutdown runs out of time, as `keel serve` does.
var ErrShuttingDown = server.ErrShuttingDown

// Close releases idle upstream connections and closes what the mesh
// opened (logs, stores, exporters). In-flight calls are not interrupted.
func (m *Mesh) Close() error { return m.built.Close() }
