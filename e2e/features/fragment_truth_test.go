package features_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	keel "github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/callrec"
	kreport "github.com/keelmesh/keel/internal/report"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/internal/telemetry/debugtrace"
	"github.com/keelmesh/keel/sim"
)

// Issue 13: the X-Mesh-Fragments header, the debug trace and `keel report`
// are computed from the same record fields, so fragments lost on purpose
// (one region failing every call, one section too long for the model's
// context window everywhere) are counted alike by all three, and the trace
// names each fragment's byte range, endpoints and outcome.
func TestFragmentHeadersTraceAndReportAgree(t *testing.T) {
	var rec *callrec.Record
	var header, lost string
	var doc string
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Models[0].ContextWindow = 150 // sim-opus
		long := strings.TrimSpace(strings.Repeat("and the auditor kept adding remarks without a pause ", 30))
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Models[0].ContextWindow = 150
			c.Fragmentation.TargetTokens = 60
		})
		defer s.mesh.Close()
		if err := s.fleet.AddFault(sim.Fault{Kind: sim.KindServerError, Model: "sim-opus", Region: "eu-west", Status: 503}); err != nil {
			t.Fatal(err)
		}
		// The hint's titles hold digits: guarded spans never apply inside
		// a hint, so this is not a 400.
		doc = `<mesh-hint> context_boundary: ["Section 4: Region report 4", "Notes"] </mesh-hint>` + "\n" + report(long)
		doc = strings.Replace(doc, "## Income statement", "## Section 4: Region report 4", 1)
		body, _ := json.Marshal(map[string]any{"model": "sim-opus", "max_tokens": 200,
			"mesh_behavior": map[string]any{"fragment": true},
			"messages":      []map[string]any{{"role": "user", "content": doc}}})
		r := s.call(t, "/v1/messages", string(body))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		header, lost = r.header.Get("X-Mesh-Fragments"), r.header.Get("X-Mesh-Fragments-Lost")
		s.mu.Lock()
		rec = s.records[len(s.records)-1]
		s.mu.Unlock()
	})
	t.Logf("X-Mesh-Fragments: %s; X-Mesh-Fragments-Lost: %s", header, lost)

	// The record: some fragments answered, some lost, and the details say
	// which, with the bytes they cover.
	if rec.Fragments == nil {
		t.Fatal("the record has no fragments part")
	}
	if len(rec.Fragments.Details) != rec.Fragments.Count || rec.Fragments.Count < 3 {
		t.Fatalf("%d fragment details for %d fragments", len(rec.Fragments.Details), rec.Fragments.Count)
	}
	var wantLost []string
	ok, next := 0, 0
	sawEU := false
	for i, d := range rec.Fragments.Details {
		if d.Start != next {
			t.Errorf("fragment %d starts at %d, want %d (contiguous cover)", i, d.Start, next)
		}
		next = d.End
		if d.Outcome == callrec.FragmentOK {
			ok++
		} else {
			wantLost = append(wantLost, strconv.Itoa(d.Start)+"-"+strconv.Itoa(d.End))
		}
		if len(d.Endpoints) == 0 {
			t.Errorf("fragment %d names no endpoint", i)
		}
		sawEU = sawEU || slices.ContainsFunc(d.Endpoints, func(e string) bool { return strings.Contains(e, "eu-west") })
	}
	if next != len(doc) {
		t.Errorf("fragments cover [0, %d), want [0, %d)", next, len(doc))
	}
	if ok == 0 || ok == rec.Fragments.Count {
		t.Fatalf("%d of %d fragments ok: the test wants some lost and some answered", ok, rec.Fragments.Count)
	}
	if !sawEU {
		t.Errorf("no fragment tried the failing eu-west endpoint: %+v", rec.Fragments.Details)
	}

	// Header.
	if want := fmt.Sprintf("%d/%d", ok, rec.Fragments.Count); header != want {
		t.Errorf("X-Mesh-Fragments (-got +want):\n- %s\n+ %s", header, want)
	}
	if want := strings.Join(wantLost, ","); lost != want {
		t.Errorf("X-Mesh-Fragments-Lost (-got +want):\n- %s\n+ %s", lost, want)
	}
	for _, l := range wantLost {
		var a, b int
		fmt.Sscanf(l, "%d-%d", &a, &b)
		if !strings.Contains(doc[a:b], "auditor kept adding") {
			t.Errorf("lost range %s is not the oversized section: %.60q", l, doc[a:b])
		}
	}

	// Trace, as /debug/requests/{id} serves it.
	b, err := json.Marshal(debugtrace.View(rec))
	if err != nil {
		t.Fatal(err)
	}
	var tr struct {
		Fragments struct {
			Sent, Succeeded int
			Lost            []string
			Detail          []struct {
				Start, End int
				Endpoints  []string
				Outcome    string
			}
		}
	}
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%d/%d", tr.Fragments.Succeeded, tr.Fragments.Sent); got != header {
		t.Errorf("trace says %s, header %s", got, header)
	}
	if !slices.Equal(tr.Fragments.Lost, wantLost) {
		t.Errorf("trace lost (-got +want):\n- %v\n+ %v", tr.Fragments.Lost, wantLost)
	}
	if len(tr.Fragments.Detail) != rec.Fragments.Count {
		t.Fatalf("trace has %d fragment details, want %d", len(tr.Fragments.Detail), rec.Fragments.Count)
	}
	for i, d := range tr.Fragments.Detail {
		w := rec.Fragments.Details[i]
		if d.Start != w.Start || d.End != w.End || d.Outcome != w.Outcome || !slices.Equal(d.Endpoints, w.Endpoints) {
			t.Errorf("trace fragment %d (-got +want):\n- %+v\n+ %+v", i, d, w)
		}
	}

	// Report, from the request log.
	path := filepath.Join(t.TempDir(), "requests.db")
	l, err := sqlite.Open(sqlite.Config{Path: path, Now: func() time.Time { return rec.Start.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	l.RequestDone(rec)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rd, err := sqlite.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	since := rec.Start.Add(-time.Minute)
	rep, err := kreport.Build(rd.Query(context.Background(), since), kreport.Options{Since: since, Now: func() time.Time { return rec.Start.Add(time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%d/%d", rep.Fragmentation.FragmentsOK, rep.Fragmentation.FragmentsSent); got != header {
		t.Errorf("report says %s answered/sent, header %s", got, header)
	}
}

// fusionErrors measures field errors on the simulator at per-field error
// rate p: trials documents of 20 "field: value" lines, each extracted once
// by a single call and once by three replicas on distinct endpoints whose
// answers are fused. It returns the single-call and fused field error rates
// and the number of fields per arm.
func fusionErrors(tb testing.TB, p float64, trials int) (single, fused float64, fields int) {
	tb.Helper()
	simCfg := sim.ZeroLatency()
	for i := range simCfg.Models {
		simCfg.Models[i].ExtractionErrorRate = p
	}
	fleet, err := sim.New(simCfg)
	if err != nil {
		tb.Fatal(err)
	}
	cfg := simfleet.Config(fleet, "http://sim.test")
	off := false
	cfg.RequestLog.Enabled = &off
	mesh, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		tb.Fatal(err)
	}
	defer mesh.Close()
	names := make([]string, 20)
	props := map[string]any{}
	for j := range names {
		names[j] = fmt.Sprintf("field_%02d", j)
		props[names[j]] = map[string]any{"type": "string"}
	}
	schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
	var wrongSingle, wrongFused int
	for i := range trials {
		var doc strings.Builder
		for j, f := range names {
			fmt.Fprintf(&doc, "%s: v%d_%d\n", f, i, j)
		}
		for _, redundant := range []bool{false, true} {
			req := map[string]any{"model": "sim-sonnet",
				"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(schema)}},
				"messages":        []map[string]any{{"role": "user", "content": "Extract the fields.\n\n" + doc.String()}}}
			if redundant {
				req["mesh_behavior"] = map[string]any{"fragment": true, "min_redundancy": 3}
			}
			body, _ := json.Marshal(req)
			hr, _ := http.NewRequest("POST", "http://keel.test/v1/chat/completions", strings.NewReader(string(body)))
			hr.Header.Set("Content-Type", "application/json")
			resp, err := mesh.HTTPClient().Do(hr)
			if err != nil {
				tb.Fatal(err)
			}
			var cc struct {
				Choices []struct{ Message struct{ Content string } }
			}
			err = json.NewDecoder(resp.Body).Decode(&cc)
			resp.Body.Close()
			if resp.StatusCode != 200 || err != nil || len(cc.Choices) == 0 {
				tb.Fatalf("status %d, %v", resp.StatusCode, err)
			}
			var got map[string]any
			if err := json.Unmarshal([]byte(cc.Choices[0].Message.Content), &got); err != nil {
				tb.Fatalf("answer %q: %v", cc.Choices[0].Message.Content, err)
			}
			for j, f := range names {
				if fmt.Sprint(got[f]) != fmt.Sprintf("v%d_%d", i, j) {
					if redundant {
						wrongFused++
					} else {
						wrongSingle++
					}
				}
			}
		}
	}
	fields = trials * len(names)
	return float64(wrongSingle) / float64(fields), float64(wrongFused) / float64(fields), fields
}

// Issue 13: fusion measurably helps. Over 1,000 fields per arm, three fused
// replicas' field error is at most 0.75× a single call's at p = 0.3 and
// 0.3× at p = 0.1 (majority voting predicts 0.72× and 0.28×).
func TestFusionErrorRatio(t *testing.T) {
	for _, tc := range []struct {
		name     string
		p, ratio float64
	}{
		{"p=0.3", 0.3, 0.75},
		{"p=0.1", 0.1, 0.3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				single, fused, n := fusionErrors(t, tc.p, 50)
				t.Logf("%d fields: single call %.1f%%, fused ×3 %.1f%%, ratio %.2f", n, 100*single, 100*fused, fused/single)
				if n < 1000 {
					t.Fatalf("%d fields, want ≥ 1000", n)
				}
				if single < tc.p-0.05 || single > tc.p+0.05 {
					t.Errorf("single-call field error %.3f, want ≈ %.2f (the simulator's rate)", single, tc.p)
				}
				if fused > tc.ratio*single {
					t.Errorf("fused field error %.3f > %.2f × single %.3f", fused, tc.ratio, single)
				}
			})
		})
	}
}

// BenchmarkFusion reports the fused and single-call field error rates and
// their ratio at p = 0.3 and 0.1 (1,000 fields per arm per iteration).
func BenchmarkFusion(b *testing.B) {
	for _, p := range []float64{0.3, 0.1} {
		b.Run(fmt.Sprintf("p=%.1f", p), func(b *testing.B) {
			var single, fused float64
			for b.Loop() {
				s, f, _ := fusionErrors(b, p, 50)
				single += s
				fused += f
			}
			n := float64(b.N)
			b.ReportMetric(single/n, "single_err")
			b.ReportMetric(fused/n, "fused_err")
			b.ReportMetric(fused/single, "ratio")
		})
	}
}
