package pipeline

import (
	"encoding/json"
	"fmt"
)

// Behavior holds the per-request mesh options a client may set in the body
// (`mesh_behavior`, or the object form of the Anthropic system) or in the
// X-Mesh-Behavior header; the engine's ParseBehavior reads and validates
// them. It lives here, beside Call, because stages read it: a stage
// package never imports the engine. Fields not yet acted on are parsed and
// validated so clients get a clear error for a typo today.
type Behavior struct {
	DisableNormalization bool            `json:"disable_normalization,omitempty"`
	MinRedundancy        int             `json:"min_redundancy,omitempty"`
	PreferredRegion      string          `json:"preferred_region,omitempty"`
	MinModelCapability   Capability      `json:"min_model_capability,omitempty"`
	CalibrationID        string          `json:"calibration_id,omitempty"`
	Fragment             *bool           `json:"fragment,omitempty"`
	Hedge                *bool           `json:"hedge,omitempty"`
	OutputSchema         json.RawMessage `json:"output_schema,omitempty"`
	Debug                bool            `json:"debug,omitempty"`
	// Cache: false neither reads nor writes the response cache for this
	// call (X-Mesh-Cache: bypass); unset or true leaves it to the policy.
	Cache *bool `json:"cache,omitempty"`
	// PII is the call's personal-data action: redact, mask, block or log;
	// it may not let more through than the route's.
	PII string `json:"pii,omitempty"`
}

// Capability is a model tier, 1 (weakest) to 5 (strongest). In JSON it is a
// number or a tier name: "haiku" or "small" = 1, "sonnet" or "medium" = 3,
// "opus" or "large" = 5.
type Capability int

// UnmarshalJSON accepts a number or a tier name.
func (c *Capability) UnmarshalJSON(b []byte) error {
	var n int
	if err := json.Unmarshal(b, &n); err == nil {
		*c = Capability(n)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("min_model_capability: want a number or a tier name")
	}
	switch s {
	case "haiku", "small":
		*c = 1
	case "sonnet", "medium":
		*c = 3
	case "opus", "large":
		*c = 5
	default:
		return fmt.Errorf("min_model_capability: unknown tier %q (want haiku, sonnet or opus, or 1-5)", s)
	}
	return nil
}
