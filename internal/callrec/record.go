// Package callrec is the record of one client call: what each stage of
// the call pipeline did, in one part per stage. It is the request log's
// row, the metrics' source, the debug trace's body and the source of the
// X-Mesh response headers; the engine fills it (each stage through its
// Record hook) and hands it to observers when the call is finished.
//
// The parts every call has (its identity and timing, its route and
// attempts, its result) are values embedded in the Record, so their
// fields read as the Record's own (rec.ServedBy, rec.Attempts, rec.Cost).
// The part of a feature stage is a pointer, nil when the stage is off or
// did nothing for the call, so a call pays only for the stages that acted.
//
// A Record is filled by the call's goroutine (a stream's by whoever reads
// it; the fragment fan-out under the engine's lock) and not modified after
// it is handed to observers, which must not modify it. The package imports
// no engine: stages' consumers (telemetry, the request log, the server)
// read it without reaching the engine.
package callrec

import (
	"slices"
	"time"

	"github.com/keelmesh/keel/internal/cache"
	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/structured"
)

// Observer receives one Record per finished client call (for a stream: when
// the stream ends). Implementations must not block: they run on the
// request's goroutine. Telemetry, the request log and the debug-trace store
// are observers; the engine imports none of them.
type Observer interface {
	RequestDone(r *Record)
}

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(*Record)

// RequestDone calls f.
func (f ObserverFunc) RequestDone(r *Record) { f(r) }

// Record is everything the engine did for one client call, one part per
// stage. The embedded parts are every call's; a nil pointer part is a stage
// that was off or did nothing for the call.
type Record struct {
	Call
	Route
	Result

	// Normalization is the core's parameter normalisation and translation
	// (nil when nothing was dropped, normalised or calibrated).
	Normalization *Normalization
	// Tier is tiering's part (nil unless the call named a tiered alias).
	Tier *Tier
	// Cache is the exact response cache's part (nil when the mesh has no
	// cache): X-Mesh-Cache.
	Cache *Cache
	// Semantic is the semantic cache's part (nil unless it was looked up:
	// an alias with it on, after the exact cache missed).
	Semantic *Semantic
	// Affinity is cache-aware routing's part: set when the call was
	// served off the endpoint its conversation's prompt cache was warm
	// on.
	Affinity *Affinity
	// Structured is structured output's part (nil when no contract
	// applied and no fused answer broke one).
	Structured *Structured
	// Fragments is fragmentation's part (nil unless the call was split).
	Fragments *Fragments
	// PII is what personal-data detection found and did (nil when it did
	// not run): kinds, positions and keyed hashes, never a value.
	PII *PIIReport
}

// Call is the call's identity and timing, set when the call starts and when
// it ends (every call).
type Call struct {
	RequestID string
	Start     time.Time
	Duration  time.Duration
	// TTFT is the time to the first content event sent to the client (streams).
	TTFT   time.Duration
	Format llm.Format
	// Side names a call beside the model call (Engine.Side):
	// "count_tokens", "embeddings"; empty for a model call. (A side call's
	// only part is its kind: a string here costs less than a part.)
	Side string
	// Model is the name the client asked for.
	Model  string
	Stream bool
	// Behavior is the parsed mesh options.
	Behavior *pipeline.Behavior
	// KeyID and Team name the virtual key the call was made with (Call);
	// empty for an unmetered call.
	KeyID, Team string
	// TraceParent is the client's W3C traceparent header, if any.
	TraceParent string
}

// Route is the call's route and attempts: the resolve stage's (domain,
// primary model), the rollout stage's (stage, legacy path: every call has
// one) and the core's (candidates, attempts, who served).
type Route struct {
	Domain string
	// PrimaryModel is the first model of the route's chain; ModelFallback
	// is set when another model served.
	PrimaryModel  string
	ModelFallback bool
	// Downgraded is set when the model that served ranks below the
	// primary in capability: the fallbacks the safety valve counts.
	Downgraded bool
	// Stage is the rollout stage the call ran in: monitor, hedging or full.
	Stage string
	// Legacy is set when the safety valve restricted the call to the
	// route's primary model, without hedging or continuation.
	Legacy bool

	// ServedBy is the endpoint whose answer reached the client (empty on error).
	ServedBy       string
	ServedModel    string
	ServedRegion   string
	ServedProvider string
	// Fallback is why the first choice did not serve ("" when it did).
	Fallback string

	// Candidates is the router's view at the first pick: every endpoint,
	// its score and why it was or was not chosen.
	Candidates []Candidate
	Attempts   []Attempt
	Retries    int
	Hedges     int
	HedgeWon   bool
	// Recovered counts mid-stream continuations.
	Recovered int
	// QueueWait is time the call spent waiting inside Keel (backoff and
	// cooldown waits) before its winning attempt.
	QueueWait time.Duration
}

// Result is what the client got (every call).
type Result struct {
	Status int
	Err    *llm.APIError
	Usage  llm.Usage
	// Cost is the estimated upstream cost in USD: the sum of the attempts'
	// own costs (every answer whose usage the upstream reported: retries,
	// hedges, fragment replicas, re-asks, each leg of a continued stream;
	// a failed call's included), or the serving endpoint's price for the
	// usage the client got when that is more.
	Cost float64

	// Request is the client's request as parsed and Response the answer
	// it received (for a stream, the text blocks sent; nil on error).
	// Where personal data was found, both hold the placeholders or masks,
	// never the values (Request is nil when detection failed).
	// Observers must not modify them; the request log stores them when
	// request_log.log_bodies is set.
	Request  *llm.Request
	Response *llm.Response
}

// Normalization is how the call's request was adapted to the endpoints
// that received it (the core, per attempt): X-Mesh-Dropped,
// X-Mesh-Normalization-Offset and X-Mesh-Normalized.
type Normalization struct {
	// Offset is the applied temperature offset (serving − requested);
	// Calibrated says a calibration was applied at all.
	Offset     float64
	Calibrated bool
	// Normalized describes parameter normalisation ("top_k:dropped,…").
	Normalized string
	// Dropped lists request parameters removed for the serving endpoint
	// (by normalisation or by translation to its wire format).
	Dropped []string
}

// Tier is tiering's part: the prompt's class (simple, medium, complex) and
// the tier that answered (cheap, middle, strong); Escalated is set when a
// failed validation moved the re-ask up a tier. X-Mesh-Tier says all three.
type Tier struct {
	Complexity string
	Name       string
	Escalated  bool
}

// Cache is the exact response cache's part: Status is hit (answered from
// the cache, no attempt, cost 0; a semantic hit too), miss or bypass.
// The engine's parts are shared, one per status (CachePart): a Cache in a
// record is never modified, only replaced.
type Cache struct {
	Status string
}

// cacheParts are the shared parts of the exact cache's statuses: the
// cache acts on every call of a mesh that has one, and its part costs no
// allocation.
var cacheParts = [...]Cache{{Status: cache.Hit}, {Status: cache.Miss}, {Status: cache.Bypass}}

// CachePart returns the part of a call the exact cache gave status: a
// shared, read-only part for hit, miss and bypass.
func CachePart(status string) *Cache {
	for i := range cacheParts {
		if cacheParts[i].Status == status {
			return &cacheParts[i]
		}
	}
	return &Cache{Status: status}
}

// Semantic is the semantic cache's part: Status is hit, miss or error (the
// embeddings call failed: a miss); Similarity is a hit's cosine similarity
// (X-Mesh-Cache-Similarity), 0 otherwise.
type Semantic struct {
	Status     string
	Similarity float64
}

// Structured is structured output's part.
type Structured struct {
	// Contract is the output contract the answer was validated against
	// (nil when none applied: the part of a fused answer that broke the
	// JSON asked for).
	Contract *StructuredTrace
	// Repairs lists the repair steps applied to the answer.
	Repairs []string
	// Reasked is set when a targeted repair request was sent; Violation
	// when the answer stayed invalid.
	Reasked, Violation bool
}

// Source is the X-Mesh-Schema value: "given" (the client's schema) or
// "implied" (read from the system prompt), "" when no contract applied.
func (s *Structured) Source() string {
	if s == nil || s.Contract == nil {
		return ""
	}
	return s.Contract.Source
}

// Fragments is fragmentation's part.
type Fragments struct {
	// Count and OK count fragments sent and answered; Fusions and
	// FusionConflicts count fused fields and disagreements.
	Count, OK, Fusions, FusionConflicts int
	// Conflicts describes each fusion disagreement; LostRanges the input
	// byte ranges ("start-end") no replica answered.
	Conflicts  []string
	LostRanges []string
	// Details describes each fragment, in input order; a fragment is lost
	// (its range in LostRanges) unless its Outcome is FragmentOK.
	Details []FragmentDetail
	// Merged is set when a final merge call produced a fused text answer.
	Merged bool
}

// StructuredTrace describes the output contract of a call (structured.Trace).
type StructuredTrace = structured.Trace

// FragmentDetail is one fragment of a fragmented call (fragment.Detail).
type FragmentDetail = fragment.Detail

// PIIReport is what personal-data detection found and did (pii.Report).
type PIIReport = pii.Report

// Fragment outcomes (fragment.OutcomeOK …).
const (
	FragmentOK      = fragment.OutcomeOK
	FragmentInvalid = fragment.OutcomeInvalid
	FragmentFailed  = fragment.OutcomeFailed
)

// CacheStatus is the exact cache's status ("" when the mesh has no cache).
func (r *Record) CacheStatus() string {
	if r.Cache == nil {
		return ""
	}
	return r.Cache.Status
}

// Affinity is cache-aware routing's part of a call's record.
type Affinity struct {
	// Moved is "<from>-><to>": the endpoint the conversation's prompt
	// cache was warm on and the one that served (X-Mesh-Cache-Moved).
	Moved string
}

// CacheMoved is Affinity.Moved ("" when the conversation did not move).
func (r *Record) CacheMoved() string {
	if r.Affinity == nil {
		return ""
	}
	return r.Affinity.Moved
}

// SemanticStatus is the semantic cache's status ("" when not looked up).
func (r *Record) SemanticStatus() string {
	if r.Semantic == nil {
		return ""
	}
	return r.Semantic.Status
}

// SchemaViolation reports an answer that stayed invalid against the
// structured output asked for.
func (r *Record) SchemaViolation() bool { return r.Structured != nil && r.Structured.Violation }

// Dropped is the request parameters removed for the serving endpoint.
func (r *Record) Dropped() []string {
	if r.Normalization == nil {
		return nil
	}
	return r.Normalization.Dropped
}

// AddNormalization returns the record's normalisation part, added when the
// record has none (by the core, which owns it).
func (r *Record) AddNormalization() *Normalization {
	if r.Normalization == nil {
		r.Normalization = &Normalization{}
	}
	return r.Normalization
}

// AddStructured returns the record's structured-output part, added when the
// record has none (a fused answer that broke the JSON asked for has one
// without a contract).
func (r *Record) AddStructured() *Structured {
	if r.Structured == nil {
		r.Structured = &Structured{}
	}
	return r.Structured
}

// Attempt is one upstream attempt.
type Attempt struct {
	Endpoint string
	Model    string
	Region   string
	Provider string
	Start    time.Time
	End      time.Time
	// Kind is the attempt's policy.AttemptKind as its label: "primary",
	// "retry", "hedge", "fallback", "continuation", "reask", "fragment"
	// or "merge".
	Kind string
	// Outcome is "ok" or the failure reason from the classification table.
	Outcome string
	Status  int
	// Wait is the backoff or cooldown wait before this attempt.
	Wait time.Duration
	// Bytes is the size of the response body read from the upstream.
	Bytes int64
	// Winner is set on the attempt that won a hedge race, on a fragment's
	// first replica to answer (the others are redundancy) and on a merge
	// call whose answer was used; an unraced call marks none.
	Winner bool
	// InputTokens (prompt, cached included) and OutputTokens are the usage
	// the attempt's upstream reported for it — its complete answer, or for
	// a stream what it reported before it ended (output counted by content
	// events when it was cut before its usage) — and Cost is that usage at
	// the attempt's endpoint's price in USD (cache reads and writes at
	// theirs); all 0 when it got no answer or was cancelled before any
	// usage (a hedge race's loser).
	InputTokens, OutputTokens int
	Cost                      float64
	// UpstreamRequest is the request body as sent to the endpoint (after
	// translation and normalisation), cut at 4 KiB, with API keys and
	// bearer tokens replaced by [REDACTED]; kept only for calls that asked
	// for a debug trace.
	UpstreamRequest string
}

// Candidate is one endpoint as the router saw it.
type Candidate struct {
	Endpoint string
	// ExpectedMS is the expected latency in milliseconds the router scored.
	ExpectedMS float64
	InFlight   int
	Chosen     bool
	// Reason says why it was or was not chosen.
	Reason string
}

// Drop adds the parameters removed for an endpoint to the record's
// normalisation part, each once, in the order first dropped.
func (r *Record) Drop(params []string) {
	for _, d := range params {
		if !slices.Contains(r.Dropped(), d) {
			n := r.AddNormalization()
			n.Dropped = append(n.Dropped, d)
		}
	}
}

// Part is the value of a record's part, the zero value when the stage did
// not act (p is nil): for readers that want its fields either way.
func Part[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
