package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

// Target is one URL under test.
type Target struct {
	// Name labels the target in reports (default: its URL).
	Name string
	// URL is the API base ("http://127.0.0.1:7878"), a base ending in /v1,
	// or the full API path.
	URL string
	// Direct marks the simulator itself: each of its calls is exactly one
	// upstream call, which is how a run splits the simulator's counters
	// between a direct target and a gateway in front of the same fleet. Its
	// calls ask for Request.DirectModel when that is set.
	Direct bool
	// Client sends the calls; nil means a tuned keep-alive client of the
	// run's own. A non-nil Client also skips the reachability check.
	Client *http.Client
}

// Options configure Run. Rate > 0 is the open loop; Rate == 0 with
// Concurrency > 0 is the closed loop.
type Options struct {
	Targets []Target
	Request Request
	// Rate is calls per second sent to each target. Calls are due at fixed
	// intervals and go round-robin across targets, so every target sees the
	// same load at the same moments.
	Rate float64
	// Concurrency is the number of back-to-back clients per target in the
	// closed loop.
	Concurrency int
	// ConcurrencyLimit caps the calls outstanding per target in the open
	// loop; a call due while the cap is reached is dropped and counted, not
	// delayed. 0 means no cap.
	ConcurrencyLimit int
	Duration         time.Duration
	// Timeline is played on Sim; steps are restored (faults cleared,
	// regions brought up) when the run ends.
	Timeline []Action
	// Sim, when set, plays the timeline and gives amplification and cost.
	Sim Sim
	// Prices by model prices a direct target's calls for cost; nil leaves
	// the cost fields 0.
	Prices map[string]sim.Price
	// Timeout bounds one call (default 60s).
	Timeout time.Duration
	// Progress receives a live progress bar (TTY) or a plain line every few
	// seconds; nil prints nothing.
	Progress io.Writer
	TTY      bool
	// Windows is the number of time slices of the latency-over-time series
	// (default 60).
	Windows int
}

// Result is the outcome of a run.
type Result struct {
	Scenario    string          `json:"scenario,omitempty"`
	Mode        string          `json:"mode"` // "open" or "closed"
	Rate        float64         `json:"rate,omitempty"`
	Concurrency int             `json:"concurrency,omitempty"`
	DurationS   float64         `json:"duration_s"`
	Targets     []*TargetResult `json:"targets"`
	// Actions lists the timeline steps played, with their times.
	Actions []string `json:"actions,omitempty"`
}

// TargetResult holds one target's figures. Latency percentiles are over
// successful calls, measured from the time each call was due (open loop)
// or sent (closed loop) to its last byte; TTFT to the first content delta.
type TargetResult struct {
	Name         string           `json:"name"`
	URL          string           `json:"url"`
	Requests     int64            `json:"requests"`
	Successes    int64            `json:"successes"`
	Errors       int64            `json:"errors"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	Dropped      int64            `json:"dropped"`
	P50Ms        float64          `json:"p50_ms"`
	P90Ms        float64          `json:"p90_ms"`
	P99Ms        float64          `json:"p99_ms"`
	P999Ms       float64          `json:"p999_ms"`
	MaxMs        float64          `json:"max_ms"`
	MeanMs       float64          `json:"mean_ms"`
	TTFTP50Ms    float64          `json:"ttft_p50_ms"`
	TTFTP99Ms    float64          `json:"ttft_p99_ms"`
	// ThroughputRPS is successful calls per second of wall time.
	ThroughputRPS float64 `json:"throughput_rps"`
	// Amplification is upstream calls ÷ calls sent (0 when no simulator
	// was known). UpstreamRequests counts the simulator calls attributed to
	// this target; Shared is true when several gateways shared one
	// simulator and their figure is their combined one.
	Amplification       float64 `json:"amplification"`
	UpstreamRequests    int64   `json:"upstream_requests"`
	AmplificationShared bool    `json:"amplification_shared,omitempty"`
	// UpstreamCostUSD is what the simulator billed for this target's calls
	// (0 when unknown).
	UpstreamCostUSD float64 `json:"upstream_cost_usd"`
	InvalidJSON     int64   `json:"invalid_json"`

	// Latency and TTFT are the full histograms; Series the latency over
	// time. Not in the JSON.
	Latency *Histogram `json:"-"`
	TTFT    *Histogram `json:"-"`
	Series  []Window   `json:"-"`

	direct bool
	cost   float64 // client-side priced usage, for direct targets
}

// Window is one time slice of a run.
type Window struct {
	Start    time.Duration
	P50, P99 time.Duration
	Calls    int64
	Errors   int64
}

// ms converts to fractional milliseconds, rounded to the microsecond.
func ms(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }

// recorder accumulates one target's outcomes.
type recorder struct {
	t           Target
	caller      *caller
	outstanding atomic.Int64
	sent        atomic.Int64
	dropped     atomic.Int64
	failed      atomic.Int64

	mu      sync.Mutex // guards following
	lat     Histogram
	ttft    Histogram
	kinds   map[string]int64
	ok      int64
	windows []*Histogram
	werrs   []int64
	wcalls  []int64
	cost    float64
}

func (r *recorder) record(o outcome, start, intended time.Time, window time.Duration, d time.Duration, prices map[string]sim.Price, model string) {
	wi := -1
	if window > 0 {
		wi = int(intended.Sub(start) / window)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o.answered && prices != nil {
		p := prices[model]
		r.cost += (float64(o.usage.InputTokens)*p.InputPerMTok + float64(o.usage.OutputTokens)*p.OutputPerMTok) / 1e6
	}
	if wi >= 0 && wi < len(r.windows) {
		r.wcalls[wi]++
	}
	if o.kind != "" {
		r.kinds[o.kind]++
		r.failed.Add(1)
		if wi >= 0 && wi < len(r.windows) {
			r.werrs[wi]++
		}
		return
	}
	r.ok++
	r.lat.Record(d)
	if o.ttft > 0 {
		r.ttft.Record(o.ttft)
	}
	if wi >= 0 && wi < len(r.windows) {
		if r.windows[wi] == nil {
			r.windows[wi] = new(Histogram)
		}
		r.windows[wi].Record(d)
	}
}

// ErrBadOptions is returned (wrapped) for options Run cannot run.
var ErrBadOptions = errors.New("bad options")

// ErrUnreachable is returned (wrapped) when a target cannot be dialled.
var ErrUnreachable = errors.New("unreachable target")

// Run sends the load to every target until Duration has passed, waits for
// every call to finish, restores the simulator and returns the figures.
func Run(ctx context.Context, opt Options) (*Result, error) {
	if len(opt.Targets) == 0 {
		return nil, fmt.Errorf("%w: no target", ErrBadOptions)
	}
	if opt.Duration <= 0 {
		return nil, fmt.Errorf("%w: duration must be positive", ErrBadOptions)
	}
	if opt.Rate <= 0 && opt.Concurrency <= 0 {
		return nil, fmt.Errorf("%w: set a rate (open loop) or a concurrency (closed loop)", ErrBadOptions)
	}
	req := opt.Request
	req.applyDefaults()
	if err := req.validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	if len(opt.Timeline) > 0 && opt.Sim == nil {
		return nil, fmt.Errorf("%w: the scenario has a timeline but no simulator is known (pass --sim URL)", ErrBadOptions)
	}
	format := llm.ParseFormat(req.Format)
	if opt.Timeout <= 0 {
		opt.Timeout = 60 * time.Second
	}
	if opt.Windows <= 0 {
		opt.Windows = 60
	}
	var transports []*http.Transport
	defer func() {
		for _, t := range transports {
			t.CloseIdleConnections()
		}
	}()
	recs := make([]*recorder, len(opt.Targets))
	for i, t := range opt.Targets {
		if t.Name == "" {
			t.Name = t.URL
		}
		client := t.Client
		if client == nil {
			if err := checkReachable(ctx, t.URL); err != nil {
				return nil, fmt.Errorf("%w: target %s: %w", ErrUnreachable, t.Name, err)
			}
			tr := newTransport()
			transports = append(transports, tr)
			client = &http.Client{Transport: tr}
		}
		recs[i] = &recorder{
			t:       t,
			caller:  newCaller(client, endpointPath(t.URL, format), format, req.forTarget(t)),
			kinds:   map[string]int64{},
			windows: make([]*Histogram, opt.Windows),
			werrs:   make([]int64, opt.Windows),
			wcalls:  make([]int64, opt.Windows),
		}
	}

	var before sim.Stats
	if opt.Sim != nil {
		st, err := opt.Sim.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading simulator stats: %w", err)
		}
		before = st
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	start := time.Now()
	res := &Result{Rate: opt.Rate, Concurrency: opt.Concurrency, Mode: "open"}
	if opt.Rate <= 0 {
		res.Mode = "closed"
	}

	var tlErr error
	tlDone := make(chan struct{})
	go func() {
		defer close(tlDone)
		res.Actions, tlErr = playTimeline(runCtx, opt.Sim, opt.Timeline, start)
		if tlErr != nil {
			cancel()
		}
	}()
	progDone := make(chan struct{})
	progStop := make(chan struct{})
	go func() {
		defer close(progDone)
		progress(opt, recs, start, progStop)
	}()

	window := opt.Duration / time.Duration(opt.Windows)
	var wg sync.WaitGroup
	var seq atomic.Uint64
	send := func(r *recorder, intended time.Time) {
		n := seq.Add(1)
		cctx, ccancel := context.WithTimeout(runCtx, opt.Timeout)
		o := r.caller.call(cctx, n, intended)
		ccancel()
		r.record(o, start, intended, window, time.Since(intended), opt.Prices, r.caller.req.Model)
	}
	if opt.Rate > 0 {
		openLoop(runCtx, opt, recs, start, &wg, send)
	} else {
		closedLoop(runCtx, opt, recs, start, &wg, send)
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(progStop)
	<-progDone
	cancel()
	<-tlDone
	restore(ctx, opt.Sim, opt.Timeline)
	if tlErr != nil {
		return nil, tlErr
	}
	res.DurationS = math.Round(elapsed.Seconds()*1000) / 1000
	for _, r := range recs {
		res.Targets = append(res.Targets, r.result(elapsed, window))
	}
	if opt.Sim != nil {
		after, err := opt.Sim.Stats(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading simulator stats: %w", err)
		}
		attribute(res.Targets, before, after, opt.Prices != nil)
	}
	return res, nil
}

// newTransport is a keep-alive transport sized for thousands of calls in
// flight to one host.
func newTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 8192,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
}

// openLoop issues calls at fixed intervals until opt.Duration, each due at
// start + i·interval whatever happened to earlier calls, round-robin over
// the targets.
func openLoop(ctx context.Context, opt Options, recs []*recorder, start time.Time, wg *sync.WaitGroup, send func(*recorder, time.Time)) {
	total := opt.Rate * float64(len(recs))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for i := 0; ; i++ {
		off := time.Duration(float64(i) * float64(time.Second) / total)
		if off >= opt.Duration {
			return
		}
		intended := start.Add(off)
		if d := time.Until(intended); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
		} else if ctx.Err() != nil {
			return
		}
		r := recs[i%len(recs)]
		if opt.ConcurrencyLimit > 0 && r.outstanding.Load() >= int64(opt.ConcurrencyLimit) {
			r.dropped.Add(1)
			continue
		}
		r.outstanding.Add(1)
		r.sent.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.outstanding.Add(-1)
			send(r, intended)
		}()
	}
}

// closedLoop runs opt.Concurrency clients per target, each sending its next
// call when the previous one ends, until opt.Duration.
func closedLoop(ctx context.Context, opt Options, recs []*recorder, start time.Time, wg *sync.WaitGroup, send func(*recorder, time.Time)) {
	end := start.Add(opt.Duration)
	for range opt.Concurrency {
		for _, r := range recs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					now := time.Now()
					if !now.Before(end) {
						return
					}
					r.outstanding.Add(1)
					r.sent.Add(1)
					send(r, now)
					r.outstanding.Add(-1)
				}
			}()
		}
	}
}

// playTimeline applies each step at its time and returns what it did.
func playTimeline(ctx context.Context, s Sim, tl []Action, start time.Time) ([]string, error) {
	var done []string
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for _, a := range tl {
		if d := time.Until(start.Add(a.At.D())); d > 0 {
			timer.Reset(d)
			select {
			case <-ctx.Done():
				return done, nil
			case <-timer.C:
			}
		}
		var err error
		switch {
		case a.RegionDown != "":
			err = s.SetRegionDown(ctx, a.RegionDown, true)
		case a.RegionUp != "":
			err = s.SetRegionDown(ctx, a.RegionUp, false)
		case a.Faults != nil:
			err = s.SetFaults(ctx, *a.Faults)
		}
		if err != nil {
			if ctx.Err() != nil {
				return done, nil
			}
			return done, fmt.Errorf("timeline %s: %w", a, err)
		}
		done = append(done, a.String())
	}
	return done, nil
}

// restore undoes a timeline: faults cleared, regions it took down brought
// up. Errors are ignored: the run's figures are already taken.
func restore(ctx context.Context, s Sim, tl []Action) {
	if s == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	for _, a := range tl {
		switch {
		case a.RegionDown != "":
			_ = s.SetRegionDown(ctx, a.RegionDown, false)
		case a.Faults != nil:
			_ = s.SetFaults(ctx, nil)
		}
	}
}

func (r *recorder) result(elapsed, window time.Duration) *TargetResult {
	r.mu.Lock()
	defer r.mu.Unlock()
	lat, ttft := r.lat, r.ttft
	tr := &TargetResult{
		Name:          r.t.Name,
		URL:           r.t.URL,
		Requests:      r.sent.Load(),
		Successes:     r.ok,
		Errors:        r.failed.Load(),
		ErrorsByKind:  map[string]int64{},
		Dropped:       r.dropped.Load(),
		P50Ms:         ms(lat.Quantile(0.50)),
		P90Ms:         ms(lat.Quantile(0.90)),
		P99Ms:         ms(lat.Quantile(0.99)),
		P999Ms:        ms(lat.Quantile(0.999)),
		MaxMs:         ms(lat.Max()),
		MeanMs:        ms(lat.Mean()),
		TTFTP50Ms:     ms(ttft.Quantile(0.50)),
		TTFTP99Ms:     ms(ttft.Quantile(0.99)),
		ThroughputRPS: math.Round(float64(r.ok)/elapsed.Seconds()*10) / 10,
		InvalidJSON:   r.kinds[KindInvalidJSON],
		Latency:       &lat,
		TTFT:          &ttft,
		direct:        r.t.Direct,
		cost:          r.cost,
	}
	for k, v := range r.kinds {
		tr.ErrorsByKind[k] = v
	}
	for i, h := range r.windows {
		w := Window{Start: time.Duration(i) * window, Calls: r.wcalls[i], Errors: r.werrs[i]}
		if h != nil {
			w.P50, w.P99 = h.Quantile(0.5), h.Quantile(0.99)
		}
		tr.Series = append(tr.Series, w)
	}
	return tr
}

// attribute splits the simulator's counters between the targets: a direct
// target made exactly its own calls upstream (and paid for what it was
// answered, priced client-side); the gateways made the rest. Cost stays 0
// when a direct target could not be priced.
func attribute(ts []*TargetResult, before, after sim.Stats, priced bool) {
	up := after.Total.Requests - before.Total.Requests
	cost := after.Total.CostUSD - before.Total.CostUSD
	var gw []*TargetResult
	var gwCalls int64
	costKnown := true
	for _, t := range ts {
		if t.direct {
			costKnown = costKnown && priced
			t.UpstreamRequests = t.Requests
			up -= t.Requests
			if priced {
				t.UpstreamCostUSD = t.cost
				cost -= t.cost
			}
			if t.Requests > 0 {
				t.Amplification = 1
			}
			continue
		}
		gw = append(gw, t)
		gwCalls += t.Requests
	}
	for _, t := range gw {
		t.UpstreamRequests, t.UpstreamCostUSD = up, max(cost, 0)
		t.AmplificationShared = len(gw) > 1
		if gwCalls > 0 {
			t.Amplification = math.Round(float64(up)/float64(gwCalls)*1000) / 1000
		}
	}
	if !costKnown {
		for _, t := range ts {
			t.UpstreamCostUSD = 0
		}
	}
}
