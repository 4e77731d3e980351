// Package dashboard serves Keel's live web dashboard: one self-contained
// HTML page (GET /dashboard, inline CSS and JavaScript, no external assets)
// that shows the five mesh rates, per-endpoint routing state (the engine's,
// as the picker sees it), health and breaker states, and the
// latest fallbacks, kept current through Server-Sent Events
// (GET /dashboard/events).
//
// The rates come from an in-process rolling window of finished calls (the
// last Options.Window, one bucket per second), fed by RequestDone — not from
// Prometheus — so the page moves within a second of a region failing.
// Endpoint health and routing state are read from the engine when a
// snapshot is built. Each snapshot also carries the last 15 minutes in
// 10-second steps (calls, errors, fallback rate, p50/p99 per served model),
// which the page charts.
//
// A *Dashboard is an callrec.Observer and is safe for concurrent use.
// RequestDone never blocks: it takes one short mutex to update the current
// bucket and, when pages are open, nudges their streams without waiting.
// Each open event stream runs on its request's goroutine: it pushes a
// snapshot every Options.Interval and soon after a change (at most one
// change-push per Interval/5), and returns when the client goes away.
package dashboard

import (
	"cmp"
	_ "embed"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/sse"
)

//go:embed dashboard.html
var page []byte

// Defaults for zero Options fields.
const (
	DefaultWindow          = 60 * time.Second
	DefaultInterval        = 500 * time.Millisecond
	DefaultRecentFallbacks = 20
)

// Options configure New. The zero value is the documented defaults.
type Options struct {
	// Window is the rolling window the rates are computed over, rounded up
	// to whole seconds (default 60s).
	Window time.Duration
	// Interval is the period of snapshot pushes (default 500ms).
	Interval time.Duration
	// RecentFallbacks is how many of the latest fallbacks the page lists
	// (default 20).
	RecentFallbacks int
	// Endpoints, when set, is read for every snapshot
	// (engine.Engine.Endpoints).
	Endpoints func() []fleet.Status
	// Now is the clock (nil = time.Now).
	Now func() time.Time
}

// Dashboard is the live dashboard. See the package doc for its
// concurrency rules.
type Dashboard struct {
	now       func() time.Time
	interval  time.Duration
	endpoints func() []fleet.Status

	mu      sync.Mutex // guards following
	buckets []bucket   // one per second of the window, indexed by unix second mod len
	recent  []Fallback // ring of the latest fallbacks
	nrecent int        // fallbacks ever recorded
	hist    [historyLen]step
	started int64 // the step the dashboard started in
	spend   map[spendKey]*spendSum

	subsMu sync.Mutex // guards subs
	subs   map[chan struct{}]struct{}
	nsubs  atomic.Int32 // len(subs), read without the lock on the per-request path
}

// Queue-wait histogram bounds, in milliseconds, for the window's p95.
var waitBounds = [...]float64{0, 1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000}

// History: the last 15 minutes in 10-second steps, for the page's charts.
const (
	historyStep = 10 // seconds
	historyLen  = 90
)

// latBounds are the latency histogram's upper bounds in milliseconds:
// 1ms × 2^(i/4), so a percentile is within 19 % of the true value.
var latBounds = func() []float64 {
	var b []float64
	for v := 1.0; v < 600_000; v *= math.Pow(2, 0.25) {
		b = append(b, math.Round(v*100)/100)
	}
	return b
}()

type step struct {
	n                        int64 // unix second / historyStep
	calls, errors, fallbacks int
	lat                      map[string][]uint32 // served model → counts per latBounds (+1 overflow)
}

// spendKey is what spend is counted by: the served model (the asked one
// when nothing served), the virtual key and its team ("" without keys).
type spendKey struct{ model, key, team string }

type spendSum struct {
	usd   float64
	calls int
}

// maxSpendRows bounds the spend table: past it, new combinations count in
// one row named "other", as /metrics does.
const maxSpendRows = 256

type bucket struct {
	sec                                 int64 // the unix second counted here
	requests, fallbacks, errors, served int
	offsetSum                           float64
	fragSent, fragOK, fusions, conflict int
	waits                               [len(waitBounds) + 1]int
}

// New returns a Dashboard.
func New(o Options) (*Dashboard, error) {
	if o.Window < 0 || o.Interval < 0 || o.RecentFallbacks < 0 {
		return nil, errors.New("dashboard: negative option")
	}
	if o.Window == 0 {
		o.Window = DefaultWindow
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	if o.RecentFallbacks == 0 {
		o.RecentFallbacks = DefaultRecentFallbacks
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	secs := int((o.Window + time.Second - 1) / time.Second)
	return &Dashboard{
		started: o.Now().Unix() / historyStep,
		now:     o.Now, interval: o.Interval, endpoints: o.Endpoints,
		buckets: make([]bucket, secs), recent: make([]Fallback, o.RecentFallbacks),
		subs: map[chan struct{}]struct{}{}, spend: map[spendKey]*spendSum{},
	}, nil
}

// RequestDone counts one finished call in the current second.
func (d *Dashboard) RequestDone(r *callrec.Record) {
	now := d.now()
	sec := now.Unix()
	d.mu.Lock()
	b := &d.buckets[int(sec%int64(len(d.buckets)))]
	if b.sec != sec {
		*b = bucket{sec: sec}
	}
	b.requests++
	if r.Err != nil {
		b.errors++
	} else {
		b.served++
		b.offsetSum += math.Abs(callrec.Part(r.Normalization).Offset)
	}
	if f := r.Fragments; f != nil {
		b.fragSent += f.Count
		b.fragOK += f.OK
		b.fusions += f.Fusions
		b.conflict += f.FusionConflicts
	}
	b.waits[waitIndex(float64(r.QueueWait.Microseconds())/1000)]++
	n := sec / historyStep
	h := &d.hist[int(n%historyLen)]
	if h.n != n {
		*h = step{n: n, lat: h.lat}
		clear(h.lat)
	}
	h.calls++
	if r.Err != nil {
		h.errors++
	} else {
		m := r.ServedModel
		if m == "" {
			m = r.Model
		}
		c := h.lat[m]
		if c == nil {
			if h.lat == nil {
				h.lat = map[string][]uint32{}
			}
			c = make([]uint32, len(latBounds)+1)
			h.lat[m] = c
		}
		ms := float64(r.Duration.Microseconds()) / 1000
		i := len(latBounds)
		for j, bd := range latBounds {
			if ms <= bd {
				i = j
				break
			}
		}
		c[i]++
	}
	if r.Cost > 0 {
		k := spendKey{model: r.ServedModel, key: r.KeyID, team: r.Team}
		if k.model == "" {
			k.model = r.Model
		}
		sp := d.spend[k]
		if sp == nil {
			if len(d.spend) >= maxSpendRows {
				k = spendKey{model: "other", key: "other", team: "other"}
				sp = d.spend[k]
			}
			if sp == nil {
				sp = &spendSum{}
				d.spend[k] = sp
			}
		}
		sp.usd += r.Cost
		sp.calls++
	}
	if r.Fallback != "" {
		h.fallbacks++
		b.fallbacks++
		d.recent[d.nrecent%len(d.recent)] = Fallback{Time: now, RequestID: r.RequestID, Model: r.Model, Reason: r.Fallback, ServedBy: r.ServedBy}
		d.nrecent++
	}
	d.mu.Unlock()
	if d.nsubs.Load() > 0 {
		d.notify()
	}
}

func waitIndex(ms float64) int {
	for i, b := range waitBounds {
		if ms <= b {
			return i
		}
	}
	return len(waitBounds)
}

// notify nudges every open stream without blocking: a stream already
// nudged has its one-slot channel full and skips this one.
func (d *Dashboard) notify() {
	d.subsMu.Lock()
	defer d.subsMu.Unlock()
	for ch := range d.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

func (d *Dashboard) subscribe() chan struct{} {
	ch := make(chan struct{}, 1)
	d.subsMu.Lock()
	d.subs[ch] = struct{}{}
	d.nsubs.Store(int32(len(d.subs)))
	d.subsMu.Unlock()
	return ch
}

func (d *Dashboard) unsubscribe(ch chan struct{}) {
	d.subsMu.Lock()
	delete(d.subs, ch)
	d.nsubs.Store(int32(len(d.subs)))
	d.subsMu.Unlock()
}

// Snapshot is what the page shows, as sent on the event stream.
type Snapshot struct {
	Time          time.Time `json:"time"`
	WindowSeconds int       `json:"window_seconds"`
	// Requests and Fallbacks count calls in the window.
	Requests  int        `json:"requests"`
	Fallbacks int        `json:"fallbacks"`
	Errors    int        `json:"errors"`
	Rates     Rates      `json:"rates"`
	Endpoints []Endpoint `json:"endpoints"`
	// Recent lists the latest fallbacks, newest first.
	Recent []Fallback `json:"recent_fallbacks"`
	// History is the last 15 minutes in 10-second steps, oldest first,
	// from the dashboard's start (steps before it are absent: no data).
	History []Point `json:"history"`
	// Spend is what calls cost since the dashboard started, by model, key
	// and team, dearest first; SpendUSD is its total.
	Spend    []Spend `json:"spend"`
	SpendUSD float64 `json:"spend_usd"`
}

// Spend is the cost of the calls of one model, virtual key and team (key
// and team are empty for calls made without a key).
type Spend struct {
	Model string  `json:"model"`
	Key   string  `json:"key"`
	Team  string  `json:"team"`
	Calls int     `json:"calls"`
	USD   float64 `json:"usd"`
}

// Point is one 10-second step of History.
type Point struct {
	// Time is the step's start.
	Time   time.Time `json:"time"`
	Calls  int       `json:"calls"`
	Errors int       `json:"errors"`
	// FallbackRate is nil in a step without calls.
	FallbackRate *float64 `json:"fallback_rate"`
	// Latency holds the served models' percentiles (upper bucket bounds)
	// in the step; a model absent served nothing then.
	Latency map[string]Percentiles `json:"latency"`
}

// Percentiles of one model's call latency in a step, in milliseconds.
type Percentiles struct {
	P50MS float64 `json:"p50_ms"`
	P99MS float64 `json:"p99_ms"`
}

func percentile(c []uint32, q float64) float64 {
	var total uint32
	for _, v := range c {
		total += v
	}
	need := uint32(math.Ceil(q * float64(total)))
	var seen uint32
	for i, v := range c {
		seen += v
		if seen >= need {
			return latBounds[min(i, len(latBounds)-1)]
		}
	}
	return latBounds[len(latBounds)-1]
}

// Rates are the five mesh rates over the window; nil when the window holds
// nothing to divide by.
type Rates struct {
	// FallbackRate is fallbacks / requests.
	FallbackRate *float64 `json:"fallback_rate"`
	// NormalizationOffset is the mean absolute temperature offset of served calls.
	NormalizationOffset *float64 `json:"normalization_offset"`
	// FragmentSuccessRate is fragments answered / sent.
	FragmentSuccessRate *float64 `json:"fragment_success_rate"`
	// FusionConflictRate is conflicting fused fields / fused fields.
	FusionConflictRate *float64 `json:"fusion_conflict_rate"`
	// QueueWaitP95MS is the 95th percentile queue wait (upper bucket bound).
	QueueWaitP95MS *float64 `json:"queue_wait_p95_ms"`
}

// Endpoint is one endpoint's live health.
type Endpoint struct {
	ID       string `json:"id"`
	Model    string `json:"model"`
	Region   string `json:"region"`
	Provider string `json:"provider"`
	// State is what routing sees (fleet.Status.State): down,
	// breaker_open, half_open, cooling, ejected or healthy.
	State   string `json:"state"`
	Breaker string `json:"breaker"`
	// P95MS and ErrorRate are nil when the health window holds no
	// successes or no outcomes: the page shows "no data", not 0.
	P95MS     *float64 `json:"p95_ms"`
	InFlight  int      `json:"in_flight"`
	ErrorRate *float64 `json:"error_rate"`
	Ejected   bool     `json:"ejected"`
	Cooling   bool     `json:"cooling"`
	Headroom  float64  `json:"headroom"`
}

// Fallback is one call whose first choice did not serve.
type Fallback struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Model     string    `json:"model"`
	Reason    string    `json:"reason"`
	ServedBy  string    `json:"served_by"`
}

// Snapshot sums the window ending now and reads the endpoints.
func (d *Dashboard) Snapshot() Snapshot {
	now := d.now()
	sec := now.Unix()
	n := int64(len(d.buckets))
	var sum bucket
	s := Snapshot{Time: now, WindowSeconds: len(d.buckets), Endpoints: []Endpoint{}, Recent: []Fallback{}}
	d.mu.Lock()
	for i := range d.buckets {
		b := &d.buckets[i]
		if b.sec <= sec-n || b.sec > sec {
			continue
		}
		sum.requests += b.requests
		sum.fallbacks += b.fallbacks
		sum.errors += b.errors
		sum.served += b.served
		sum.offsetSum += b.offsetSum
		sum.fragSent += b.fragSent
		sum.fragOK += b.fragOK
		sum.fusions += b.fusions
		sum.conflict += b.conflict
		for j, w := range b.waits {
			sum.waits[j] += w
		}
	}
	s.History = []Point{}
	cur := sec / historyStep
	for n := max(cur-historyLen+1, d.started); n <= cur; n++ {
		h := &d.hist[int(n%historyLen)]
		p := Point{Time: time.Unix(n*historyStep, 0).UTC(), Latency: map[string]Percentiles{}}
		if h.n == n {
			p.Calls, p.Errors = h.calls, h.errors
			p.FallbackRate = ratio(h.fallbacks, h.calls)
			for m, c := range h.lat {
				p.Latency[m] = Percentiles{P50MS: percentile(c, 0.5), P99MS: percentile(c, 0.99)}
			}
		}
		s.History = append(s.History, p)
	}
	for k := range min(d.nrecent, len(d.recent)) {
		s.Recent = append(s.Recent, d.recent[(d.nrecent-1-k)%len(d.recent)])
	}
	s.Spend = make([]Spend, 0, len(d.spend))
	for k, v := range d.spend {
		s.Spend = append(s.Spend, Spend{Model: k.model, Key: k.key, Team: k.team, Calls: v.calls, USD: v.usd})
		s.SpendUSD += v.usd
	}
	d.mu.Unlock()
	slices.SortFunc(s.Spend, func(a, b Spend) int {
		if c := cmp.Compare(b.USD, a.USD); c != 0 {
			return c
		}
		return cmp.Or(cmp.Compare(a.Model, b.Model), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team))
	})

	s.Requests, s.Fallbacks, s.Errors = sum.requests, sum.fallbacks, sum.errors
	s.Rates.FallbackRate = ratio(sum.fallbacks, sum.requests)
	if sum.served > 0 {
		v := sum.offsetSum / float64(sum.served)
		s.Rates.NormalizationOffset = &v
	}
	s.Rates.FragmentSuccessRate = ratio(sum.fragOK, sum.fragSent)
	s.Rates.FusionConflictRate = ratio(sum.conflict, sum.fusions)
	if sum.requests > 0 {
		need := int(math.Ceil(0.95 * float64(sum.requests)))
		seen := 0
		for j, w := range sum.waits {
			seen += w
			if seen >= need {
				v := waitBounds[min(j, len(waitBounds)-1)]
				s.Rates.QueueWaitP95MS = &v
				break
			}
		}
	}
	if d.endpoints != nil {
		for _, e := range d.endpoints() {
			h := e.Health
			ep := Endpoint{ID: e.ID, Model: e.Model, Region: e.Region, Provider: e.Provider, State: e.State, Breaker: e.Breaker,
				InFlight: h.InFlight, Ejected: h.Ejected, Cooling: h.Cooling, Headroom: h.Headroom}
			if h.P95 > 0 { // the tracker reports 0 without successes
				v := float64(h.P95.Microseconds()) / 1000
				ep.P95MS = &v
			}
			if h.Requests > 0 {
				v := h.ErrorRate
				ep.ErrorRate = &v
			}
			s.Endpoints = append(s.Endpoints, ep)
		}
	}
	return s
}

func ratio(a, b int) *float64 {
	if b == 0 {
		return nil
	}
	v := float64(a) / float64(b)
	return &v
}

// Handler serves the page on any path not ending in "/events" and the
// event stream on paths that do, so it can be mounted at /dashboard and
// /dashboard/events (or under a prefix: the page finds its stream
// relative to its own URL).
func (d *Dashboard) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/events") {
			d.serveEvents(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		// The page needs nothing from elsewhere; say so to the browser.
		h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; connect-src 'self'; img-src data:")
		w.Write(page)
	})
}

// serveEvents streams snapshots until the client leaves.
func (d *Dashboard) serveEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // keep reverse proxies (nginx) from buffering the stream
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return
	}
	kick := d.subscribe()
	defer d.unsubscribe(kick)
	sw := sse.NewWriter(w, rc.Flush)
	send := func() error {
		b, err := json.Marshal(d.Snapshot())
		if err != nil {
			return err
		}
		return sw.WriteEvent("snapshot", b)
	}
	if send() != nil {
		return
	}
	tick := time.NewTicker(d.interval)
	defer tick.Stop()
	gap := d.interval / 5 // change-pushes come at most this often
	var gapT *time.Timer
	var gapC <-chan time.Time
	defer func() {
		if gapT != nil {
			gapT.Stop()
		}
	}()
	last := time.Now()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		case <-gapC:
			gapC = nil
		case <-kick:
			if wait := gap - time.Since(last); wait > 0 {
				if gapC == nil {
					gapT = time.NewTimer(wait)
					gapC = gapT.C
				}
				continue
			}
		}
		if send() != nil {
			return
		}
		last = time.Now()
		if gapC != nil { // this push carried the pending change
			gapT.Stop()
			gapC = nil
		}
	}
}
