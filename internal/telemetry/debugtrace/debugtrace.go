// Package debugtrace keeps the debug traces of calls that asked for one
// (X-Mesh-Debug: true, mesh-debug-mode: true or mesh_behavior.debug) in a
// bounded in-memory ring keyed by request id, and serves each as JSON
// with every stage the engine went through: the parsed options, the
// router's candidates with their scores and reasons, each attempt (endpoint,
// start, end, outcome, kind, wait, winner), hedges, retries and their
// waits, recoveries, fragments, repairs and the normalisation offset.
//
// A *Store is safe for concurrent use. Put and Get take a short mutex
// (debug calls are rare; other calls pay one field check in RequestDone);
// the JSON is built when a trace is read, not when it is stored. When the
// ring is full the oldest trace is dropped.
package debugtrace

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/pipeline"
)

// DefaultCapacity is the ring size when NewStore is given 0.
const DefaultCapacity = 1024

// Store is the ring of debug traces.
type Store struct {
	mu   sync.Mutex // guards following
	ring []*callrec.Record
	next int            // slot the next Put writes
	byID map[string]int // request id → slot
}

// NewStore returns a Store keeping the last capacity traces (0 means
// DefaultCapacity).
func NewStore(capacity int) (*Store, error) {
	if capacity < 0 {
		return nil, errors.New("debugtrace: capacity must be ≥ 0")
	}
	if capacity == 0 {
		capacity = DefaultCapacity
	}
	return &Store{ring: make([]*callrec.Record, capacity), byID: make(map[string]int, capacity)}, nil
}

// RequestDone stores r when the call asked for a debug trace
// (r.Behavior.Debug). It makes Store an callrec.Observer.
func (s *Store) RequestDone(r *callrec.Record) {
	if r.Behavior != nil && r.Behavior.Debug {
		s.Put(r)
	}
}

// Put stores r under r.RequestID, replacing a trace with the same id and
// dropping the oldest when the ring is full. r must not be modified after
// (engine Records are not). A Record without a request id is ignored.
func (s *Store) Put(r *callrec.Record) {
	if r == nil || r.RequestID == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.byID[r.RequestID]; ok {
		s.ring[i] = r
		return
	}
	if old := s.ring[s.next]; old != nil && s.byID[old.RequestID] == s.next {
		delete(s.byID, old.RequestID)
	}
	s.ring[s.next] = r
	s.byID[r.RequestID] = s.next
	s.next = (s.next + 1) % len(s.ring)
}

// Get returns the trace of request id.
func (s *Store) Get(id string) (*Trace, bool) {
	s.mu.Lock()
	i, ok := s.byID[id]
	var r *callrec.Record
	if ok {
		r = s.ring[i]
	}
	s.mu.Unlock()
	if !ok {
		return nil, false
	}
	return View(r), true
}

// IDs returns the stored request ids, newest first.
func (s *Store) IDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]string, 0, len(s.byID))
	for k := range len(s.ring) {
		i := (s.next - 1 - k + 2*len(s.ring)) % len(s.ring)
		if r := s.ring[i]; r != nil {
			ids = append(ids, r.RequestID)
		}
	}
	return ids
}

// Handler serves GET /debug/traces/{id}: the trace as JSON, or a JSON 404
// for an unknown id. GET /debug/traces (no id) lists the stored ids,
// newest first. The id is read from the route's {id} wildcard when the
// handler is mounted on an http.ServeMux pattern, else from the path
// after "/debug/traces/".
func (s *Store) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			writeJSON(w, http.StatusMethodNotAllowed, errorBody("invalid_request_error", "method "+r.Method+" not allowed; use GET"))
			return
		}
		id := r.PathValue("id")
		if id == "" {
			if _, rest, ok := strings.Cut(r.URL.Path, "/debug/traces"); ok {
				id = strings.Trim(rest, "/")
			}
		}
		if id == "" {
			writeJSON(w, http.StatusOK, map[string][]string{"request_ids": s.IDs()})
			return
		}
		t, ok := s.Get(id)
		if !ok {
			writeJSON(w, http.StatusNotFound, errorBody("not_found_error",
				fmt.Sprintf("no debug trace for request id %q: traces are kept for the last %d calls sent with X-Mesh-Debug: true", id, len(s.ring))))
			return
		}
		writeJSON(w, http.StatusOK, t)
	})
}

func errorBody(typ, msg string) any {
	return map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"type":"error","error":{"type":"api_error","message":"encoding the trace failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// Trace is the JSON view of one call, stage by stage. Times are RFC 3339
// with nanoseconds; durations are milliseconds; *_offset_ms fields are
// relative to the call's start.
type Trace struct {
	RequestID  string    `json:"request_id"`
	Start      time.Time `json:"start"`
	DurationMS float64   `json:"duration_ms"`
	Status     int       `json:"status"`

	Request     RequestStage     `json:"request"`
	Route       RouteStage       `json:"route"`
	Execute     ExecuteStage     `json:"execute"`
	Fragments   FragmentStage    `json:"fragments"`
	Structured  StructuredStage  `json:"structured"`
	Postprocess PostprocessStage `json:"postprocess"`
	Response    ResponseStage    `json:"response"`
}

// RequestStage is what the client asked for and how Keel parsed it.
type RequestStage struct {
	Format      string             `json:"format"`
	Model       string             `json:"model"`
	Stream      bool               `json:"stream"`
	Domain      string             `json:"domain"`
	Options     *pipeline.Behavior `json:"options"`
	TraceParent string             `json:"traceparent,omitempty"`
}

// RouteStage is the router's view at the first pick.
type RouteStage struct {
	Candidates []Candidate `json:"candidates"`
}

// Candidate is one endpoint as the router scored it.
type Candidate struct {
	Endpoint   string  `json:"endpoint"`
	ExpectedMS float64 `json:"expected_ms"`
	InFlight   int     `json:"in_flight"`
	Chosen     bool    `json:"chosen"`
	Reason     string  `json:"reason"`
}

// ExecuteStage is every upstream attempt and the policies that made them.
type ExecuteStage struct {
	Attempts       []Attempt `json:"attempts"`
	FallbackReason string    `json:"fallback_reason,omitempty"`
	// PrimaryModel is the first model of the route's chain; ModelFallback
	// says another model served; Legacy says the safety valve sent the
	// call down the legacy path.
	PrimaryModel  string  `json:"primary_model,omitempty"`
	ModelFallback bool    `json:"model_fallback"`
	Legacy        bool    `json:"legacy"`
	Retries       Retries `json:"retries"`
	Hedges        Hedges  `json:"hedges"`
	Recoveries    int     `json:"recoveries"`
	QueueWaitMS   float64 `json:"queue_wait_ms"`
}

// Attempt is one upstream attempt.
type Attempt struct {
	N             int       `json:"n"`
	Endpoint      string    `json:"endpoint"`
	Model         string    `json:"model"`
	Region        string    `json:"region"`
	Kind          string    `json:"kind"`
	Outcome       string    `json:"outcome"`
	Status        int       `json:"status,omitempty"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end,omitzero"`
	StartOffsetMS float64   `json:"start_offset_ms"`
	DurationMS    float64   `json:"duration_ms"`
	WaitMS        float64   `json:"wait_ms"`
	Bytes         int64     `json:"bytes"`
	Winner        bool      `json:"winner"`
	// CostUSD is the attempt's own usage at its endpoint's price (0 when
	// it got no complete answer of its own, as a stream's attempts).
	CostUSD float64 `json:"cost_usd"`
	// UpstreamRequest is the body sent upstream, cut at 4 KiB, keys and
	// tokens redacted.
	UpstreamRequest string `json:"upstream_request"`
}

// StructuredStage is the output contract the answer was held to.
type StructuredStage struct {
	// SchemaSource is "given" (the client's schema), "implied" (read from
	// the system prompt) or "none".
	SchemaSource string `json:"schema_source"`
	// Sentence is the system-prompt text an implied schema came from.
	Sentence string `json:"sentence"`
	// Required lists the keys the schema requires at its top level.
	Required []string `json:"required"`
	// Schema is the JSON Schema validated against (null for none).
	Schema json.RawMessage `json:"schema"`
	// InvalidAnswer is the first answer that failed validation, cut at
	// 4 KiB ("" when every answer was valid).
	InvalidAnswer string `json:"invalid_answer"`
	// Repairs lists the repair steps applied, as X-Mesh-Repaired does.
	Repairs []string `json:"repairs"`
}

// Retries counts retry attempts and lists the backoff or cooldown wait
// before each (attempt number → ms).
type Retries struct {
	Count int       `json:"count"`
	Waits []RetryAt `json:"waits"`
}

// RetryAt is the wait before one attempt.
type RetryAt struct {
	Attempt int     `json:"attempt"`
	WaitMS  float64 `json:"wait_ms"`
}

// Hedges counts hedge attempts sent and whether one won.
type Hedges struct {
	Sent int  `json:"sent"`
	Won  bool `json:"won"`
}

// FragmentStage counts fragments and fused fields and describes each
// fragment. Succeeded, Lost and Detail come from the same record fields as
// the X-Mesh-Fragments and X-Mesh-Fragments-Lost headers.
type FragmentStage struct {
	Sent            int `json:"sent"`
	Succeeded       int `json:"succeeded"`
	Fusions         int `json:"fusions"`
	FusionConflicts int `json:"fusion_conflicts"`
	// Lost lists the input byte ranges ("start-end") no replica answered
	// usably.
	Lost   []string   `json:"lost"`
	Detail []Fragment `json:"detail"`
}

// Fragment is one fragment: its own bytes [start, end) of the document,
// every endpoint its replicas tried, and "ok", "invalid" (answers, none
// usable) or "failed" (every replica failed).
type Fragment struct {
	Start     int      `json:"start"`
	End       int      `json:"end"`
	Endpoints []string `json:"endpoints"`
	Outcome   string   `json:"outcome"`
}

// PostprocessStage is what Keel changed on the way out.
type PostprocessStage struct {
	Repairs             []string `json:"repairs"`
	NormalizationOffset float64  `json:"normalization_offset"`
	DroppedParams       []string `json:"dropped_params"`
}

// ResponseStage is what the client received.
type ResponseStage struct {
	ServedBy string  `json:"served_by,omitempty"`
	Model    string  `json:"model,omitempty"`
	Region   string  `json:"region,omitempty"`
	Provider string  `json:"provider,omitempty"`
	TTFTMS   float64 `json:"ttft_ms,omitempty"`
	Usage    Usage   `json:"usage"`
	CostUSD  float64 `json:"cost_usd"`
	Error    *Error  `json:"error,omitempty"`
}

// Usage is the serving attempt's token counts.
type Usage struct {
	InputTokens      int `json:"input_tokens"`
	OutputTokens     int `json:"output_tokens"`
	CacheReadTokens  int `json:"cache_read_input_tokens"`
	CacheWriteTokens int `json:"cache_write_input_tokens"`
}

// Error is the error the client received.
type Error struct {
	Status   int    `json:"status"`
	Type     string `json:"type"`
	Message  string `json:"message"`
	MeshCode string `json:"mesh_error_code,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// View builds the JSON view of r.
func View(r *callrec.Record) *Trace {
	fr, st := callrec.Part(r.Fragments), callrec.Part(r.Structured)
	t := &Trace{
		RequestID: r.RequestID, Start: r.Start, DurationMS: ms(r.Duration), Status: r.Status,
		Request: RequestStage{Format: r.Format.String(), Model: r.Model, Stream: r.Stream, Domain: r.Domain, Options: r.Behavior, TraceParent: r.TraceParent},
		Route:   RouteStage{Candidates: make([]Candidate, 0, len(r.Candidates))},
		Execute: ExecuteStage{Attempts: make([]Attempt, 0, len(r.Attempts)), FallbackReason: r.Fallback,
			PrimaryModel: r.PrimaryModel, ModelFallback: r.ModelFallback, Legacy: r.Legacy,
			Retries: Retries{Count: r.Retries, Waits: []RetryAt{}}, Hedges: Hedges{Sent: r.Hedges, Won: r.HedgeWon},
			Recoveries: r.Recovered, QueueWaitMS: ms(r.QueueWait)},
		Fragments: FragmentStage{Sent: fr.Count, Succeeded: fr.OK, Fusions: fr.Fusions, FusionConflicts: fr.FusionConflicts,
			Lost: nonNil(fr.LostRanges), Detail: make([]Fragment, 0, len(fr.Details))},
		Postprocess: PostprocessStage{Repairs: nonNil(st.Repairs), NormalizationOffset: callrec.Part(r.Normalization).Offset, DroppedParams: nonNil(r.Dropped())},
		Response: ResponseStage{ServedBy: r.ServedBy, Model: r.ServedModel, Region: r.ServedRegion, Provider: r.ServedProvider, TTFTMS: ms(r.TTFT),
			Usage:   Usage{InputTokens: r.Usage.InputTokens, OutputTokens: r.Usage.OutputTokens, CacheReadTokens: r.Usage.CacheReadTokens, CacheWriteTokens: r.Usage.CacheWriteTokens},
			CostUSD: r.Cost},
	}
	t.Structured = StructuredStage{SchemaSource: "none", Required: []string{}, Schema: json.RawMessage("null"), Repairs: nonNil(st.Repairs)}
	if c := st.Contract; c != nil {
		t.Structured.SchemaSource, t.Structured.Sentence, t.Structured.InvalidAnswer = c.Source, c.Sentence, c.InvalidAnswer
		t.Structured.Required = nonNil(c.Required)
		if json.Valid(c.Schema) {
			t.Structured.Schema = json.RawMessage(c.Schema)
		}
	}
	for _, f := range fr.Details {
		t.Fragments.Detail = append(t.Fragments.Detail, Fragment{Start: f.Start, End: f.End, Endpoints: nonNil(f.Endpoints), Outcome: f.Outcome})
	}
	for _, c := range r.Candidates {
		t.Route.Candidates = append(t.Route.Candidates, Candidate{Endpoint: c.Endpoint, ExpectedMS: c.ExpectedMS, InFlight: c.InFlight, Chosen: c.Chosen, Reason: c.Reason})
	}
	for i, a := range r.Attempts {
		v := Attempt{N: i + 1, Endpoint: a.Endpoint, Model: a.Model, Region: a.Region, Kind: a.Kind, Outcome: a.Outcome, Status: a.Status,
			Start: a.Start, End: a.End, StartOffsetMS: ms(a.Start.Sub(r.Start)), WaitMS: ms(a.Wait), Bytes: a.Bytes, Winner: a.Winner,
			CostUSD: a.Cost, UpstreamRequest: a.UpstreamRequest}
		if !a.End.IsZero() {
			v.DurationMS = ms(a.End.Sub(a.Start))
		}
		t.Execute.Attempts = append(t.Execute.Attempts, v)
		if a.Wait > 0 {
			t.Execute.Retries.Waits = append(t.Execute.Retries.Waits, RetryAt{Attempt: i + 1, WaitMS: ms(a.Wait)})
		}
	}
	if e := r.Err; e != nil {
		t.Response.Error = &Error{Status: e.Status, Type: string(e.Type), Message: e.Message, MeshCode: e.MeshCode}
	}
	return t
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
