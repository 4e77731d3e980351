package health

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Failure kinds that, with HTTP 502, 503 and 504, count as gateway failures
// for outlier ejection. They match the names the provider client gives its
// failed attempts.
const (
	// KindConnect: no connection could be made (refused, DNS, TLS). A
	// connect failure counts like a 5xx: the endpoint is not there.
	KindConnect = "connect"
	// KindReset: the connection broke before a complete answer.
	KindReset = "reset"
	// KindTimeout: a header, idle or request timeout fired.
	KindTimeout = "timeout"
)

// Outcome is what one attempt against an endpoint turned out to be.
type Outcome struct {
	// Latency is the attempt's total duration; TTFT the time to its first
	// content event (streams only, zero otherwise). Both are recorded for
	// successes only: a fast 429 says nothing about how fast the endpoint
	// answers, and its cost shows in the error rate instead.
	Latency, TTFT time.Duration
	// Failure reports a fault of the endpoint. A caller's bad request (400,
	// 401, 404 …) is not a failure of the endpoint; the engine's error
	// classification decides.
	Failure bool
	// Kind is the failure's reason (KindConnect, KindReset, KindTimeout or
	// another classification name).
	Kind string
	// Status is the HTTP status, or 0 when no response arrived.
	Status int
	// RetryAfter is the server's retry-after, if the caller parsed it; when
	// zero, Header is searched (see ParseRetryAfter).
	RetryAfter time.Duration
	// Header holds the response headers, for rate-limit headroom and
	// retry-after. It may be nil.
	Header http.Header
	// Cancelled reports an attempt abandoned before its answer (a hedge
	// race's loser, a client gone): it ends the flight, and its Latency
	// and TTFT, when set, are lower bounds of the true ones: they enter
	// the latency and time-to-first-token histograms (so the percentiles
	// the hedge delay reads keep the slow tail the hedges cut short) but
	// not the EWMA or the error rate.
	Cancelled bool
	// NoLatency reports an attempt that is not a model call (a token
	// count): its outcome counts in the error rate, the cooldowns and
	// outlier ejection, but its latency says nothing of how fast the
	// endpoint answers model calls and is not recorded.
	NoLatency bool
}

// Config configures a Tracker. The zero value is the documented default.
type Config struct {
	// SubWindow and SubWindows shape the sliding window of the histograms
	// and of the error rate (defaults 5s × 6, as HistogramConfig).
	SubWindow  time.Duration
	SubWindows int
	// Alpha is the weight of a new sample in the latency EWMA, in (0, 1].
	// The half-life is ln 2 / -ln(1-Alpha) samples. Zero means 0.1 (a
	// half-life of about 6.6 samples).
	Alpha float64
	// Capacity is the number of concurrent requests the endpoint serves
	// without queueing, if known. Zero means learn it (see QueueWait).
	Capacity int
	// InitialLatency is ExpectedLatency's prior before the first success,
	// so that a cold endpoint is neither flooded nor shunned. Zero means 1s.
	InitialLatency time.Duration
	// ConsecutiveGatewayFailures ejects the endpoint after that many
	// gateway failures in a row (connect, reset or timeout failures, or
	// HTTP 502/503/504). Zero means 3; negative disables it.
	ConsecutiveGatewayFailures int
	// EjectionErrorRate ejects the endpoint when the failure rate since its
	// last return (within the window) reaches it, over at least
	// EjectionMinRequests outcomes. Zero means 0.5; negative disables it.
	EjectionErrorRate float64
	// EjectionMinRequests: zero means 10.
	EjectionMinRequests int
	// BaseEjection is the first ejection's length; the n-th ejection in a
	// row lasts n × BaseEjection, up to MaxEjection. Zero means 2s.
	BaseEjection time.Duration
	// MaxEjection caps an ejection. The ejection count starts again from
	// one when MaxEjection has passed since the previous ejection ended.
	// Zero means 60s.
	MaxEjection time.Duration
	// Now is the clock. Nil means time.Now.
	Now func() time.Time
}

// Tracker holds the live statistics of one endpoint.
//
// A Tracker is safe for concurrent use. The per-request path (Begin, the
// done callback, ExpectedLatency, Unavailable) is lock-free and does not
// allocate; an ejection and the once-per-sub-window rotation take short
// locks.
type Tracker struct {
	alpha      float64
	capacity   int64
	prior      time.Duration
	consecMax  int64
	ejectRate  float64
	ejectMin   int64
	baseEject  time.Duration
	maxEject   time.Duration
	width      int64
	now        func() time.Time
	start      time.Time
	done       func(Outcome)
	latency    *Histogram
	ttft       *Histogram
	rate       rateWindow // outcomes in the window, for ErrorRate
	ejectCount rateWindow // outcomes since the last return, for ejection

	ewma         atomic.Uint64 // float64 bits of ns; 0 = no sample yet
	inflight     atomic.Int64
	learnedCap   atomic.Int64
	headroom     atomic.Uint64 // float64 bits
	coolingUntil atomic.Int64  // ns since start; 0 = never
	ejectedUntil atomic.Int64  // ns since start; 0 = never
	consec       atomic.Int64

	mu        sync.Mutex // guards following
	ejections int64
	lastEnd   int64 // when the latest ejection ends, ns since start
}

// New validates cfg, fills in defaults and returns a Tracker with no data.
func New(cfg Config) (*Tracker, error) {
	hc := HistogramConfig{SubWindow: cfg.SubWindow, SubWindows: cfg.SubWindows, Now: cfg.Now}
	if err := hc.fill(); err != nil {
		return nil, err
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = 0.1
	}
	if cfg.InitialLatency == 0 {
		cfg.InitialLatency = time.Second
	}
	if cfg.ConsecutiveGatewayFailures == 0 {
		cfg.ConsecutiveGatewayFailures = 3
	}
	if cfg.EjectionErrorRate == 0 {
		cfg.EjectionErrorRate = 0.5
	}
	if cfg.EjectionMinRequests == 0 {
		cfg.EjectionMinRequests = 10
	}
	if cfg.BaseEjection == 0 {
		cfg.BaseEjection = 2 * time.Second
	}
	if cfg.MaxEjection == 0 {
		cfg.MaxEjection = 60 * time.Second
	}
	switch {
	case !(cfg.Alpha > 0 && cfg.Alpha <= 1):
		return nil, fmt.Errorf("ewma alpha %v outside (0, 1]: %w", cfg.Alpha, ErrInvalidConfig)
	case cfg.Capacity < 0:
		return nil, fmt.Errorf("capacity %d is negative: %w", cfg.Capacity, ErrInvalidConfig)
	case cfg.InitialLatency < 0:
		return nil, fmt.Errorf("initial latency %v is negative: %w", cfg.InitialLatency, ErrInvalidConfig)
	case cfg.EjectionErrorRate > 1:
		return nil, fmt.Errorf("ejection error rate %v above 1: %w", cfg.EjectionErrorRate, ErrInvalidConfig)
	case cfg.EjectionMinRequests < 1:
		return nil, fmt.Errorf("ejection min requests %d below 1: %w", cfg.EjectionMinRequests, ErrInvalidConfig)
	case cfg.BaseEjection < 0:
		return nil, fmt.Errorf("base ejection %v is negative: %w", cfg.BaseEjection, ErrInvalidConfig)
	case cfg.MaxEjection < cfg.BaseEjection:
		return nil, fmt.Errorf("max ejection %v below base ejection %v: %w", cfg.MaxEjection, cfg.BaseEjection, ErrInvalidConfig)
	}
	start := hc.Now()
	t := &Tracker{
		alpha:      cfg.Alpha,
		capacity:   int64(cfg.Capacity),
		prior:      cfg.InitialLatency,
		consecMax:  int64(cfg.ConsecutiveGatewayFailures),
		ejectRate:  cfg.EjectionErrorRate,
		ejectMin:   int64(cfg.EjectionMinRequests),
		baseEject:  cfg.BaseEjection,
		maxEject:   cfg.MaxEjection,
		width:      int64(hc.SubWindow),
		now:        hc.Now,
		start:      start,
		latency:    newHistogram(hc, start),
		ttft:       newHistogram(hc, start),
		rate:       newRateWindow(hc.SubWindows),
		ejectCount: newRateWindow(hc.SubWindows),
	}
	t.headroom.Store(math.Float64bits(1))
	t.done = t.finish
	return t, nil
}

// Begin counts one request in flight and returns the callback that ends it:
// call done exactly once with the attempt's outcome.
func (t *Tracker) Begin() (done func(Outcome)) {
	t.inflight.Add(1)
	return t.done
}

func (t *Tracker) since(now time.Time) int64 { return max(int64(now.Sub(t.start)), 0) }

func (t *Tracker) finish(o Outcome) {
	level := t.inflight.Add(-1) + 1 // requests in flight while this one ended
	if o.Cancelled {
		e := t.since(t.now()) / t.width
		if o.Latency > 0 {
			t.latency.record(e, o.Latency)
		}
		if o.TTFT > 0 {
			t.ttft.record(e, o.TTFT)
		}
		return
	}
	now := t.since(t.now())
	e := now / t.width
	t.rate.add(e, o.Failure)
	if !o.Failure && !o.NoLatency {
		t.latency.record(e, o.Latency)
		if o.TTFT > 0 {
			t.ttft.record(e, o.TTFT)
		}
		t.observeLatency(o.Latency, level)
	}
	if o.Header != nil {
		if h, ok := parseHeadroom(o.Header); ok {
			t.headroom.Store(math.Float64bits(h))
		}
	}
	if o.Status == 429 || o.Status == 529 || o.Status == 503 {
		ra := o.RetryAfter
		if ra <= 0 && o.Header != nil {
			ra, _ = ParseRetryAfter(o.Header, t.start.Add(time.Duration(now)))
		}
		if ra > 0 {
			storeMax(&t.coolingUntil, now+int64(ra))
		}
	}
	t.outlier(now, e, o)
}

// observeLatency updates the EWMA and the learned capacity: the largest
// number in flight at which a request still finished within twice the
// EWMA, that is, without visible queueing.
func (t *Tracker) observeLatency(d time.Duration, level int64) {
	x := float64(max(d, 1))
	var prev float64
	for {
		old := t.ewma.Load()
		nv := x
		if old != 0 {
			prev = math.Float64frombits(old)
			nv = prev + t.alpha*(x-prev)
		}
		if t.ewma.CompareAndSwap(old, math.Float64bits(nv)) {
			break
		}
	}
	if prev == 0 || x <= 2*prev {
		storeMax(&t.learnedCap, level)
	}
}

// outlier runs Envoy-style outlier detection on one outcome. Outcomes that
// arrive while the endpoint is ejected (requests sent before) are ignored.
func (t *Tracker) outlier(now, e int64, o Outcome) {
	if now < t.ejectedUntil.Load() {
		return
	}
	t.ejectCount.add(e, o.Failure)
	if !o.Failure {
		if t.consec.Load() != 0 {
			t.consec.Store(0)
		}
		return
	}
	if isGatewayFailure(o) {
		if n := t.consec.Add(1); t.consecMax > 0 && n >= t.consecMax {
			t.eject(now)
			return
		}
	}
	if t.ejectRate > 0 {
		reqs, fails := t.ejectCount.sums(e)
		if reqs >= t.ejectMin && float64(fails) >= t.ejectRate*float64(reqs) {
			t.eject(now)
		}
	}
}

func isGatewayFailure(o Outcome) bool {
	switch o.Kind {
	case KindConnect, KindReset, KindTimeout:
		return true
	}
	return o.Status == 502 || o.Status == 503 || o.Status == 504
}

func (t *Tracker) eject(now int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if now < t.ejectedUntil.Load() {
		return
	}
	if t.ejections > 0 && now-t.lastEnd >= int64(t.maxEject) {
		t.ejections = 0
	}
	t.ejections++
	d := min(time.Duration(t.ejections)*t.baseEject, t.maxEject)
	t.lastEnd = now + int64(d)
	t.consec.Store(0)
	t.ejectCount.reset()
	t.ejectedUntil.Store(t.lastEnd)
}

// Unavailable returns why the router must not send to the endpoint now:
// "ejected", "cooling" (inside a retry-after), or "" when it may.
func (t *Tracker) Unavailable() string {
	now := t.since(t.now())
	switch {
	case now < t.ejectedUntil.Load():
		return "ejected"
	case now < t.coolingUntil.Load():
		return "cooling"
	}
	return ""
}

// ExpectedLatency estimates how long a request sent now would take to
// succeed: (EWMA latency, or InitialLatency before the first success, plus
// QueueWait) divided by (1 − error rate), since each failure costs about one
// more try; the error rate is capped at 0.9. It reads a few atomics and
// costs tens of nanoseconds, cheap enough for every request.
func (t *Tracker) ExpectedLatency() time.Duration {
	now := t.since(t.now())
	reqs, fails := t.rate.sums(now / t.width)
	return t.expected(t.ewmaDuration(), t.queueWait(), reqs, fails)
}

func (t *Tracker) expected(ewma, queue time.Duration, reqs, fails int64) time.Duration {
	base := ewma
	if base == 0 {
		base = t.prior
	}
	return time.Duration(float64(base+queue) / (1 - min(errorRate(reqs, fails), 0.9)))
}

func errorRate(reqs, fails int64) float64 {
	if reqs == 0 {
		return 0
	}
	return float64(fails) / float64(reqs)
}

func (t *Tracker) ewmaDuration() time.Duration {
	return time.Duration(math.Float64frombits(t.ewma.Load()))
}

// queueWait estimates how long a new request would wait for a free slot.
// Requests beyond the endpoint's concurrent capacity C queue; slots free up
// at about C per EWMA latency (Little's law), so the last queued request
// waits about (in-flight − C) × EWMA / C. C is Config.Capacity when set,
// else the learned capacity (see observeLatency); with no estimate yet the
// wait is taken as zero.
func (t *Tracker) queueWait() time.Duration {
	c := t.capacity
	if c == 0 {
		c = t.learnedCap.Load()
	}
	excess := t.inflight.Load() - c
	if c == 0 || excess <= 0 {
		return 0
	}
	return time.Duration(float64(excess) * float64(t.ewmaDuration()) / float64(c))
}

// Snapshot is a plain-value copy of a Tracker's statistics.
type Snapshot struct {
	// Latency and time-to-first-token percentiles of successes in the
	// window (0 without data).
	P50, P95, P99    time.Duration
	TTFTP50, TTFTP95 time.Duration
	// EWMA is the exponentially weighted mean latency of successes.
	EWMA time.Duration
	// ErrorRate is failures / outcomes in the window.
	ErrorRate float64
	// InFlight counts requests begun and not yet done.
	InFlight int
	// QueueWait is the estimated wait for a free slot (see Tracker).
	QueueWait time.Duration
	// ExpectedLatency is Tracker.ExpectedLatency at the snapshot.
	ExpectedLatency time.Duration
	// Headroom is the smallest remaining/limit fraction among the
	// provider's rate-limit headers last seen, in [0, 1]; 1 when unknown.
	Headroom float64
	// Ejected reports an outlier ejection in force until EjectedUntil.
	Ejected      bool
	EjectedUntil time.Time
	// Cooling reports a retry-after in force until CoolingUntil.
	Cooling      bool
	CoolingUntil time.Time
	// Requests counts outcomes in the window.
	Requests int64
}

// P95 is the 95th percentile of latency over the window, or of time to
// first token when ttft is set: Snapshot's P95 or TTFTP95 alone (the hedge
// delay needs just that, on every call).
func (t *Tracker) P95(ttft bool) time.Duration {
	e := t.since(t.now()) / t.width
	var q [1]time.Duration
	if ttft {
		t.ttft.quantiles(e, []float64{0.95}, q[:])
	} else {
		t.latency.quantiles(e, []float64{0.95}, q[:])
	}
	return q[0]
}

// Snapshot returns the endpoint's statistics now. It scans the two
// histograms once each (about a microsecond); use ExpectedLatency and
// Unavailable on the per-request path.
func (t *Tracker) Snapshot() Snapshot {
	nowT := t.now()
	now := t.since(nowT)
	e := now / t.width
	var lat [3]time.Duration
	var ttft [2]time.Duration
	t.latency.quantiles(e, []float64{0.5, 0.95, 0.99}, lat[:])
	t.ttft.quantiles(e, []float64{0.5, 0.95}, ttft[:])
	reqs, fails := t.rate.sums(e)
	s := Snapshot{
		P50: lat[0], P95: lat[1], P99: lat[2],
		TTFTP50: ttft[0], TTFTP95: ttft[1],
		EWMA:      t.ewmaDuration(),
		ErrorRate: errorRate(reqs, fails),
		InFlight:  int(t.inflight.Load()),
		QueueWait: t.queueWait(),
		Headroom:  math.Float64frombits(t.headroom.Load()),
		Requests:  reqs,
	}
	s.ExpectedLatency = t.expected(s.EWMA, s.QueueWait, reqs, fails)
	if u := t.ejectedUntil.Load(); u != 0 {
		s.EjectedUntil = t.start.Add(time.Duration(u))
		s.Ejected = now < u
	}
	if u := t.coolingUntil.Load(); u != 0 {
		s.CoolingUntil = t.start.Add(time.Duration(u))
		s.Cooling = now < u
	}
	return s
}

func storeMax(v *atomic.Int64, x int64) {
	for {
		old := v.Load()
		if x <= old || v.CompareAndSwap(old, x) {
			return
		}
	}
}

// Rate-limit header pairs (remaining, limit), canonical keys.
var headroomHeaders = [...][2]string{
	{"Anthropic-Ratelimit-Requests-Remaining", "Anthropic-Ratelimit-Requests-Limit"},
	{"Anthropic-Ratelimit-Tokens-Remaining", "Anthropic-Ratelimit-Tokens-Limit"},
	{"X-Ratelimit-Remaining-Requests", "X-Ratelimit-Limit-Requests"},
	{"X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Limit-Tokens"},
}

// parseHeadroom returns the smallest remaining/limit fraction among the
// rate-limit headers present in h, clamped to [0, 1].
func parseHeadroom(h http.Header) (float64, bool) {
	frac, found := 1.0, false
	for _, p := range headroomHeaders {
		rem, ok1 := headerFloat(h, p[0])
		lim, ok2 := headerFloat(h, p[1])
		if !ok1 || !ok2 || lim <= 0 {
			continue
		}
		frac, found = min(frac, max(rem/lim, 0)), true
	}
	return frac, found
}

func headerFloat(h http.Header, key string) (float64, bool) {
	v := h[key]
	if len(v) == 0 {
		return 0, false
	}
	f, err := strconv.ParseFloat(v[0], 64)
	return f, err == nil && !math.IsNaN(f) && !math.IsInf(f, 0)
}

// ParseRetryAfter reads how long the server asked the client to wait:
// retry-after-ms (milliseconds, sent by Anthropic and OpenAI beside the
// coarser retry-after) when present, else retry-after as seconds or an HTTP
// date relative to now. It reports false when neither header gives a
// positive wait. It is a pure function.
func ParseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if ms, ok := headerFloat(h, "Retry-After-Ms"); ok && ms > 0 {
		return time.Duration(ms * float64(time.Millisecond)), true
	}
	v := h["Retry-After"]
	if len(v) == 0 {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v[0], 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second)), true
		}
		return 0, false
	}
	if at, err := http.ParseTime(v[0]); err == nil && at.After(now) {
		return at.Sub(now), true
	}
	return 0, false
}

// rateWindow counts outcomes and failures per sub-window in a ring. Adding
// is lock-free; a slice whose epoch has passed is reset under a short lock.
type rateWindow struct {
	slots []rateSlot
	mu    *sync.Mutex // serialises slice resets
}

type rateSlot struct {
	epoch atomic.Int64
	reqs  atomic.Int64
	fails atomic.Int64
}

func newRateWindow(n int) rateWindow {
	return rateWindow{slots: make([]rateSlot, n), mu: new(sync.Mutex)}
}

func (w rateWindow) add(e int64, failure bool) {
	s := &w.slots[e%int64(len(w.slots))]
	if s.epoch.Load() < e {
		w.mu.Lock()
		if s.epoch.Load() < e {
			s.reqs.Store(0)
			s.fails.Store(0)
			s.epoch.Store(e)
		}
		w.mu.Unlock()
	}
	s.reqs.Add(1)
	if failure {
		s.fails.Add(1)
	}
}

// sums returns the outcomes and failures of the slices inside the window
// ending at epoch e.
func (w rateWindow) sums(e int64) (reqs, fails int64) {
	n := int64(len(w.slots))
	for i := range w.slots {
		s := &w.slots[i]
		if ep := s.epoch.Load(); ep > e-n && ep <= e {
			reqs += s.reqs.Load()
			fails += s.fails.Load()
		}
	}
	return reqs, fails
}

func (w rateWindow) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range w.slots {
		w.slots[i].reqs.Store(0)
		w.slots[i].fails.Store(0)
	}
}
