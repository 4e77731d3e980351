package engine

import (
	"time"

	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
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

// Record is everything the engine did for one client call: the metrics'
// source, the request log's row and the debug trace's body. A Record is
// not modified after it is handed to observers.
type Record struct {
	RequestID string
	Start     time.Time
	Duration  time.Duration
	// TTFT is the time to the first content event sent to the client (streams).
	TTFT   time.Duration
	Format llm.Format
	// Side names a call beside the model call (Engine.Side):
	// "count_tokens", "embeddings"; empty for a model call.
	Side string
	// Model is the name the client asked for.
	Model  string
	Stream bool
	Domain string
	// Behavior is the parsed mesh options.
	Behavior *Behavior

	// ServedBy is the endpoint whose answer reached the client (empty on error).
	ServedBy       string
	ServedModel    string
	ServedRegion   string
	ServedProvider string
	// Fallback is why the first choice did not serve ("" when it did).
	Fallback string
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

	Status int
	Err    *llm.APIError
	Usage  llm.Usage
	// Cost is the estimated upstream cost in USD: the sum of the attempts'
	// own costs (every answer whose usage the upstream reported: retries,
	// hedges, fragment replicas, re-asks, each leg of a continued stream;
	// a failed call's included), or the serving endpoint's price for the
	// usage the client got when that is more.
	Cost float64
	// CacheMoved is set when cache-aware routing served the call's
	// conversation elsewhere than the endpoint its prompt cache was warm
	// on: "from->to", endpoint ids (X-Mesh-Cache-Moved).
	CacheMoved string
	// Cache is the response cache's part in the call, X-Mesh-Cache: hit
	// (answered from the cache, no attempt, cost 0), miss or bypass
	// (CacheHit, CacheMiss, CacheBypass); empty when the mesh has no cache.
	Cache string
	// SemanticCache is the semantic cache's part in a call to an alias
	// that has it on, once the exact cache missed: SemanticHit (Cache is
	// then CacheHit), SemanticMiss or SemanticError (the embeddings call
	// failed: a miss); empty when it was not looked up.
	SemanticCache string
	// CacheSimilarity is a semantic hit's cosine similarity
	// (X-Mesh-Cache-Similarity); 0 otherwise.
	CacheSimilarity float64
	// Complexity is the prompt's class (simple, medium, complex) and Tier
	// the tier that answered (cheap, middle, strong) when the call named a
	// tiered alias; Escalated is set when a failed validation moved the
	// re-ask up a tier. X-Mesh-Tier says all three.
	Complexity string
	Tier       string
	Escalated  bool
	// KeyID and Team name the virtual key the call was made with (Call);
	// empty for an unmetered call.
	KeyID, Team string

	// Repairs lists structured-output repair steps applied to the answer.
	Repairs []string
	// Reasked is set when a targeted repair request was sent;
	// SchemaViolation when the answer stayed invalid.
	Reasked         bool
	SchemaViolation bool
	// Structured is the output contract the answer was validated against
	// (nil when none applied); SchemaSource is its X-Mesh-Schema value:
	// "given" (the client's schema) or "implied" (read from the system
	// prompt), "" when none applied.
	Structured   *Structured
	SchemaSource string
	// NormalizationOffset is the applied temperature offset (serving −
	// requested); Calibrated says a calibration was applied at all.
	NormalizationOffset float64
	Calibrated          bool
	// Normalized describes parameter normalisation ("top_k:dropped,…").
	Normalized string
	// Dropped lists request parameters removed for the serving endpoint.
	Dropped []string

	// Fragments and FragmentsOK count fragments sent and answered;
	// Fusions and FusionConflicts count fused fields and disagreements.
	Fragments       int
	FragmentsOK     int
	Fusions         int
	FusionConflicts int
	// Conflicts describes each fusion disagreement; LostRanges the input
	// byte ranges ("start-end") no replica answered.
	Conflicts  []string
	LostRanges []string
	// FragmentDetails describes each fragment, in input order; a fragment
	// is lost (its range in LostRanges) unless its Outcome is FragmentOK.
	FragmentDetails []FragmentDetail
	// Merged is set when a final merge call produced a fused text answer.
	Merged bool

	// TraceParent is the client's W3C traceparent header, if any.
	TraceParent string

	// PII is what personal-data detection found and did (nil when it did
	// not run): kinds, positions and keyed hashes, never a value.
	PII *PIIReport

	// Request is the client's request as parsed and Response the answer
	// it received (for a stream, the text blocks sent; nil on error).
	// Where personal data was found, both hold the placeholders or masks,
	// never the values (Request is nil when detection failed).
	// Observers must not modify them; the request log stores them when
	// request_log.log_bodies is set.
	Request  *llm.Request
	Response *llm.Response
}

// Structured describes the output contract of a call (structured.Trace).
type Structured = structured.Trace

// FragmentDetail is one fragment of a fragmented call (fragment.Detail).
type FragmentDetail = fragment.Detail

// Fragment outcomes (fragment.OutcomeOK …).
const (
	FragmentOK      = fragment.OutcomeOK
	FragmentInvalid = fragment.OutcomeInvalid
	FragmentFailed  = fragment.OutcomeFailed
)

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
