package server

import (
	"net/http"
	"reflect"
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

// headerCase is one record and the headers a family sets from it.
type headerCase struct {
	name string
	rec  callrec.Record
	want http.Header
}

// runFamily checks that family sets exactly want's headers for each case's
// record (nothing for a stage that did not act).
func runFamily(t *testing.T, family func(setter, *callrec.Record), cases []headerCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := http.Header{}
			family(got, &tc.rec)
			want := tc.want
			if want == nil {
				want = http.Header{}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("headers (-got +want):\n- %v\n+ %v", got, want)
			}
		})
	}
}

// h builds an http.Header from name, value pairs.
func h(kv ...string) http.Header {
	out := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func TestRoutingHeaders(t *testing.T) {
	two := []callrec.Attempt{{Endpoint: "a"}, {Endpoint: "b"}}
	family := func(s setter, rec *callrec.Record) { routingHeaders(s, "sim-sonnet", "eu-west", "sim", rec) }
	runFamily(t, family, []headerCase{
		{"first choice served", callrec.Record{Route: callrec.Route{Attempts: two[:1]}},
			h("X-Mesh-Model", "sim-sonnet", "X-Mesh-Region", "eu-west", "X-Mesh-Provider", "sim", "X-Mesh-Attempts", "1")},
		{"fallback, hedge won, continued", callrec.Record{Route: callrec.Route{Attempts: two, Fallback: "overloaded", Hedges: 1, HedgeWon: true, Recovered: 2}},

			h("X-Mesh-Model", "sim-sonnet", "X-Mesh-Region", "eu-west", "X-Mesh-Provider", "sim", "X-Mesh-Attempts", "2",
				"X-Mesh-Fallback", "overloaded", "X-Mesh-Hedged", "won", "X-Mesh-Recovered", "2")},
		{"hedge lost", callrec.Record{Route: callrec.Route{Attempts: two, Hedges: 1}},
			h("X-Mesh-Model", "sim-sonnet", "X-Mesh-Region", "eu-west", "X-Mesh-Provider", "sim", "X-Mesh-Attempts", "2", "X-Mesh-Hedged", "lost")},
	})
}

func TestPathHeaders(t *testing.T) {
	runFamily(t, pathHeaders, []headerCase{
		{"full stage", callrec.Record{Route: callrec.Route{Stage: "full"}}, nil},
		{"no stage", callrec.Record{}, nil},
		{"monitor, legacy", callrec.Record{Route: callrec.Route{Stage: "monitor", Legacy: true}},
			h("X-Mesh-Mode", "legacy", "X-Mesh-Stage", "monitor")},
		{"hedging", callrec.Record{Route: callrec.Route{Stage: "hedging"}}, h("X-Mesh-Stage", "hedging")},
	})
}

func TestFragmentHeaders(t *testing.T) {
	runFamily(t, fragmentHeaders, []headerCase{
		{"not split", callrec.Record{}, nil},
		{"all answered", callrec.Record{Fragments: &callrec.Fragments{Count: 3, OK: 3, Fusions: 4}}, h("X-Mesh-Fragments", "3/3")},
		{"lost and conflicting", callrec.Record{Fragments: &callrec.Fragments{Count: 4, OK: 2, FusionConflicts: 1, LostRanges: []string{"0-100", "300-400"}}},

			h("X-Mesh-Fragments", "2/4", "X-Mesh-Fragments-Lost", "0-100,300-400", "X-Mesh-Fusion-Conflicts", "1")},
		{"part without fragments", callrec.Record{Fragments: &callrec.Fragments{FusionConflicts: 1}}, nil},
	})
}

func TestTierHeaders(t *testing.T) {
	runFamily(t, tierHeaders, []headerCase{
		{"not tiered", callrec.Record{}, nil},
		{"simple", callrec.Record{Tier: &callrec.Tier{Complexity: "simple", Name: "cheap"}}, h("X-Mesh-Tier", "simple/cheap")},
		{"escalated", callrec.Record{Tier: &callrec.Tier{Complexity: "medium", Name: "strong", Escalated: true}},
			h("X-Mesh-Tier", "medium/strong; escalated")},
	})
}

func TestCacheHeaders(t *testing.T) {
	runFamily(t, cacheHeaders, []headerCase{
		{"no cache", callrec.Record{}, nil},
		{"miss", callrec.Record{Cache: &callrec.Cache{Status: "miss"}}, h("X-Mesh-Cache", "miss")},
		{"bypass", callrec.Record{Cache: &callrec.Cache{Status: "bypass"}}, h("X-Mesh-Cache", "bypass")},
		{"semantic miss", callrec.Record{Cache: &callrec.Cache{Status: "miss"}, Semantic: &callrec.Semantic{Status: "miss"}},
			h("X-Mesh-Cache", "miss")},
		{"semantic hit", callrec.Record{Cache: &callrec.Cache{Status: "hit"}, Semantic: &callrec.Semantic{Status: "hit", Similarity: 0.95999}},
			h("X-Mesh-Cache", "hit", "X-Mesh-Cache-Similarity", "0.9600")},
	})
}

func TestPIIHeaders(t *testing.T) {
	runFamily(t, piiHeaders, []headerCase{
		{"not run", callrec.Record{}, nil},
		{"nothing found", callrec.Record{PII: &pii.Report{Action: "redact"}}, nil},
		{"kinds in order first found", callrec.Record{PII: &pii.Report{Action: "redact", Findings: []pii.Finding{{Kind: "EMAIL"}, {Kind: "PHONE"}, {Kind: "EMAIL"}}}},

			h("X-Mesh-PII", "redact; EMAIL=2, PHONE=1")},
	})
}

func TestNormalizationHeaders(t *testing.T) {
	runFamily(t, normalizationHeaders, []headerCase{
		{"nothing adapted", callrec.Record{}, nil},
		{"dropped and normalized", callrec.Record{Normalization: &callrec.Normalization{Dropped: []string{"top_k", "seed"}, Normalized: "top_k:dropped"}},

			h("X-Mesh-Dropped", "top_k,seed", "X-Mesh-Normalized", "top_k:dropped")},
		{"calibrated", callrec.Record{Normalization: &callrec.Normalization{Calibrated: true, Offset: -0.25}},
			h("X-Mesh-Normalization-Offset", "-0.250")},
		{"calibrated to no offset", callrec.Record{Normalization: &callrec.Normalization{Calibrated: true}},
			h("X-Mesh-Normalization-Offset", "+0.000")},
	})
}

func TestStructuredHeaders(t *testing.T) {
	runFamily(t, structuredHeaders, []headerCase{
		{"no contract", callrec.Record{}, nil},
		{"given, repaired", callrec.Record{Structured: &callrec.Structured{Contract: &structured.Trace{Source: "given"}, Repairs: []string{"strip_fence", "close_brackets"}}},

			h("X-Mesh-Schema", "given", "X-Mesh-Repaired", "strip_fence,close_brackets")},
		{"implied, re-asked, still invalid", callrec.Record{Structured: &callrec.Structured{Contract: &structured.Trace{Source: "implied", Required: []string{"risk"}}, Reasked: true, Violation: true}},

			h("X-Mesh-Schema", "implied", "X-Mesh-Reasked", "true", "X-Mesh-Schema-Violation", "risk")},
		{"fused answer broke JSON", callrec.Record{Structured: &callrec.Structured{Violation: true}}, h("X-Mesh-Schema-Violation", "true")},
	})
}

func TestErrorHeaders(t *testing.T) {
	runFamily(t, func(s setter, rec *callrec.Record) { errorHeaders(s.(http.Header), rec) }, []headerCase{
		{"nothing tried", callrec.Record{}, h("X-Mesh-Attempts", "0")},
		{"last attempt named", callrec.Record{
			Route: callrec.Route{Fallback: "server_error",
				Attempts: []callrec.Attempt{{Model: "a", Region: "us", Provider: "p"}, {Model: "b", Region: "eu", Provider: "q"}}},
			Normalization: &callrec.Normalization{Dropped: []string{"top_k"}, Normalized: "top_k:dropped", Calibrated: true, Offset: 0.1},
		}, h("X-Mesh-Attempts", "2", "X-Mesh-Model", "b", "X-Mesh-Region", "eu", "X-Mesh-Provider", "q", "X-Mesh-Fallback", "server_error",
			"X-Mesh-Dropped", "top_k", "X-Mesh-Normalized", "top_k:dropped")},
	})
}

// TestAnswerHeaders: a served call sets every family from its parts, and a
// stream's trailer sets the served families again (routing, path,
// fragments), the ones not declared as trailers under the trailer prefix.
func TestAnswerHeaders(t *testing.T) {
	rec := &callrec.Record{
		Route:         callrec.Route{Attempts: []callrec.Attempt{{}}, Stage: "hedging"},
		Result:        callrec.Result{Usage: llm.Usage{InputTokens: 1}},
		Tier:          &callrec.Tier{Complexity: "simple", Name: "cheap"},
		Cache:         &callrec.Cache{Status: "miss"},
		Normalization: &callrec.Normalization{Dropped: []string{"seed"}},
		Structured:    &callrec.Structured{Contract: &structured.Trace{Source: "given"}},
		Fragments:     &callrec.Fragments{Count: 2, OK: 2},
		PII:           &pii.Report{Action: "mask", Findings: []pii.Finding{{Kind: "EMAIL"}}},
	}
	got := http.Header{}
	answerHeaders(got, &provider.Endpoint{Model: "m", Region: "r", Provider: "p"}, rec)
	want := h("X-Mesh-Model", "m", "X-Mesh-Region", "r", "X-Mesh-Provider", "p", "X-Mesh-Attempts", "1", "X-Mesh-Stage", "hedging",
		"X-Mesh-Tier", "simple/cheap", "X-Mesh-Cache", "miss", "X-Mesh-Dropped", "seed", "X-Mesh-Schema", "given", "X-Mesh-Fragments", "2/2",
		"X-Mesh-PII", "mask; EMAIL=1")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("answer headers (-got +want):\n- %v\n+ %v", got, want)
	}
	tr := http.Header{}
	servedHeaders(streamTrailer{tr}, "m2", "r2", "p2", rec)
	wantTr := h("X-Mesh-Model", "m2", "X-Mesh-Region", "r2", "X-Mesh-Provider", "p2", "X-Mesh-Attempts", "1",
		http.TrailerPrefix+"X-Mesh-Stage", "hedging", http.TrailerPrefix+"X-Mesh-Fragments", "2/2")
	if !reflect.DeepEqual(tr, wantTr) {
		t.Errorf("trailer (-got +want):\n- %v\n+ %v", tr, wantTr)
	}
}

// TestHeaderValueIsGet: headerValue answers as http.Header.Get for every
// canonical name the server reads, whatever case the client sent.
func TestHeaderValueIsGet(t *testing.T) {
	names := []string{"Traceparent", "X-Mesh-Behavior", "X-Mesh-Debug", "Mesh-Debug-Mode", "X-Mesh-Timeout", "Origin", "Content-Type", "Request-Id", "X-Request-Id"}
	for _, n := range names {
		if c := http.CanonicalHeaderKey(n); c != n {
			t.Fatalf("%q is not canonical (%q): headerValue needs canonical names", n, c)
		}
	}
	for _, h := range []http.Header{
		nil,
		{},
		{"X-Mesh-Debug": {"true"}, "Traceparent": {"00-abc-def-01", "second"}, "Origin": {""}},
		{"x-mesh-debug": {"true"}, "content-type": {"application/json"}}, // set in the map as sent: Get does not see them either
		{"Content-Type": {"application/json; charset=utf-8"}, "Request-Id": {"req_1"}, "X-Request-Id": {"req_2"}},
	} {
		for _, n := range names {
			if got, want := headerValue(h, n), h.Get(n); got != want {
				t.Errorf("headerValue(%v, %q) = %q, Get = %q", h, n, got, want)
			}
		}
	}
}
