package engine

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// min_model_capability above the alias's primary model upgrades the call
// within the chain: the first model meeting the floor serves, in one
// attempt, and the weaker primary receives nothing. A plain model name
// below the floor (no chain to upgrade within) is a 400 naming the floor.
func TestCapabilityFloorUpgradesWithinAliasChain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		weak := &scripted{id: "weak", format: llm.FormatAnthropic, script: always(anthropicJSON("weak"))}
		mid := &scripted{id: "mid", format: llm.FormatAnthropic, script: always(anthropicJSON("mid"))}
		strong := &scripted{id: "strong", format: llm.FormatAnthropic, script: always(anthropicJSON("strong"))}
		h := newHarness(t, weak, mid, strong)
		w, m, s := h.endpoints("m-weak", "weak")[0], h.endpoints("m-mid", "mid")[0], h.endpoints("m-strong", "strong")[0]
		w.Capability, m.Capability, s.Capability = 2, 4, 5
		e := h.engine(Options{Aliases: map[string]Alias{"chain": {Models: []string{"m-weak", "m-mid", "m-strong"}, Strategy: "ordered"}}}, w, m, s)

		do := func(model string, floor pipeline.Capability) (*Outcome, error) {
			return e.Do(context.Background(), ask(llm.FormatAnthropic, model, false), Call{RequestID: "t", Behavior: &Behavior{MinModelCapability: floor}})
		}
		out, err := do("chain", 4)
		if err != nil {
			t.Fatalf("alias with floor 4: %v", err)
		}
		if r := out.Record; r.ServedModel != "m-mid" || len(r.Attempts) != 1 || r.Downgraded {
			t.Errorf("served %q in %d attempts (downgraded %v), want m-mid (the first chain model meeting the floor) in 1", r.ServedModel, len(r.Attempts), r.Downgraded)
		}
		if n := weak.count(); n != 0 {
			t.Errorf("the model below the floor received %d calls, want 0", n)
		}

		_, err = do("m-weak", 4)
		ae, _ := err.(*llm.APIError)
		if ae == nil || ae.Status != http.StatusBadRequest || ae.MeshCode != llm.MeshBadRequest || !strings.Contains(ae.Message, "below_min_capability (capability 2, floor 4)") {
			t.Fatalf("plain model below the floor: %v, want 400 MESH_BAD_REQUEST naming the model's capability and the floor", err)
		}
		if n := weak.count(); n != 0 {
			t.Errorf("the model below the floor received %d calls, want 0", n)
		}
	})
}
