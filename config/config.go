// Package config is Keel's one configuration file: the types it decodes into,
// loading with strict checking, ${VAR} expansion, defaults and validation.
//
// A Config is plain data. Load and Parse return a fully defaulted and
// validated value; after that it is safe for concurrent reads and must not be
// mutated while shared. Nothing in the package blocks or starts goroutines.
//
// Every error names the key path (providers[0].timeouts.connect) and, when the
// configuration came from a file, the file, line and column. Secrets (api_key,
// header values) are held as Secret, which prints, logs and marshals as
// "[redacted]"; no error message ever contains a configured value of a secret
// field.
//
// A policy's or stage's settings decode straight into its package's config
// type (resilience.BreakerConfig, resilience.BudgetConfig,
// resilience.HedgePolicy, structured.Config, fragment.Config,
// rollout.Config, normalize.Policy), whose
// constructor owns the defaults and the rules: Validate runs it. A typed
// value (a mode, a policy name) decodes with its own UnmarshalText, which
// lists the allowed values in its error.
//
// The package imports only the standard library, github.com/goccy/go-yaml and
// Keel's policy and stage packages whose config types it decodes into
// (internal/resilience, internal/pricing, internal/cache, internal/shadow,
// internal/pii, internal/convstate, internal/normalize, internal/structured,
// internal/fragment, internal/rollout, internal/affinity, internal/policy;
// internal/health is allowed too). It builds nothing: internal/assemble
// builds a mesh from a Config.
package config

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/normalize"
	kpolicy "github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/structured"
)

// AnthropicVersionClient as providers[].anthropic_version passes the
// client's anthropic-version on (the provider speaks every version).
const AnthropicVersionClient = "client"

// Defaults. A zero field in a Config means the default listed here; ApplyDefaults
// writes them in.
const (
	DefaultListen              = "127.0.0.1:7878"
	DefaultMaxBodyBytes        = 10 << 20 // 10 MiB
	DefaultShutdownTimeout     = Duration(30 * time.Second)
	DefaultDrainDelay          = Duration(5 * time.Second)
	DefaultLogFormat           = "text"
	DefaultLogLevel            = "info"
	DefaultBodyReadTimeout     = Duration(30 * time.Second)
	DefaultMinBodyRate         = 1024
	DefaultMaxMessages         = 10000
	DefaultMaxHeaderBytes      = 64 << 10 // 64 KiB
	MaxMaxHeaderBytes          = 1 << 20  // net/http's DefaultMaxHeaderBytes
	DefaultAnthropicBaseURL    = "https://api.anthropic.com"
	DefaultOpenAIBaseURL       = "https://api.openai.com/v1"
	DefaultGeminiBaseURL       = "https://generativelanguage.googleapis.com"
	DefaultAnthropicVersion    = "2023-06-01"
	DefaultMaxIdleConnsPerHost = 1024
	DefaultConnectTimeout      = Duration(5 * time.Second)
	DefaultResponseHeader      = Duration(60 * time.Second)
	DefaultStreamIdle          = Duration(30 * time.Second)
	DefaultRequestTimeout      = Duration(10 * time.Minute)
	DefaultCapability          = 3
	DefaultContextWindow       = 200000
	DefaultRegion              = "default"
	DefaultStrategy            = StrategyOrdered
	DefaultRedisKeyPrefix      = "keel:"
	DefaultRedisTimeout        = Duration(250 * time.Millisecond)
	DefaultKeysPath            = "keel-keys.db"
	DefaultKeysRefresh         = Duration(5 * time.Second)
)

// Key stores (keys.store).
const (
	KeysStoreSQLite = "sqlite"
	KeysStoreRedis  = "redis"
)

// Cache stores (cache.store).
const (
	CacheStoreMemory = "memory"
	CacheStoreRedis  = "redis"
)

// Provider types: the wire format a provider speaks.
const (
	TypeAnthropic = "anthropic"
	TypeOpenAI    = "openai" // OpenAI-compatible: OpenAI, vLLM, Ollama, llama.cpp, hosted services
	// TypeAzure is Azure OpenAI: OpenAI's bodies at Azure's URLs
	// (deployments with api_version, or the /openai/v1/ surface) with
	// Azure's authentication (api-key or a Microsoft Entra ID token).
	TypeAzure = "azure"
	// TypeGemini is Google's Gemini API (generateContent,
	// streamGenerateContent), its key in x-goog-api-key.
	TypeGemini = "gemini"

	// Values of Provider.Auth for an azure provider.
	AuthAPIKey = "api_key"
	AuthEntra  = "entra"

	// Values of Model.ContentFilter.
	ContentFilterFail     = "fail"
	ContentFilterFallback = "fallback"

	// Values of Provider.API for an openai provider.
	APIChatCompletions = "chat_completions"
	APIResponses       = "responses"
)

// Model kinds (models[].kind).
const (
	KindChat      = "chat"      // called with model calls: Messages, Chat Completions
	KindEmbedding = "embedding" // called with the Embeddings API (POST /v1/embeddings)
)

// Alias strategies.
const (
	StrategyOrdered = "ordered" // try the models in the listed order
	StrategyLatency = "latency" // pick the model whose endpoints are currently fastest
)

// Config is the whole configuration file.
type Config struct {
	Server    Server     `yaml:"server"`
	Providers []Provider `yaml:"providers"`
	Models    []Model    `yaml:"models"`
	Aliases   []Alias    `yaml:"aliases"`
	// Resilience tunes retries, hedging, breakers, probing and the safety valve.
	Resilience Resilience `yaml:"resilience"`
	// Telemetry configures metrics, tracing, debug traces and the dashboard.
	Telemetry Telemetry `yaml:"telemetry"`
	// RequestLog configures the embedded SQLite request log.
	RequestLog RequestLog `yaml:"request_log"`
	// StructuredOutput configures JSON validation, repair and re-ask.
	StructuredOutput StructuredOutput `yaml:"structured_output"`
	// Fragmentation configures long-input splitting, redundant dispatch and fusion.
	Fragmentation Fragmentation `yaml:"fragmentation"`
	// Normalization configures behaviour and parameter normalisation.
	Normalization Normalization `yaml:"normalization"`
	// Classifier extends the local domain classifier.
	Classifier Classifier `yaml:"classifier"`
	// Redis shares endpoint state and budgets between replicas.
	Redis Redis `yaml:"redis"`
	// Pricing overrides and extends the built-in price table
	// (internal/pricing) by upstream model name; a model's own price
	// overrides both.
	Pricing []pricing.Entry `yaml:"pricing"`
	// Keys configures the virtual-key store (keel keys).
	Keys Keys `yaml:"keys"`
	// Cache configures the exact response cache.
	Cache Cache `yaml:"cache"`
	// Shadow sizes the pool that runs the aliases' shadow calls
	// (aliases[].shadow) and says where their comparisons are stored.
	Shadow Shadow `yaml:"shadow"`
	// PII configures personal-data detection, redaction and its audit log.
	PII PII `yaml:"pii"`
	// Responses configures what Keel keeps of the Responses API's
	// conversations (store, previous_response_id, GET and DELETE
	// /v1/responses/{id}): how long, how much, and where.
	Responses convstate.Config `yaml:"responses"`

	// src locates keys in the file this Config was parsed from; nil when built in code.
	src *source
}

// Server configures the HTTP front of `keel serve` and process-wide logging.
type Server struct {
	// Listen is the host:port to listen on; default "127.0.0.1:7878".
	Listen string `yaml:"listen"`
	// MaxBodyBytes caps a request body; default 10 MiB.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ShutdownTimeout bounds a graceful shutdown; default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// DrainDelay is how long `keel serve` keeps accepting and serving after
	// SIGTERM, with /readyz answering 503, before it closes its listener and
	// the shutdown timeout starts: time for load balancers to notice. Nil
	// means DefaultDrainDelay (5s); 0 closes the listener at once. See
	// DrainDelayOrDefault.
	DrainDelay *Duration `yaml:"drain_delay"`
	// LogFormat is "text" (default) or "json".
	LogFormat string `yaml:"log_format"`
	// LogLevel is "debug", "info" (default), "warn" or "error".
	LogLevel string `yaml:"log_level"`
	// AdminToken protects the admin API (POST /admin/features): requests
	// must send "Authorization: Bearer <token>". Empty (the default)
	// disables the admin API. May use ${VAR}.
	AdminToken Secret `yaml:"admin_token"`
	// ReadToken, like AdminToken, opens GET /metrics, /debug/traces and
	// /dashboard when Listen is not a loopback address (on loopback they
	// are open). May use ${VAR}.
	ReadToken Secret `yaml:"read_token"`
	// AllowedHosts are the Host headers accepted on the API, admin and
	// observability routes: "name" (any port), "name:port", "*.domain",
	// "*". Default: on a loopback Listen, localhost, 127.0.0.1 and [::1]
	// with any port; otherwise any Host (and a warning at start).
	AllowedHosts []string `yaml:"allowed_hosts"`
	// AllowedOrigins are the browser origins ("https://app.example.com",
	// or "*") that may call; any other Origin header but the request's
	// own is refused with 403. Default none.
	AllowedOrigins []string `yaml:"allowed_origins"`
	// BodyReadTimeout bounds the time to receive a request body; default 30s.
	BodyReadTimeout Duration `yaml:"body_read_timeout"`
	// MinBodyRateBytesPerSec is the lowest average rate a request body may
	// arrive at after its first second; default 1024.
	MinBodyRateBytesPerSec int64 `yaml:"min_body_rate_bytes_per_sec"`
	// MaxInflightBodyBytes bounds the request-body bytes buffered at once
	// by requests being read and parsed; beyond it a request is answered
	// 429 at once. 0 (the default) means 256 MiB, or a quarter of
	// GOMEMLIMIT when that is smaller; never below MaxBodyBytes.
	MaxInflightBodyBytes int64 `yaml:"max_inflight_body_bytes"`
	// MaxMessages bounds the messages of one request; default 10000.
	MaxMessages int `yaml:"max_messages"`
	// MaxHeaderBytes bounds a request's line and headers (431 in the
	// caller's format beyond); default 64 KiB, at most 1 MiB (net/http's
	// own limit, beyond which it answers a plain-text 431).
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// RequireKeys refuses API calls without a virtual key Keel issued
	// (keel keys create): 401 MESH_KEY_INVALID. Off (the default), a call
	// without one is served unmetered; a call that sends a virtual key is
	// checked and metered either way.
	RequireKeys bool `yaml:"require_keys"`
}

// Keys is the virtual-key store: keys are kept hashed (SHA-256) in an
// embedded SQLite database, with each key's spend.
type Keys struct {
	// Path is the database file; default "keel-keys.db". It may be the
	// request log's file: the tables do not collide.
	Path string `yaml:"path"`
	// RefreshInterval is how often a running mesh re-reads the keys, so
	// that a key `keel keys` revoked or changed from another process
	// takes effect; default 5s. A key created elsewhere works at once (an
	// unknown key is looked up in the database).
	RefreshInterval Duration `yaml:"refresh_interval"`
	// Store is where the keys and their spend live: "sqlite" (Path) or
	// "redis" (the redis section's server, shared by every replica, which
	// then also enforce each key's limits together). Default: "redis" when
	// a redis section is configured, else "sqlite".
	Store string `yaml:"store"`
}

// Cache configures the exact response cache: a request the policy deems
// safe to cache (temperature 0, no tools, unless the policy widens it) is
// answered from memory when an identical one was answered within the TTL.
// Its bounds (ttl, max_entries, max_bytes) are cache.Config's and its policy
// (any_temperature, allow_tools, shared_across_keys) cache.Policy's.
type Cache struct {
	// Enabled turns the cache on; default false.
	Enabled bool `yaml:"enabled"`
	// Store is "memory" (each replica its own) or "redis" (the redis
	// section's server: an answer one replica stored serves the fleet,
	// each replica keeping a copy in memory); default "redis" when a redis
	// section is configured, else "memory".
	Store        string `yaml:"store"`
	cache.Config `yaml:",inline"`
	cache.Policy `yaml:",inline"`
	// Embeddings is the endpoint the semantic cache embeds prompts with:
	// required when an alias turns semantic_cache on, unused otherwise.
	Embeddings *Embeddings `yaml:"embeddings"`
	// SemanticMaxEntries bounds the semantic cache's index (all aliases
	// together); default 10000. Its entries expire after the cache's ttl.
	SemanticMaxEntries int `yaml:"semantic_max_entries"`
}

// Embeddings is an endpoint speaking OpenAI's Embeddings API
// (POST {base_url}/embeddings).
type Embeddings struct {
	// BaseURL is the API base, e.g. "https://api.openai.com/v1"; required.
	// May use ${VAR}.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as a bearer token when set. May use ${VAR}.
	APIKey Secret `yaml:"api_key"`
	// Model is the embedding model, e.g. "text-embedding-3-small"; required.
	Model string `yaml:"model"`
	// Dimensions, when > 0, asks for shorter vectors (text-embedding-3
	// models accept it).
	Dimensions int `yaml:"dimensions"`
	// Timeout bounds one embeddings call; default 500ms. A call that
	// fails or times out is a cache miss: the request goes upstream.
	Timeout Duration `yaml:"timeout"`
}

// DefaultSemanticThreshold is the cosine similarity at or above which a
// semantic cache entry answers a call, when an alias sets no threshold:
// chosen on the tuning half of testdata/semcache with the simulator's
// embeddings (BENCHMARKS.md, Session 6) as the lowest threshold, in steps of
// 0.01, with at most 1 % false hits there. A real embedding model puts
// paraphrases and near misses at other similarities: measure before relying
// on it.
const DefaultSemanticThreshold = 0.90

// SemanticCache turns an alias's semantic cache on: a call the exact cache
// misses is answered with a stored answer to a similar prompt (cosine
// similarity of the last user message's embedding ≥ Threshold) of the same
// domain and otherwise identical request.
type SemanticCache struct {
	// Enabled turns it on; default false. Needs cache.enabled and
	// cache.embeddings.
	Enabled bool `yaml:"enabled"`
	// Threshold is the lowest cosine similarity served, in (0, 1];
	// default DefaultSemanticThreshold.
	Threshold float64 `yaml:"threshold"`
}

// ThresholdOrDefault returns Threshold, or DefaultSemanticThreshold when
// unset.
func (s SemanticCache) ThresholdOrDefault() float64 {
	if s.Threshold == 0 {
		return DefaultSemanticThreshold
	}
	return s.Threshold
}

// KeysStore is keys.store, or its default when unset: redis when the
// redis section is set, else sqlite.
func (c *Config) KeysStore() string {
	if c.Keys.Store == "" && c.Redis.On() {
		return KeysStoreRedis
	}
	if c.Keys.Store == "" {
		return KeysStoreSQLite
	}
	return c.Keys.Store
}

// CacheStore is cache.store, or its default when unset: redis when the
// redis section is set, else memory.
func (c *Config) CacheStore() string {
	if c.Cache.Store == "" && c.Redis.On() {
		return CacheStoreRedis
	}
	if c.Cache.Store == "" {
		return CacheStoreMemory
	}
	return c.Cache.Store
}

// ResponsesStore is responses.store, or its default when unset: redis when
// the redis section is set, else sqlite when the request log is written
// (the conversations go into its file), else memory.
func (c *Config) ResponsesStore() string {
	switch {
	case c.Responses.Store != "":
		return c.Responses.Store
	case c.Redis.On():
		return convstate.StoreRedis
	case c.RequestLog.On():
		return convstate.StoreSQLite
	}
	return convstate.StoreMemory
}

// KeysOn reports whether the mesh opens the key store: when keys are required
// or a path is set.
func (c *Config) KeysOn() bool { return c.Server.RequireKeys || c.Keys.Path != "" }

// DrainDelayOrDefault returns DrainDelay, or DefaultDrainDelay when unset.
func (s Server) DrainDelayOrDefault() time.Duration {
	if s.DrainDelay != nil {
		return time.Duration(*s.DrainDelay)
	}
	return time.Duration(DefaultDrainDelay)
}

// Redis is the store several replicas of one mesh share: each publishes
// what it observes of the upstreams (endpoints down and back, ejections,
// retry-after cooldowns, breaker openings and closings, rate-limit
// headroom) and applies the others' within milliseconds, and the retry
// and hedge budgets are one token bucket per route for the whole fleet,
// leased in batches. No call waits for Redis: when it is down or slow,
// each replica goes on with its own state and budgets, and re-syncs when
// it returns. Unset (no url), nothing is shared.
type Redis struct {
	// URL is redis://[[user]:password@]host:port[/db] (rediss:// for TLS);
	// empty (the default) shares nothing. May use ${VAR}; a secret.
	URL Secret `yaml:"url"`
	// Password, when set, overrides the URL's. May use ${VAR}; a secret.
	Password Secret `yaml:"password"`
	// KeyPrefix starts every key and the pub/sub channel, so several meshes
	// can share one Redis; default "keel:". Replicas of one mesh must use
	// the same prefix (and the same model names).
	KeyPrefix string `yaml:"key_prefix"`
	// Timeout bounds connecting and each command; default 250ms. A replica
	// that cannot reach Redis within it goes on with local state.
	Timeout Duration `yaml:"timeout"`
}

// On reports whether the mesh shares state through Redis.
func (r Redis) On() bool { return r.URL != "" }

// Telemetry configures what Keel exposes about itself.
type Telemetry struct {
	// Metrics serves Prometheus metrics at GET /metrics; default true.
	Metrics *bool `yaml:"metrics"`
	// OTLPEndpoint is the OTLP/HTTP traces URL (http://host:4318/v1/traces);
	// empty (the default) exports no spans. May use ${VAR}.
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// OTLPHeaders are sent with every export (an API key, typically).
	OTLPHeaders map[string]Secret `yaml:"otlp_headers"`
	// ServiceName is the OTel service.name; default "keel".
	ServiceName string `yaml:"service_name"`
	// DebugTraces is how many debug traces GET /debug/traces/{id} keeps; default 1024.
	DebugTraces int `yaml:"debug_traces"`
	// Dashboard serves the live dashboard at GET /dashboard; default true.
	Dashboard *bool `yaml:"dashboard"`
}

// Classifier extends the domain signature: each lexicon adds a domain, or
// boosts terms of a built-in one (finance, medical, legal, code, general).
type Classifier struct {
	// Lexicons maps a domain to terms (words or CJK phrases) and their
	// weights (positive: evidence for the domain).
	Lexicons map[string]map[string]float64 `yaml:"lexicons"`
}

// Normalization maps sampling parameters onto what the serving model
// accepts and, with calibrations from `keel calibrate`, the requested
// temperature onto the serving model's equivalent.
type Normalization struct {
	// Enabled turns normalisation on; default true.
	Enabled *bool `yaml:"enabled"`
	// CalibrationDB is the SQLite file `keel calibrate` writes; read at
	// start (and on reload) when it exists. Default "keel-calibrations.db".
	CalibrationDB string `yaml:"calibration_db"`
	// ParameterPolicy is what happens to a parameter the serving model or
	// API version does not accept: "drop" (default), "map" (clamp or map to
	// an accepted value) or "reject" (400 MESH_NORMALIZATION_FAILED).
	ParameterPolicy normalize.Policy `yaml:"parameter_policy"`
}

// Fragmentation is the fragmentation section: the fragment package's own
// config type, whose defaults live in that package.
type Fragmentation = fragment.Config

// StructuredOutput is the structured_output section: the structured
// package's own config type (structured.Config), whose typed modes decode
// with their own UnmarshalText and whose limits default in
// structured.DefaultLimits.
type StructuredOutput = structured.Config

// Derivation is one structured_output.derive entry (structured.DeriveRule).
type Derivation = structured.DeriveRule

// RequestLog is the embedded SQLite request log `keel report` reads.
type RequestLog struct {
	// Enabled writes one row per request. Unset, the log is written only
	// when Path is set (see On), so a library user of keel.New never finds
	// a database file in the working directory; `keel serve` sets it true.
	Enabled *bool `yaml:"enabled"`
	// Path is the database file; default "keel-requests.db" when Enabled.
	Path string `yaml:"path"`
	// RetentionDays is how long rows are kept; default 30.
	RetentionDays int `yaml:"retention_days"`
	// QueueSize bounds records waiting to be written; a full queue drops
	// (and counts) rather than slowing a request; default 8192.
	QueueSize int `yaml:"queue_size"`
	// BatchSize is the most records written per transaction; default 256.
	BatchSize int `yaml:"batch_size"`
	// FlushInterval is the longest a record waits to be written; default 200ms.
	FlushInterval Duration `yaml:"flush_interval"`
	// LogBodies stores prompt and answer bodies too; default false.
	LogBodies bool `yaml:"log_bodies"`
}

// On reports whether the request log is written: Enabled when set, else
// whether Path names a file.
func (r RequestLog) On() bool {
	if r.Enabled != nil {
		return *r.Enabled
	}
	return r.Path != ""
}

// Resilience tunes the engine. Zero values mean the defaults listed. The
// retry and hedge budgets, the hedge delay bounds and the breaker are the
// resilience package's own config structs: their defaults and rules are
// those of resilience.NewBudget, HedgePolicy.Validate and NewBreaker.
type Resilience struct {
	// MaxAttempts bounds upstream attempts per call, retries, hedges and
	// continuations included; default 4.
	MaxAttempts int `yaml:"max_attempts"`
	// Timeout is the default overall deadline of a call (a client's
	// X-Mesh-Timeout header overrides it); default none.
	Timeout Duration `yaml:"timeout"`
	// RetryBudget caps retries per route: default ratio 0.2 (retries ≤ 20 %
	// of requests), burst 10.
	RetryBudget resilience.BudgetConfig `yaml:"retry_budget"`
	// HedgeBudget caps hedges per route: default ratio 0.1, burst 10.
	HedgeBudget resilience.BudgetConfig `yaml:"hedge_budget"`
	// Hedging sends a second attempt when the first is slower than the
	// endpoint's live p95; default true.
	Hedging *bool `yaml:"hedging"`
	// Hedge clamps the adaptive hedge delay; its keys, hedge_floor
	// (default 20ms) and hedge_ceiling (default 2s), sit in this section.
	Hedge resilience.HedgePolicy `yaml:",inline"`
	// SlowStreamHedging races a stream that slows down mid-way (its recent
	// pace SlowStream's threshold times below its endpoint's normal one)
	// against a continuation on another endpoint, within
	// SlowStreamBudget; default true (off wherever hedging is).
	SlowStreamHedging *bool `yaml:"slow_stream_hedging"`
	// SlowStream's key, slow_stream_threshold (default 4), sits in this
	// section.
	SlowStream health.PacePolicy `yaml:",inline"`
	// SlowStreamBudget caps slow-stream races per route, apart from
	// HedgeBudget: default ratio 0.05 of the streams, burst 10.
	SlowStreamBudget resilience.BudgetConfig `yaml:"slow_stream_budget"`
	// Recovery continues a stream that breaks mid-way on another endpoint; default true.
	Recovery *bool `yaml:"recovery"`
	// ProbeInterval caps the gap between probes of an unreachable endpoint
	// (the first after 5ms, then doubling); default 50ms.
	ProbeInterval Duration `yaml:"probe_interval"`
	// CacheAffinity keeps a conversation on the endpoint whose prompt
	// cache is warm (the affinity package's config: on by default).
	CacheAffinity affinity.Config `yaml:"cache_affinity"`
	// ColdSpend is the dollar budget hedges and moved conversations pay
	// cold prompts from (the policy package's config: on by default).
	ColdSpend kpolicy.ColdSpendConfig `yaml:"cold_spend"`
	// Breaker tunes the per-endpoint circuit breakers (defaults: see
	// resilience.BreakerConfig and docs/config.md).
	Breaker     resilience.BreakerConfig `yaml:"breaker"`
	SafetyValve Valve                    `yaml:"safety_valve"`
	Rollout     Rollout                  `yaml:"rollout"`
}

// Rollout is resilience.rollout: the rollout package's own config type
// (its stage decodes with its own UnmarshalText; its rules are
// rollout.Rollout.Validate's).
type Rollout = rollout.Config

// Valve is the mesh-aware safety valve: when the share of calls that needed
// a fallback to a weaker model passes its threshold over its window, the
// mesh drops to plain pass-through to each route's primary endpoint for a
// while, logs an alert and posts it to Webhook when set. Its policy keys
// (disabled, threshold, window, min_requests, hold; defaults: see
// resilience.ValveConfig and docs/config.md) decode straight into the
// resilience package's struct.
type Valve struct {
	resilience.ValveConfig `yaml:",inline"`
	// Webhook receives a JSON POST when the valve trips or recovers; it
	// configures telemetry's alert subscriber, not the valve. May use ${VAR}.
	Webhook string `yaml:"webhook"`
}

// Provider is one upstream API account: a wire format, a base URL and credentials.
type Provider struct {
	// Name is unique among providers and required; endpoints refer to it.
	// Letters, digits, '.', '_' and '-'.
	Name string `yaml:"name"`
	// Type is the provider's API: "anthropic", "openai" (any
	// OpenAI-compatible server), "azure" (Azure OpenAI) or "gemini" (the
	// Gemini API).
	Type string `yaml:"type"`
	// BaseURL defaults to https://api.anthropic.com for anthropic,
	// https://api.openai.com/v1 for openai and
	// https://generativelanguage.googleapis.com for gemini; required for
	// azure: the resource's endpoint, https://{resource}.openai.azure.com
	// (deployment URLs, with api_version) or
	// https://{resource}.openai.azure.com/openai/v1 (the v1 surface, no
	// api_version). May use ${VAR}.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the environment variable holding the key, read at call
	// time by Key. Mutually exclusive with APIKey.
	APIKeyEnv string `yaml:"api_key_env"`
	// APIKey is the key itself, literal or "${VAR}" (expanded at load time).
	APIKey Secret `yaml:"api_key"`
	// AnthropicVersion is the anthropic-version the provider speaks: a
	// date, sent with every call, whose rules (2026-10-21: no sampling
	// parameters) apply to its calls; or AnthropicVersionClient, the
	// client's header passed on (DefaultAnthropicVersion when it sent
	// none), as for Anthropic's own API. Empty: "client" for Anthropic's
	// API (base_url on api.anthropic.com), DefaultAnthropicVersion for any
	// other server. Anthropic only.
	AnthropicVersion string `yaml:"anthropic_version"`
	// Headers are extra headers sent upstream. Values may use ${VAR} and are
	// secrets (an Authorization header is typical), so they print redacted.
	Headers map[string]Secret `yaml:"headers"`
	// Timeouts bound each upstream attempt.
	Timeouts Timeouts `yaml:"timeouts"`
	// MaxConnsPerHost caps connections to one upstream host; 0 (default) is unlimited.
	MaxConnsPerHost int `yaml:"max_conns_per_host"`
	// MaxIdleConnsPerHost caps idle kept-alive connections; default 1024.
	MaxIdleConnsPerHost int `yaml:"max_idle_conns_per_host"`
	// HTTPClient picks the client for plain-http upstreams: "lean" (default,
	// Keel's HTTP/1.1 client on the caller's goroutine) or "standard"
	// (net/http's Transport). https upstreams always use the standard one.
	HTTPClient string `yaml:"http_client"`
	// API is the OpenAI API an openai or azure provider is called through:
	// "chat_completions" (default, POST /chat/completions) or "responses"
	// (POST /responses, for models or features only the Responses API has).
	API string `yaml:"api"`
	// APIVersion, for an azure provider whose base_url is the resource's
	// endpoint, is the api-version query parameter every call sends
	// (e.g. "2024-10-21"); Azure answers a deployment URL without one
	// with 404. Unset for the v1 surface (base_url ending in /openai/v1),
	// which takes none.
	APIVersion string `yaml:"api_version"`
	// Auth is how an azure provider authenticates: "api_key" (default:
	// the key of api_key or api_key_env in the api-key header) or "entra"
	// (a Microsoft Entra ID bearer token for
	// https://cognitiveservices.azure.com/.default from the Azure
	// credential chain: environment, workload identity, managed identity,
	// Azure CLI; refreshed before it expires).
	Auth string `yaml:"auth"`
	// Continuation is how the upstream continues a partial answer sent as
	// a trailing assistant message (stream recovery): "prefill" (Anthropic,
	// llama.cpp), "continue_final_message" (vLLM, SGLang), "prefix"
	// (DeepSeek, Mistral) or "none" (OpenAI: the message is history).
	// Empty means the type's default: prefill for anthropic, none for openai.
	Continuation string `yaml:"continuation"`
	// Bedrock, on an anthropic provider, calls Anthropic's models on
	// Amazon Bedrock (InvokeModel, InvokeModelWithResponseStream) instead
	// of base_url: the endpoints' upstream_model is a Bedrock model id or
	// inference profile (us.anthropic.claude-…-v1:0). api_key or
	// api_key_env, when set, is a Bedrock API key; otherwise calls are
	// signed (SigV4) with the AWS standard credential chain. base_url,
	// when set, replaces https://bedrock-runtime.{region}.amazonaws.com.
	Bedrock *Bedrock `yaml:"bedrock"`
	// Vertex, on an anthropic provider, calls Anthropic's models on Google
	// Vertex AI (rawPredict, streamRawPredict) with OAuth2 tokens: the
	// endpoints' upstream_model is a Vertex model id
	// (claude-sonnet-4-5@20250929). base_url, when set, replaces the
	// region's Vertex AI host.
	Vertex *Vertex `yaml:"vertex"`
}

// Bedrock is where and as whom a provider calls Amazon Bedrock.
type Bedrock struct {
	// Region is the AWS region (us-east-1, …); empty: the credential
	// chain's (AWS_REGION, the profile's region).
	Region string `yaml:"region"`
	// Profile is a shared config profile (~/.aws/config); empty: the
	// chain's (AWS_PROFILE, else default).
	Profile string `yaml:"profile"`
}

// Vertex is where and as whom a provider calls Google Vertex AI.
type Vertex struct {
	// Project is the Google Cloud project; empty: the credentials'.
	Project string `yaml:"project"`
	// Region is the location: global, us, eu or a region (us-east5, …).
	// Required.
	Region string `yaml:"region"`
	// CredentialsFile is a Google credentials JSON file (a service account
	// key, …); empty: Application Default Credentials. May use ${VAR}.
	CredentialsFile string `yaml:"credentials_file"`
}

// Timeouts bound one upstream attempt. Zero means the default.
type Timeouts struct {
	// Connect bounds dialing and the TLS handshake; default 5s.
	Connect Duration `yaml:"connect"`
	// ResponseHeader bounds the wait for the response headers; default 60s.
	ResponseHeader Duration `yaml:"response_header"`
	// StreamIdle is the longest gap allowed between two stream events; default 30s.
	StreamIdle Duration `yaml:"stream_idle"`
	// Request bounds a whole attempt, body included; default 10m.
	Request Duration `yaml:"request"`
}

// Model is a model name clients can ask for, served by one or more endpoints.
type Model struct {
	// Name is what clients put in "model"; unique across models and aliases.
	Name string `yaml:"name"`
	// Kind is "chat" (the default: served by model calls) or "embedding"
	// (served by POST /v1/embeddings, on endpoints of openai providers; an
	// alias may not name it).
	Kind string `yaml:"kind"`
	// Capability is a tier from 1 (weakest) to 5 (strongest); default 3.
	Capability int `yaml:"capability"`
	// ContextWindow is the context size in tokens; default 200000 for a
	// chat model, none (unknown) for an embedding model.
	ContextWindow int `yaml:"context_window"`
	// Domains scores the model's fitness per request domain (finance,
	// medical, legal, code, general), 0–1; a missing domain scores 1. The
	// router skips a model scoring below 0.8 for the request's domain.
	Domains map[string]float64 `yaml:"domains"`
	// Price is the list price, used for cost, spend and budgets. Unset, the
	// endpoint's upstream model is looked up in the pricing section, then
	// in the built-in table (internal/pricing); a model found in neither
	// costs 0 (and a warning is logged at start).
	Price Price `yaml:"price"`
	// Endpoints are the places this model is served; at least one.
	Endpoints []Endpoint `yaml:"endpoints"`
	// Translation is what happens when a client's request has a feature an
	// endpoint of the other wire format cannot express: unset, content (a
	// document, audio, thinking, a server tool …) is refused with a 400
	// naming it and other features are removed and named in X-Mesh-Dropped;
	// "drop" removes and names content too; "reject" refuses every feature.
	Translation string `yaml:"translation"`
	// StructuredOutputs is how the model is asked for an answer matching a
	// JSON Schema Keel will validate (mesh_behavior.output_schema, or one
	// implied by the system prompt, when the client named no format):
	// "native" (default: OpenAI response_format json_schema or Anthropic
	// output_config.format), "tool" (a forced tool call folded back into
	// text) or "none" (not sent; validated, repaired and re-asked).
	StructuredOutputs string `yaml:"structured_outputs"`
	// PII overrides pii.action and pii.fail_open for calls to this model.
	PII *RoutePII `yaml:"pii"`
	// ContentFilter is what a call does when an endpoint's content filter
	// refuses its prompt (Azure OpenAI's 400 with code content_filter):
	// "fail" (default: the refusal reaches the client as an error in its
	// format; the request is at fault, not the endpoint, so no other
	// endpoint is tried) or "fallback" (the model's other endpoints are
	// tried, as for an outage — for models served by providers whose
	// filters differ).
	ContentFilter string `yaml:"content_filter"`
}

// Price is a model's price in US dollars per million tokens: input,
// output, cache_read and cache_write (both 0: priced as input).
type Price = pricing.Price

// Endpoint is one way to reach a model: a provider, in a region, under the
// model name that provider uses.
type Endpoint struct {
	// Provider names an entry of Config.Providers; required.
	Provider string `yaml:"provider"`
	// Region labels the endpoint for routing and metrics; default "default".
	// Letters, digits, '.', '_' and '-'.
	Region string `yaml:"region"`
	// UpstreamModel is the model name sent upstream; default the Model's name.
	UpstreamModel string `yaml:"upstream_model"`
	// BaseURL overrides the provider's base URL for this endpoint. May use ${VAR}.
	BaseURL string `yaml:"base_url"`
}

// Alias is a client-facing name for an ordered fallback chain of models.
type Alias struct {
	// Name is what clients put in "model"; unique across models and aliases.
	Name string `yaml:"name"`
	// Models is the fallback chain, most preferred first; at least one.
	Models []string `yaml:"models"`
	// Strategy is "ordered" (default) or "latency".
	Strategy string `yaml:"strategy"`
	// Translation overrides the models' translation policy for this alias.
	Translation string `yaml:"translation"`
	// Tiering, when set, routes each call by its prompt's complexity to one
	// of three models; Models may then be omitted.
	Tiering *Tiering `yaml:"tiering"`
	// Shadow, when set, also sends a share of the alias's calls (sticky
	// by key) on a shadow path — a model, another alias or the legacy
	// path — after the client has its answer, and diffs the answers
	// (see shadow.Config and docs/config.md).
	Shadow *shadow.Config `yaml:"shadow"`
	// SemanticCache, when enabled, answers calls to the alias from the
	// semantic cache (see SemanticCache).
	SemanticCache *SemanticCache `yaml:"semantic_cache"`
	// PII overrides pii.action and pii.fail_open for calls to this alias.
	PII *RoutePII `yaml:"pii"`
}

// Shadow is the shadow pool and store (the policy is per alias).
type Shadow struct {
	// Store is the SQLite file comparisons are written to (keel shadow
	// report reads it); empty, the default, stores none (the metrics still
	// count them).
	Store string `yaml:"store"`
	// RetentionDays is how long comparisons are kept; default 30.
	RetentionDays int `yaml:"retention_days"`
	// Workers run shadow calls; default 2.
	Workers int `yaml:"workers"`
	// Queue bounds shadow calls waiting for a worker; a full queue drops
	// (and counts) the next one; default 64.
	Queue int `yaml:"queue"`
	// ShedInflight: while more client calls than this are in flight, every
	// queued and running shadow is cancelled; default 64.
	ShedInflight int `yaml:"shed_inflight"`
	// Timeout is each shadow call's deadline; default 30s.
	Timeout Duration `yaml:"timeout"`
}

// Tiering is an alias's complexity tiering: Keel's local classifier reads
// each prompt as simple, medium or complex and sends it to the cheap,
// middle or strong model. The zero value is invalid (tiers are required).
type Tiering struct {
	Tiers Tiers `yaml:"tiers"`
	// Escalate re-asks an answer that failed validation (a schema violation
	// repair could not fix) on the next tier up instead of the same model.
	// Default false.
	Escalate bool `yaml:"escalate"`
}

// Tiers names the model of each tier.
type Tiers struct {
	Cheap  string `yaml:"cheap"`
	Middle string `yaml:"middle"`
	Strong string `yaml:"strong"`
}

// AutoAlias is the built-in tiered alias keel.New adds when no model or alias
// has the name and the models differ in capability.
const AutoAlias = "auto"

// ID returns the endpoint's stable identifier, model/region/provider, used in
// health tracking, metrics and logs. An empty region counts as "default".
// Region and provider names cannot contain '/', so the ID splits unambiguously
// from the right even when the model name contains '/'.
func (e Endpoint) ID(model string) string {
	region := e.Region
	if region == "" {
		region = DefaultRegion
	}
	return model + "/" + region + "/" + e.Provider
}

// ErrKeyEnvUnset reports that a provider's api_key_env names an environment
// variable that is not set (or is empty).
var ErrKeyEnvUnset = errors.New("api key environment variable not set")

// Key returns the provider's API key: the value of the environment variable
// named by APIKeyEnv, read now, or APIKey. It returns "" and no error when the
// provider has no key configured (a local server). The error names the
// variable, never a value, and wraps ErrKeyEnvUnset.
func (p Provider) Key() (string, error) {
	if p.APIKeyEnv != "" {
		v := os.Getenv(p.APIKeyEnv)
		if v == "" {
			return "", fmt.Errorf("provider %q: %w: %s", p.Name, ErrKeyEnvUnset, p.APIKeyEnv)
		}
		return v, nil
	}
	return p.APIKey.Value(), nil
}

// Provider returns the provider with the given name, or nil.
func (c *Config) Provider(name string) *Provider {
	for i := range c.Providers {
		if c.Providers[i].Name == name {
			return &c.Providers[i]
		}
	}
	return nil
}

// Model returns the model with the given name, or nil.
func (c *Config) Model(name string) *Model {
	for i := range c.Models {
		if c.Models[i].Name == name {
			return &c.Models[i]
		}
	}
	return nil
}

// Alias returns the alias with the given name, or nil.
func (c *Config) Alias(name string) *Alias {
	for i := range c.Aliases {
		if c.Aliases[i].Name == name {
			return &c.Aliases[i]
		}
	}
	return nil
}

// WireFormat is the wire format calls to p use: its type, or "responses"
// for an openai provider with api: responses.
func (p *Provider) WireFormat() string {
	switch {
	case (p.Type == TypeOpenAI || p.Type == TypeAzure) && p.API == APIResponses:
		return APIResponses
	case p.Type == TypeAzure:
		return TypeOpenAI // Azure OpenAI takes OpenAI's bodies
	}
	return p.Type
}
