package chain

import (
	"errors"
	"testing"

	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/rollout"
	"github.com/keelmesh/keel/internal/semcache"
	"github.com/keelmesh/keel/internal/structured"
)

// Build: the zero config runs personal data (refusing a client's pii
// actions), structured output and fragmentation, no cache; a store turns
// the exact cache on and an embedder with it the semantic cache; each
// Build compiles schemas under its own limits (no process-wide setting).
func TestBuild(t *testing.T) {
	zero, err := Build(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if zero.PII == nil || zero.Structured == nil || zero.Fragment == nil || zero.Exact != nil || zero.Semantic != nil {
		t.Errorf("zero config: pii %t structured %t fragment %t exact %t semantic %t, want the first three only",
			zero.PII != nil, zero.Structured != nil, zero.Fragment != nil, zero.Exact != nil, zero.Semantic != nil)
	}
	sem := &semcache.Semantic{}
	if s, _ := Build(Config{Semantic: sem}); s.Semantic != nil {
		t.Error("a semantic cache without the exact cache was built")
	}
	both, err := Build(Config{Cache: store{}, Semantic: sem, Structured: structured.Settings{RelaxedStreams: true, Limits: structured.Limits{MaxProperties: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	if both.Exact == nil || both.Semantic == nil || !both.RelaxedStreams {
		t.Errorf("exact %t semantic %t relaxed %t, want all", both.Exact != nil, both.Semantic != nil, both.RelaxedStreams)
	}
	if both.Schemas == zero.Schemas || both.Schemas.Limits().MaxProperties != 3 || zero.Schemas.Limits().MaxProperties == 3 {
		t.Errorf("schema compilers shared or limits crossed: %+v, %+v", both.Schemas.Limits(), zero.Schemas.Limits())
	}
}

// Build checks the safety valve's policy with resilience.ValveConfig.Validate,
// as config does (moved from the engine with the valve's building), and a
// bad rollout; it builds the rollout stage over its own plan and valve.
func TestBuildRolloutAndValve(t *testing.T) {
	if _, err := Build(Config{Valve: resilience.ValveConfig{Threshold: 2}}); !errors.Is(err, resilience.ErrInvalidConfig) {
		t.Errorf("Build(threshold 2) = %v, want an error wrapping ErrInvalidConfig", err)
	}
	if _, err := Build(Config{Rollout: rollout.Rollout{Stage: "nope", Percent: 10}}); err == nil {
		t.Error("Build accepted an unknown rollout stage")
	}
	s, err := Build(Config{Rollout: rollout.Rollout{Stage: rollout.StageHedging, Percent: 30}, Valve: resilience.ValveConfig{Disabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	if s.Rollout == nil || s.Plan.Get() != (rollout.Rollout{Stage: rollout.StageHedging, Percent: 30}) || s.Valve.Enabled() {
		t.Errorf("rollout stage %t, plan %+v, valve enabled %t", s.Rollout != nil, s.Plan.Get(), s.Valve.Enabled())
	}
}
