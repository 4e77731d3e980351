package keel_test

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
		if rec.Fragments < 3 || rec.FragmentsOK != rec.Fragments-1 {
			t.Errorf("record: %d fragments, %d answered", rec.Fragments, rec.FragmentsOK)
		}
	})
}
