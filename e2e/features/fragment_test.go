package features_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

func report(long string) string {
	var b strings.Builder
	b.WriteString("# Quarterly report\n\n")
	for _, sec := range []string{"Balance sheet", "Income statement", "Cash flow"} {
		fmt.Fprintf(&b, "## %s\n\n", sec)
		for p := range 3 {
			fmt.Fprintf(&b, "The %s paragraph %d notes revenue of $152.37 million and steady margins. Costs fell by 3%% on the year.\n\n", strings.ToLower(sec), p)
		}
	}
	b.WriteString("## Notes\n\n" + long + "\n")
	return b.String()
}

// Must show (issue 8): fragments go to distinct endpoints and are fused;
// losing every replica of one fragment yields an answer that names the
// lost range.
func TestFragmentationNamesLostRange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		simCfg.Models[0].ContextWindow = 150 // sim-opus
		// One run-on "sentence" of ~230 words: it cannot be cut, so its
		// fragment is over the model's window everywhere.
		long := strings.TrimSpace(strings.Repeat("and the auditor kept adding remarks without a pause ", 30))
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			c.Models[0].ContextWindow = 150
			c.Fragmentation.TargetTokens = 60
		})
		defer s.mesh.Close()
		doc := report(long)
		body, _ := json.Marshal(map[string]any{"model": "sim-opus", "max_tokens": 200,
			"mesh_behavior": map[string]any{"fragment": true},
			"messages":      []map[string]any{{"role": "user", "content": doc}}})
		r := s.call(t, "/v1/messages", string(body))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		frags := r.header.Get("X-Mesh-Fragments")
		lost := r.header.Get("X-Mesh-Fragments-Lost")
		t.Logf("fragments %s lost %s", frags, lost)
		if frags == "" || lost == "" {
			t.Fatalf("fragments %q lost %q: want fragments and one lost range", frags, lost)
		}
		var start, end int
		if _, err := fmt.Sscanf(lost, "%d-%d", &start, &end); err != nil {
			t.Fatalf("lost range %q: %v", lost, err)
		}
		if !strings.Contains(doc[start:end], "auditor kept adding") {
			t.Errorf("the lost range %q does not cover the oversized section: %q", lost, doc[start:end])
		}
		var msg struct{ Content []struct{ Text string } }
		json.Unmarshal(r.body, &msg)
		if len(msg.Content) == 0 || !strings.Contains(msg.Content[0].Text, "could not be processed") || !strings.Contains(msg.Content[0].Text, lost) {
			t.Errorf("the answer does not name the lost range %s: %s", lost, r.body)
		}
		// Each answered fragment went to 2 distinct endpoints.
		s.mu.Lock()
		rec := s.records[len(s.records)-1]
		s.mu.Unlock()
		if rec.Fragments == nil {
			t.Fatal("the record has no fragments part")
		}
		if rec.Fragments.Count < 3 || rec.Fragments.OK != rec.Fragments.Count-1 {
			t.Errorf("record: %d fragments, %d answered", rec.Fragments.Count, rec.Fragments.OK)
		}
	})
}

// Must show (issue 8): fusion beats a single call. Each replica errs on a
// field with probability 10 % (the simulator's extraction error rate);
// fused answers with redundancy 3 have ≤ 3 % field errors.
func TestFusionBeatsSingleCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.ZeroLatency()
		for i := range simCfg.Models {
			simCfg.Models[i].ExtractionErrorRate = 0.1
		}
		s := newSimMesh(t, simCfg, nil)
		defer s.mesh.Close()
		fields := []string{"invoice_id", "vendor", "currency", "country", "terms", "status", "owner", "region"}
		props := map[string]any{}
		for _, f := range fields {
			props[f] = map[string]any{"type": "string"}
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props})
		const trials = 300
		var single, fused, total int
		for i := range trials {
			var doc strings.Builder
			want := map[string]string{}
			for j, f := range fields {
				v := fmt.Sprintf("v%d_%d", i, j)
				want[f] = v
				fmt.Fprintf(&doc, "%s: %s\n", f, v)
			}
			for _, redundant := range []bool{false, true} {
				req := map[string]any{"model": "sim-sonnet",
					"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "x", "schema": json.RawMessage(schema)}},
					"messages":        []map[string]any{{"role": "user", "content": "Extract the fields.\n\n" + doc.String()}}}
				if redundant {
					req["mesh_behavior"] = map[string]any{"fragment": true, "min_redundancy": 3}
				}
				body, _ := json.Marshal(req)
				r := s.call(t, "/v1/chat/completions", string(body))
				if r.status != 200 {
					t.Fatalf("status %d: %s", r.status, r.body)
				}
				var cc struct {
					Choices []struct{ Message struct{ Content string } }
				}
				json.Unmarshal(r.body, &cc)
				var got map[string]any
				if err := json.Unmarshal([]byte(cc.Choices[0].Message.Content), &got); err != nil {
					t.Fatalf("answer %q: %v", cc.Choices[0].Message.Content, err)
				}
				errs := 0
				for f, v := range want {
					if fmt.Sprint(got[f]) != v {
						errs++
					}
				}
				if redundant {
					fused += errs
				} else {
					single += errs
					total += len(fields)
				}
			}
		}
		ps, pf := float64(single)/float64(total), float64(fused)/float64(total)
		t.Logf("field error rate over %d fields: single call %.2f%%, fused (redundancy 3) %.2f%%", total, 100*ps, 100*pf)
		if ps < 0.07 || ps > 0.13 {
			t.Errorf("single-call field error %.3f, want ≈ 0.10 (the simulator's rate)", ps)
		}
		if pf > 0.03 {
			t.Errorf("fused field error %.3f, want ≤ 0.03", pf)
		}
	})
}

// Issue 8: a route may ask for a final merge call over free-text fragment
// answers; the answer is then the merge call's, and the call is counted.
func TestFragmentMergeCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, sim.ZeroLatency(), func(c *config.Config) {
			c.Fragmentation.TargetTokens = 60
			c.Fragmentation.MergeCall = true
		})
		defer s.mesh.Close()
		body, _ := json.Marshal(map[string]any{"model": "sim-sonnet", "max_tokens": 200,
			"mesh_behavior": map[string]any{"fragment": true},
			"messages":      []map[string]any{{"role": "user", "content": report("Short notes.")}}})
		r := s.call(t, "/v1/messages", string(body))
		if r.status != 200 {
			t.Fatalf("status %d: %s", r.status, r.body)
		}
		s.mu.Lock()
		rec := s.records[len(s.records)-1]
		s.mu.Unlock()
		merges := 0
		for _, a := range rec.Attempts {
			if a.Kind == "merge" {
				merges++
			}
		}
		if rec.Fragments == nil {
			t.Fatal("the record has no fragments part")
		}
		if !rec.Fragments.Merged || merges != 1 || rec.Fragments.Count < 2 {
			t.Errorf("merged %v, %d merge attempts, %d fragments", rec.Fragments.Merged, merges, rec.Fragments.Count)
		}
	})
}
