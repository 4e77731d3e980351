package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Behavior is the per-request mesh options (pipeline.Behavior: stages
// read it without importing the engine).
type Behavior = pipeline.Behavior

// Capability is a model tier, 1 (weakest) to 5 (strongest).
type Capability = pipeline.Capability

// ParseBehavior merges the body's mesh_behavior and the X-Mesh-Behavior
// header (the body wins per key). Unknown keys and wrong types are a 400.
func ParseBehavior(body json.RawMessage, header string) (*Behavior, error) {
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
	if b.PII != "" && !pii.ClientAction(b.PII) {
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
