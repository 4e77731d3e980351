package engine

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// FragmentOptions tune long-input fragmentation. Zero values are the
// defaults; fragmentation is off unless ThresholdTokens is set or a request
// asks for it (mesh_behavior.fragment: true).
type FragmentOptions struct {
	// ThresholdTokens fragments any request whose last user message is
	// longer (estimated tokens); 0 means only on request.
	ThresholdTokens int
	// TargetTokens is the size of a fragment; default 1500.
	TargetTokens int
	// OverlapBudget bounds the context repeated across fragments, as a
	// share of the input; default 0.15.
	OverlapBudget float64
	// Redundancy is how many distinct endpoints answer each fragment;
	// default 2 (a request's min_redundancy raises it).
	Redundancy int
	// ListQuorum is the share of confidence a list item needs to survive
	// fusion (0 = plain union).
	ListQuorum float64
	// MergeCall sends one final request that merges free-text fragment
	// answers into one answer (instead of the plain concatenation).
	MergeCall bool
}

// wantsFragments reports whether req is fragmented, and its document.
func (e *Engine) wantsFragments(req *llm.Request, b *Behavior) (doc string, idx int, ok bool) {
	idx = -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			idx = i
			break
		}
	}
	if idx < 0 || req.Stream && (b == nil || b.Fragment == nil || !*b.Fragment) && e.fragOpts.ThresholdTokens == 0 {
		return "", -1, false
	}
	m := req.Messages[idx]
	for _, blk := range m.Content {
		if blk.Type != llm.BlockText {
			return "", -1, false // tool results, images: not a document to split
		}
	}
	doc = m.Text()
	asked := b != nil && b.Fragment != nil
	if asked && !*b.Fragment {
		return "", -1, false
	}
	if asked || e.fragOpts.ThresholdTokens > 0 && fragment.EstimateTokens(doc) > e.fragOpts.ThresholdTokens {
		return doc, idx, true
	}
	return "", -1, false
}

// fragmented splits the document, sends each fragment to `redundancy`
// distinct endpoints in parallel through the resilience engine, and fuses
// the answers. It returns nil, nil when the document is one fragment.
func (e *Engine) fragmented(ctx context.Context, x *exec, doc string, idx int, spec *outputSpec) (*llm.Response, error) {
	o := e.fragOpts
	var guarded []fragment.Range
	for _, sp := range structured.GuardedSpans(doc) {
		guarded = append(guarded, fragment.Range{Start: sp.Start, End: sp.End})
	}
	frags, err := fragment.Split(doc, fragment.Options{TargetTokens: o.TargetTokens, OverlapBudget: o.OverlapBudget, GuardedSpans: guarded})
	if err != nil {
		return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "fragmenting the input: " + err.Error()}
	}
	red := o.Redundancy
	if red <= 0 {
		red = 2
	}
	b := x.call.Behavior
	if b != nil && b.MinRedundancy > red {
		red = b.MinRedundancy
	}
	if len(frags) < 2 && (b == nil || b.MinRedundancy < 2) {
		return nil, nil // one fragment, no redundancy asked for: the plain path
	}
	red = min(red, len(x.rs.cands))
	rec := x.rec
	rec.Fragments = len(frags)
	answers := make([][]fragment.FragmentAnswer, len(frags))
	// endpoints[i] lists, in order, every endpoint fragment i's replicas
	// sent an attempt to.
	endpoints := make([][]string, len(frags))
	// won[i][r] is the index in rec.Attempts of replica r's answering
	// attempt (-1 when it got no answer).
	won := make([][]int, len(frags))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var served *endpoint
	for i, fr := range frags {
		answers[i] = make([]fragment.FragmentAnswer, red)
		won[i] = make([]int, red)
		req := fragmentRequest(x.req, idx, fr, len(frags))
		used := make([]bool, len(x.rs.cands))
		for r := range red {
			// Each replica has its own attempts; replicas of a fragment
			// start on distinct endpoints.
			rx := newExec(e, x.rs, req, x.call, &Record{})
			rx.policy, rx.legacy = x.policy, x.legacy
			if x.spec != nil && x.spec.JSONMode {
				// JSON mode is the client's own demand on every answer:
				// each fragment is asked in the form its endpoint takes.
				rx.spec = x.spec
			}
			copy(rx.tried, used)
			rx.mu.Lock()
			first, err := rx.pick(false)
			rx.mu.Unlock()
			if err == nil {
				used[first] = true
				rx.pin = first
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				a, err := rx.run(ctx, req, "fragment")
				var ans fragment.FragmentAnswer
				at := -1
				if err != nil {
					ans.Err = err
				} else {
					a.settle(nil)
					a.release()
					resp := a.res.Response
					if a.tool {
						translate.FoldOutputTool(resp)
					}
					text := resp.Text()
					if spec != nil {
						if d, _, ok := spec.AnswerJSON(resp); ok {
							res := structured.Repair(d, spec.Schema, structured.Options{Input: fr.Text})
							if res.Valid {
								text = string(res.Output)
							}
						}
					}
					ans = fragment.FragmentAnswer{Text: text, Confidence: 1}
					mu.Lock()
					rec.Usage.InputTokens += resp.Usage.InputTokens
					rec.Usage.OutputTokens += resp.Usage.OutputTokens
					if served == nil {
						served = a.ep
					}
					mu.Unlock()
					at = a.recIdx
				}
				rx.seal()
				mu.Lock()
				if at >= 0 {
					at += len(rec.Attempts)
				}
				won[i][r] = at
				rec.Attempts = append(rec.Attempts, rx.rec.Attempts...)
				rec.Retries += rx.rec.Retries
				rec.Hedges += rx.rec.Hedges
				for _, at := range rx.rec.Attempts {
					if !slices.Contains(endpoints[i], at.Endpoint) {
						endpoints[i] = append(endpoints[i], at.Endpoint)
					}
				}
				answers[i][r] = ans
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	for i, as := range answers {
		for r, a := range as {
			if a.Err == nil {
				// The first replica to answer is the fragment's answer;
				// the others are the redundancy it paid for.
				rec.Attempts[won[i][r]].Winner = true
				break
			}
		}
	}
	mode := fragment.ModeText
	if spec != nil {
		mode = fragment.ModeStructured
	}
	fused, err := fragment.Fuse(frags, answers, fragment.FuseOptions{Mode: mode, ListQuorum: o.ListQuorum})
	if mode == fragment.ModeStructured && served != nil && fused != nil && len(fused.LostFragments) == len(frags) && !spec.MayFail(e.structOpts) {
		// Replicas answered, none with a JSON object, and the JSON was
		// JSON mode or an implied schema, not a contract: the answers are
		// fused as text, as the call would have been answered direct
		// (X-Mesh-Schema-Violation says the JSON was not met).
		if tf, terr := fragment.Fuse(frags, answers, fragment.FuseOptions{Mode: fragment.ModeText, ListQuorum: o.ListQuorum}); tf != nil {
			fused, err = tf, terr
			rec.SchemaViolation = true
		}
	}
	if err != nil && fused == nil {
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: "fusing fragment answers: " + err.Error()}
	}
	// Fuse decides which fragments were lost (every replica failed, or
	// none gave a usable answer), so FragmentsOK, LostRanges and
	// FragmentDetails all come from its one list: the headers, the debug
	// trace and the report read these fields and cannot disagree.
	rec.FragmentsOK = len(frags) - len(fused.LostFragments)
	rec.FragmentDetails = make([]FragmentDetail, len(frags))
	for i, fr := range frags {
		d := FragmentDetail{Start: fr.Start, End: fr.End, Endpoints: endpoints[i], Outcome: FragmentOK}
		if slices.Contains(fused.LostFragments, fr.Index) {
			d.Outcome = FragmentFailed
			if slices.ContainsFunc(answers[i], func(a fragment.FragmentAnswer) bool { return a.Err == nil }) {
				d.Outcome = FragmentInvalid
			}
		}
		rec.FragmentDetails[i] = d
	}
	rec.Fusions = fused.Fields
	rec.FusionConflicts = len(fused.Conflicts)
	for _, c := range fused.Conflicts {
		rec.Conflicts = append(rec.Conflicts, fmt.Sprintf("fragment %d %s: %v", c.Fragment, c.Path, c.Values))
	}
	for _, l := range fused.Lost {
		rec.LostRanges = append(rec.LostRanges, strconv.Itoa(l.Start)+"-"+strconv.Itoa(l.End))
	}
	if served == nil {
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
			Message: fmt.Sprintf("every replica of all %d fragments failed", len(frags))}
	}
	if rec.FragmentsOK == 0 {
		// Replicas answered, but no answer was a JSON object: an empty
		// fused object would be a fake.
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshSchemaViolation,
			Message: fmt.Sprintf("no replica of any of the %d fragments answered a JSON object", len(frags))}
	}
	text := fused.Text
	if o.MergeCall && !fused.Structured && len(frags) > 1 {
		// The route asks for a final merge call: one more request turns the
		// concatenated fragment answers into one answer. If it fails, the
		// concatenation stands (it lost nothing).
		mreq := mergeRequest(x.req, idx, text)
		mx := newExec(e, x.rs, mreq, x.call, &Record{})
		mx.policy = x.policy
		if a, err := mx.run(ctx, mreq, "merge"); err == nil {
			a.settle(nil)
			a.release()
			if t := a.res.Response.Text(); t != "" {
				text = t
				rec.Usage.InputTokens += a.res.Response.Usage.InputTokens
				rec.Usage.OutputTokens += a.res.Response.Usage.OutputTokens
				rec.Merged = true
				mx.rec.Attempts[a.recIdx].Winner = true
			}
		}
		mx.seal()
		rec.Attempts = append(rec.Attempts, mx.rec.Attempts...)
	}
	if len(fused.Lost) > 0 && !fused.Structured {
		// Never a silent gap: say which input was not processed.
		text += fmt.Sprintf("\n\n[keel: input byte ranges %s could not be processed; every replica failed]", strings.Join(rec.LostRanges, ", "))
	}
	x.fragServed = served
	return &llm.Response{ID: "msg_keel_" + rec.RequestID, Model: served.UpstreamModel, Content: []llm.Block{{Type: llm.BlockText, Text: text}},
		StopReason: llm.StopEndTurn, Usage: rec.Usage}, nil
}

// mergeRequest asks for one answer made of the fragment answers.
func mergeRequest(req *llm.Request, idx int, parts string) *llm.Request {
	out := *req
	out.Stream = false
	msgs := make([]llm.Message, len(req.Messages))
	copy(msgs, req.Messages)
	msgs[idx] = llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText,
		Text: "The input was answered in parts. Merge these partial answers, in order, into one coherent answer; keep every fact, number and name exactly as written:\n\n" + parts}}}
	out.Messages = msgs
	return &out
}

// fragmentRequest is req with the document replaced by one fragment.
func fragmentRequest(req *llm.Request, idx int, fr fragment.Fragment, n int) *llm.Request {
	out := *req
	out.Stream = false
	msgs := make([]llm.Message, len(req.Messages))
	copy(msgs, req.Messages)
	msgs[idx] = llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText,
		Text: fmt.Sprintf("[Part %d of %d of a longer input]\n\n%s", fr.Index+1, n, fr.Text)}}}
	out.Messages = msgs
	return &out
}
