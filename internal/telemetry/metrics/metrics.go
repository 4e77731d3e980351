// Package metrics exports Keel's Prometheus metrics: the mesh's own series
// (requests, fallbacks, normalisation offset, fragments, fusions, queue
// wait, attempts, retries, hedges, recoveries, structured-output outcomes),
// the OpenTelemetry GenAI client metrics under their Prometheus names, and
// per-endpoint health gauges read from the engine at scrape time.
//
// A *Metrics is an callrec.Observer: RequestDone updates counters from one
// callrec.Record. It is also an observe.BreakerObserver and
// observe.ValveObserver, counting breaker transitions
// (mesh_breaker_transitions_total) and safety valve openings and closings
// (mesh_safety_valve_transitions_total) as they happen, and an
// shadow.Observer, counting shadow calls by alias and result
// (mesh_shadow_calls_total: equal, differ, error, dropped, shed) and their
// spend apart from the client's (mesh_shadow_spend_usd_total). It is safe for
// concurrent use and never blocks: label children are cached behind atomic
// pointers, so the per-request path takes no lock except the first time a
// label combination is seen. Metrics live in their own registry (never the
// global one), served by Handler.
//
// Label values are bounded. model, region and domain accept only the values
// given in Options (plus "other" for anything else and "none" for an empty
// value); failure reasons and error types accept the first
// Options.MaxDynamicValues distinct values seen, then "other". The endpoint
// label (per-endpoint gauges, breaker transitions) is the engine's endpoint
// id, which the engine bounds (the configured endpoints plus its capped
// passthrough ones).
// mesh_spend_usd_total's key and team labels are the virtual key's ID and
// team: the first Options.MaxSpendSeries combinations with a model pass,
// later ones become "other".
//
// Prometheus names cannot contain dots, so the GenAI metrics are exposed as
// OpenTelemetry's Prometheus exporter would name them (see
// semconv.PrometheusName):
//
//	gen_ai.client.operation.duration (s)            → gen_ai_client_operation_duration_seconds
//	gen_ai.client.token.usage ({token})             → gen_ai_client_token_usage
//	gen_ai.client.operation.time_to_first_chunk (s) → gen_ai_client_operation_time_to_first_chunk_seconds
//
// with attribute keys as labels (gen_ai.token.type → gen_ai_token_type).
// With OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental the duration
// and time-to-first-chunk metrics take the experimental
// gen_ai.client.inference.* names instead.
//
// The mesh rates, in PromQL (deploy/prometheus/rules.yml records them):
//
//	mesh_fallback_rate           = sum(rate(mesh_fallbacks_total[5m])) / sum(rate(mesh_requests_total[5m]))
//	model fallback rate (valve)  = sum(rate(mesh_model_fallbacks_total[5m])) / sum(rate(mesh_requests_total[5m]))
//	mesh_fragment_success_rate   = sum(rate(mesh_fragments_succeeded_total[5m])) / sum(rate(mesh_fragments_sent_total[5m]))
//	mesh_fusion_conflict_rate    = sum(rate(mesh_fusion_conflicts_total[5m])) / sum(rate(mesh_fusions_total[5m]))
//	normalisation offset average = sum(rate(mesh_normalization_offset_sum[5m])) / sum(rate(mesh_normalization_offset_count[5m]))
//	queue wait p95 (seconds)     = histogram_quantile(0.95, sum by (le) (rate(mesh_queue_wait_seconds_bucket[5m])))
package metrics

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/telemetry/semconv"
)

// DefaultDomains is the domain classifier's built-in set.
var DefaultDomains = []string{"finance", "medical", "legal", "code", "general"}

// DefaultMaxDynamicValues caps the distinct values of a reason or error-type
// label when Options.MaxDynamicValues is 0.
const DefaultMaxDynamicValues = 32

// Options configure New. The zero value is usable: every model and region
// is then "other" (or "none").
type Options struct {
	// Models are the model and alias names clients may call (config
	// models and aliases); the model label takes these values.
	Models []string
	// Regions are the configured regions; the region label takes these.
	Regions []string
	// Domains are the classifier's domains (nil = DefaultDomains).
	Domains []string
	// ProviderNames maps a config provider name to its
	// gen_ai.provider.name ("anthropic", "openai"); a provider missing
	// here is reported under its config name.
	ProviderNames map[string]string
	// Endpoints, when set, is read at every scrape for the per-endpoint
	// gauges (engine.Engine.Endpoints).
	Endpoints func() []fleet.Status
	// Structured, when set, is read at every scrape for
	// mesh_structured_total and mesh_structured_repair_steps_total.
	Structured *structured.Metrics
	// MaxDynamicValues caps the distinct values of each open-ended label
	// (fallback reason, attempt outcome, error type, provider); 0 means
	// DefaultMaxDynamicValues.
	MaxDynamicValues int
	// NoRuntimeMetrics leaves out the Go runtime and process collectors.
	NoRuntimeMetrics bool
	// SharedStateUp, when set (the mesh shares state through Redis), is
	// read at every scrape for mesh_shared_state_up: 1 while the replica
	// is linked to the shared store, 0 while it serves on its own state.
	SharedStateUp func() bool
	// SharedStateDropped, when set, is read at every scrape for
	// mesh_shared_observations_dropped_total: endpoint observations not
	// sent to the other replicas (the link was down or the queue full).
	SharedStateDropped func() int64
	// MaxSpendSeries caps the (model, key, team) combinations of
	// mesh_spend_usd_total; beyond it key and team are "other". 0 means
	// DefaultMaxSpendSeries.
	MaxSpendSeries int
}

// DefaultMaxSpendSeries caps mesh_spend_usd_total's series when
// Options.MaxSpendSeries is 0.
const DefaultMaxSpendSeries = 4096

// Metrics is the Prometheus observer. See the package doc for its
// concurrency rules.
type Metrics struct {
	reg *prometheus.Registry

	models, regions, domains fixedSet
	reasons, outcomes        capped // fallback reasons; attempt outcomes
	errTypes, providers      capped
	providerNames            map[string]string

	series []atomic.Pointer[series] // by (model, region, domain) index
	// attempts holds one child per outcome for each kind in attemptKinds.
	attempts [len(attemptKinds)]cow[string, prometheus.Counter]

	requestsV, fallbacksV, modelFallbacksV *prometheus.CounterVec
	// byFormat counts client calls by the wire format they spoke, one
	// child per llm.Format.
	byFormatV                                 *prometheus.CounterVec
	byFormat                                  [llm.FormatResponses + 1]prometheus.Counter
	legacyV                                   *prometheus.CounterVec
	offsetV, queueWaitV                       *prometheus.HistogramVec
	fragSentV, fragOKV, fusionsV, conflictsV  *prometheus.CounterVec
	retriesV, hedgesV, hedgesWonV, recoveredV *prometheus.CounterVec
	attemptsV                                 *prometheus.CounterVec
	durationV, ttfcV, tokensV                 *prometheus.HistogramVec
	// breakerV counts breaker transitions by (endpoint, from, to): rare,
	// so children are looked up in the vector each time.
	breakerV *prometheus.CounterVec
	// valveTo holds mesh_safety_valve_transitions_total's children by
	// valveStates index.
	valveTo [len(valveStates)]prometheus.Counter
	// spendV is mesh_spend_usd_total; spend caches its children by
	// spendKey (a sync.Map: one lock-free load per call however many
	// keys), spendN counts them up to maxSpend.
	spendV *prometheus.CounterVec
	// cacheHit, cacheMiss and cacheBypass are mesh_cache_requests_total's
	// children.
	cacheHit, cacheMiss, cacheBypass prometheus.Counter
	// shadowV and shadowSpendV count shadow calls (rare: children are
	// looked up in the vector each time); alias is bounded by models.
	shadowV, shadowSpendV *prometheus.CounterVec
	// semHit, semMiss and semError are
	// mesh_semantic_cache_requests_total's series.
	semHit, semMiss, semError prometheus.Counter
	// unknownV is mesh_unknown_route_total{method}; unknown holds its
	// children by method (unknownMethods, then "other").
	unknownV *prometheus.CounterVec
	unknown  [len(unknownMethods) + 1]prometheus.Counter
	// piiV is mesh_pii_detections_total{kind,action} (kinds are the
	// built-in ones and the config's custom ones: bounded); piiFailV is
	// mesh_pii_detection_failures_total{outcome}.
	piiV, piiFailV *prometheus.CounterVec
	spend          sync.Map
	spendN         atomic.Int64
	maxSpend       int64
}

// spendKey labels a spend counter: a model index and the key and team.
type spendKey struct {
	model     int
	key, team string
}

// valveStates are the states the safety valve enters.
var valveStates = [...]string{"open", "closed"}

// Request outcomes: "ok", the mesh error codes without their MESH_ prefix
// in lower case, else the HTTP status class.
var requestOutcomes = [...]string{"ok", "timeout", "fallback_exhausted", "circuit_open", "normalization_failed",
	"schema_violation", "budget_exhausted", "bad_request", "upstream_protocol", "error_4xx", "error_5xx", Other}

// Attempt kinds the engine records, plus Other.
var attemptKinds = [...]string{"primary", "retry", "hedge", "fallback", "continuation", Other}

// genaiKey picks a GenAI child within a series (whose model is the request model).
type genaiKey struct {
	respModel         int // -1: no response model
	provider, errType string
}

// series holds the children of one (model, region, domain) combination.
type series struct {
	labels    [3]string
	requests  [len(requestOutcomes)]atomic.Pointer[prometheus.Counter]
	fallbacks cow[string, prometheus.Counter]
	offset    prometheus.Observer
	queueWait prometheus.Observer
	fragSent, fragOK, fusions, conflicts,
	retries, hedges, hedgesWon, recovered,
	modelFallbacks, legacy prometheus.Counter
	genai cow[genaiKey, *genaiSeries]
}

type genaiSeries struct {
	duration, ttfc, tokIn, tokOut prometheus.Observer
}

var (
	offsetBuckets    = []float64{0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 1.5, 2}
	queueWaitBuckets = []float64{0, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}
)

// New builds the metrics and their registry.
func New(o Options) (*Metrics, error) {
	if o.MaxDynamicValues < 0 {
		return nil, errors.New("metrics: MaxDynamicValues must be ≥ 0")
	}
	if o.MaxDynamicValues == 0 {
		o.MaxDynamicValues = DefaultMaxDynamicValues
	}
	if o.Domains == nil {
		o.Domains = DefaultDomains
	}
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		models:  newFixedSet(o.Models),
		regions: newFixedSet(o.Regions),
		domains: newFixedSet(o.Domains),
		reasons: capped{max: o.MaxDynamicValues}, outcomes: capped{max: o.MaxDynamicValues},
		errTypes: capped{max: o.MaxDynamicValues}, providers: capped{max: o.MaxDynamicValues},
		providerNames: o.ProviderNames,
	}
	m.series = make([]atomic.Pointer[series], m.models.len()*m.regions.len()*m.domains.len())

	mrd := []string{"model", "region", "domain"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string(nil), mrd...), extra...))
	}
	m.requestsV = counter("mesh_requests_total", "Client calls finished, by outcome (ok, a mesh error code, or the HTTP status class).", "outcome")
	m.fallbacksV = counter("mesh_fallbacks_total", "Client calls whose first choice did not serve, by the first failure's reason; mesh_fallback_rate = fallbacks / requests.", "reason")
	m.modelFallbacksV = counter("mesh_model_fallbacks_total", "Client calls served by another model than the route's primary one (the safety valve's measure).")
	m.legacyV = counter("mesh_legacy_requests_total", "Client calls the safety valve sent down the legacy path (primary endpoint only, no retry, hedge or fallback).")
	m.offsetV = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mesh_normalization_offset",
		Help: "Absolute temperature offset (|serving − requested|) applied by behaviour normalisation, per served call (0 when none).", Buckets: offsetBuckets}, mrd)
	m.queueWaitV = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "mesh_queue_wait_seconds",
		Help: "Time a call waited inside Keel (backoff and cooldown) before its winning attempt, in seconds (Prometheus base units).", Buckets: queueWaitBuckets}, mrd)
	m.fragSentV = counter("mesh_fragments_sent_total", "Fragments dispatched; mesh_fragment_success_rate = succeeded / sent.")
	m.fragOKV = counter("mesh_fragments_succeeded_total", "Fragments answered.")
	m.fusionsV = counter("mesh_fusions_total", "Fields fused from fragment answers; mesh_fusion_conflict_rate = conflicts / fusions.")
	m.conflictsV = counter("mesh_fusion_conflicts_total", "Fused fields whose fragment answers disagreed.")
	m.retriesV = counter("mesh_retries_total", "Retry attempts (after a failure, including mid-stream continuations).")
	m.hedgesV = counter("mesh_hedges_sent_total", "Hedge attempts sent.")
	m.hedgesWonV = counter("mesh_hedges_won_total", "Calls won by a hedge attempt.")
	m.recoveredV = counter("mesh_recoveries_total", "Mid-stream continuations on another endpoint.")
	m.attemptsV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_attempts_total",
		Help: "Upstream attempts by kind (primary, retry, hedge, fallback, continuation) and outcome (ok or the failure reason)."}, []string{"kind", "outcome"})
	m.breakerV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_breaker_transitions_total",
		Help: "Circuit breaker state changes, by endpoint and the states left and entered (closed, open, half-open)."}, []string{"endpoint", "from", "to"})
	if o.MaxSpendSeries <= 0 {
		o.MaxSpendSeries = DefaultMaxSpendSeries
	}
	m.maxSpend = int64(o.MaxSpendSeries)
	m.spendV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_spend_usd_total",
		Help: "Upstream cost of client calls in US dollars (every attempt: retries, hedges, redundancy, re-asks), by the model that served (the one asked for when none did), the virtual key and its team (none: a call without a key)."},
		[]string{"model", "key", "team"})
	cacheV := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_cache_requests_total",
		Help: "Client calls by the response cache's part (X-Mesh-Cache): hit (answered from the cache), miss, bypass; none counted without a cache. Hit rate = hit / (hit + miss)."}, []string{"result"})
	m.cacheHit, m.cacheMiss, m.cacheBypass = cacheV.WithLabelValues(cache.Hit), cacheV.WithLabelValues(cache.Miss), cacheV.WithLabelValues(cache.Bypass)
	semV := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_semantic_cache_requests_total",
		Help: "Calls to aliases with the semantic cache on that the exact cache missed, by the semantic cache's part: hit (answered from a similar prompt's answer; also counted as a hit in mesh_cache_requests_total), miss, error (the embeddings call failed or timed out: served as a miss)."}, []string{"result"})
	m.semHit, m.semMiss, m.semError = semV.WithLabelValues(semcache.StatusHit), semV.WithLabelValues(semcache.StatusMiss), semV.WithLabelValues(semcache.StatusError)
	m.piiV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_pii_detections_total",
		Help: "Personal-data values found in requests, by kind (EMAIL, PHONE, CARD, IBAN, CN_ID, SSN, IPV4, IPV6, SECRET or a custom kind) and the action applied (redact, mask, block, log); never a value."}, []string{"kind", "action"})
	m.piiFailV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_pii_detection_failures_total",
		Help: "Requests whose personal-data detection failed or ran past pii.time_budget, by outcome: refused (503 MESH_PII_UNAVAILABLE) or sent_unscanned (fail_open)."}, []string{"outcome"})
	valveV := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_safety_valve_transitions_total",
		Help: "Safety valve state changes, by the state entered: open (calls take the legacy path) or closed."}, []string{"to"})
	for i, st := range valveStates {
		m.valveTo[i] = valveV.WithLabelValues(st)
	}

	names := semconv.Current()
	gl := []string{semconv.PrometheusLabel(semconv.AttrOperationName), semconv.PrometheusLabel(semconv.AttrProviderName),
		semconv.PrometheusLabel(semconv.AttrRequestModel), semconv.PrometheusLabel(semconv.AttrResponseModel), semconv.PrometheusLabel(semconv.AttrErrorType)}
	m.durationV = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: semconv.PrometheusName(names.OperationDuration, semconv.UnitSeconds),
		Help: "GenAI operation duration (" + names.OperationDuration + ", s): the client call through the mesh.", Buckets: semconv.DurationBuckets}, gl)
	m.ttfcV = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: semconv.PrometheusName(names.TimeToFirstChunk, semconv.UnitSeconds),
		Help: "Time to the first content chunk of a stream (" + names.TimeToFirstChunk + ", s).", Buckets: semconv.DurationBuckets}, gl)
	m.tokensV = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: semconv.PrometheusName(semconv.MetricTokenUsage, semconv.UnitTokens),
		Help: "Tokens per call (" + semconv.MetricTokenUsage + ", {token}); input includes cached tokens.", Buckets: semconv.TokenBuckets},
		append(gl[:4:4], semconv.PrometheusLabel(semconv.AttrTokenType)))

	m.shadowV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_shadow_calls_total",
		Help: "Shadowed client calls (aliases[].shadow), by alias and result: equal (answers compared, nothing differed), differ, error (the shadow path failed), dropped (shadow queue full), shed (cancelled under load)."},
		[]string{"alias", "result"})
	m.shadowSpendV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_shadow_spend_usd_total",
		Help: "Upstream cost of shadow calls in US dollars, by alias; never part of mesh_spend_usd_total or a key's spend."}, []string{"alias"})
	m.byFormatV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_client_requests_total",
		Help: "Client calls finished, by the wire format the client spoke (anthropic, openai for Chat Completions, responses)."}, []string{"format"})
	for f := range m.byFormat {
		m.byFormat[f] = m.byFormatV.WithLabelValues(llm.Format(f).String())
	}
	m.unknownV = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "mesh_unknown_route_total",
		Help: "Requests for a path Keel does not serve (answered 404), by HTTP method (GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS or other): clients failing against the mesh; the log names each path."}, []string{"method"})
	for i, meth := range append(unknownMethods[:len(unknownMethods):len(unknownMethods)], "other") {
		m.unknown[i] = m.unknownV.WithLabelValues(meth)
	}
	cs := []prometheus.Collector{m.byFormatV, m.unknownV, m.shadowV, m.shadowSpendV, m.requestsV, m.fallbacksV, m.modelFallbacksV, m.legacyV, m.offsetV, m.queueWaitV, m.fragSentV, m.fragOKV, m.fusionsV, m.conflictsV,
		m.retriesV, m.hedgesV, m.hedgesWonV, m.recoveredV, m.attemptsV, m.durationV, m.ttfcV, m.tokensV, m.breakerV, valveV, m.spendV, cacheV, semV, m.piiV, m.piiFailV}
	if o.Endpoints != nil {
		cs = append(cs, newEndpointCollector(o.Endpoints))
	}
	if o.Structured != nil {
		cs = append(cs, newStructuredCollector(o.Structured))
	}
	if up := o.SharedStateUp; up != nil {
		cs = append(cs, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "mesh_shared_state_up",
			Help: "1 while this replica is linked to the state the mesh's replicas share (Redis), 0 while it serves on its own state."},
			func() float64 {
				if up() {
					return 1
				}
				return 0
			}))
	}
	if dropped := o.SharedStateDropped; dropped != nil {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "mesh_shared_observations_dropped_total",
			Help: "Endpoint observations this replica could not send to the others (Redis down, or the send queue full); its state is republished when Redis returns."},
			func() float64 { return float64(dropped()) }))
	}
	if !o.NoRuntimeMetrics {
		cs = append(cs, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	for _, c := range cs {
		if err := m.reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Registry returns the registry the metrics live in, for callers that
// want to add their own collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus text (or OpenMetrics, when
// asked) exposition format, for GET /metrics.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, EnableOpenMetrics: true})
}

// RequestDone updates the metrics from one finished call. It never blocks.
func (m *Metrics) RequestDone(r *callrec.Record) {
	if int(r.Format) < len(m.byFormat) {
		m.byFormat[r.Format].Inc()
	}
	s := m.seriesFor(r)
	s.requestCounter(m, requestOutcome(r)).Inc()
	if r.Fallback != "" {
		reason := m.reasons.value(r.Fallback)
		s.fallbacks.get(reason, func(reason string) (prometheus.Counter, bool) {
			return m.fallbacksV.WithLabelValues(s.labels[0], s.labels[1], s.labels[2], reason), true
		}).Inc()
	}
	if r.ModelFallback {
		s.modelFallbacks.Inc()
	}
	if r.Legacy {
		s.legacy.Inc()
	}
	switch r.CacheStatus() {
	case cache.Hit:
		m.cacheHit.Inc()
	case cache.Miss:
		m.cacheMiss.Inc()
	case cache.Bypass:
		m.cacheBypass.Inc()
	}
	switch r.SemanticStatus() {
	case semcache.StatusHit:
		m.semHit.Inc()
	case semcache.StatusMiss:
		m.semMiss.Inc()
	case semcache.StatusError:
		m.semError.Inc()
	}
	if p := r.PII; p != nil {
		for _, f := range p.Findings {
			m.piiV.WithLabelValues(f.Kind, p.Action).Inc()
		}
		if p.Failed {
			outcome := "refused"
			if p.RawUpstream {
				outcome = "sent_unscanned"
			}
			m.piiFailV.WithLabelValues(outcome).Inc()
		}
	}
	if r.Err == nil {
		off := callrec.Part(r.Normalization).Offset
		if off < 0 {
			off = -off
		}
		s.offset.Observe(off)
	}
	s.queueWait.Observe(r.QueueWait.Seconds())
	if f := r.Fragments; f != nil {
		addInt(s.fragSent, f.Count)
		addInt(s.fragOK, f.OK)
		addInt(s.fusions, f.Fusions)
		addInt(s.conflicts, f.FusionConflicts)
	}
	addInt(s.retries, r.Retries)
	addInt(s.hedges, r.Hedges)
	if r.HedgeWon {
		s.hedgesWon.Inc()
	}
	addInt(s.recovered, r.Recovered)
	for i := range r.Attempts {
		a := &r.Attempts[i]
		kind := kindIndex(a.Kind)
		m.attempts[kind].get(m.outcomes.value(a.Outcome), func(outcome string) (prometheus.Counter, bool) {
			return m.attemptsV.WithLabelValues(attemptKinds[kind], outcome), true
		}).Inc()
	}
	m.observeGenAI(s, r)
	if r.Cost > 0 {
		m.spendCounter(r).Add(r.Cost)
	}
}

// spendCounter is r's mesh_spend_usd_total child.
func (m *Metrics) spendCounter(r *callrec.Record) prometheus.Counter {
	model := r.ServedModel
	if model == "" {
		model = r.Model
	}
	k := spendKey{model: m.models.index(model), key: r.KeyID, team: r.Team}
	if c, ok := m.spend.Load(k); ok {
		return c.(prometheus.Counter)
	}
	if m.spendN.Load() >= m.maxSpend {
		k.key, k.team = Other, Other
	} else {
		m.spendN.Add(1) // may pass the cap by the calls racing here: a bound, not an exact count
	}
	key, team := k.key, k.team
	if key == "" {
		key = None
	}
	if team == "" {
		team = None
	}
	c, _ := m.spend.LoadOrStore(k, m.spendV.WithLabelValues(m.models.names[k.model], key, team))
	return c.(prometheus.Counter)
}

// unknownMethods are the methods mesh_unknown_route_total names; any
// other is "other".
var unknownMethods = [...]string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

// UnknownRoute counts one request for a path Keel does not serve
// (server.Options.OnUnknownRoute). It never blocks.
func (m *Metrics) UnknownRoute(method string) {
	i := len(unknownMethods)
	for j, meth := range unknownMethods {
		if meth == method {
			i = j
			break
		}
	}
	m.unknown[i].Inc()
}

// OnBreakerState counts one breaker transition. It never blocks.
func (m *Metrics) OnBreakerState(ev observe.BreakerEvent) {
	m.breakerV.WithLabelValues(ev.Endpoint, ev.From.String(), ev.To.String()).Inc()
}

// OnValve counts the safety valve opening or closing (an event of another
// name is not counted). It never blocks.
func (m *Metrics) OnValve(ev observe.ValveEvent) {
	switch ev.Event {
	case observe.ValveEventOpen:
		m.valveTo[0].Inc()
	case observe.ValveEventClosed:
		m.valveTo[1].Inc()
	}
}

// OnShadow counts one shadowed call.
func (m *Metrics) OnShadow(r shadow.Result) {
	result := r.Outcome
	if result == shadow.OutcomeCompared {
		result = "equal"
		if r.Comparison != nil && r.Comparison.Differ() {
			result = "differ"
		}
	}
	alias := m.models.names[m.models.index(r.Alias)]
	m.shadowV.WithLabelValues(alias, result).Inc()
	if r.ShadowCost > 0 {
		m.shadowSpendV.WithLabelValues(alias).Add(r.ShadowCost)
	}
}

func addInt(c prometheus.Counter, n int) {
	if n > 0 {
		c.Add(float64(n))
	}
}

func (m *Metrics) seriesFor(r *callrec.Record) *series {
	mi, ri, di := m.models.index(r.Model), m.regions.index(r.ServedRegion), m.domains.index(r.Domain)
	p := &m.series[(mi*m.regions.len()+ri)*m.domains.len()+di]
	if s := p.Load(); s != nil {
		return s
	}
	l := [3]string{m.models.names[mi], m.regions.names[ri], m.domains.names[di]}
	s := &series{
		labels: l, offset: m.offsetV.WithLabelValues(l[:]...), queueWait: m.queueWaitV.WithLabelValues(l[:]...),
		fragSent: m.fragSentV.WithLabelValues(l[:]...), fragOK: m.fragOKV.WithLabelValues(l[:]...),
		fusions: m.fusionsV.WithLabelValues(l[:]...), conflicts: m.conflictsV.WithLabelValues(l[:]...),
		retries: m.retriesV.WithLabelValues(l[:]...), hedges: m.hedgesV.WithLabelValues(l[:]...),
		hedgesWon: m.hedgesWonV.WithLabelValues(l[:]...), recovered: m.recoveredV.WithLabelValues(l[:]...),
		modelFallbacks: m.modelFallbacksV.WithLabelValues(l[:]...), legacy: m.legacyV.WithLabelValues(l[:]...),
	}
	if p.CompareAndSwap(nil, s) {
		return s
	}
	return p.Load() // another call built the same children first
}

func (s *series) requestCounter(m *Metrics, outcome int) prometheus.Counter {
	p := &s.requests[outcome]
	if c := p.Load(); c != nil {
		return *c
	}
	c := m.requestsV.WithLabelValues(s.labels[0], s.labels[1], s.labels[2], requestOutcomes[outcome])
	p.CompareAndSwap(nil, &c)
	return *p.Load()
}

func requestOutcome(r *callrec.Record) int {
	if r.Err == nil {
		return 0
	}
	if code, ok := strings.CutPrefix(r.Err.MeshCode, "MESH_"); ok {
		code = strings.ToLower(code)
		for i, o := range requestOutcomes {
			if o == code {
				return i
			}
		}
	}
	switch {
	case r.Err.Status >= 400 && r.Err.Status < 500:
		return len(requestOutcomes) - 3
	case r.Err.Status >= 500:
		return len(requestOutcomes) - 2
	}
	return len(requestOutcomes) - 1
}

func kindIndex(kind string) int {
	for i, k := range attemptKinds[:len(attemptKinds)-1] {
		if k == kind {
			return i
		}
	}
	return len(attemptKinds) - 1
}

func (m *Metrics) observeGenAI(s *series, r *callrec.Record) {
	respModel := m.models.index(r.ServedModel)
	if r.ServedModel == "" {
		respModel = -1 // no response model: the label stays empty
	}
	k := genaiKey{respModel: respModel, provider: m.providers.value(m.providerName(r.ServedProvider))}
	if r.Err != nil {
		k.errType = m.errTypes.value(errorType(r.Err))
	}
	g := s.genai.get(k, func(k genaiKey) (*genaiSeries, bool) {
		resp := ""
		if k.respModel >= 0 {
			resp = m.models.names[k.respModel]
		}
		provider := k.provider
		if provider == None {
			provider = semconv.ErrorTypeOther
		}
		l := []string{semconv.OperationChat, provider, s.labels[0], resp, k.errType}
		return &genaiSeries{
			duration: m.durationV.WithLabelValues(l...),
			ttfc:     m.ttfcV.WithLabelValues(l...),
			tokIn:    m.tokensV.WithLabelValues(append(l[:4:4], semconv.TokenTypeInput)...),
			tokOut:   m.tokensV.WithLabelValues(append(l[:4:4], semconv.TokenTypeOutput)...),
		}, true
	})
	g.duration.Observe(r.Duration.Seconds())
	if r.Stream && r.TTFT > 0 {
		g.ttfc.Observe(r.TTFT.Seconds())
	}
	if r.Err == nil {
		g.tokIn.Observe(float64(r.Usage.PromptTokens()))
		g.tokOut.Observe(float64(r.Usage.OutputTokens))
	}
}

func (m *Metrics) providerName(p string) string {
	if n, ok := m.providerNames[p]; ok {
		return n
	}
	return p
}

// errorType is error.type for a failed call: the mesh code when Keel
// decided the outcome, else the upstream's error type, else its status.
func errorType(e *llm.APIError) string {
	switch {
	case e.MeshCode != "":
		return e.MeshCode
	case e.Type != "":
		return string(e.Type)
	case e.Status != 0:
		return strconv.Itoa(e.Status)
	}
	return semconv.ErrorTypeOther
}
