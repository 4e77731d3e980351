// Package report builds Keel's transparency report from the request log:
// what the mesh did to the traffic (fragmentation, fallbacks, normalisation,
// hedging and retries), what it cost, and how fast it was, hour by hour.
//
// Build reads the log once and holds only aggregates plus one float per
// request for the latency percentiles. A *Report is plain data: safe to read
// concurrently, and rendered as JSON, Markdown or self-contained HTML with
// inline SVG charts (Render).
package report

import (
	"cmp"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"

	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

// Report is the transparency report. Every figure is computed from the
// request log's rows that started at or after Since; ratios are 0 when their
// denominator is.
type Report struct {
	GeneratedAt time.Time `json:"generated_at"`
	Since       time.Time `json:"since"`
	// First and Last are the earliest and latest request start (nil when
	// there are no requests).
	First    *time.Time `json:"first_request,omitempty"`
	Last     *time.Time `json:"last_request,omitempty"`
	Requests int        `json:"requests"`
	Streamed int        `json:"streamed"`
	// Stages counts requests by rollout stage ("" in logs written before
	// the stage was recorded).
	Stages []Count `json:"stages"`
	// PlainPath counts the calls sent on the plain path to the route's
	// primary model, and why.
	PlainPath PlainPath `json:"plain_path"`

	Fragmentation Fragmentation `json:"fragmentation"`
	Fallbacks     Fallbacks     `json:"fallbacks"`
	Normalization Normalization `json:"normalization"`
	Latency       Latency       `json:"latency"`
	Amplification Amplification `json:"amplification"`
	Cost          Cost          `json:"cost"`
	// Spend is what each virtual key and team spent.
	Spend Spend `json:"spend"`
	// Errors counts failed requests (HTTP status ≥ 400 or a mesh error
	// code) by mesh_error_code and the HTTP status the client got; code ""
	// is an upstream error passed through without a mesh code.
	Errors      []ErrorCount `json:"errors"`
	ErrorsTotal int          `json:"errors_total"`
	// AttemptErrors counts the failed upstream attempts (of served and
	// failed requests alike) by outcome and upstream HTTP status (0: none,
	// as for a timeout or a reset).
	AttemptErrors []AttemptError `json:"attempt_errors"`
	// Audit is the personal-data audit log's summary over the same window
	// (nil when no audit log was read).
	Audit *Audit `json:"audit,omitempty"`
}

// Audit summarises the personal-data audit log: how many values of each
// kind were found, under which action and with which outcome, and in how
// many calls. It never holds a value.
type Audit struct {
	// Requests is the calls with audit rows; Values the values found.
	Requests int `json:"requests"`
	Values   int `json:"values"`
	// Failures is the calls whose detection failed (refused or sent
	// unscanned under fail_open).
	Failures int                 `json:"detection_failures"`
	Counts   []sqlite.AuditCount `json:"counts"`
}

// NewAudit summarises counts (AuditReader.Summary) over requests calls.
func NewAudit(requests int, counts []sqlite.AuditCount) *Audit {
	a := &Audit{Requests: requests, Counts: counts}
	for _, c := range counts {
		if c.Kind == "" {
			a.Failures += c.Requests
			continue
		}
		a.Values += c.Values
	}
	if a.Counts == nil {
		a.Counts = []sqlite.AuditCount{}
	}
	return a
}

// PlainPath is the calls that took the plain path to the route's primary
// model (no hedging, fragmentation or continuation). The rollout's monitor
// stage sends every call so by design; the safety valve only while open.
type PlainPath struct {
	Total int `json:"total"`
	// Monitor is the calls of the rollout's monitor stage.
	Monitor int `json:"rollout_monitor"`
	// ValveOpen is the calls of the hedging or full stage the open safety
	// valve sent on the plain path.
	ValveOpen int `json:"safety_valve_open"`
	// Unattributed is the plain-path calls of logs written before the stage
	// was recorded: monitor stage or open valve, the log cannot tell.
	Unattributed int `json:"unattributed"`
}

// ErrorCount is the failed requests of one mesh_error_code and status.
type ErrorCount struct {
	Code   string `json:"mesh_error_code"`
	Status int    `json:"status"`
	N      int    `json:"n"`
	// Share is N's share of all requests.
	Share float64 `json:"share"`
}

// AttemptError is the failed upstream attempts of one outcome and status.
type AttemptError struct {
	Outcome string `json:"outcome"`
	Status  int    `json:"status"`
	N       int    `json:"n"`
}

// Count is a labelled count.
type Count struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// Fragmentation is how many requests were split into fragments.
type Fragmentation struct {
	Requests        int     `json:"requests"`
	Share           float64 `json:"share"`
	FragmentsSent   int     `json:"fragments_sent"`
	FragmentsOK     int     `json:"fragments_ok"`
	Fusions         int     `json:"fusions"`
	FusionConflicts int     `json:"fusion_conflicts"`
}

// Fallbacks counts requests whose first choice did not serve.
type Fallbacks struct {
	Total    int     `json:"total"`
	Rate     float64 `json:"rate"`
	ByReason []Count `json:"by_reason"`
	// ByModelRegion is keyed by the first choice's model and region (the
	// endpoint fallen back from).
	ByModelRegion []ModelRegionCount `json:"by_model_region"`
}

// ModelRegionCount is a count per model and region.
type ModelRegionCount struct {
	Model  string `json:"model"`
	Region string `json:"region"`
	N      int    `json:"n"`
}

// Normalization is the distribution of the temperature offsets the
// normaliser applied (serving − requested) over compensated requests.
type Normalization struct {
	// Compensated is the number of requests with a non-zero offset.
	Compensated int     `json:"compensated"`
	Share       float64 `json:"share"`
	Min         float64 `json:"min"`
	Max         float64 `json:"max"`
	Mean        float64 `json:"mean"`
	BinWidth    float64 `json:"bin_width"`
	Histogram   []Bin   `json:"histogram"`
}

// Bin is one histogram bin [Lo, Hi).
type Bin struct {
	Lo float64 `json:"lo"`
	Hi float64 `json:"hi"`
	N  int     `json:"n"`
}

// Latency holds end-to-end request latency percentiles in milliseconds
// (nearest-rank), overall and per UTC hour.
type Latency struct {
	Overall Percentiles   `json:"overall"`
	Hourly  []HourLatency `json:"hourly"`
}

// Percentiles are nearest-rank percentiles in milliseconds.
type Percentiles struct {
	P50 float64 `json:"p50_ms"`
	P95 float64 `json:"p95_ms"`
	P99 float64 `json:"p99_ms"`
}

// HourLatency is the latency of the requests that started in one UTC hour.
type HourLatency struct {
	Hour     time.Time `json:"hour"`
	Requests int       `json:"requests"`
	Percentiles
}

// Amplification is upstream attempts per client request.
type Amplification struct {
	Attempts   int         `json:"attempts"`
	PerRequest float64     `json:"per_request"`
	ByKind     []KindCount `json:"by_kind"`
	Retries    int         `json:"retries"`
	Hedges     int         `json:"hedges"`
	Hedged     int         `json:"hedged_requests"`
	HedgesWon  int         `json:"hedges_won"`
	Recovered  int         `json:"recovered"`
	Outcomes   []Count     `json:"attempt_outcomes"`
}

// KindCount is the attempts of one kind (primary, retry, hedge, fallback,
// continuation) and their share of amplification.
type KindCount struct {
	Kind       string  `json:"kind"`
	Attempts   int     `json:"attempts"`
	PerRequest float64 `json:"per_request"`
}

// Cost is upstream cost in USD. RecordedUSD is the answers' cost: the
// engine's figure for a call (its answer's usage at the serving endpoint's
// price), but for a fragmented call the answering attempts' own costs (one
// replica per fragment and the merge call), as the engine's figure counts
// every replica's usage. The overheads are each extra attempt's own usage
// at its own endpoint's price, as the request log records it.
type Cost struct {
	RecordedUSD float64 `json:"recorded_usd"`
	// HedgeOverheadUSD is the cost of the attempts that lost a hedge race
	// (outcome "cancelled_loser", or none when the call finished first).
	HedgeOverheadUSD float64 `json:"hedge_overhead_usd"`
	HedgeLosers      int     `json:"hedge_losers"`
	// RedundancyOverheadUSD is the cost of the other attempts whose answer
	// the client did not get: fragment replicas beyond a fragment's first
	// answer, unused merge calls, failed attempts retried or fallen back
	// from.
	RedundancyOverheadUSD float64 `json:"redundancy_overhead_usd"`
	RedundantAttempts     int     `json:"redundant_attempts"`
	TotalUSD              float64 `json:"total_usd"`
	// UnpricedAttempts are extra attempts of logs written before
	// per-attempt usage was recorded: their cost is unknown and not
	// included.
	UnpricedAttempts int `json:"unpriced_attempts"`
	// FallbackUSD is the cost of the attempts sent to a fallback endpoint
	// (kind "fallback"): the prompt each re-sent elsewhere and its answer,
	// already in the sums above (as an answer, or redundancy when it
	// failed in turn); FallbackAttempts counts them.
	FallbackUSD      float64 `json:"fallback_usd"`
	FallbackAttempts int     `json:"fallback_attempts"`
	// CacheReadTokens and CacheWriteTokens are the answers' prompt tokens
	// the providers read from and wrote to their prompt caches,
	// CacheWrite1hTokens the part of the writes with the 1-hour TTL.
	// CacheSavedUSD is what the reads saved against the same tokens sent
	// uncached, less the writes' premium over the input price, at each
	// serving model's price (Options.Prices), each TTL's writes at their
	// price (rows of logs written before the split was kept at the
	// 5-minute price); CacheUnpriced counts the requests with cache tokens
	// whose model has no price (not included).
	CacheReadTokens    int64       `json:"cache_read_tokens"`
	CacheWriteTokens   int64       `json:"cache_write_tokens"`
	CacheWrite1hTokens int64       `json:"cache_write_1h_tokens"`
	CacheSavedUSD      float64     `json:"cache_saved_usd"`
	CacheUnpriced      int         `json:"cache_unpriced_requests"`
	ByModel            []ModelCost `json:"by_model"`
	Note               string      `json:"note"`
}

// Spend is the calls' cost by virtual key and by team: each call's
// engine figure (every attempt: the answer, hedges, redundancy, re-asks),
// the figure its key's budget was charged. Calls without a key are under
// key "" and team "".
type Spend struct {
	TotalUSD float64     `json:"total_usd"`
	ByKey    []KeySpend  `json:"by_key"`
	ByTeam   []TeamSpend `json:"by_team"`
}

// KeySpend is the spend of one key.
type KeySpend struct {
	Key      string  `json:"key"`
	Team     string  `json:"team"`
	Requests int     `json:"requests"`
	USD      float64 `json:"usd"`
}

// TeamSpend is the spend of one team's keys.
type TeamSpend struct {
	Team     string  `json:"team"`
	Keys     int     `json:"keys"`
	Requests int     `json:"requests"`
	USD      float64 `json:"usd"`
}

// Keyed reports whether any call was made with a virtual key.
func (s Spend) Keyed() bool {
	for _, k := range s.ByKey {
		if k.Key != "" {
			return true
		}
	}
	return false
}

// ModelCost is Cost for the requests served by one model ("unserved: M" for
// failed requests that asked for M).
type ModelCost struct {
	Model                 string  `json:"model"`
	Requests              int     `json:"requests"`
	RecordedUSD           float64 `json:"recorded_usd"`
	HedgeOverheadUSD      float64 `json:"hedge_overhead_usd"`
	RedundancyOverheadUSD float64 `json:"redundancy_overhead_usd"`
	TotalUSD              float64 `json:"total_usd"`
	// OverheadShare is the overheads' share of TotalUSD.
	OverheadShare float64 `json:"overhead_share"`
	// FallbackUSD and CacheSavedUSD are Cost's, for this model.
	FallbackUSD   float64 `json:"fallback_usd"`
	CacheSavedUSD float64 `json:"cache_saved_usd"`
}

// lookupPrice is prices(model) when both are there.
func lookupPrice(prices func(string) (pricing.Price, bool), model string) (pricing.Price, bool) {
	if prices == nil || model == "" {
		return pricing.Price{}, false
	}
	return prices(model)
}

// CostNote is the caveat every rendering of the cost section carries.
const CostNote = "Overheads are each extra attempt's own tokens at its endpoint's price. An attempt cancelled before its answer was complete (most hedge losers) reports no usage and counts $0, though a provider may bill what it had generated; a failed attempt is billed nothing."

// Options configure Build.
type Options struct {
	// Since is the start of the window (only rows at or after it are read).
	Since time.Time
	// Now stamps GeneratedAt (default time.Now).
	Now func() time.Time
	// Prices prices a served model, for what the prompt cache saved (nil:
	// not priced, CacheSavedUSD 0).
	Prices func(model string) (pricing.Price, bool)
}

// binTarget is the most normalisation histogram bins before widening.
const (
	binBase   = 0.05
	binTarget = 40
)

// kindOrder is the display order of attempt kinds; others follow by name.
var kindOrder = []string{"primary", "retry", "hedge", "fallback", "continuation"}

// Build reads rows (typically Reader.Query(ctx, opt.Since)) and computes the
// report. It stops at the first error rows yields.
func Build(rows iter.Seq2[*sqlite.Row, error], opt Options) (*Report, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	r := &Report{GeneratedAt: now().UTC(), Since: opt.Since.UTC()}
	var (
		all         []float64
		hourly      = map[time.Time][]float64{}
		reasons     = map[string]int{}
		fromMR      = map[[2]string]int{}
		errs        = map[errKey]int{}
		attErrs     = map[attKey]int{}
		stages      = map[string]int{}
		outcomes    = map[string]int{}
		byKind      = map[string]int{}
		models      = map[string]*ModelCost{}
		byKey       = map[[2]string]*KeySpend{}
		offsets     []float64
		offsetSum   float64
		first, last time.Time
	)
	for row, err := range rows {
		if err != nil {
			return nil, err
		}
		if row.Start.Before(opt.Since) {
			continue
		}
		r.Requests++
		if first.IsZero() || row.Start.Before(first) {
			first = row.Start
		}
		if row.Start.After(last) {
			last = row.Start
		}
		if row.Stream {
			r.Streamed++
		}
		stages[row.Stage]++
		if row.Legacy {
			p := &r.PlainPath
			p.Total++
			switch row.Stage {
			case "monitor":
				p.Monitor++
			case "":
				p.Unattributed++
			default:
				p.ValveOpen++
			}
		}
		msec := float64(row.Duration) / float64(time.Millisecond)
		all = append(all, msec)
		h := row.Start.UTC().Truncate(time.Hour)
		hourly[h] = append(hourly[h], msec)

		f := &r.Fragmentation
		if row.Fragments > 0 {
			f.Requests++
		}
		f.FragmentsSent += row.Fragments
		f.FragmentsOK += row.FragmentsOK
		f.Fusions += row.Fusions
		f.FusionConflicts += row.FusionConflicts

		if row.Fallback != "" {
			r.Fallbacks.Total++
			reasons[row.Fallback]++
			m, reg := row.Model, ""
			if len(row.Attempts) > 0 {
				if a := row.Attempts[0]; a.Model != "" {
					m = a.Model
				}
				reg = row.Attempts[0].Region
			}
			fromMR[[2]string{m, reg}]++
		}

		if o := row.NormalizationOffset; o != 0 {
			offsets = append(offsets, o)
			offsetSum += o
		}

		if row.Status >= 400 || row.MeshErrorCode != "" {
			r.ErrorsTotal++
			errs[errKey{row.MeshErrorCode, row.Status}]++
		}

		a := &r.Amplification
		a.Attempts += len(row.Attempts)
		a.Retries += row.Retries
		a.Hedges += row.Hedges
		if row.Hedges > 0 {
			a.Hedged++
		}
		if row.HedgeWon {
			a.HedgesWon++
		}
		a.Recovered += row.Recovered

		key := row.ServedModel
		if key == "" {
			key = "unserved: " + row.Model
		}
		mc := models[key]
		if mc == nil {
			mc = &ModelCost{Model: key}
			models[key] = mc
		}
		mc.Requests++
		ks := byKey[[2]string{row.KeyID, row.Team}]
		if ks == nil {
			ks = &KeySpend{Key: row.KeyID, Team: row.Team}
			byKey[[2]string{row.KeyID, row.Team}] = ks
		}
		ks.Requests++
		ks.USD += row.CostUSD
		answer, answers, recorded, overhead := row.CostUSD, 0.0, false, 0.0
		if row.TokensCacheRead != 0 || row.TokensCacheWrite != 0 {
			r.Cost.CacheReadTokens += int64(row.TokensCacheRead)
			r.Cost.CacheWriteTokens += int64(row.TokensCacheWrite)
			w5m, w1h := row.TokensCacheWrite5m, row.TokensCacheWrite1h
			r.Cost.CacheWrite1hTokens += int64(w1h)
			if p, ok := lookupPrice(opt.Prices, row.ServedModel); ok {
				mc.CacheSavedUSD += p.Bill(pricing.Tokens{CacheRead: row.TokensCacheRead, CacheWrite5m: w5m, CacheWrite1h: w1h}).CacheSaved
			} else {
				r.Cost.CacheUnpriced++
			}
		}
		for _, at := range row.Attempts {
			byKind[at.Kind]++
			if at.Kind == "fallback" {
				r.Cost.FallbackAttempts++
				mc.FallbackUSD += at.CostUSD
			}
			outcomes[at.Outcome]++
			recorded = recorded || at.UsageRecorded
			if failed(at.Outcome) {
				attErrs[attKey{at.Outcome, at.Status}]++
			}
			// The attempts whose answer the client got: the winner of a
			// race or of a fragment, else any that succeeded (a call
			// without a race marks no winner).
			used := at.Winner || row.Fragments == 0 && at.Outcome == "ok"
			switch {
			case used:
				answers += at.CostUSD
			case !at.UsageRecorded:
				r.Cost.UnpricedAttempts++
			case at.Outcome == "cancelled_loser" || at.Outcome == "":
				// An attempt without an outcome was still in flight or had
				// just answered when the race was decided: a loser too.
				mc.HedgeOverheadUSD += at.CostUSD
				overhead += at.CostUSD
				r.Cost.HedgeLosers++
			default:
				mc.RedundancyOverheadUSD += at.CostUSD
				overhead += at.CostUSD
				r.Cost.RedundantAttempts++
			}
		}
		switch {
		case row.Fragments > 0 && recorded:
			answer = answers
		case recorded:
			// The engine's figure sums every attempt: the answer is what
			// is left once the overheads, counted apart, are taken out.
			answer = max(0, row.CostUSD-overhead)
		}
		mc.RecordedUSD += answer
	}
	if r.Requests > 0 {
		r.First, r.Last = ptr(first.UTC()), ptr(last.UTC())
	}
	n := float64(r.Requests)
	r.Fragmentation.Share = ratio(float64(r.Fragmentation.Requests), n)
	r.Fallbacks.Rate = ratio(float64(r.Fallbacks.Total), n)
	r.Fallbacks.ByReason = counts(reasons)
	for k, v := range fromMR {
		r.Fallbacks.ByModelRegion = append(r.Fallbacks.ByModelRegion, ModelRegionCount{Model: k[0], Region: k[1], N: v})
	}
	slices.SortFunc(r.Fallbacks.ByModelRegion, func(a, b ModelRegionCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Model, b.Model), cmp.Compare(a.Region, b.Region))
	})
	r.Stages = counts(stages)
	for k, v := range errs {
		r.Errors = append(r.Errors, ErrorCount{Code: k.code, Status: k.status, N: v, Share: ratio(float64(v), n)})
	}
	slices.SortFunc(r.Errors, func(a, b ErrorCount) int {
		return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Code, b.Code), cmp.Compare(a.Status, b.Status))
	})
	for k, v := range attErrs {
		r.AttemptErrors = append(r.AttemptErrors, AttemptError{Outcome: k.outcome, Status: k.status, N: v})
	}
	slices.SortFunc(r.AttemptErrors, func(a, b AttemptError) int {
		return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Outcome, b.Outcome), cmp.Compare(a.Status, b.Status))
	})
	r.Amplification.Outcomes = counts(outcomes)
	r.Amplification.PerRequest = ratio(float64(r.Amplification.Attempts), n)
	r.Amplification.ByKind = kinds(byKind, n)
	r.Normalization = normalization(offsets, offsetSum, n)
	r.Latency.Overall = percentiles(all)
	for h, v := range hourly {
		r.Latency.Hourly = append(r.Latency.Hourly, HourLatency{Hour: h, Requests: len(v), Percentiles: percentiles(v)})
	}
	slices.SortFunc(r.Latency.Hourly, func(a, b HourLatency) int { return a.Hour.Compare(b.Hour) })

	c := &r.Cost
	c.Note = CostNote
	for _, mc := range models {
		mc.TotalUSD = mc.RecordedUSD + mc.HedgeOverheadUSD + mc.RedundancyOverheadUSD
		mc.OverheadShare = ratio(mc.HedgeOverheadUSD+mc.RedundancyOverheadUSD, mc.TotalUSD)
		c.ByModel = append(c.ByModel, *mc)
	}
	slices.SortFunc(c.ByModel, func(a, b ModelCost) int {
		return cmp.Or(cmp.Compare(b.TotalUSD, a.TotalUSD), cmp.Compare(a.Model, b.Model))
	})
	for _, mc := range c.ByModel { // summed in a fixed order: the totals are reproducible
		c.RecordedUSD += mc.RecordedUSD
		c.HedgeOverheadUSD += mc.HedgeOverheadUSD
		c.RedundancyOverheadUSD += mc.RedundancyOverheadUSD
		c.FallbackUSD += mc.FallbackUSD
		c.CacheSavedUSD += mc.CacheSavedUSD
	}
	c.TotalUSD = c.RecordedUSD + c.HedgeOverheadUSD + c.RedundancyOverheadUSD
	r.Spend = spend(byKey)
	return r, nil
}

// spend sorts the keys' spend (dearest first) and sums it by team.
func spend(byKey map[[2]string]*KeySpend) Spend {
	s := Spend{ByKey: []KeySpend{}, ByTeam: []TeamSpend{}}
	for _, k := range byKey {
		s.ByKey = append(s.ByKey, *k)
	}
	slices.SortFunc(s.ByKey, func(a, b KeySpend) int {
		return cmp.Or(cmp.Compare(b.USD, a.USD), cmp.Compare(a.Key, b.Key), cmp.Compare(a.Team, b.Team))
	})
	teams := map[string]*TeamSpend{}
	var order []string
	for _, k := range s.ByKey { // summed in a fixed order: the totals are reproducible
		s.TotalUSD += k.USD
		t := teams[k.Team]
		if t == nil {
			t = &TeamSpend{Team: k.Team}
			teams[k.Team] = t
			order = append(order, k.Team)
		}
		t.Keys++
		t.Requests += k.Requests
		t.USD += k.USD
	}
	for _, name := range order {
		s.ByTeam = append(s.ByTeam, *teams[name])
	}
	slices.SortStableFunc(s.ByTeam, func(a, b TeamSpend) int { return cmp.Or(cmp.Compare(b.USD, a.USD), cmp.Compare(a.Team, b.Team)) })
	return s
}

type errKey struct {
	code   string
	status int
}

type attKey struct {
	outcome string
	status  int
}

// failed reports whether an attempt outcome is a failure of the upstream
// call: not a success, a race lost, or an attempt cut short by the caller.
func failed(outcome string) bool {
	switch outcome {
	case "ok", "", "cancelled_loser", "canceled":
		return false
	}
	return true
}

func ptr[T any](v T) *T { return &v }

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// counts sorts a map of counts by count, descending, then key.
func counts(m map[string]int) []Count {
	out := make([]Count, 0, len(m))
	for k, v := range m {
		out = append(out, Count{Key: k, N: v})
	}
	slices.SortFunc(out, func(a, b Count) int { return cmp.Or(cmp.Compare(b.N, a.N), cmp.Compare(a.Key, b.Key)) })
	return out
}

func kinds(m map[string]int, n float64) []KindCount {
	out := []KindCount{}
	for _, k := range kindOrder {
		if v, ok := m[k]; ok {
			out = append(out, KindCount{Kind: k, Attempts: v, PerRequest: ratio(float64(v), n)})
		}
	}
	var rest []KindCount
	for k, v := range m {
		if !slices.Contains(kindOrder, k) {
			rest = append(rest, KindCount{Kind: k, Attempts: v, PerRequest: ratio(float64(v), n)})
		}
	}
	slices.SortFunc(rest, func(a, b KindCount) int { return cmp.Compare(a.Kind, b.Kind) })
	return append(out, rest...)
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func percentiles(v []float64) Percentiles {
	slices.Sort(v)
	return Percentiles{P50: Percentile(v, 50), P95: Percentile(v, 95), P99: Percentile(v, 99)}
}

// normalization bins the non-zero offsets in bins of binBase (widened by
// whole multiples to keep at most binTarget bins), aligned on multiples of
// the width.
func normalization(offsets []float64, sum, n float64) Normalization {
	out := Normalization{Compensated: len(offsets), Share: ratio(float64(len(offsets)), n), Histogram: []Bin{}}
	if len(offsets) == 0 {
		return out
	}
	out.Min, out.Max = slices.Min(offsets), slices.Max(offsets)
	out.Mean = sum / float64(len(offsets))
	w := binBase
	idx := func(x float64) int { return int(math.Floor(x/w + 1e-9)) }
	if span := idx(out.Max) - idx(out.Min) + 1; span > binTarget {
		w = binBase * math.Ceil(float64(span)/binTarget)
	}
	out.BinWidth = w
	lo, hi := idx(out.Min), idx(out.Max)
	bins := make([]int, hi-lo+1)
	for _, o := range offsets {
		bins[idx(o)-lo]++
	}
	for i, c := range bins {
		out.Histogram = append(out.Histogram, Bin{Lo: round9(float64(lo+i) * w), Hi: round9(float64(lo+i+1) * w), N: c})
	}
	return out
}

// round9 removes float noise from bin edges (0.15000000000000002 → 0.15).
func round9(x float64) float64 { return math.Round(x*1e9) / 1e9 }

// String is a one-line summary.
func (r *Report) String() string {
	return fmt.Sprintf("%d requests since %s: %.1f%% fragmented, %.1f%% fell back, %.2f upstream attempts per request, $%.4f",
		r.Requests, r.Since.Format(time.RFC3339), 100*r.Fragmentation.Share, 100*r.Fallbacks.Rate, r.Amplification.PerRequest, r.Cost.TotalUSD)
}
