package engine

import (
	"context"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// StructuredOptions tune structured-output handling (structured.Config).
type StructuredOptions = structured.Config

// outputSpec is a call's output contract (structured.Spec).
type outputSpec = structured.Spec

// askSchema returns req asking ep's model for the call's schema in the
// form ep takes (provider.SchemaMode), and whether that is the forced
// output tool (whose call is folded back into text). Continuations,
// fragments and merge calls are sent as they are, except that JSON mode,
// the client's own demand, reaches every fragment.
func (x *exec) askSchema(req *llm.Request, ep *endpoint, kind policy.AttemptKind) (*llm.Request, bool) {
	sp := x.spec
	if sp != nil && sp.JSONMode && kind != policy.AttemptMerge {
		return x.askJSONMode(req, ep)
	}
	if sp == nil || kind == policy.AttemptFragment || kind == policy.AttemptMerge {
		return req, false
	}
	switch ep.StructuredOutputs {
	case provider.SchemaNone:
		return req, false
	case provider.SchemaTool:
		if len(req.Tools) > 0 || req.Stream && x.e.structOpts.RelaxedStreams {
			// The client's own tools, or a stream passed through as it
			// comes: a forced tool call would change the answer's shape.
			return req, false
		}
		return translate.WithOutputTool(req, sp.Raw), true
	}
	// The client's format: translation takes it to ep's.
	out, err := translate.WithOutputSchema(req, req.Format, sp.Raw)
	if err != nil {
		return req, false
	}
	return out, false
}

// jsonModeInstruction tells a model without a JSON mode what OpenAI's
// json_object would have made it do.
const jsonModeInstruction = "Respond with a single valid JSON object and nothing else: no prose, no code fences."

// askJSONMode returns req in the form ep understands for OpenAI JSON mode.
// An endpoint whose API has a JSON mode (OpenAI response_format
// json_object) gets req as it is. An Anthropic-format endpoint has none
// (the Messages API rejects response_format, and translation would drop
// it): with an instructor-style schema member whose root is an object with
// properties, Anthropic structured outputs with that schema (json_schema,
// translated to output_config.format) on a native endpoint; otherwise a
// forced output tool with the schema, or an open object, as input (folded
// back into the text: LiteLLM's emulation), where the endpoint takes tools
// and the request has no tools of its own and no thinking or reasoning
// (Anthropic refuses a forced tool with thinking on); a stream answered so
// is buffered and folded even under relaxed streams (engine.go); otherwise
// an instruction in the system prompt. The json_object format is removed,
// so nothing is dropped.
func (x *exec) askJSONMode(req *llm.Request, ep *endpoint) (*llm.Request, bool) {
	sp := x.spec
	if wire.For(ep.Format).JSONMode() || req.ResponseFormat == nil || req.ResponseFormat.Type != "json_object" {
		return req, false
	}
	out := *req
	out.ResponseFormat = nil
	_, thinking := req.Extra["thinking"]
	_, effort := req.Extra["reasoning_effort"]
	if _, r := req.Extra["reasoning"]; r {
		effort = true
	}
	withSchema := sp.Source == "response_format.json_object.schema"
	switch {
	case withSchema && ep.StructuredOutputs == provider.SchemaNative && translate.ObjectRoot(sp.Raw):
		out.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: translate.OutputSchemaName, Schema: sp.Raw}
		return &out, false
	case ep.StructuredOutputs != provider.SchemaNone && len(req.Tools) == 0 && !thinking && !effort:
		return translate.WithOutputTool(&out, sp.Raw), true
	}
	text := jsonModeInstruction
	if withSchema {
		text += " It must match this JSON Schema: " + string(sp.Raw)
	}
	out.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}, req.Messages...)
	return &out, false
}

// StructuredMetrics returns the structured-output counters.
func (e *Engine) StructuredMetrics() *structured.Metrics { return e.smetrics }

// structuredStage is the structured-output stage (structured.NewStage)
// over this engine's calls: its part goes into the call's record, the
// contract it sends upstream into the call's exec, and a re-ask's answer
// that replaced the first is credited to the re-ask's endpoint.
func (e *Engine) structuredStage() pipeline.Stage {
	return structured.NewStage(e.structOpts, e.schemas, e.smetrics, structured.Hooks{
		Record: func(pc *pipeline.Call, p *structured.Part) {
			c := callOf(pc)
			rec := &c.rec
			if c.structured == nil {
				// Before the attempts: what they ask for upstream.
				c.structured, c.x.spec = p, p.Upstream
				rec.Structured, rec.SchemaSource = p.Trace, p.Trace.Source
			}
			rec.Repairs, rec.Reasked, rec.SchemaViolation = p.Repairs, p.Reasked, p.Violation
			if p.Replaced {
				c.reasked, c.served = c.reask.ep, c.reask.ep
			}
		},
		Answers:    func(pc *pipeline.Call) bool { return callOf(pc).rec.Stage == StageFull },
		Legacy:     func(pc *pipeline.Call) bool { return callOf(pc).x.legacy },
		OutputTool: func(pc *pipeline.Call) bool { c := callOf(pc); return c.relay != nil && c.relay.legs.cur.tool },
		Reasker: func(pc *pipeline.Call) structured.Reasker {
			c := callOf(pc)
			c.reask = &reasker{c: c}
			return c.reask
		},
		Buffered: func(pc *pipeline.Call, resp *llm.Response, err error) {
			c := callOf(pc)
			if err != nil {
				c.rec.Response = nil // a refused answer is not what the client got
				return
			}
			c.rec.Usage = resp.Usage
		},
		Fused: func(pc *pipeline.Call) bool { return callOf(pc).fused },
	})
}

// reasker sends a re-ask as one more attempt of c (structured.Reasker):
// when the attempt and retry budgets allow, up a tier when the alias
// escalates. ep is the endpoint that answered it.
type reasker struct {
	c  *callState
	ep *endpoint
}

func (r *reasker) Reask(ctx context.Context, rq *llm.Request) (*pipeline.Answer, bool) {
	x := r.c.x
	if x.TakeRetry() != nil {
		return nil, false
	}
	r.c.escalate()
	a, err := x.run(ctx, rq, policy.AttemptReask)
	if err != nil {
		return nil, true
	}
	a.settle(nil)
	a.release()
	r2 := a.res.Response
	if r2 == nil {
		return nil, true
	}
	if a.tool {
		translate.FoldOutputTool(r2)
	}
	x.rec.Usage.OutputTokens += r2.Usage.OutputTokens
	r.ep = a.ep
	return &pipeline.Answer{Response: r2, Endpoint: a.ep.Endpoint}, true
}

// synthesize turns a complete answer back into stream events
// (structured.Synthesize).
func synthesize(resp *llm.Response, chunk int) []*llm.Event {
	return structured.Synthesize(resp, chunk)
}

// cutUTF8 cuts s to at most n bytes, never inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
