package engine

import (
	"encoding/json"

	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Behavior is the per-request mesh options (pipeline.Behavior: stages
// read it without importing the engine).
type Behavior = pipeline.Behavior

// ParseBehavior merges the body's mesh_behavior and the X-Mesh-Behavior
// header (pipeline.ParseBehavior, with the personal-data actions a client
// may ask for).
func ParseBehavior(body json.RawMessage, header string) (*Behavior, error) {
	return pipeline.ParseBehavior(body, header, pii.ClientAction)
}
