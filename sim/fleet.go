package sim

import (
	"context"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// Fleet is a running simulated provider fleet: one endpoint per model and
// region, each with its own FIFO queue, latency generator and counters.
// All methods are safe for concurrent use; the control methods
// (SetRegionDown, SetFaults, AddFault, Reset) take effect for calls that
// start after they return.
type Fleet struct {
	cfg      Config
	models   map[string]*ModelSpec
	regions  map[string]*region
	eps      map[epKey]*endpoint
	epList   []*endpoint
	handler  http.Handler
	inFlight atomic.Int64
	reqSeq   atomic.Uint64
	nFaults  atomic.Int32 // len(faults), read without the lock on the hot path
	stored   storedResponses
	tokens   tokens // the Google access tokens the token endpoint issued
	// caches holds the prompt caches of the models that have one, by
	// model and region ("" for a model's shared cache); built by New.
	caches map[epKey]*promptStore

	mu       sync.Mutex // guards following
	faults   []*activeFault
	faultRNG rng
}

type epKey struct{ model, region string }

type region struct {
	spec RegionSpec
	down atomic.Bool
}

// endpoint is one model in one region.
type endpoint struct {
	name   string // "model@region"
	model  *ModelSpec
	region *region
	lat    LatencySpec
	q      queue

	requests atomic.Int64
	inFlight atomic.Int64
	inTok    atomic.Int64
	outTok   atomic.Int64
	// cacheRead and cacheWrite count prompt tokens read from and written
	// to the prompt cache (not in inTok).
	cacheRead  atomic.Int64
	cacheWrite atomic.Int64
	// cache is the endpoint's prompt cache (nil without one).
	cache *promptStore

	mu  sync.Mutex // guards following
	rng rng
	// seen counts the calls of each conversation (its hash) the endpoint
	// has drawn for (Config.RequestDraws); cleared when it reaches
	// maxSeen.
	seen      map[uint64]uint64
	byStatus  map[int]int64
	byFault   map[string]int64
	tailHits  int64
	queued    int64 // calls that waited for a slot
	waitSum   time.Duration
	waitMax   time.Duration
	winStart  time.Time // rate-limit window
	winReset  string    // winStart + 1m in RFC 3339
	winCount  int
	winTokens int
	costMicro float64
}

// New builds a fleet from cfg after validating it.
func New(cfg Config) (*Fleet, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	f := &Fleet{
		cfg:      cloneConfig(cfg),
		models:   map[string]*ModelSpec{},
		regions:  map[string]*region{},
		eps:      map[epKey]*endpoint{},
		caches:   map[epKey]*promptStore{},
		faultRNG: newRNG(hashString(uint64(cfg.Seed), "faults")),
	}
	for i := range f.cfg.Regions {
		r := &f.cfg.Regions[i]
		f.regions[r.Name] = &region{spec: *r}
	}
	for i := range f.cfg.Models {
		m := &f.cfg.Models[i]
		f.models[m.Name] = m
		for _, rn := range m.Regions {
			r := f.regions[rn]
			ep := &endpoint{
				name:     m.Name + "@" + rn,
				model:    m,
				region:   r,
				lat:      r.spec.Latency.merge(m.Latency),
				byStatus: map[int]int64{},
				byFault:  map[string]int64{},
			}
			if pc := m.PromptCache; pc != nil {
				k := epKey{model: m.Name}
				if pc.PerRegion {
					k.region = rn
				}
				if f.caches[k] == nil {
					f.caches[k] = &promptStore{}
				}
				ep.cache = f.caches[k]
			}
			ep.q.limit = ep.lat.Concurrency
			ep.rng = newRNG(hashString(uint64(cfg.Seed), ep.name))
			f.eps[epKey{m.Name, rn}] = ep
			f.epList = append(f.epList, ep)
		}
	}
	f.setFaults(f.cfg.Faults)
	f.handler = f.routes()
	return f, nil
}

func cloneConfig(c Config) Config {
	c.Models = slices.Clone(c.Models)
	for i := range c.Models {
		c.Models[i].Regions = slices.Clone(c.Models[i].Regions)
		c.Models[i].Formats = slices.Clone(c.Models[i].Formats)
	}
	c.Regions = slices.Clone(c.Regions)
	c.Faults = slices.Clone(c.Faults)
	if c.Azure != nil {
		az := *c.Azure
		az.APIKeys, az.EntraTokens, az.Deployments = slices.Clone(az.APIKeys), slices.Clone(az.EntraTokens), maps.Clone(az.Deployments)
		c.Azure = &az
	}
	if c.Gemini != nil {
		g := *c.Gemini
		g.APIKeys = slices.Clone(g.APIKeys)
		c.Gemini = &g
	}
	c.Auth.AWS = slices.Clone(c.Auth.AWS)
	c.Auth.BedrockAPIKeys = slices.Clone(c.Auth.BedrockAPIKeys)
	c.Auth.Google = slices.Clone(c.Auth.Google)
	for i := range c.Models {
		if pc := c.Models[i].PromptCache; pc != nil {
			cp := *pc
			c.Models[i].PromptCache = &cp
		}
	}
	return c
}

// Config returns a copy of the configuration the fleet was built from
// (its Faults are the initial ones; see Faults for the active list).
func (f *Fleet) Config() Config { return cloneConfig(f.cfg) }

// Models returns the fleet's models in configuration order.
func (f *Fleet) Models() []ModelSpec { return cloneConfig(f.cfg).Models }

// Regions returns the fleet's region names in configuration order.
func (f *Fleet) Regions() []string {
	out := make([]string, len(f.cfg.Regions))
	for i, r := range f.cfg.Regions {
		out[i] = r.Name
	}
	return out
}

// Answer is the package-level Answer with the fleet's seed.
func (f *Fleet) Answer(req *llm.Request) *llm.Response { return Answer(f.cfg, req) }

// Handler returns the fleet's HTTP handler: the Anthropic and OpenAI APIs
// per region, the model lists, and the /sim control API.
func (f *Fleet) Handler() http.Handler { return f.handler }

// TransportHost is the host of the URLs BaseURL returns, meant for
// Transport (which ignores the host); it never resolves.
const TransportHost = "sim.invalid"

// BaseURL returns the SDK base URL of region for format, on TransportHost:
// for FormatAnthropic "http://sim.invalid/r/REGION", for FormatOpenAI the
// same plus "/v1". An empty region gives the unprefixed base, served from
// each model's first region.
func (f *Fleet) BaseURL(region string, format Format) string {
	return baseURL("http://"+TransportHost, region, format)
}

func baseURL(root, region string, format Format) string {
	if region != "" {
		root += "/r/" + region
	}
	if format == FormatOpenAI {
		root += "/v1"
	}
	return root
}

// SetRegionDown takes a region down (every call to it is reset at once, as
// a refused connection) or brings it back. It reports an error for an
// unknown region.
func (f *Fleet) SetRegionDown(name string, down bool) error {
	r := f.regions[name]
	if r == nil {
		return fmt.Errorf("sim: unknown region %q", name)
	}
	r.down.Store(down)
	return nil
}

// RegionDown reports whether a region is down.
func (f *Fleet) RegionDown(name string) bool {
	r := f.regions[name]
	return r != nil && r.down.Load()
}

// SetFaults replaces the active faults. It rejects the whole list, keeping
// the old one, if any fault is invalid.
func (f *Fleet) SetFaults(faults []Fault) error {
	for i := range faults {
		if err := faults[i].validate(); err != nil {
			return fmt.Errorf("sim: faults[%d]: %w", i, err)
		}
	}
	f.setFaults(faults)
	return nil
}

func (f *Fleet) setFaults(faults []Fault) {
	afs := make([]*activeFault, len(faults))
	for i, fl := range faults {
		afs[i] = &activeFault{Fault: fl, left: fl.Count}
	}
	f.mu.Lock()
	f.faults = afs
	f.nFaults.Store(int32(len(afs)))
	f.mu.Unlock()
}

// AddFault appends a fault to the active list.
func (f *Fleet) AddFault(fl Fault) error {
	if err := fl.validate(); err != nil {
		return fmt.Errorf("sim: %w", err)
	}
	f.mu.Lock()
	f.faults = append(f.faults, &activeFault{Fault: fl, left: fl.Count})
	f.nFaults.Store(int32(len(f.faults)))
	f.mu.Unlock()
	return nil
}

// Faults returns the active faults; a counted fault's Count is the number of
// hits it has left.
func (f *Fleet) Faults() []Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]Fault, len(f.faults))
	for i, af := range f.faults {
		out[i] = af.Fault
		if af.Count > 0 {
			out[i].Count = af.left
		}
	}
	return out
}

// pickFault returns the fault that hits a call, or nil, consuming one hit
// of a counted fault.
func (f *Fleet) pickFault(c *callInfo) *Fault {
	if f.nFaults.Load() == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, af := range f.faults {
		if !af.matches(c) {
			continue
		}
		if af.Rate > 0 && af.Rate < 1 && f.faultRNG.float() >= af.Rate {
			continue
		}
		hit := af.Fault
		if af.Count > 0 {
			af.left--
			if af.left == 0 {
				f.faults = slices.Delete(f.faults, i, i+1)
				f.nFaults.Store(int32(len(f.faults)))
			}
		}
		return &hit
	}
	return nil
}

// InFlight returns the number of calls the fleet is serving or queueing.
func (f *Fleet) InFlight() int64 { return f.inFlight.Load() }

// Stats is a snapshot of the fleet's counters.
type Stats struct {
	Endpoints []EndpointStats `json:"endpoints"`
	// Total sums the endpoints (Endpoint, Model and Region are empty).
	Total EndpointStats `json:"total"`
}

// EndpointStats counts the calls of one endpoint since the fleet started or
// was Reset.
type EndpointStats struct {
	Endpoint string `json:"endpoint,omitempty"`
	Model    string `json:"model,omitempty"`
	Region   string `json:"region,omitempty"`
	Requests int64  `json:"requests"`
	// InFlight counts calls being served or waiting for a slot now.
	InFlight int64 `json:"in_flight"`
	// ByStatus counts answers by HTTP status (calls that were reset or hung
	// have none).
	ByStatus map[int]int64 `json:"by_status"`
	// ByFault counts calls hit by each fault kind ("region_down" for calls
	// to a region that was down).
	ByFault map[string]int64 `json:"by_fault"`
	// TailHits counts calls the heavy tail slowed down.
	TailHits int64 `json:"tail_hits"`
	// Queued counts calls that waited for a slot; QueueWait sums and
	// QueueWaitMax bounds their waits.
	Queued       int64    `json:"queued"`
	QueueWait    Duration `json:"queue_wait"`
	QueueWaitMax Duration `json:"queue_wait_max"`
	InputTokens  int64    `json:"input_tokens"`
	OutputTokens int64    `json:"output_tokens"`
	// CacheReadTokens and CacheWriteTokens are the prompt tokens read from
	// and written to the prompt cache (see PromptCache), not counted in
	// InputTokens.
	CacheReadTokens  int64 `json:"cache_read_tokens,omitempty"`
	CacheWriteTokens int64 `json:"cache_write_tokens,omitempty"`
	// CostUSD prices the tokens served at the model's price: cache reads
	// at a tenth of the input price, 5-minute writes at 1.25× and 1-hour
	// writes at 2×, as Anthropic prices them (pricing's built-in entries
	// for the simulator's models say the same).
	CostUSD float64 `json:"cost_usd"`
}

func (s *EndpointStats) add(o *EndpointStats) {
	s.Requests += o.Requests
	s.InFlight += o.InFlight
	for k, v := range o.ByStatus {
		s.ByStatus[k] += v
	}
	for k, v := range o.ByFault {
		s.ByFault[k] += v
	}
	s.TailHits += o.TailHits
	s.Queued += o.Queued
	s.QueueWait += o.QueueWait
	s.QueueWaitMax = max(s.QueueWaitMax, o.QueueWaitMax)
	s.InputTokens += o.InputTokens
	s.OutputTokens += o.OutputTokens
	s.CacheReadTokens += o.CacheReadTokens
	s.CacheWriteTokens += o.CacheWriteTokens
	s.CostUSD += o.CostUSD
}

// Stats returns a snapshot of every endpoint's counters, in configuration
// order (models, then their regions), and their totals.
func (f *Fleet) Stats() Stats {
	st := Stats{Total: EndpointStats{ByStatus: map[int]int64{}, ByFault: map[string]int64{}}}
	for _, ep := range f.epList {
		s := ep.stats()
		st.Total.add(&s)
		st.Endpoints = append(st.Endpoints, s)
	}
	return st
}

// Endpoint returns the stats of one endpoint, and false if the fleet has no
// such endpoint.
func (f *Fleet) Endpoint(model, region string) (EndpointStats, bool) {
	ep := f.eps[epKey{model, region}]
	if ep == nil {
		return EndpointStats{}, false
	}
	return ep.stats(), true
}

func (ep *endpoint) stats() EndpointStats {
	s := EndpointStats{
		Endpoint:         ep.name,
		Model:            ep.model.Name,
		Region:           ep.region.spec.Name,
		Requests:         ep.requests.Load(),
		InFlight:         ep.inFlight.Load(),
		InputTokens:      ep.inTok.Load(),
		OutputTokens:     ep.outTok.Load(),
		CacheReadTokens:  ep.cacheRead.Load(),
		CacheWriteTokens: ep.cacheWrite.Load(),
		ByStatus:         map[int]int64{},
		ByFault:          map[string]int64{},
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	for k, v := range ep.byStatus {
		s.ByStatus[k] = v
	}
	for k, v := range ep.byFault {
		s.ByFault[k] = v
	}
	s.TailHits = ep.tailHits
	s.Queued = ep.queued
	s.QueueWait = Duration(ep.waitSum)
	s.QueueWaitMax = Duration(ep.waitMax)
	s.CostUSD = ep.costMicro / 1e6
	return s
}

// Reset zeroes the counters (not the in-flight gauges, which stay live).
// Faults, regions and random generators are left as they are.
func (f *Fleet) Reset() {
	for _, ep := range f.epList {
		ep.requests.Store(0)
		ep.inTok.Store(0)
		ep.outTok.Store(0)
		ep.cacheRead.Store(0)
		ep.cacheWrite.Store(0)
		ep.mu.Lock()
		clear(ep.byStatus)
		clear(ep.byFault)
		ep.tailHits, ep.queued, ep.waitSum, ep.waitMax, ep.costMicro = 0, 0, 0, 0, 0
		ep.mu.Unlock()
	}
}

func (ep *endpoint) recordStatus(code int) {
	ep.mu.Lock()
	ep.byStatus[code]++
	ep.mu.Unlock()
}

func (ep *endpoint) recordFault(kind string) {
	ep.mu.Lock()
	ep.byFault[kind]++
	ep.mu.Unlock()
}

func (ep *endpoint) recordWait(d time.Duration) {
	ep.mu.Lock()
	ep.queued++
	ep.waitSum += d
	ep.waitMax = max(ep.waitMax, d)
	ep.mu.Unlock()
}

// recordOK records a complete non-streaming answer: its status and its
// tokens, under one lock.
func (ep *endpoint) recordOK(u *llm.Usage) {
	ep.addTokens(u)
	ep.mu.Lock()
	ep.byStatus[http.StatusOK]++
	ep.costMicro += ep.costMicroOf(u)
	ep.mu.Unlock()
}

func (ep *endpoint) recordTokens(u *llm.Usage) {
	ep.addTokens(u)
	ep.mu.Lock()
	ep.costMicro += ep.costMicroOf(u)
	ep.mu.Unlock()
}

func (ep *endpoint) addTokens(u *llm.Usage) {
	ep.inTok.Add(int64(u.InputTokens))
	ep.outTok.Add(int64(u.OutputTokens))
	if u.CacheReadTokens != 0 || u.CacheWriteTokens != 0 {
		ep.cacheRead.Add(int64(u.CacheReadTokens))
		ep.cacheWrite.Add(int64(u.CacheWriteTokens))
	}
}

// costMicroOf is u's cost in millionths of a dollar (see
// EndpointStats.CostUSD).
func (ep *endpoint) costMicroOf(u *llm.Usage) float64 {
	p := &ep.model.Price
	w1h := u.CacheWrite1h()
	return float64(u.InputTokens)*p.InputPerMTok + float64(u.OutputTokens)*p.OutputPerMTok +
		float64(u.CacheReadTokens)*p.CacheReadPerMTok() + float64(u.CacheWriteTokens-w1h)*p.CacheWrite5mPerMTok() +
		float64(w1h)*p.CacheWrite1hPerMTok()
}

// rateWindow counts a call of tokens in the current one-minute rate-limit
// window and returns the window's calls, its tokens and when it resets, as a
// time and in RFC 3339 (UTC).
func (ep *endpoint) rateWindow(now time.Time, tokens int) (int, int, time.Time, string) {
	ep.mu.Lock()
	defer ep.mu.Unlock()
	if now.Sub(ep.winStart) >= time.Minute || now.Before(ep.winStart) {
		ep.winStart, ep.winCount, ep.winTokens = now, 0, 0
		ep.winReset = now.Add(time.Minute).UTC().Format(time.RFC3339)
	}
	ep.winCount++
	ep.winTokens += tokens
	return ep.winCount, ep.winTokens, ep.winStart.Add(time.Minute), ep.winReset
}

// maxSeen bounds an endpoint's count of conversations for
// Config.RequestDraws (a long-running fleet forgets, and starts counting
// again).
const maxSeen = 1 << 16

// callRNG is the generator of one call of conversation h on the endpoint
// (Config.RequestDraws): seeded by h and by how many calls of it came
// before. Called with ep.mu held.
func (ep *endpoint) callRNG(seed int64, h uint64) rng {
	if ep.seen == nil || len(ep.seen) >= maxSeen {
		ep.seen = map[uint64]uint64{}
	}
	n := ep.seen[h]
	ep.seen[h] = n + 1
	return newRNG(hashString(uint64(seed)^h^(n+1)*0x9e3779b97f4a7c15, ep.name))
}

// draw returns the time to first token and the tail factor of one call of
// conversation h: from the call's own generator when perCall
// (Config.RequestDraws), else from the endpoint's.
func (ep *endpoint) draw(seed int64, perCall bool, h uint64) (time.Duration, float64) {
	l := &ep.lat
	if l.TTFTSigma == 0 && l.TailProb == 0 {
		return l.TTFT.D(), 1
	}
	ep.mu.Lock()
	defer ep.mu.Unlock()
	r := &ep.rng
	if perCall {
		cr := ep.callRNG(seed, h)
		r = &cr
	}
	ttft := l.TTFT.D()
	if l.TTFTSigma > 0 && ttft > 0 {
		ttft = time.Duration(float64(ttft) * math.Exp(l.TTFTSigma*r.normal()))
	}
	factor := 1.0
	if l.TailProb > 0 && r.float() < l.TailProb {
		factor = l.TailFactor
		ep.tailHits++
	}
	return ttft, factor
}

// normal returns a standard normal draw (Box–Muller).
func (r *rng) normal() float64 {
	u1 := 1 - r.float() // (0, 1]
	u2 := r.float()
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
}

// queue is a counting semaphore that admits waiters in FIFO order.
type queue struct {
	limit int // 0 = unlimited

	mu      sync.Mutex // guards following
	busy    int
	waiters []chan struct{}
}

// acquire takes a slot, waiting in line while all are busy; it reports
// whether it had to wait, and how long. A cancelled ctx leaves the line at
// once.
func (q *queue) acquire(ctx context.Context) (waited bool, wait time.Duration, err error) {
	if q.limit == 0 {
		return false, 0, nil
	}
	q.mu.Lock()
	if q.busy < q.limit && len(q.waiters) == 0 {
		q.busy++
		q.mu.Unlock()
		return false, 0, nil
	}
	start := time.Now()
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	q.mu.Unlock()
	select {
	case <-ch:
		return true, time.Since(start), nil
	case <-ctx.Done():
		q.mu.Lock()
		if i := slices.Index(q.waiters, ch); i >= 0 {
			q.waiters = slices.Delete(q.waiters, i, i+1)
			q.mu.Unlock()
			return true, time.Since(start), ctx.Err()
		}
		q.mu.Unlock()
		// The slot was handed over as ctx ended: pass it on.
		q.release()
		return true, time.Since(start), ctx.Err()
	}
}

// release frees a slot, handing it to the first waiter if there is one.
func (q *queue) release() {
	if q.limit == 0 {
		return
	}
	q.mu.Lock()
	if len(q.waiters) > 0 {
		ch := q.waiters[0]
		q.waiters = slices.Delete(q.waiters, 0, 1)
		close(ch)
	} else {
		q.busy--
	}
	q.mu.Unlock()
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
