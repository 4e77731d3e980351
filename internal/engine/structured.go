package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// StructuredOptions tune structured-output handling. Zero values are the
// defaults.
type StructuredOptions struct {
	// RelaxedStreams streams answers through and validates at the end
	// (reported in the X-Mesh-Schema-Valid trailer) instead of buffering
	// and repairing them (strict, the default).
	RelaxedStreams bool
	// PassViolations answers with the raw invalid answer and an
	// X-Mesh-Schema-Violation header instead of MESH_SCHEMA_VIOLATION.
	PassViolations bool
	// DisableReask skips the targeted repair request.
	DisableReask bool
	// DisableImplied ignores schemas implied by the system prompt.
	DisableImplied bool
	// StrictImplied treats an implied schema as a contract: an answer
	// that stays invalid is MESH_SCHEMA_VIOLATION, as for a schema the
	// client gave. Otherwise (the default) an implied schema only helps:
	// the client gets the model's own answer with X-Mesh-Schema-Violation.
	StrictImplied bool
	// Derive lists declared derivation rules for missing required fields.
	Derive []structured.Derivation
	// Limits bound client schemas before they are compiled (zero fields:
	// structured.DefaultLimits).
	Limits structured.Limits
}

// outputSpec says which part of an answer must be JSON, and against what.
type outputSpec struct {
	schema *structured.Schema // nil: any JSON value
	raw    json.RawMessage
	// tool, when set, names the forced tool whose input must validate;
	// otherwise the answer's text must.
	tool    string
	source  string // response_format, forced_tool, output_schema, implied
	implied *structured.Implied
	// jsonMode marks OpenAI JSON mode (response_format json_object, with
	// or without an instructor-style schema member): the answer must
	// parse, but the model's answer is never turned into an error.
	jsonMode bool
}

// mayFail reports whether an answer that stays invalid fails the call
// (502 MESH_SCHEMA_VIOLATION) under opts: only for a schema the client
// gave in a structured-output format, or an implied one under
// structured_output.implied: strict. JSON mode and implied schemas are the
// client's or Keel's wish, not a contract: direct, the client would have
// had the model's answer, so it gets it (STYLE 23).
func (sp *outputSpec) mayFail(opts StructuredOptions) bool {
	switch {
	case opts.PassViolations, sp.jsonMode:
		return false
	case sp.implied != nil:
		return opts.StrictImplied
	}
	return true
}

// given reports whether the client named the schema (rather than Keel
// reading it from the system prompt).
func (sp *outputSpec) given() bool { return sp.implied == nil }

// record describes sp for the call's record and debug trace.
func (sp *outputSpec) record() *Structured {
	st := &Structured{Source: "given", Origin: sp.source, Schema: sp.raw, Required: topRequired(sp.raw)}
	if sp.implied != nil {
		st.Source, st.Sentence, st.Required = "implied", sp.implied.Sentence, sp.implied.Required
	}
	return st
}

func topRequired(raw json.RawMessage) []string {
	var s struct {
		Required []string `json:"required"`
	}
	json.Unmarshal(raw, &s)
	return s.Required
}

// upstream reports whether sp should be sent upstream with the request:
// only a schema the client named in no wire format of its own
// (mesh_behavior.output_schema) or one implied by its system prompt, and
// only an object schema with properties (what both providers' structured
// outputs take). A response_format, output_config or forced tool the
// client sent goes upstream as it is.
func (sp *outputSpec) upstream(req *llm.Request) bool {
	if sp.jsonMode {
		return true // askJSONMode decides per endpoint
	}
	if sp.implied != nil && !sp.implied.Sure {
		// A guess: validated and repaired against, never sent.
		return false
	}
	if sp.source != "mesh_behavior.output_schema" && sp.source != "implied" {
		return false
	}
	if req.ResponseFormat != nil || anthropicJSONFormat(req) != nil {
		return false
	}
	if tc := req.ToolChoice; tc != nil && tc.Type == llm.ToolChoiceTool {
		return false
	}
	return translate.ObjectRoot(sp.raw)
}

// askSchema returns req asking ep's model for the call's schema in the
// form ep takes (provider.SchemaMode), and whether that is the forced
// output tool (whose call is folded back into text). Continuations,
// fragments and merge calls are sent as they are, except that JSON mode,
// the client's own demand, reaches every fragment.
func (x *exec) askSchema(req *llm.Request, ep *endpoint, kind string) (*llm.Request, bool) {
	sp := x.spec
	if sp != nil && sp.jsonMode && kind != "merge" {
		return x.askJSONMode(req, ep)
	}
	if sp == nil || kind == "fragment" || kind == "merge" {
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
		return translate.WithOutputTool(req, sp.raw), true
	}
	// The client's format: translation takes it to ep's.
	out, err := translate.WithOutputSchema(req, req.Format, sp.raw)
	if err != nil {
		return req, false
	}
	return out, false
}

// objectSchema is what json_object asks for.
var objectSchema = json.RawMessage(`{"type":"object"}`)

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
	withSchema := sp.source == "response_format.json_object.schema"
	switch {
	case withSchema && ep.StructuredOutputs == provider.SchemaNative && translate.ObjectRoot(sp.raw):
		out.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: translate.OutputSchemaName, Schema: sp.raw}
		return &out, false
	case ep.StructuredOutputs != provider.SchemaNone && len(req.Tools) == 0 && !thinking && !effort:
		return translate.WithOutputTool(&out, sp.raw), true
	}
	text := jsonModeInstruction
	if withSchema {
		text += " It must match this JSON Schema: " + string(sp.raw)
	}
	out.Messages = append([]llm.Message{{Role: llm.RoleSystem, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}, req.Messages...)
	return &out, false
}

// outputSpecFor finds the request's output contract, or nil when the
// answer passes untouched.
func (e *Engine) outputSpecFor(ctx context.Context, req *llm.Request, b *Behavior) (*outputSpec, error) {
	compile := func(raw json.RawMessage, src string) (*outputSpec, error) {
		s, err := structured.CompileContext(ctx, raw, e.structOpts.Limits)
		if err != nil {
			if ctx.Err() != nil {
				return nil, &llm.APIError{Status: http.StatusGatewayTimeout, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout, Message: src + ": " + err.Error()}
			}
			msg := src + ": invalid JSON Schema: " + err.Error()
			if errors.Is(err, structured.ErrSchemaLimit) {
				msg = src + ": schema refused: " + err.Error()
			}
			return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: src, Message: msg}
		}
		return &outputSpec{schema: s, raw: raw, source: src}, nil
	}
	if b != nil && len(b.OutputSchema) > 0 {
		return compile(b.OutputSchema, "mesh_behavior.output_schema")
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "json_schema":
			if len(rf.Schema) > 0 {
				return compile(rf.Schema, "response_format.json_schema")
			}
		case "json_object":
			// instructor's JSON modes send the schema beside the type
			// (response_format {type: json_object, schema: {…}}), as
			// Together, Fireworks and Anyscale take it: validated against.
			raw, src := objectSchema, "response_format.json_object"
			if s, ok := rf.Extra["schema"]; ok && len(s) > 0 && s[0] == '{' {
				raw, src = s, "response_format.json_object.schema"
			}
			sp, err := compile(raw, src)
			if err != nil {
				return nil, err
			}
			sp.jsonMode = true
			return sp, nil
		}
	}
	if raw := anthropicJSONFormat(req); raw != nil {
		return compile(raw, "output_config.format")
	}
	if tc := req.ToolChoice; tc != nil && tc.Type == llm.ToolChoiceTool {
		for _, t := range req.Tools {
			if t.Name == tc.Name && len(t.InputSchema) > 0 {
				sp, err := compile(t.InputSchema, "forced_tool")
				if err != nil {
					return nil, err
				}
				sp.tool = t.Name
				return sp, nil
			}
		}
	}
	if !e.structOpts.DisableImplied && len(req.Tools) == 0 {
		if sys := req.SystemText(); sys != "" {
			if imp, ok := structured.ExtractConstraints(sys); ok {
				sp, err := compile(imp.Schema, "implied")
				if err != nil {
					return nil, nil // an implied schema we cannot compile is no contract
				}
				sp.implied = imp
				return sp, nil
			}
		}
	}
	return nil, nil
}

// StructuredMetrics returns the structured-output counters.
func (e *Engine) StructuredMetrics() *structured.Metrics { return e.smetrics }

// answerJSON returns the part of resp that must be JSON.
func (sp *outputSpec) answerJSON(resp *llm.Response) (string, int, bool) {
	if sp.tool != "" {
		for i, b := range resp.Content {
			if b.Type == llm.BlockToolUse && b.Name == sp.tool {
				return string(b.Input), i, true
			}
		}
		return "", -1, false
	}
	return resp.Text(), -1, true
}

// replace puts the repaired document back into resp.
func (sp *outputSpec) replace(resp *llm.Response, idx int, doc []byte) {
	resp.Touch()
	if sp.tool != "" {
		resp.Content[idx].Input = json.RawMessage(doc)
		return
	}
	// One text block carries the document (surrounding prose was part of
	// what the repair removed).
	var content []llm.Block
	placed := false
	for _, b := range resp.Content {
		if b.Type == llm.BlockText {
			if !placed {
				content = append(content, llm.Block{Type: llm.BlockText, Text: string(doc)})
				placed = true
			}
			continue
		}
		content = append(content, b)
	}
	resp.Content = content
}

// checkStructured validates resp, repairs it losslessly, re-asks once when
// it cannot, and returns the answer to deliver.
func (x *exec) checkStructured(ctx context.Context, sp *outputSpec, resp *llm.Response) (*llm.Response, error) {
	e := x.e
	opt := structured.Options{Input: promptText(x.req), Derive: e.structOpts.Derive}
	doc, idx, ok := sp.answerJSON(resp)
	var res structured.Result
	if ok {
		res = structured.Repair(doc, sp.schema, opt)
		e.smetrics.Observe(res)
		x.noteRepair(res)
		if res.Valid {
			if res.Changed {
				sp.replace(resp, idx, res.Output)
			}
			return resp, nil
		}
	}
	x.noteInvalid(sp, doc, ok)
	// An answer cut by max_tokens is what the client asked for: asked
	// again with the same limit it would be cut again. Direct, the client
	// gets it with finish_reason length; so it does here.
	cut := resp.StopReason == llm.StopMaxTokens
	if !cut && !e.structOpts.DisableReask && x.TakeRetry() == nil {
		e.smetrics.Reasked.Add(1)
		x.rec.Reasked = true
		rq := reaskRequest(x.req, sp, doc, res.Violations, ok)
		x.escalate()
		if a, err := x.run(ctx, rq, "reask"); err == nil {
			a.settle(nil)
			a.release()
			if a.res.Response != nil {
				r2 := a.res.Response
				if a.tool {
					translate.FoldOutputTool(r2)
				}
				x.rec.Usage.OutputTokens += r2.Usage.OutputTokens
				if doc2, idx2, ok2 := sp.answerJSON(r2); ok2 {
					res2 := structured.Repair(doc2, sp.schema, opt)
					e.smetrics.Observe(res2)
					x.noteRepair(res2)
					if res2.Valid {
						if res2.Changed {
							sp.replace(r2, idx2, res2.Output)
						}
						// Keep the first answer's usage of the prompt: the
						// client's prompt was sent once as far as it knows.
						x.reasked = a.ep
						return r2, nil
					}
					res = res2
				}
			}
		}
	}
	e.smetrics.Failed.Add(1)
	x.rec.SchemaViolation = true
	if cut || !sp.mayFail(e.structOpts) {
		// The model's own answer, as direct; X-Mesh-Schema-Violation
		// names the keys it was checked against.
		return resp, nil
	}
	msg := "the answer is not valid JSON for the requested schema and could not be repaired"
	if len(res.Violations) > 0 {
		var parts []string
		for i, v := range res.Violations {
			if i == 3 {
				break
			}
			parts = append(parts, v.String()) // "(root)" for the whole answer, never an empty path
		}
		msg += ": " + strings.Join(parts, "; ")
	}
	ae := &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshSchemaViolation, Message: msg}
	if x.rec.SchemaSource != "" {
		ae.MeshHeaders = map[string]string{"X-Mesh-Schema": x.rec.SchemaSource}
	}
	return nil, ae
}

// maxInvalidAnswer bounds the invalid answer a record keeps.
const maxInvalidAnswer = 4 << 10

// noteInvalid keeps the call's first invalid answer for its trace.
func (x *exec) noteInvalid(sp *outputSpec, doc string, found bool) {
	st := x.rec.Structured
	if st == nil || st.InvalidAnswer != "" {
		return
	}
	if !found {
		doc = "(no " + sp.tool + " call)"
	}
	st.InvalidAnswer = cutUTF8(doc, maxInvalidAnswer)
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

func (x *exec) noteRepair(res structured.Result) {
	for _, s := range res.Steps {
		x.rec.Repairs = append(x.rec.Repairs, s.Name)
	}
}

// reaskRequest is the targeted repair request: the conversation, the
// invalid answer, and the validator's complaints.
func reaskRequest(req *llm.Request, sp *outputSpec, invalid string, v []structured.Violation, found bool) *llm.Request {
	out := *req
	msgs := make([]llm.Message, len(req.Messages), len(req.Messages)+2)
	copy(msgs, req.Messages)
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
		msgs = msgs[:n-1] // a client prefill is re-sent by the model's answer
	}
	if !found {
		invalid = "(no " + sp.tool + " call)"
	}
	prompt := structured.RepairPrompt(invalid, v, sp.raw)
	if sp.tool != "" {
		// A forced tool call: ask again with the complaints; the tool
		// choice still forces the call.
		prompt = fmt.Sprintf("Your %s call had invalid input. %s", sp.tool, prompt)
	}
	msgs = append(msgs,
		llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: nonEmpty(invalid)}}},
		llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: prompt}}})
	out.Messages = msgs
	out.Stream = false
	return &out
}

func nonEmpty(s string) string {
	if strings.TrimSpace(s) == "" {
		return "(empty answer)"
	}
	return strings.TrimRight(s, " \t\r\n")
}

// accumulate builds the complete answer from a stream's events.
func accumulate(s *relay) (*llm.Response, error) {
	var a llm.Accumulator
	for {
		ev, err := s.Next()
		if err != nil {
			break
		}
		if ev.Type == llm.EventError {
			return nil, ev.Err
		}
		a.Add(ev)
	}
	return a.Response(), nil
}

// synthesize turns a complete answer back into stream events, cutting text
// and tool input into deltas of about chunk bytes (never inside a UTF-8
// character), so the reassembled answer is exactly resp.
func synthesize(resp *llm.Response, chunk int) []*llm.Event {
	start := *resp
	start.Content = nil
	start.Usage = llm.Usage{InputTokens: resp.Usage.InputTokens, CacheReadTokens: resp.Usage.CacheReadTokens, CacheWriteTokens: resp.Usage.CacheWriteTokens}
	evs := []*llm.Event{{Type: llm.EventMessageStart, Message: &start}}
	for i, b := range resp.Content {
		startBlock := b
		var dt llm.DeltaType
		var body string
		switch b.Type {
		case llm.BlockText:
			startBlock.Text, dt, body = "", llm.DeltaText, b.Text
		case llm.BlockToolUse:
			startBlock.Input, dt, body = json.RawMessage("{}"), llm.DeltaInputJSON, string(b.Input)
		case llm.BlockThinking:
			startBlock.Thinking, dt, body = "", llm.DeltaThinking, b.Thinking
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStart, Index: i, Block: &startBlock})
		for _, piece := range structured.Deltas([]byte(body), chunk) {
			evs = append(evs, &llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: dt, Delta: piece})
		}
		evs = append(evs, &llm.Event{Type: llm.EventBlockStop, Index: i})
	}
	u := resp.Usage
	evs = append(evs, &llm.Event{Type: llm.EventMessageDelta, StopReason: resp.StopReason, StopSequence: resp.StopSequence, Usage: &u},
		&llm.Event{Type: llm.EventMessageStop})
	return evs
}

// anthropicJSONFormat returns the schema of Anthropic structured outputs:
// output_config.format (or the beta output_format) of type json_schema.
func anthropicJSONFormat(req *llm.Request) json.RawMessage {
	type format struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if raw, ok := req.Extra["output_config"]; ok {
		var oc struct {
			Format *format `json:"format"`
		}
		if json.Unmarshal(raw, &oc) == nil && oc.Format != nil && oc.Format.Type == "json_schema" && len(oc.Format.Schema) > 0 {
			return oc.Format.Schema
		}
	}
	if raw, ok := req.Extra["output_format"]; ok {
		var f format
		if json.Unmarshal(raw, &f) == nil && f.Type == "json_schema" && len(f.Schema) > 0 {
			return f.Schema
		}
	}
	return nil
}
