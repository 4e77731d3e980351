package attempt

import (
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
)

// askSchema returns req asking ep's model for the call's contract in the
// form ep takes (structured.Spec.Ask), and whether that is the forced
// output tool (whose call is folded back into text).
func (x *Exec) askSchema(req *llm.Request, ep *fleet.Endpoint, kind policy.AttemptKind) (*llm.Request, bool) {
	t := structured.Target{Mode: ep.StructuredOutputs, JSONMode: wire.For(ep.Format).JSONMode()}
	return x.Spec.Ask(req, t, kind.String(), x.r.d.RelaxedStreams)
}
