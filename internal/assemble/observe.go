package assemble

import (
	"context"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/server"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/internal/telemetry"
	"github.com/keelmesh/keel/internal/telemetry/alert"
	"github.com/keelmesh/keel/internal/telemetry/dashboard"
	"github.com/keelmesh/keel/internal/telemetry/debugtrace"
	"github.com/keelmesh/keel/internal/telemetry/metrics"
	"github.com/keelmesh/keel/internal/telemetry/tracing"
	"github.com/keelmesh/keel/internal/wire"
)

// observers is what the observe step hands on: the engine's observer, the
// routes that show it, and the parts later steps need (the metrics for the
// server's unknown routes, the audit log for the personal-data hash key).
type observers struct {
	observer callrec.Observer
	routes   []server.Route
	metrics  *metrics.Metrics
	audit    *sqlite.Audit
}

// observe builds the observers (metrics, tracing, debug traces, dashboard,
// request log, shadow store, audit log, the safety valve's alert webhook,
// the caller's) and the HTTP routes that show them. What it opens, m
// closes.
func (m *Mesh) observe(cfg *config.Config, sh shared, o Options) (observers, error) {
	var out observers
	var obs []callrec.Observer
	add := func(ob callrec.Observer, r ...server.Route) {
		obs = append(obs, ob)
		out.routes = append(out.routes, r...)
	}
	t := cfg.Telemetry
	pn := map[string]string{}
	for _, p := range cfg.Providers {
		pn[p.Name] = p.Type
	}
	if on(t.Metrics) {
		mt, err := m.newMetrics(cfg, sh, pn)
		if err != nil {
			return observers{}, err
		}
		out.metrics = mt
		add(mt, server.Route{Path: "/metrics", Handler: mt.Handler()})
	}
	if t.OTLPEndpoint != "" {
		hdr := map[string]string{}
		for k, v := range t.OTLPHeaders {
			hdr[k] = v.Value()
		}
		tr, err := tracing.New(context.Background(), tracing.Options{OTLPEndpoint: t.OTLPEndpoint, Headers: hdr, ServiceName: t.ServiceName, ProviderNames: pn})
		if err != nil {
			return observers{}, err
		}
		m.tracer = tr
		add(tr)
	}
	dbg, err := debugtrace.NewStore(t.DebugTraces)
	if err != nil {
		return observers{}, err
	}
	add(dbg, server.Route{Path: "/debug/traces", Prefix: true, Handler: dbg.Handler()})
	if on(t.Dashboard) {
		d, err := dashboard.New(dashboard.Options{Endpoints: m.liveEndpoints})
		if err != nil {
			return observers{}, err
		}
		add(d, server.Route{Path: "/dashboard", Prefix: true, Handler: d.Handler()})
	}
	stored, err := m.openLogs(cfg, o)
	if err != nil {
		return observers{}, err
	}
	obs = append(obs, stored...)
	out.audit = m.audit
	if v := cfg.Resilience.SafetyValve; v.Webhook != "" && !v.Disabled {
		a, err := alert.New(alert.Options{URL: v.Webhook, Logger: o.Logger})
		if err != nil {
			return observers{}, fmt.Errorf("resilience.safety_valve.webhook: %w", err)
		}
		m.alert = a
		add(a)
	}
	if o.Observer != nil {
		add(o.Observer)
	}
	out.observer = telemetry.Multi(obs...)
	return out, nil
}

func on(b *bool) bool { return b == nil || *b }

// newMetrics builds the Prometheus metrics, labelled with every model,
// alias and region the config names.
func (m *Mesh) newMetrics(cfg *config.Config, sh shared, providerNames map[string]string) (*metrics.Metrics, error) {
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
	mo := metrics.Options{Models: models, Regions: regions, ProviderNames: providerNames, Endpoints: m.liveEndpoints, Structured: m.smetrics}
	if sh.store != nil {
		mo.SharedStateUp, mo.SharedStateDropped = sh.store.Up, sh.store.Dropped
	}
	return metrics.New(mo)
}

// openLogs opens the SQLite observers: the request log, the shadow
// comparisons and the personal-data audit log, each when configured.
func (m *Mesh) openLogs(cfg *config.Config, o Options) ([]callrec.Observer, error) {
	var obs []callrec.Observer
	if rl := cfg.RequestLog; rl.On() {
		l, err := sqlite.Open(sqlite.Config{Path: rl.Path, RetentionDays: rl.RetentionDays, QueueSize: rl.QueueSize,
			BatchSize: rl.BatchSize, FlushInterval: time.Duration(rl.FlushInterval), LogBodies: rl.LogBodies, Bodies: recordBodies, Logger: o.Logger})
		if err != nil {
			return nil, err
		}
		m.reqlog = l
		obs = append(obs, l)
	}
	if s := cfg.Shadow; s.Store != "" {
		st, err := sqlite.OpenShadow(sqlite.ShadowConfig{Path: s.Store, RetentionDays: s.RetentionDays, Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("shadow.store: %w", err)
		}
		m.shadows = st
		obs = append(obs, st)
	}
	if p := cfg.PII; p.Enabled && p.Audit.Path != "" {
		a, err := sqlite.OpenAudit(sqlite.AuditConfig{Path: p.Audit.Path, RetentionDays: p.Audit.RetentionDays,
			HashKey: []byte(p.Audit.HashKey.Value()), Logger: o.Logger})
		if err != nil {
			return nil, fmt.Errorf("pii.audit: %w", err)
		}
		m.audit = a
		obs = append(obs, a)
	}
	return obs, nil
}

// MaxLoggedBody bounds each body the request log stores with
// request_log.log_bodies: a longer one is cut there and ends with a note
// saying how many bytes were cut.
const MaxLoggedBody = 64 << 10

// recordBodies is the request log's Bodies: the client's request and the
// answer it received, in the client's wire format (a stream's answer as
// the equivalent non-streaming body), each cut at MaxLoggedBody. It runs on
// the log's writer goroutine, off the request path.
func recordBodies(r *callrec.Record) (prompt, answer string) {
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
