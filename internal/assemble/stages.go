package assemble

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/classify"
	"github.com/keelmesh/keel/internal/engine"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/shadow"
	redisstore "github.com/keelmesh/keel/internal/store/redis"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// shared is the Redis store the mesh's replicas share, or none (store nil).
type shared struct {
	store *redisstore.Store
}

// engineState is what the engine shares with the other replicas: nil
// (an interface without a value) when nothing is shared.
func (s shared) engineState() fleet.SharedState {
	if s.store == nil {
		return nil
	}
	return s.store
}

// openShared connects to the redis section's server, when configured.
func openShared(cfg *config.Config, log *slog.Logger) (shared, error) {
	if !cfg.Redis.On() {
		return shared{}, nil
	}
	st, err := redisstore.New(cfg.Redis, log)
	return shared{store: st}, err
}

// waitLinked starts with the fleet's view: it waits for the first sync with
// Redis, a few milliseconds when it answers; when it does not, the mesh
// serves on local state after a bounded wait (sharedStartWait).
func (s shared) waitLinked(r config.Redis) {
	if s.store == nil {
		return
	}
	t := time.NewTimer(sharedStartWait(r))
	defer t.Stop()
	select {
	case <-s.store.Linked():
	case <-t.C:
	}
}

// sharedStartWait bounds how long Build waits for the first sync with Redis:
// four command timeouts (1s by default).
func sharedStartWait(r config.Redis) time.Duration {
	d := time.Duration(r.Timeout)
	if d <= 0 {
		d = time.Duration(config.DefaultRedisTimeout)
	}
	return 4 * d
}

// aliases maps the config's aliases, and the built-in auto alias when the
// models differ in capability, onto the engine's; a tiered alias's calls
// are classified by complexity, its tiers laid out as routes (tiered).
func aliases(cfg *config.Config, complexity func(string) classify.Complexity, eps []*provider.Endpoint) (map[string]engine.Alias, error) {
	out := map[string]engine.Alias{}
	for _, a := range cfg.Aliases {
		ea := engine.Alias{Models: a.Models, Strategy: a.Strategy, Translation: a.Translation}
		if t := a.Tiering; t != nil {
			ct := classify.Tiering{Cheap: t.Tiers.Cheap, Middle: t.Tiers.Middle, Strong: t.Tiers.Strong, Escalate: t.Escalate}
			if err := tiered(&ea, a.Name, &tiering{Tiering: ct, Complexity: complexity}, eps); err != nil {
				return nil, err
			}
		}
		if sc := a.SemanticCache; sc != nil && sc.Enabled {
			ea.SemanticThreshold = sc.ThresholdOrDefault()
		}
		out[a.Name] = ea
	}
	if t := autoTiering(cfg); t != nil {
		var ea engine.Alias
		if err := tiered(&ea, config.AutoAlias, &tiering{Tiering: *t, Complexity: complexity}, eps); err != nil {
			return nil, err
		}
		out[config.AutoAlias] = ea
	}
	return out, nil
}

// shadowRoutes resolves the aliases' shadow policies (shadow.NewRoutes):
// each target must be a chat model of eps or an alias of als.
func shadowRoutes(cfg *config.Config, als map[string]engine.Alias, eps []*provider.Endpoint) (map[string]*shadow.Route, error) {
	configs := make(map[string]*shadow.Config, len(cfg.Aliases))
	for _, a := range cfg.Aliases {
		configs[a.Name] = a.Shadow
	}
	known := func(name string) bool {
		_, alias := als[name]
		return alias || slices.ContainsFunc(eps, func(ep *provider.Endpoint) bool { return ep.Model == name && !ep.Embedding })
	}
	routes, err := shadow.NewRoutes(configs, known)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	return routes, nil
}

// tiered sets alias a's tiering t, checked against the configured models:
// its tiers' routes (classify.Tiering.Order) and, when it names no models,
// its chain (Middle, Strong, Cheap).
func tiered(ea *engine.Alias, a string, t *tiering, eps []*provider.Endpoint) error {
	if err := t.Check(a, func(m string) bool {
		return slices.ContainsFunc(eps, func(ep *provider.Endpoint) bool { return ep.Model == m })
	}); err != nil {
		return fmt.Errorf("engine: %w", err)
	}
	if len(ea.Models) == 0 {
		ea.Models = t.AliasModels()
	}
	for i := range t.Names() {
		ea.Tiers = append(ea.Tiers, t.Order(i))
	}
	ea.Tiering = t
	return nil
}

// autoTiering is the built-in alias auto's tiering, or nil when a model or
// alias is named auto or the models do not differ in capability: the cheap
// tier is the least capable model, the strong tier the most capable, the
// middle tier the one nearest midway between them; a tie goes to the lower
// list price, then to the model listed first. It escalates.
func autoTiering(cfg *config.Config) *classify.Tiering {
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
	return &classify.Tiering{Cheap: cheap.Name, Middle: middle.Name, Strong: strong.Name, Escalate: true}
}

// classifier is the shipped domain classifier, extended by
// classifier.lexicons.
func classifier(cfg *config.Config) (*classify.Classifier, error) {
	if len(cfg.Classifier.Lexicons) == 0 {
		return classify.Default(), nil
	}
	var copts []classify.Option
	for d, terms := range cfg.Classifier.Lexicons {
		copts = append(copts, classify.WithLexicon(d, terms))
	}
	clf, err := classify.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("classifier.lexicons: %w", err)
	}
	return clf, nil
}

// resilienceOptions maps the config section onto the engine's options. The
// budgets, hedge bounds and breaker are the resilience package's own config
// structs and pass straight through; their constructors fill the defaults.
// The rollout and the safety valve go to the rollout stage (chain.Config).
func resilienceOptions(c config.Resilience) engine.Resilience {
	return engine.Resilience{
		MaxAttempts:              c.MaxAttempts,
		Timeout:                  c.Timeout.Std(),
		RetryBudget:              c.RetryBudget,
		HedgeBudget:              c.HedgeBudget,
		Hedge:                    c.Hedge,
		Breaker:                  c.Breaker,
		DisableHedging:           c.Hedging != nil && !*c.Hedging,
		DisableRecovery:          c.Recovery != nil && !*c.Recovery,
		DisableSlowStreamHedging: c.SlowStreamHedging != nil && !*c.SlowStreamHedging,
		SlowStream:               c.SlowStream,
		SlowStreamBudget:         c.SlowStreamBudget,
		CacheAffinity:            c.CacheAffinity,
		ColdSpend:                c.ColdSpend,
		ProbeInterval:            c.ProbeInterval.Std(),
	}
}

// piiOptions builds the engine's personal-data options from the pii
// section and the models' and aliases' overrides; off unless pii.enabled.
// The audit log, when open (the observe step), supplies the hash key
// unless the config does.
func piiOptions(cfg *config.Config, audit *sqlite.Audit) (pii.Options, error) {
	p := cfg.PII
	if !p.Enabled {
		return pii.Options{}, nil
	}
	d, err := pii.New(p.Config)
	if err != nil {
		return pii.Options{}, fmt.Errorf("pii: %w", err)
	}
	o := pii.Options{
		Detector: pii.FinderFunc(func(ctx context.Context, text string) ([]pii.Match, error) {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			return d.Find(text), nil
		}),
		Action: p.Action, FailOpen: p.FailOpen, TimeBudget: time.Duration(p.TimeBudget),
		HashKey: []byte(p.Audit.HashKey.Value()), Routes: map[string]pii.Route{},
	}
	if len(o.HashKey) == 0 && audit != nil {
		o.HashKey = audit.HashKey()
	}
	for _, md := range cfg.Models {
		if r := md.PII; r != nil {
			o.Routes[md.Name] = pii.Route{Action: r.Action, FailOpen: r.FailOpen}
		}
	}
	for _, a := range cfg.Aliases {
		if r := a.PII; r != nil {
			o.Routes[a.Name] = pii.Route{Action: r.Action, FailOpen: r.FailOpen}
		}
	}
	return o, nil
}

// caches are the exact cache (in memory, or in front of Redis) and the
// semantic cache, each nil when off.
type caches struct {
	exact    cache.Store
	semantic *semcache.Semantic
}

// openCaches builds the exact cache when cache.enabled, over the fleet's
// Redis when cache.store is redis, and the semantic cache when an alias
// turns it on.
func openCaches(cfg *config.Config, eps []*provider.Endpoint, sh shared, rt http.RoundTripper, now func() time.Time) (caches, error) {
	var c caches
	if cfg.Cache.Enabled {
		lru, err := cache.New[*cache.Entry](cfg.Cache.Config, now)
		if err != nil {
			return caches{}, fmt.Errorf("cache: %w", err)
		}
		c.exact = lru
		if cfg.CacheStore() == config.CacheStoreRedis {
			byID := make(map[string]*provider.Endpoint, len(eps))
			for _, ep := range eps {
				byID[ep.ID] = ep
			}
			c.exact = sh.store.Cache(lru, func(id string) *provider.Endpoint { return byID[id] })
		}
	}
	sem, err := semanticCache(cfg, rt, now)
	if err != nil {
		return caches{}, fmt.Errorf("cache: %w", err)
	}
	c.semantic = sem
	return c, nil
}

// semanticCache builds the semantic cache when an alias turns it on: an
// index bounded by cache.semantic_max_entries with the exact cache's TTL,
// and a client of cache.embeddings sending through rt.
func semanticCache(cfg *config.Config, rt http.RoundTripper, now func() time.Time) (*semcache.Semantic, error) {
	on := false
	for _, a := range cfg.Aliases {
		on = on || a.SemanticCache != nil && a.SemanticCache.Enabled
	}
	if !on || !cfg.Cache.Enabled || cfg.Cache.Embeddings == nil {
		return nil, nil
	}
	idx, err := semcache.New[*cache.Entry](semcache.Config{TTL: cfg.Cache.TTL, MaxEntries: cfg.Cache.SemanticMaxEntries}, now)
	if err != nil {
		return nil, err
	}
	e := cfg.Cache.Embeddings
	c, err := semcache.NewClient(semcache.ClientConfig{BaseURL: e.BaseURL, APIKey: e.APIKey.Value(), Model: e.Model, Dimensions: e.Dimensions, Timeout: e.Timeout.Std()}, rt)
	if err != nil {
		return nil, fmt.Errorf("embeddings: %w", err)
	}
	return &semcache.Semantic{Embed: c.Embed, Index: idx}, nil
}

// calibrations are the ones `keel calibrate` stored in the file at path
// and, when the mesh shares state through Redis, the fleet's: this
// replica's are published and every replica's read back, and for one id
// the calibration created last wins (this replica's on a tie). With Redis
// unreachable, this replica's alone, and a warning. Start and reload only.
func calibrations(path string, sh shared, log *slog.Logger) (*normalize.Set, error) {
	local, err := loadCalibrations(path)
	if err != nil {
		return nil, err
	}
	all := local
	if sh.store != nil {
		fleet, err := sh.store.ShareCalibrations(context.Background(), local)
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
