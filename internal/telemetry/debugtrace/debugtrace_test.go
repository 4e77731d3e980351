package debugtrace

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func hedgedRetried(id string) *callrec.Record {
	hedge := true
	return &callrec.Record{
		Call: callrec.Call{RequestID: id, Start: t0, Duration: 900 * time.Millisecond, Format: llm.FormatAnthropic, Model: "claude-sonnet",
			Behavior: &pipeline.Behavior{Debug: true, Hedge: &hedge, PreferredRegion: "us-east"}},
		Route: callrec.Route{Domain: "finance", ServedBy: "claude-sonnet/eu-west/anthropic", ServedModel: "claude-sonnet",
			ServedRegion: "eu-west", ServedProvider: "anthropic", Fallback: "overloaded", Retries: 1, Hedges: 1, HedgeWon: true,
			QueueWait: 50 * time.Millisecond, Candidates: []callrec.Candidate{
				{Endpoint: "claude-sonnet/us-east/anthropic", ExpectedMS: 210, Chosen: true, Reason: "lowest expected latency"},
				{Endpoint: "claude-sonnet/eu-west/anthropic", ExpectedMS: 260, InFlight: 3, Reason: "higher expected latency"},
			}, Attempts: []callrec.Attempt{
				{Endpoint: "claude-sonnet/us-east/anthropic", Model: "claude-sonnet", Region: "us-east", Kind: "primary", Outcome: "overloaded", Status: 529,
					Start: t0, End: t0.Add(100 * time.Millisecond)},
				{Endpoint: "claude-sonnet/us-west/anthropic", Model: "claude-sonnet", Region: "us-west", Kind: "retry", Outcome: "canceled",
					Start: t0.Add(150 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Wait: 50 * time.Millisecond},
				{Endpoint: "claude-sonnet/eu-west/anthropic", Model: "claude-sonnet", Region: "eu-west", Kind: "hedge", Outcome: "ok", Winner: true, Status: 200,
					Start: t0.Add(450 * time.Millisecond), End: t0.Add(800 * time.Millisecond), Bytes: 2048},
			}},
		Result:        callrec.Result{Status: 200, Usage: llm.Usage{InputTokens: 100, OutputTokens: 40}},
		Normalization: &callrec.Normalization{Offset: -0.15, Dropped: []string{"top_k"}},
		Structured:    &callrec.Structured{Repairs: []string{"extract", "trailing_commas"}},
		Fragments:     &callrec.Fragments{Count: 3, OK: 3, Fusions: 4, FusionConflicts: 1},
	}
}

func get(t *testing.T, h http.Handler, path string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	rr := httptest.NewRecorder()
	h.ServeHTTP(rr, httptest.NewRequest(http.MethodGet, path, nil))
	if ct := rr.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("GET %s: Content-Type %q, want application/json", path, ct)
	}
	var body map[string]any
	if err := json.Unmarshal(rr.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v\n%s", path, err, rr.Body)
	}
	return rr, body
}

// The must-show: a hedged, retried call's trace lists every attempt with
// its outcome, and every stage.
func TestHedgedRetriedTrace(t *testing.T) {
	s, err := NewStore(0)
	if err != nil {
		t.Fatal(err)
	}
	s.RequestDone(hedgedRetried("req-7"))
	rr, _ := get(t, s.Handler(), "/debug/traces/req-7")
	if rr.Code != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", rr.Code, rr.Body)
	}
	var tr Trace
	if err := json.Unmarshal(rr.Body.Bytes(), &tr); err != nil {
		t.Fatal(err)
	}
	type att struct {
		Kind, Outcome, Endpoint string
		Winner                  bool
		WaitMS, StartMS, DurMS  float64
	}
	var got []att
	for _, a := range tr.Execute.Attempts {
		got = append(got, att{a.Kind, a.Outcome, a.Endpoint, a.Winner, a.WaitMS, a.StartOffsetMS, a.DurationMS})
	}
	want := []att{
		{"primary", "overloaded", "claude-sonnet/us-east/anthropic", false, 0, 0, 100},
		{"retry", "canceled", "claude-sonnet/us-west/anthropic", false, 50, 150, 650},
		{"hedge", "ok", "claude-sonnet/eu-west/anthropic", true, 0, 450, 350},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attempts (-got +want):\n got %+v\nwant %+v", got, want)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"retries", tr.Execute.Retries, Retries{Count: 1, Waits: []RetryAt{{Attempt: 2, WaitMS: 50}}}},
		{"hedges", tr.Execute.Hedges, Hedges{Sent: 1, Won: true}},
		{"fallback", tr.Execute.FallbackReason, "overloaded"},
		{"queue wait", tr.Execute.QueueWaitMS, 50.0},
		{"options", tr.Request.Options.PreferredRegion, "us-east"},
		{"format", tr.Request.Format, "anthropic"},
		{"candidates", len(tr.Route.Candidates), 2},
		{"chosen", tr.Route.Candidates[0].Chosen && tr.Route.Candidates[0].Reason != "", true},
		{"repairs", tr.Postprocess.Repairs, []string{"extract", "trailing_commas"}},
		{"offset", tr.Postprocess.NormalizationOffset, -0.15},
		{"dropped", tr.Postprocess.DroppedParams, []string{"top_k"}},
		{"fragments", tr.Fragments, FragmentStage{Sent: 3, Succeeded: 3, Fusions: 4, FusionConflicts: 1, Lost: []string{}, Detail: []Fragment{}}},
		{"served", tr.Response.ServedBy, "claude-sonnet/eu-west/anthropic"},
		{"duration", tr.DurationMS, 900.0},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %+v, want %+v", c.name, c.got, c.want)
		}
	}
	// Stage keys are present in the raw JSON as documented.
	for _, key := range []string{`"request"`, `"route"`, `"execute"`, `"fragments"`, `"postprocess"`, `"response"`, `"outcome": "overloaded"`} {
		if !strings.Contains(rr.Body.String(), key) {
			t.Errorf("trace JSON lacks %s", key)
		}
	}
}

func TestHandlerErrors(t *testing.T) {
	s, _ := NewStore(4)
	s.Put(hedgedRetried("known"))
	cases := []struct {
		name, method, path string
		status             int
		errType            string
	}{
		{"unknown id", http.MethodGet, "/debug/traces/nope", http.StatusNotFound, "not_found_error"},
		{"known id", http.MethodGet, "/debug/traces/known", http.StatusOK, ""},
		{"wrong method", http.MethodPost, "/debug/traces/known", http.StatusMethodNotAllowed, "invalid_request_error"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr := httptest.NewRecorder()
			s.Handler().ServeHTTP(rr, httptest.NewRequest(c.method, c.path, nil))
			if rr.Code != c.status {
				t.Errorf("status %d, want %d", rr.Code, c.status)
			}
			var body struct {
				Error struct{ Type, Message string }
			}
			if err := json.Unmarshal(rr.Body.Bytes(), &body); err != nil {
				t.Fatalf("body not JSON: %v", err)
			}
			if body.Error.Type != c.errType {
				t.Errorf("error type %q, want %q (%s)", body.Error.Type, c.errType, rr.Body)
			}
			if c.errType != "" && body.Error.Message == "" {
				t.Error("error without a message")
			}
		})
	}
}

// Mounted on a ServeMux pattern, the {id} wildcard is used.
func TestServeMuxPattern(t *testing.T) {
	s, _ := NewStore(4)
	s.Put(hedgedRetried("abc"))
	mux := http.NewServeMux()
	mux.Handle("GET /admin/traces/{id}", s.Handler())
	rr, body := get(t, mux, "/admin/traces/abc")
	if rr.Code != http.StatusOK || body["request_id"] != "abc" {
		t.Errorf("status %d, request_id %v", rr.Code, body["request_id"])
	}
}

func TestRing(t *testing.T) {
	cases := []struct {
		name    string
		cap     int
		puts    []string
		present []string
		absent  []string
		ids     []string
	}{
		{"under capacity", 3, []string{"a", "b"}, []string{"a", "b"}, []string{"c"}, []string{"b", "a"}},
		{"oldest evicted", 3, []string{"a", "b", "c", "d"}, []string{"b", "c", "d"}, []string{"a"}, []string{"d", "c", "b"}},
		{"wraps twice", 2, []string{"a", "b", "c", "d", "e"}, []string{"d", "e"}, []string{"a", "b", "c"}, []string{"e", "d"}},
		{"same id replaced in place, keeping its age", 2, []string{"a", "b", "a", "c"}, []string{"b", "c"}, []string{"a"}, []string{"c", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := NewStore(c.cap)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range c.puts {
				s.Put(&callrec.Record{Call: callrec.Call{RequestID: id}})
			}
			for _, id := range c.present {
				if _, ok := s.Get(id); !ok {
					t.Errorf("Get(%q) missing", id)
				}
			}
			for _, id := range c.absent {
				if _, ok := s.Get(id); ok {
					t.Errorf("Get(%q) present, want evicted", id)
				}
			}
			if got := s.IDs(); !reflect.DeepEqual(got, c.ids) {
				t.Errorf("IDs() = %v, want %v", got, c.ids)
			}
		})
	}
	if _, err := NewStore(-1); err == nil {
		t.Error("NewStore(-1) succeeded")
	}
}

// Only calls that asked for a trace are kept by the observer.
func TestObserverKeepsDebugCallsOnly(t *testing.T) {
	s, _ := NewStore(8)
	s.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "plain"}})
	s.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "opts", Behavior: &pipeline.Behavior{}}})
	s.RequestDone(&callrec.Record{Call: callrec.Call{RequestID: "dbg", Behavior: &pipeline.Behavior{Debug: true}}})
	if got := s.IDs(); !reflect.DeepEqual(got, []string{"dbg"}) {
		t.Errorf("stored %v, want [dbg]", got)
	}
	_, body := get(t, s.Handler(), "/debug/traces")
	if fmt.Sprint(body["request_ids"]) != "[dbg]" {
		t.Errorf("listing = %v", body)
	}
}

func TestConcurrentPutGet(t *testing.T) {
	s, _ := NewStore(16)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				id := fmt.Sprintf("%d-%d", g, i)
				s.Put(hedgedRetried(id))
				s.Get(id)
			}
		}()
	}
	wg.Wait()
	if n := len(s.IDs()); n != 16 {
		t.Errorf("%d traces kept, want 16", n)
	}
}
