package sim

import (
	"fmt"
	"math"
	"testing"
)

// TestDriftPerturbsOneFieldBounded: a model with a Drift answers an
// extraction with the field moved in about Share of the answers, by at
// most MaxDelta, every other field exact, and the same request always the
// same way.
func TestDriftPerturbsOneFieldBounded(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Models[0].Drift = &Drift{Field: "confidence_score", Share: 0.3, MaxDelta: 0.02}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	model := cfg.Models[0].Name
	const schema = `{"type":"object","properties":{"risk_level":{"type":"string"},"confidence_score":{"type":"number"}},"required":["risk_level","confidence_score"],"additionalProperties":false}`
	const n = 2000
	moved := 0
	for i := range n {
		score := 0.5 + float64(i%400)/1000
		in := fmt.Sprintf("case: %d\nrisk_level: high\nconfidence_score: %g\n", i, score)
		req := extractReq(model, "Extract the fields as JSON.", schema, in)
		got := decodeObject(t, Answer(cfg, req).Content[0].Text)
		if again := AnswerSample(cfg, req, uint64(i)+7).Content[0].Text; again != Answer(cfg, req).Content[0].Text {
			t.Fatalf("the same request drifted two ways: %s and %s", again, Answer(cfg, req).Content[0].Text)
		}
		if got["risk_level"] != "high" {
			t.Fatalf("risk_level = %v, want high (only confidence_score drifts)", got["risk_level"])
		}
		d := math.Abs(got["confidence_score"].(float64) - score)
		if d > 0.02+1e-9 {
			t.Fatalf("answer %d moved by %g > max_delta 0.02", i, d)
		}
		if d > 1e-9 {
			moved++
		}
	}
	// Binomial(2000, 0.3): sd ≈ 20.5; 5 sd either side.
	if moved < 600-103 || moved > 600+103 {
		t.Errorf("%d of %d answers moved, want about 30 %%", moved, n)
	}
	cfg.Models[0].Drift = &Drift{Field: "x", Share: 2, MaxDelta: 0.1}
	if err := cfg.Validate(); err == nil {
		t.Error("share 2 validated")
	}
}
