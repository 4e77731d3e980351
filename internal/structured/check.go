package structured

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Part is structured output's part of a call's record: what the stage
// found and did. The stage writes it; the engine copies it into the
// call's Record.
type Part struct {
	// Spec is the output contract applied and Trace its description
	// (both nil when none).
	Spec  *Spec
	Trace *Trace
	// Upstream is the contract the attempts below ask the model for in the
	// form each endpoint takes (nil: none is sent).
	Upstream *Spec
	// Relaxed is the contract a relaxed stream is checked against at its
	// end (nil: none).
	Relaxed *Spec
	// Repairs lists the repair steps applied to the answer.
	Repairs []string
	// Reasked is set when a targeted repair request was sent; Violation
	// when the answer stayed invalid; Replaced when the re-ask's answer
	// replaced the first.
	Reasked, Violation, Replaced bool
	// Checked is set when a relaxed stream was checked at its end.
	Checked bool
}

// Reasker sends a targeted repair request as one more attempt of the
// call, under the call's attempt and retry budgets (the engine's attempt
// path; a tiered alias may escalate it a tier).
type Reasker interface {
	// Reask sends req when the budgets allow one more attempt; sent
	// reports whether it did. ans is its answer, with a forced output tool
	// folded into text, or nil when the attempt failed.
	Reask(ctx context.Context, req *llm.Request) (ans *pipeline.Answer, sent bool)
}

// maxInvalidAnswer bounds the invalid answer a record keeps.
const maxInvalidAnswer = 4 << 10

// Check validates ans.Response against sp, repairs it losslessly, re-asks
// once through r when it cannot (unless c disables it, or the answer was
// cut by max_tokens), and returns the answer to deliver: ans, a copy with
// the repaired document, or the re-ask's answer. An answer that stays
// invalid is delivered as it is, with part.Violation set, unless the
// contract may fail the call (Spec.MayFail): then the error is a 502
// MESH_SCHEMA_VIOLATION naming the first violations. req is the request
// the answer is to (its prompt's guarded spans are protected); m counts
// the outcomes. ans is not modified.
func Check(ctx context.Context, c Settings, m *Metrics, req *llm.Request, sp *Spec, ans *pipeline.Answer, part *Part, r Reasker) (*pipeline.Answer, error) {
	opt := Options{Input: req.PromptText(), Derive: c.Derive}
	resp := ans.Response
	doc, idx, ok := sp.AnswerJSON(resp)
	var res Result
	if ok {
		res = Repair(doc, sp.Schema, opt)
		m.Observe(res)
		part.noteRepair(res)
		if res.Valid {
			guessed(m, sp, doc, res, part)
			return replaced(ans, sp, idx, res), nil
		}
	}
	part.noteInvalid(sp, doc, ok)
	// An answer cut by max_tokens is what the client asked for: asked
	// again with the same limit it would be cut again. Direct, the client
	// gets it with finish_reason length; so it does here.
	cut := resp.StopReason == llm.StopMaxTokens
	// A guess (implied: guess) is never re-asked: the re-ask would ask
	// the model for keys Keel guessed, and a keyless one for "a JSON
	// object" where the prompt asked for more. The client gets the
	// model's answer, X-Mesh-Schema-Violation naming the reading's keys.
	if !cut && !c.DisableReask && sp.Guess == nil {
		if a2, sent := r.Reask(ctx, ReaskRequest(req, sp, doc, res.Violations, ok)); sent {
			m.Reasked.Add(1)
			part.Reasked = true
			if a2 != nil {
				if doc2, idx2, ok2 := sp.AnswerJSON(a2.Response); ok2 {
					res2 := Repair(doc2, sp.Schema, opt)
					m.Observe(res2)
					part.noteRepair(res2)
					if res2.Valid {
						guessed(m, sp, doc2, res2, part)
						return replaced(a2, sp, idx2, res2), nil
					}
					res = res2
				}
			}
		}
	}
	m.Failed.Add(1)
	part.Violation = true
	if cut || !sp.MayFail(c) {
		// The model's own answer, as direct; X-Mesh-Schema-Violation
		// names the keys it was checked against.
		return ans, nil
	}
	return nil, violation(res, part)
}

// guessed reports, under implied: guess, an answer that is a JSON object
// but lacks a key of the reading (X-Mesh-Schema-Violation): the answer is
// delivered as it is, the keys being Keel's guess, not the client's ask.
func guessed(m *Metrics, sp *Spec, doc string, res Result, part *Part) {
	if sp.Guess == nil || len(sp.Guess.Validate([]byte(res.Output))) == 0 {
		return
	}
	m.Failed.Add(1)
	part.noteInvalid(sp, doc, true)
	part.Violation = true
}

// replaced is ans with res's repaired document in place, when the repair
// changed it.
func replaced(ans *pipeline.Answer, sp *Spec, idx int, res Result) *pipeline.Answer {
	if !res.Changed {
		return ans
	}
	out := *ans
	out.Response = sp.Replace(ans.Response, idx, res.Output)
	return &out
}

// violation is the 502 MESH_SCHEMA_VIOLATION of an answer that stayed
// invalid, naming up to three violations ("(root)" for the whole answer,
// never an empty path).
func violation(res Result, part *Part) *llm.APIError {
	msg := "the answer is not valid JSON for the requested schema and could not be repaired"
	if len(res.Violations) > 0 {
		var parts []string
		for i, v := range res.Violations {
			if i == 3 {
				break
			}
			parts = append(parts, v.String())
		}
		msg += ": " + strings.Join(parts, "; ")
	}
	ae := &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshSchemaViolation, Message: msg}
	if part.Trace != nil && part.Trace.Source != "" {
		ae.MeshHeaders = map[string]string{"X-Mesh-Schema": part.Trace.Source}
	}
	return ae
}

func (p *Part) noteRepair(res Result) {
	for _, s := range res.Steps {
		p.Repairs = append(p.Repairs, s.Name)
	}
}

// noteInvalid keeps the call's first invalid answer for its trace.
func (p *Part) noteInvalid(sp *Spec, doc string, found bool) {
	st := p.Trace
	if st == nil || st.InvalidAnswer != "" {
		return
	}
	if !found {
		doc = "(no " + sp.Tool + " call)"
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

// ReaskRequest is the targeted repair request: the conversation (without
// a client prefill, which the model's answer re-sends), the invalid answer,
// and the validator's complaints; never a stream.
func ReaskRequest(req *llm.Request, sp *Spec, invalid string, v []Violation, found bool) *llm.Request {
	out := *req
	msgs := make([]llm.Message, len(req.Messages), len(req.Messages)+2)
	copy(msgs, req.Messages)
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
		msgs = msgs[:n-1]
	}
	if !found {
		invalid = "(no " + sp.Tool + " call)"
	}
	prompt := RepairPrompt(invalid, v, sp.Raw)
	if sp.Tool != "" {
		// A forced tool call: ask again with the complaints; the tool
		// choice still forces the call.
		prompt = fmt.Sprintf("Your %s call had invalid input. %s", sp.Tool, prompt)
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
