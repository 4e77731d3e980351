package config

import (
	"cmp"
	"encoding"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/health"
	kpolicy "github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/structured"
)

// Validate checks the whole configuration and returns every problem found,
// joined with errors.Join and ordered by position in the file; nil when the
// configuration is valid. Each problem is an *Error naming the key path and
// what was expected. A zero field counts as its default, so Validate accepts
// a Config before and after ApplyDefaults alike.
func (c *Config) Validate() error {
	return joinSorted(c.problems())
}

// CheckServes refuses a configuration that would serve nothing, as
// keel serve checks at start and on reload: one without providers, where
// no model can have an endpoint and no model name can pass through. (A
// model without endpoints is a Validate problem; providers without models
// pass every model name through, in each provider's format.) The error
// names the key to fix, at its line when the file has it.
func (c *Config) CheckServes() error {
	if len(c.Providers) == 0 {
		return c.errAt("providers", "none configured, so this config serves no model: add a provider "+
			"(providers: [{name: anthropic, type: anthropic, api_key_env: ANTHROPIC_API_KEY}]) and the models it serves")
	}
	return nil
}

func (c *Config) problems() []error {
	v := &validator{c: c}
	v.server()
	v.providers()
	v.models()
	v.aliases()
	v.extra()
	v.pii()
	return v.errs
}

// extra checks the resilience, telemetry, request_log and
// structured_output sections.
func (v *validator) extra() {
	v.resilience()
	v.redis()
	v.pricing()
	v.stores()
	v.semanticCache()
	v.responses()
	v.nonNegative("telemetry.debug_traces", int64(v.c.Telemetry.DebugTraces))
	v.nonNegative("request_log.retention_days", int64(v.c.RequestLog.RetentionDays))
	v.nonNegative("request_log.queue_size", int64(v.c.RequestLog.QueueSize))
	v.nonNegative("request_log.batch_size", int64(v.c.RequestLog.BatchSize))
	v.routing()
	enum(v, "normalization.parameter_policy", v.c.Normalization.ParameterPolicy)
	v.fragmentation()
	v.structuredOutput()
}

// resilience checks the resilience section with the policies' own rules.
func (v *validator) resilience() {
	r := v.c.Resilience
	v.nonNegative("resilience.max_attempts", int64(r.MaxAttempts))
	v.duration("resilience.timeout", r.Timeout)
	v.duration("resilience.probe_interval", r.ProbeInterval)
	policy(v, "resilience.retry_budget", r.RetryBudget, checkBudget)
	policy(v, "resilience.hedge_budget", r.HedgeBudget, checkBudget)
	policy(v, "resilience.slow_stream_budget", r.SlowStreamBudget, checkBudget)
	policy(v, "resilience", r.Hedge, resilience.HedgePolicy.Validate)
	policy(v, "resilience", r.SlowStream, health.PacePolicy.Validate)
	policy(v, "resilience.breaker", r.Breaker, checkBreaker)
	policy(v, "resilience.safety_valve", r.SafetyValve.ValveConfig, resilience.ValveConfig.Validate)
	policy(v, "resilience.rollout", r.Rollout, rollout.Config.Validate)
	policy(v, "resilience.cache_affinity", r.CacheAffinity, affinity.Config.Validate)
	policy(v, "resilience.cold_spend", r.ColdSpend, kpolicy.ColdSpendConfig.Validate)
}

// stores checks keys.store and the exact cache.
func (v *validator) stores() {
	v.duration("keys.refresh_interval", v.c.Keys.RefreshInterval)
	switch v.c.Keys.Store {
	case "", KeysStoreSQLite:
	case KeysStoreRedis:
		if !v.c.Redis.On() {
			v.add("keys.store", "redis needs the redis section (redis.url)")
		}
	default:
		v.add("keys.store", "expected sqlite or redis, got %q", v.c.Keys.Store)
	}
	policy(v, "cache", v.c.Cache.Config, cache.Config.Validate)
	switch v.c.Cache.Store {
	case "", CacheStoreMemory:
	case CacheStoreRedis:
		if !v.c.Redis.On() {
			v.add("cache.store", "redis needs the redis section (redis.url)")
		}
	default:
		v.add("cache.store", "expected memory or redis, got %q", v.c.Cache.Store)
	}
}

// routing checks the models' domains, translation and structured-output
// modes, and the aliases' translation.
func (v *validator) routing() {
	for i, m := range v.c.Models {
		for d, sc := range m.Domains {
			if sc < 0 || sc > 1 {
				v.add(fmt.Sprintf("models[%d].domains.%s", i, d), "expected a score between 0 and 1, got %v", sc)
			}
		}
		switch m.Translation {
		case "", "drop", "reject":
		default:
			v.add(fmt.Sprintf("models[%d].translation", i), "expected drop or reject, got %q", m.Translation)
		}
		switch m.StructuredOutputs {
		case "", "native", "tool", "none":
		default:
			v.add(fmt.Sprintf("models[%d].structured_outputs", i), "expected native, tool or none, got %q", m.StructuredOutputs)
		}
		switch m.ContentFilter {
		case "", ContentFilterFail, ContentFilterFallback:
		default:
			v.add(fmt.Sprintf("models[%d].content_filter", i), "expected %s or %s, got %q", ContentFilterFail, ContentFilterFallback, m.ContentFilter)
		}
	}
	for i, a := range v.c.Aliases {
		switch a.Translation {
		case "", "drop", "reject":
		default:
			v.add(fmt.Sprintf("aliases[%d].translation", i), "expected drop or reject, got %q", a.Translation)
		}
	}
}

func (v *validator) fragmentation() {
	fr := v.c.Fragmentation
	v.nonNegative("fragmentation.threshold_tokens", int64(fr.ThresholdTokens))
	v.nonNegative("fragmentation.target_tokens", int64(fr.TargetTokens))
	v.nonNegative("fragmentation.redundancy", int64(fr.Redundancy))
	if fr.OverlapBudget < 0 || fr.OverlapBudget > 1 {
		v.add("fragmentation.overlap_budget", "expected a number between 0 and 1, got %v", fr.OverlapBudget)
	}
	if q := fr.ListQuorum; q != nil && (*q < 0 || *q > 1) {
		v.add("fragmentation.list_quorum", "expected a number between 0 and 1, got %v", *q)
	}
}

// structuredOutput checks the structured_output section: its modes (a
// file's bad mode is refused while decoding), the one contradiction
// between two keys, the limits and the derive rules.
func (v *validator) structuredOutput() {
	so := v.c.StructuredOutput
	enum(v, "structured_output.stream_mode", so.StreamMode)
	enum(v, "structured_output.implied", so.Implied)
	if so.ImpliedSchemas != nil && !*so.ImpliedSchemas && (so.Implied == structured.ImpliedGuess || so.Implied == structured.ImpliedStrict) {
		v.add("structured_output.implied", "implied_schemas: false turns implied schemas off; implied: %s contradicts it (set one of them)", so.Implied)
	}
	enum(v, "structured_output.on_violation", so.OnViolation)
	lv := reflect.ValueOf(so.Limits)
	for _, f := range yamlFields(lv.Type()) {
		if n := lv.FieldByIndex(f.index).Int(); n < 0 {
			v.add("structured_output."+f.name, "expected a positive number (0 = the default), got %d", n)
		}
	}
	for i, d := range so.Derive {
		if d.Field == "" || d.From == "" || len(d.Table) == 0 {
			v.add(fmt.Sprintf("structured_output.derive[%d]", i), "needs field, from and a non-empty table")
		}
	}
}

// enum checks a typed value with its own UnmarshalText, the one list of
// its allowed values: a Config built in code may hold any string, while a
// file's is refused as it is decoded.
func enum[T ~string, P interface {
	*T
	encoding.TextUnmarshaler
}](v *validator, path string, x T) {
	var y T
	if err := P(&y).UnmarshalText([]byte(x)); err != nil {
		v.add(path, "%v", err)
	}
}

// redis checks the redis section: a url naming a host (or a unix socket)
// whenever any of its keys is set. Messages never quote the url, which may
// hold a password.
func (v *validator) redis() {
	r := v.c.Redis
	v.duration("redis.timeout", r.Timeout)
	if !r.On() {
		if r.Password != "" || r.KeyPrefix != "" || r.Timeout != 0 {
			v.add("redis.url", "required when the redis section sets other keys")
		}
		return
	}
	u, err := url.Parse(r.URL.Value())
	switch {
	case err != nil:
		v.add("redis.url", "expected redis://host:port, rediss://host:port or unix:///path, got an unparsable url")
	case u.Scheme != "redis" && u.Scheme != "rediss" && u.Scheme != "unix":
		v.add("redis.url", "expected the scheme redis, rediss or unix, got %q", u.Scheme)
	case u.Scheme == "unix" && u.Path == "", u.Scheme != "unix" && u.Hostname() == "":
		v.add("redis.url", "names no host")
	}
	if strings.ContainsAny(r.KeyPrefix, " \t\r\n*?[") {
		v.add("redis.key_prefix", "must not contain spaces or the glob characters * ? [")
	}
}

type validator struct {
	c    *Config
	errs []error
}

// policy checks a policy package's config struct with that package's own
// constructor (or Validate), so config keeps no second copy of its rules
// or defaults. Each problem is reported at the first key that is invalid on
// its own (every other key at its default), else at the first key set, else
// at path; that key is then reset to its default and the rest checked
// again, so every bad key is reported, each with the constructor's message.
func policy[T any](v *validator, path string, cfg T, check func(T) error) {
	fields := yamlFields(reflect.TypeFor[T]())
	rv := reflect.ValueOf(&cfg).Elem()
	for range len(fields) + 1 {
		err := check(cfg)
		if err == nil {
			return
		}
		msg := strings.TrimSuffix(err.Error(), ": "+resilience.ErrInvalidConfig.Error())
		at := -1
		for i, f := range fields {
			fv := rv.FieldByIndex(f.index)
			if fv.IsZero() {
				continue
			}
			if at < 0 {
				at = i
			}
			var one T
			reflect.ValueOf(&one).Elem().FieldByIndex(f.index).Set(fv)
			if check(one) != nil {
				at = i
				break
			}
		}
		if at < 0 {
			v.add(path, "%s", msg)
			return
		}
		v.add(join(path, fields[at].name), "%s", msg)
		rv.FieldByIndex(fields[at].index).SetZero()
	}
}

func checkBudget(c resilience.BudgetConfig) error {
	_, err := resilience.NewBudget(c)
	return err
}

func checkBreaker(c resilience.BreakerConfig) error {
	_, err := resilience.NewBreaker(c)
	return err
}

func (v *validator) add(path, format string, args ...any) {
	v.errs = append(v.errs, v.c.errAt(path, format, args...))
}

func (v *validator) nonNegative(path string, n int64) {
	if n < 0 {
		v.add(path, "must not be negative, got %d", n)
	}
}

func (v *validator) duration(path string, d Duration) {
	if d < 0 {
		v.add(path, "must not be negative, got %s", d)
	}
}

func (v *validator) server() {
	s := v.c.Server
	if s.Listen != "" {
		if err := checkListen(s.Listen); err != "" {
			v.add("server.listen", "%s", err)
		}
	}
	v.nonNegative("server.max_body_bytes", s.MaxBodyBytes)
	v.duration("server.shutdown_timeout", s.ShutdownTimeout)
	v.duration("server.body_read_timeout", s.BodyReadTimeout)
	v.nonNegative("server.min_body_rate_bytes_per_sec", s.MinBodyRateBytesPerSec)
	v.nonNegative("server.max_inflight_body_bytes", s.MaxInflightBodyBytes)
	if body := cmp.Or(s.MaxBodyBytes, DefaultMaxBodyBytes); s.MaxInflightBodyBytes > 0 && s.MaxInflightBodyBytes < body {
		v.add("server.max_inflight_body_bytes", "must be at least server.max_body_bytes (%d), got %d", body, s.MaxInflightBodyBytes)
	}
	v.nonNegative("server.max_messages", int64(s.MaxMessages))
	if s.MaxHeaderBytes < 0 || s.MaxHeaderBytes > MaxMaxHeaderBytes {
		v.add("server.max_header_bytes", "expected 0 to %d (net/http's own limit), got %d", MaxMaxHeaderBytes, s.MaxHeaderBytes)
	}
	for i, h := range s.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			v.add(fmt.Sprintf("server.allowed_hosts[%d]", i), "expected a host name, name:port, *.domain or *, got %q", h)
		}
	}
	for i, o := range s.AllowedOrigins {
		if u, err := url.Parse(o); o != "*" && o != "null" && (err != nil || u.Scheme == "" || u.Host == "" || strings.TrimSuffix(u.Path, "/") != "") {
			v.add(fmt.Sprintf("server.allowed_origins[%d]", i), "expected an origin such as https://app.example.com, or *, got %q", o)
		}
	}
	if s.DrainDelay != nil {
		v.duration("server.drain_delay", *s.DrainDelay)
	}
	switch s.LogFormat {
	case "", "text", "json":
	default:
		v.add("server.log_format", "expected text or json, got %q", s.LogFormat)
	}
	switch s.LogLevel {
	case "", "debug", "info", "warn", "error":
	default:
		v.add("server.log_level", "expected debug, info, warn or error, got %q", s.LogLevel)
	}
}

func checkListen(s string) string {
	const want = "expected host:port such as \"127.0.0.1:7878\" or \":7878\""
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Sprintf("%s, got %q", want, s)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Sprintf("%s, got port %q (expected a number from 0 to 65535)", want, port)
	}
	return ""
}

func (v *validator) providers() {
	first := map[string]string{}
	for i, p := range v.c.Providers {
		base := fmt.Sprintf("providers[%d]", i)
		v.name(base+".name", "provider", p.Name, first)
		v.providerAPI(base, p)
		v.azure(base, p)
		if p.BaseURL != "" {
			if err := checkURL(p.BaseURL); err != "" {
				v.add(base+".base_url", "%s", err)
			}
		}
		if p.APIKeyEnv != "" {
			if p.APIKey != "" {
				v.add(base+".api_key_env", "api_key and api_key_env are mutually exclusive: set one of them")
			}
			// The value is not quoted: a common mistake is to paste the key itself here.
			if !validEnvName(p.APIKeyEnv) {
				v.add(base+".api_key_env", "expected the name of an environment variable such as ANTHROPIC_API_KEY (letters, digits and '_'); a literal key belongs in api_key")
			}
		}
		v.platform(base, &p)
		if p.AnthropicVersion != "" {
			if p.Type != TypeAnthropic && p.Type != "" {
				v.add(base+".anthropic_version", "applies only to providers of type anthropic")
			} else if _, err := time.Parse(time.DateOnly, p.AnthropicVersion); err != nil && p.AnthropicVersion != AnthropicVersionClient && !platformVersion(&p) {
				v.add(base+".anthropic_version", "expected a date such as %q or %q, got %q", DefaultAnthropicVersion, AnthropicVersionClient, p.AnthropicVersion)
			}
		}
		v.headers(base, p.Headers)
		v.providerClient(base, p)
	}
}

// providerAPI checks a provider's type and api.
func (v *validator) providerAPI(base string, p Provider) {
	switch p.Type {
	case TypeAnthropic, TypeOpenAI, TypeAzure, TypeGemini:
	case "":
		v.add(base+".type", "required: expected anthropic, openai, azure or gemini")
	default:
		v.add(base+".type", "unknown provider type %q: expected anthropic, openai, azure or gemini", p.Type)
	}
	switch {
	case p.API == "" || p.API == APIChatCompletions || p.API == APIResponses && (p.Type == TypeOpenAI || p.Type == TypeAzure):
	case p.API == APIResponses:
		v.add(base+".api", "applies only to providers of type openai or azure")
	default:
		v.add(base+".api", "unknown api %q: expected %s or %s", p.API, APIChatCompletions, APIResponses)
	}
}

// headers checks a provider's extra headers: valid, distinct names and
// values without line breaks.
func (v *validator) headers(base string, hs map[string]Secret) {
	folded := map[string]string{}
	for _, name := range sortedKeys(hs) {
		path := base + ".headers." + name
		if prev, ok := folded[strings.ToLower(name)]; ok {
			v.add(path, "duplicate header: %q and %q name the same header", prev, name)
		}
		folded[strings.ToLower(name)] = name
		if !validHeaderName(name) {
			v.add(path, "invalid header name: expected letters, digits and !#$%%&'*+-.^_`|~")
		}
		if strings.ContainsAny(hs[name].Value(), "\r\n\x00") {
			v.add(path, "header value must not contain line breaks or NUL")
		}
	}
}

// azure checks the keys of an azure provider, and that no other provider
// sets them; and that a gemini provider has its key.
func (v *validator) azure(base string, p Provider) {
	if p.Type == TypeGemini && p.APIKey == "" && p.APIKeyEnv == "" && p.Vertex == nil {
		v.add(base+".api_key", "a gemini provider needs api_key or api_key_env (the Gemini API key, sent in x-goog-api-key), or a vertex section (Gemini on Vertex AI)")
	}
	if p.Type != TypeAzure {
		if p.APIVersion != "" {
			v.add(base+".api_version", "applies only to providers of type azure")
		}
		if p.Auth != "" {
			v.add(base+".auth", "applies only to providers of type azure")
		}
		return
	}
	v1 := strings.HasSuffix(strings.TrimRight(p.BaseURL, "/"), "/openai/v1")
	switch {
	case p.BaseURL == "":
		v.add(base+".base_url", "required for azure: the resource endpoint, https://{resource}.openai.azure.com (with api_version) or https://{resource}.openai.azure.com/openai/v1")
	case v1 && p.APIVersion != "":
		v.add(base+".api_version", "the v1 surface (base_url ending in /openai/v1) takes no api_version: remove it, or use the resource endpoint as base_url")
	case !v1 && p.APIVersion == "":
		v.add(base+".api_version", "required with deployment URLs (Azure answers a call without api-version with 404), e.g. \"2024-10-21\"; or end base_url in /openai/v1 for the v1 surface")
	}
	switch p.Auth {
	case "", AuthAPIKey:
		if p.APIKey == "" && p.APIKeyEnv == "" {
			v.add(base+".auth", "azure with auth api_key needs api_key or api_key_env (or set auth: entra)")
		}
	case AuthEntra:
		if p.APIKey != "" || p.APIKeyEnv != "" {
			v.add(base+".auth", "auth entra takes no api_key or api_key_env: the token comes from the Azure credential chain")
		}
	default:
		v.add(base+".auth", "expected %s or %s, got %q", AuthAPIKey, AuthEntra, p.Auth)
	}
}

// providerClient checks a provider's timeouts, connection pool, client
// and continuation.
func (v *validator) providerClient(base string, p Provider) {
	v.duration(base+".timeouts.connect", p.Timeouts.Connect)
	v.duration(base+".timeouts.response_header", p.Timeouts.ResponseHeader)
	v.duration(base+".timeouts.stream_idle", p.Timeouts.StreamIdle)
	v.duration(base+".timeouts.request", p.Timeouts.Request)
	v.nonNegative(base+".max_conns_per_host", int64(p.MaxConnsPerHost))
	v.nonNegative(base+".max_idle_conns_per_host", int64(p.MaxIdleConnsPerHost))
	if p.HTTPClient != "" && p.HTTPClient != "lean" && p.HTTPClient != "standard" {
		v.add(base+".http_client", "expected lean or standard, got %q", p.HTTPClient)
	}
	// The names of provider.ParseContinuation, which config cannot
	// import; continuation_test.go checks that the two agree.
	switch p.Continuation {
	case "", "prefill", "continue_final_message", "prefix", "none":
	default:
		v.add(base+".continuation", "expected prefill, continue_final_message, prefix or none, got %q", p.Continuation)
	}
}

// name checks a required, unique name. seen maps names to the path of their
// first definition.
func (v *validator) name(path, what, name string, seen map[string]string) {
	switch {
	case name == "":
		v.add(path, "required: every %s needs a name", what)
		return
	case what == "provider" && !validLabel(name):
		v.add(path, "invalid provider name %q: expected letters, digits, '.', '_' and '-'", name)
	case what != "provider" && strings.IndexFunc(name, isSpaceOrControl) >= 0:
		v.add(path, "invalid %s name %q: must not contain spaces or control characters", what, name)
	}
	if prev, ok := seen[name]; ok {
		v.add(path, "duplicate %s name %q (first defined at %s)", what, name, v.where(prev))
		return
	}
	seen[name] = path
}

// where describes a path for a message: "line N" when known, else the path.
func (v *validator) where(path string) string {
	if p, ok := v.c.src.lookup(path); ok {
		return fmt.Sprintf("%s, line %d", strings.TrimSuffix(path, ".name"), p.line)
	}
	return strings.TrimSuffix(path, ".name")
}

func (v *validator) models() {
	first := map[string]string{}
	for i, m := range v.c.Models {
		base := fmt.Sprintf("models[%d]", i)
		v.name(base+".name", "model", m.Name, first)
		if m.Capability != 0 && (m.Capability < 1 || m.Capability > 5) {
			v.add(base+".capability", "expected a tier from 1 to 5, got %d", m.Capability)
		}
		v.nonNegative(base+".context_window", int64(m.ContextWindow))
		switch m.Kind {
		case "", KindChat, KindEmbedding:
		default:
			v.add(base+".kind", "expected chat or embedding, got %q", m.Kind)
		}
		policy(v, base+".price", m.Price, pricing.Price.Validate)
		if len(m.Endpoints) == 0 {
			v.add(base+".endpoints", "required: at least one endpoint")
		}
		ids := map[string]bool{}
		for j, e := range m.Endpoints {
			ep := fmt.Sprintf("%s.endpoints[%d]", base, j)
			switch {
			case e.Provider == "":
				v.add(ep+".provider", "required: expected the name of a provider")
			case v.c.Provider(e.Provider) == nil:
				v.add(ep+".provider", "unknown provider %q%s", e.Provider, v.didYouMean(e.Provider, v.providerNames()))
			case m.Kind == KindEmbedding && v.c.Provider(e.Provider).Type != TypeOpenAI:
				v.add(ep+".provider", "provider %q is of type %s: an embedding model is served by the Embeddings API of an openai provider", e.Provider, v.c.Provider(e.Provider).Type)
			}
			if e.Region != "" && !validLabel(e.Region) {
				v.add(ep+".region", "invalid region %q: expected letters, digits, '.', '_' and '-'", e.Region)
			}
			if e.BaseURL != "" {
				if err := checkURL(e.BaseURL); err != "" {
					v.add(ep+".base_url", "%s", err)
				}
			}
			id := e.ID(m.Name)
			if ids[id] {
				v.add(ep, "duplicate endpoint %s: each provider may serve a model once per region", id)
			}
			ids[id] = true
		}
	}
}

// pricing checks the pricing section: a model name per entry, each once,
// and prices pricing.Price accepts.
func (v *validator) pricing() {
	seen := map[string]bool{}
	for i, e := range v.c.Pricing {
		base := fmt.Sprintf("pricing[%d]", i)
		switch {
		case e.Model == "":
			v.add(base+".model", "required: the model name as sent upstream")
		case seen[e.Model]:
			v.add(base+".model", "model %q is priced twice", e.Model)
		}
		seen[e.Model] = true
		policy(v, base, e.Price, pricing.Price.Validate)
	}
}

func (v *validator) aliases() {
	first := map[string]string{}
	for i, a := range v.c.Aliases {
		base := fmt.Sprintf("aliases[%d]", i)
		v.name(base+".name", "alias", a.Name, first)
		if a.Name != "" && v.c.Model(a.Name) != nil {
			v.add(base+".name", "alias name %q is also a model name: names must be unique across models and aliases", a.Name)
		}
		if len(a.Models) == 0 && a.Tiering == nil {
			v.add(base+".models", "required: at least one model")
		}
		if t := a.Tiering; t != nil {
			v.tiering(base+".tiering.tiers.", t.Tiers)
		}
		listed := map[string]bool{}
		for j, name := range a.Models {
			path := fmt.Sprintf("%s.models[%d]", base, j)
			switch {
			case v.c.Model(name) != nil && v.c.Model(name).Kind == KindEmbedding:
				v.add(path, "%q is an embedding model: an alias is a fallback chain of chat models", name)
			case v.c.Model(name) != nil:
			case v.c.Alias(name) != nil:
				v.add(path, "%q is an alias: an alias lists models, not other aliases", name)
			default:
				v.add(path, "unknown model %q%s", name, v.didYouMean(name, v.modelNames()))
			}
			if listed[name] {
				v.add(path, "model %q listed twice", name)
			}
			listed[name] = true
		}
		switch a.Strategy {
		case "", StrategyOrdered, StrategyLatency:
		default:
			v.add(base+".strategy", "expected ordered or latency, got %q", a.Strategy)
		}
		if a.Shadow != nil {
			v.shadow(base+".shadow", a.Shadow)
		}
	}
	s := v.c.Shadow
	v.nonNegative("shadow.retention_days", int64(s.RetentionDays))
	v.nonNegative("shadow.workers", int64(s.Workers))
	v.nonNegative("shadow.queue", int64(s.Queue))
	v.nonNegative("shadow.shed_inflight", int64(s.ShedInflight))
	v.duration("shadow.timeout", s.Timeout)
}

// tiering checks that each tier names a chat model.
func (v *validator) tiering(base string, t Tiers) {
	for _, tier := range []struct{ key, name string }{{"cheap", t.Cheap}, {"middle", t.Middle}, {"strong", t.Strong}} {
		path := base + tier.key
		switch {
		case tier.name == "":
			v.add(path, "required: the model of the %s tier", tier.key)
		case v.c.Model(tier.name) != nil && v.c.Model(tier.name).Kind == KindEmbedding:
			v.add(path, "%q is an embedding model: a tier names a chat model", tier.name)
		case v.c.Model(tier.name) != nil:
		case v.c.Alias(tier.name) != nil:
			v.add(path, "%q is an alias: a tier names a model", tier.name)
		default:
			v.add(path, "unknown model %q%s", tier.name, v.didYouMean(tier.name, v.modelNames()))
		}
	}
}

// shadow checks an alias's shadow policy key by key.
func (v *validator) shadow(base string, s *shadow.Config) {
	if !(s.Percent >= 0 && s.Percent <= 100) {
		v.add(base+".percent", "expected 0-100, got %g", s.Percent)
	}
	t := s.Target
	n := 0
	for _, set := range []bool{t.Model != "", t.Alias != "", t.Legacy} {
		if set {
			n++
		}
	}
	switch {
	case n != 1:
		v.add(base+".target", "set exactly one of model, alias or legacy: true")
	case t.Model != "" && v.c.Model(t.Model) == nil:
		v.add(base+".target.model", "unknown model %q%s", t.Model, v.didYouMean(t.Model, v.modelNames()))
	case t.Alias != "" && v.c.Alias(t.Alias) == nil && t.Alias != AutoAlias:
		v.add(base+".target.alias", "unknown alias %q", t.Alias)
	}
	if s.DecisionRule != "" {
		if _, err := shadow.ParseRule(s.DecisionRule); err != nil {
			v.add(base+".decision_rule", "%v", err)
		}
	}
}

func (v *validator) didYouMean(name string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(strings.ToLower(name), strings.ToLower(n)); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

func (v *validator) providerNames() []string {
	var out []string
	for _, p := range v.c.Providers {
		out = append(out, p.Name)
	}
	return out
}

func (v *validator) modelNames() []string {
	var out []string
	for _, m := range v.c.Models {
		out = append(out, m.Name)
	}
	return out
}

// checkURL returns what is wrong with a base URL, or "". It never quotes the
// URL, which may have come from an environment variable.
func checkURL(s string) string {
	const want = "expected an absolute http or https URL such as \"https://api.anthropic.com\""
	u, err := url.Parse(s)
	if err != nil {
		return want
	}
	switch {
	case u.Scheme == "":
		return want + ", got no scheme"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("%s, got scheme %q", want, u.Scheme)
	case u.Host == "":
		return want + ", got no host"
	case u.User != nil:
		return "must not carry credentials (user:password@): put them in api_key or headers, which are kept secret"
	case u.Fragment != "" || u.RawQuery != "":
		return want + " without query or fragment"
	}
	return ""
}

// validLabel reports whether s is a provider or region name: letters,
// digits, '.', '_' and '-' (never '/', which separates endpoint IDs).
func validLabel(s string) bool {
	for _, r := range s {
		switch {
		case r == '.', r == '_', r == '-':
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9':
		default:
			return false
		}
	}
	return s != ""
}

// validHeaderName reports whether s is an HTTP field name (RFC 9110 token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func isSpaceOrControl(r rune) bool {
	return r <= ' ' || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x2028 || r == 0x2029
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// joinSorted joins errors ordered by line and column; errors without a
// position keep their relative order after the located ones.
func joinSorted(errs []error) error {
	key := func(err error) (int, int) {
		var e *Error
		if errors.As(err, &e) && e.Line > 0 {
			return e.Line, e.Column
		}
		return math.MaxInt, 0
	}
	slices.SortStableFunc(errs, func(a, b error) int {
		al, ac := key(a)
		bl, bc := key(b)
		return cmp.Or(cmp.Compare(al, bl), cmp.Compare(ac, bc))
	})
	return errors.Join(errs...)
}

// semanticCache checks cache.embeddings, cache.semantic_max_entries and each
// alias's semantic_cache: turning one on needs the exact cache (looked up
// first) and an embeddings endpoint.
func (v *validator) semanticCache() {
	c := &v.c.Cache
	v.nonNegative("cache.semantic_max_entries", int64(c.SemanticMaxEntries))
	if e := c.Embeddings; e != nil {
		if u, err := url.Parse(e.BaseURL); e.BaseURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			v.add("cache.embeddings.base_url", "required: the http(s) base of an OpenAI-compatible embeddings API, e.g. https://api.openai.com/v1")
		}
		if e.Model == "" {
			v.add("cache.embeddings.model", "required: the embedding model, e.g. text-embedding-3-small")
		}
		v.nonNegative("cache.embeddings.dimensions", int64(e.Dimensions))
		v.duration("cache.embeddings.timeout", e.Timeout)
	}
	for i, a := range v.c.Aliases {
		sc := a.SemanticCache
		if sc == nil {
			continue
		}
		base := fmt.Sprintf("aliases[%d].semantic_cache", i)
		if sc.Threshold < 0 || sc.Threshold > 1 {
			v.add(base+".threshold", "expected a cosine similarity in (0, 1], got %v", sc.Threshold)
		}
		if !sc.Enabled {
			continue
		}
		if !c.Enabled {
			v.add(base+".enabled", "needs cache.enabled: true (the exact cache is looked up first and shares the ttl)")
		}
		if c.Embeddings == nil {
			v.add(base+".enabled", "needs cache.embeddings (the endpoint that embeds prompts)")
		}
	}
}

// responses checks the responses section: non-negative bounds and a store
// the rest of the config can back.
func (v *validator) responses() {
	r := v.c.Responses
	if r.TTL < 0 {
		v.add("responses.store_ttl", "must not be negative, got %s", r.TTL)
	}
	v.nonNegative("responses.max_conversations", int64(r.MaxConversations))
	v.nonNegative("responses.max_stored_bytes", r.MaxBytes)
	switch r.Store {
	case "", convstate.StoreMemory:
	case convstate.StoreSQLite:
		if !v.c.RequestLog.On() {
			v.add("responses.store", "sqlite keeps the conversations in the request log's file: it needs the request log (request_log.path)")
		}
	case convstate.StoreRedis:
		if !v.c.Redis.On() {
			v.add("responses.store", "redis needs the redis section (redis.url)")
		}
	default:
		v.add("responses.store", "expected memory, sqlite or redis, got %q", r.Store)
	}
}

// platform checks a provider's bedrock or vertex section.
func (v *validator) platform(base string, p *Provider) {
	if p.Bedrock == nil && p.Vertex == nil {
		return
	}
	if p.Bedrock != nil && p.Vertex != nil {
		v.add(base+".vertex", "bedrock and vertex are mutually exclusive: a provider is one account")
	}
	key := base + ".bedrock"
	if p.Bedrock == nil {
		key = base + ".vertex"
	}
	switch {
	case p.Type == TypeAnthropic, p.Type == TypeGemini && p.Bedrock == nil:
	case p.Bedrock != nil:
		v.add(key, "applies only to providers of type anthropic (Claude on Amazon Bedrock or Google Vertex AI)")
	default:
		v.add(key, "applies only to providers of type anthropic (Claude on Google Vertex AI) or gemini (Gemini on Vertex AI)")
	}
	if p.Vertex != nil {
		if p.Vertex.Region == "" {
			v.add(base+".vertex.region", "required: the Vertex AI location (global, us-east5, europe-west1, …)")
		}
		if p.APIKey != "" || p.APIKeyEnv != "" {
			v.add(base+".api_key", "does not apply to vertex: Vertex AI takes OAuth2 tokens (vertex.credentials_file or Application Default Credentials)")
		}
	}
}

// platformVersion reports whether p is a Bedrock or Vertex provider
// declaring its platform's own anthropic_version (bedrock-2023-05-31,
// vertex-2023-10-16), which those platforms document for the body.
func platformVersion(p *Provider) bool {
	return p.Bedrock != nil && p.AnthropicVersion == "bedrock-2023-05-31" || p.Vertex != nil && p.AnthropicVersion == "vertex-2023-10-16"
}
