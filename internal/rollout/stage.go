package rollout

import (
	"context"
	"time"

	"github.com/keelmesh/keel/internal/llm"

	"github.com/keelmesh/keel/internal/pipeline"
)

// Part is the rollout's part of a call's record: the stage the call runs
// in and the path that gives it.
type Part struct {
	Stage string
	Path  Path
}

// Hooks are what the rollout stage needs of the rest of the chain,
// supplied by its builder (the engine). Every func is required.
type Hooks struct {
	// Record is told the call's part once it is decided, before the
	// stages below run.
	Record func(c *pipeline.Call, p Part)
	// Start is when the call started: the valve is read at that time.
	Start func(c *pipeline.Call) time.Time
	// Monitor reports a call held to the monitor stage whatever its key
	// (the shadow of a call that took the legacy path).
	Monitor func(c *pipeline.Call) bool
}

// KeyHeader is the request header naming a call's rollout key, in
// canonical form.
const KeyHeader = "X-Mesh-Rollout-Key"

// NewStage returns the rollout stage: it picks the call's stage from plan
// by its rollout key (Key: the X-Mesh-Rollout-Key header, the end user,
// the request id) and its path from the stage and valve (PathFor), records
// both, and calls next. It is safe for concurrent use; it does not block.
func NewStage(plan *Plan, valve *Valve, h Hooks) pipeline.Stage {
	return func(next pipeline.Handler) pipeline.Handler {
		return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
			stage := plan.Stage(Key(llm.HeaderValue(c.Header, KeyHeader), c.Request.UserID, c.ID))
			if h.Monitor(c) {
				stage = StageMonitor
			}
			h.Record(c, Part{Stage: stage, Path: PathFor(stage, valve.Open(h.Start(c)))})
			return next.Serve(ctx, c)
		})
	}
}
