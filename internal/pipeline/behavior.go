package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
)

// Behavior holds the per-request mesh options a client may set in the body
// (`mesh_behavior`, or the object form of the Anthropic system) or in the
// X-Mesh-Behavior header; ParseBehavior reads and validates
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

// ParseBehavior merges the body's mesh_behavior and the X-Mesh-Behavior
// header (the body wins per key). Unknown keys, wrong types and a pii
// action piiAction does not accept are a 400 (an *llm.APIError).
func ParseBehavior(body json.RawMessage, header string, piiAction func(string) bool) (*Behavior, error) {
	var b Behavior
	if header != "" {
		if err := decodeBehavior([]byte(header), &b, "X-Mesh-Behavior"); err != nil {
			return nil, err
		}
	}
	if len(body) > 0 && !bytes.Equal(bytes.TrimSpace(body), []byte("null")) {
		if err := decodeBehavior(body, &b, "mesh_behavior"); err != nil {
			return nil, err
		}
	}
	if b.MinRedundancy < 0 {
		return nil, badBehavior("mesh_behavior.min_redundancy: must be ≥ 0")
	}
	if b.PII != "" && !piiAction(b.PII) {
		return nil, badBehavior(fmt.Sprintf("mesh_behavior.pii: unknown action %q (want redact, mask, block or log)", b.PII))
	}
	if b.MinModelCapability < 0 || b.MinModelCapability > 5 {
		return nil, badBehavior("mesh_behavior.min_model_capability: must be a tier between 1 and 5 or one of haiku, sonnet, opus")
	}
	return &b, nil
}

func decodeBehavior(data []byte, b *Behavior, where string) error {
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(b); err != nil {
		return badBehavior(fmt.Sprintf("%s: %v (known keys: disable_normalization, min_redundancy, preferred_region, min_model_capability, calibration_id, fragment, hedge, output_schema, debug, cache, pii)", where, err))
	}
	if d.More() {
		return badBehavior(where + ": trailing data after the object")
	}
	return nil
}

func badBehavior(msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: msg, Param: "mesh_behavior"}
}
