package fragment

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

// Config tunes long-input fragmentation. Zero values are the defaults;
// fragmentation is off unless ThresholdTokens is set or a request asks for
// it (mesh_behavior.fragment: true). It is plain data, safe to copy.
type Config struct {
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

// Fragment outcomes (Detail.Outcome).
const (
	// OutcomeOK: a replica's answer went into the fused answer.
	OutcomeOK = "ok"
	// OutcomeInvalid: replicas answered, but none with a usable answer
	// (no JSON object where one was required).
	OutcomeInvalid = "invalid"
	// OutcomeFailed: every replica failed.
	OutcomeFailed = "failed"
)

// Detail is one fragment of a fragmented call.
type Detail struct {
	// Start and End delimit the fragment's own bytes [Start, End) of the
	// document.
	Start, End int
	// Endpoints lists every endpoint its replicas sent an attempt to.
	Endpoints []string
	// Outcome is OutcomeOK, OutcomeInvalid or OutcomeFailed.
	Outcome string
}

// Part is fragmentation's part of a call's record.
type Part struct {
	// Fragments and FragmentsOK count fragments sent and answered;
	// Fusions and FusionConflicts count fused fields and disagreements.
	Fragments, FragmentsOK, Fusions, FusionConflicts int
	// Conflicts describes each fusion disagreement; LostRanges the input
	// byte ranges no replica answered ("start-end").
	Conflicts, LostRanges []string
	// Details describes each fragment, in input order.
	Details []Detail
	// Merged is set when a final merge call produced the text answer.
	Merged bool
	// Violation is set when JSON was asked for but the answers were fused
	// as text (JSON mode or an implied schema: no contract).
	Violation bool
	// Usage is the usage of every answer fused (and of the merge call).
	Usage llm.Usage
	// Served is the endpoint credited with the fused answer: the first
	// replica's to answer.
	Served *provider.Endpoint
}

// Replicas sends fragment requests on the call's route: the engine's
// attempt path, with its retries, hedges and fallback per replica.
type Replicas interface {
	// Width is the number of the route's candidates: the most distinct
	// endpoints a fragment's replicas can start on.
	Width() int
	// Replica prepares one replica of a fragment's request req, to start
	// on a candidate not marked in used (which it marks), and returns it.
	Replica(req *llm.Request, used []bool) Replica
	// Merge sends the merge request as one more call on the route and
	// returns its answer, or nil when it failed.
	Merge(ctx context.Context, req *llm.Request) *llm.Response
}

// Replica is one replica of one fragment. Run is called once, on its own
// goroutine; the other methods after it returned.
type Replica interface {
	// Run sends the replica's request until an attempt answers (the
	// answer, a forced output tool folded into text) or the attempts give
	// up (the error).
	Run(ctx context.Context) (*llm.Response, error)
	// Endpoints lists, in order, the endpoints its attempts went to.
	Endpoints() []string
	// Served is the endpoint that answered (nil when none did).
	Served() *provider.Endpoint
	// Won marks its answer as the fragment's answer (the first replica to
	// answer); the others are the redundancy it paid for.
	Won()
}

// Hooks are what the fragmentation stage needs of the rest of the chain,
// supplied by its builder (the engine). Every func is required.
type Hooks struct {
	// Record is told the call's part once the fused answer is made.
	Record func(c *pipeline.Call, p *Part)
	// Eligible reports whether the call may be fragmented: the rollout's
	// full stage, off the legacy path.
	Eligible func(c *pipeline.Call) bool
	// Contract is the call's output contract (nil: free text) and whether
	// an answer that stays invalid fails the call (structured.Spec.MayFail).
	Contract func(c *pipeline.Call) (sp *structured.Spec, mayFail bool)
	// Replicas is the call's fragment sender.
	Replicas func(c *pipeline.Call) Replicas
	// Fail maps a fan-out's error to the client's (a passed deadline is
	// the call's timeout, whatever the replicas said).
	Fail func(ctx context.Context, c *pipeline.Call, err error) error
}

// NewStage returns the fragmentation stage under cfg: a call whose last
// user message is a document long enough (or that asks for it) is split,
// each fragment sent to Redundancy distinct endpoints in parallel, and the
// answers fused (Fuse) into the call's answer, a stream of it replayed
// (pipeline.Slice) for a streaming call; any other call goes to next. The
// stage is safe for concurrent use; it calls next at most once, and never
// after fanning out.
func NewStage(cfg Config, h Hooks) pipeline.Stage {
	return func(next pipeline.Handler) pipeline.Handler {
		return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
			if !h.Eligible(c) {
				return next.Serve(ctx, c)
			}
			doc, idx, ok := Wants(c.Request, c.Behavior, cfg.ThresholdTokens)
			if !ok {
				return next.Serve(ctx, c)
			}
			sp, mayFail := h.Contract(c)
			f := &fanout{cfg: cfg, c: c, doc: doc, idx: idx, spec: sp, mayFail: mayFail, rep: h.Replicas(c)}
			resp, served, err := f.run(ctx)
			if err != nil {
				return nil, h.Fail(ctx, c, err)
			}
			if resp == nil {
				return next.Serve(ctx, c) // one fragment: the plain path
			}
			f.part.Served = served
			h.Record(c, &f.part)
			ans := &pipeline.Answer{Endpoint: served}
			if !c.Request.Stream {
				ans.Response = resp
				return ans, nil
			}
			ans.Events = pipeline.Slice(structured.Synthesize(resp, 64))
			return ans, nil
		})
	}
}

// Wants reports whether req is fragmented under b (mesh_behavior) and the
// threshold, and returns its document (the last user message, all text)
// and that message's index. A stream is fragmented only when asked or
// over a threshold.
func Wants(req *llm.Request, b *pipeline.Behavior, threshold int) (doc string, idx int, ok bool) {
	idx = -1
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == llm.RoleUser {
			idx = i
			break
		}
	}
	if idx < 0 || req.Stream && (b == nil || b.Fragment == nil || !*b.Fragment) && threshold == 0 {
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
	if asked || threshold > 0 && EstimateTokens(doc) > threshold {
		return doc, idx, true
	}
	return "", -1, false
}

// fanout is one fragmented call.
type fanout struct {
	cfg     Config
	c       *pipeline.Call
	doc     string
	idx     int
	spec    *structured.Spec
	mayFail bool
	rep     Replicas
	part    Part

	frags []Fragment
	// answers[i][r] is replica r of fragment i's answer; replicas[i][r]
	// the replica.
	answers  [][]FragmentAnswer
	replicas [][]Replica
	mu       sync.Mutex // guards following
	served   *provider.Endpoint
}

// run splits the document, fans the fragments out and fuses the answers.
// It returns nil, nil, nil when the document is one fragment and no
// redundancy was asked for.
func (f *fanout) run(ctx context.Context) (*llm.Response, *provider.Endpoint, error) {
	var guarded []Range
	for _, sp := range structured.GuardedSpans(f.doc) {
		guarded = append(guarded, Range{Start: sp.Start, End: sp.End})
	}
	frags, err := Split(f.doc, Options{TargetTokens: f.cfg.TargetTokens, OverlapBudget: f.cfg.OverlapBudget, GuardedSpans: guarded})
	if err != nil {
		return nil, nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Message: "fragmenting the input: " + err.Error()}
	}
	red := f.cfg.Redundancy
	if red <= 0 {
		red = 2
	}
	b := f.c.Behavior
	if b != nil && b.MinRedundancy > red {
		red = b.MinRedundancy
	}
	if len(frags) < 2 && (b == nil || b.MinRedundancy < 2) {
		return nil, nil, nil
	}
	f.frags = frags
	f.part.Fragments = len(frags)
	f.send(ctx, min(red, f.rep.Width()))
	fused, err := f.fuse()
	if err != nil {
		return nil, nil, err
	}
	text, err := f.text(ctx, fused)
	if err != nil {
		return nil, nil, err
	}
	return &llm.Response{ID: "msg_keel_" + f.c.ID, Model: f.served.UpstreamModel, Content: []llm.Block{{Type: llm.BlockText, Text: text}},
		StopReason: llm.StopEndTurn, Usage: f.part.Usage}, f.served, nil
}

// send sends every fragment to red replicas in parallel, replicas of a
// fragment starting on distinct endpoints, and marks each fragment's first
// answer.
func (f *fanout) send(ctx context.Context, red int) {
	n := len(f.frags)
	f.answers, f.replicas = make([][]FragmentAnswer, n), make([][]Replica, n)
	var wg sync.WaitGroup
	for i, fr := range f.frags {
		f.answers[i], f.replicas[i] = make([]FragmentAnswer, red), make([]Replica, red)
		req := Request(f.c.Request, f.idx, fr, n)
		used := make([]bool, f.rep.Width())
		for r := range red {
			rp := f.rep.Replica(req, used)
			f.replicas[i][r] = rp
			wg.Go(func() { f.answers[i][r] = f.answer(ctx, rp, fr) })
		}
	}
	wg.Wait()
	for i, as := range f.answers {
		for r, a := range as {
			if a.Err == nil {
				f.replicas[i][r].Won()
				break
			}
		}
	}
}

// answer runs one replica: its text, repaired to the contract when the
// repair makes it valid.
func (f *fanout) answer(ctx context.Context, rp Replica, fr Fragment) FragmentAnswer {
	resp, err := rp.Run(ctx)
	if err != nil {
		return FragmentAnswer{Err: err}
	}
	text := resp.Text()
	if f.spec != nil {
		if d, _, ok := f.spec.AnswerJSON(resp); ok {
			if res := structured.Repair(d, f.spec.Schema, structured.Options{Input: fr.Text}); res.Valid {
				text = string(res.Output)
			}
		}
	}
	f.mu.Lock()
	f.part.Usage.InputTokens += resp.Usage.InputTokens
	f.part.Usage.OutputTokens += resp.Usage.OutputTokens
	if f.served == nil {
		f.served = rp.Served()
	}
	f.mu.Unlock()
	return FragmentAnswer{Text: text, Confidence: 1}
}

// fuse fuses the answers and records which fragments were lost.
func (f *fanout) fuse() (*Result, error) {
	frags, answers := f.frags, f.answers
	mode := ModeText
	if f.spec != nil {
		mode = ModeStructured
	}
	fused, err := Fuse(frags, answers, FuseOptions{Mode: mode, ListQuorum: f.cfg.ListQuorum})
	if mode == ModeStructured && f.served != nil && fused != nil && len(fused.LostFragments) == len(frags) && !f.mayFail {
		// Replicas answered, none with a JSON object, and the JSON was
		// JSON mode or an implied schema, not a contract: the answers are
		// fused as text, as the call would have been answered direct
		// (X-Mesh-Schema-Violation says the JSON was not met).
		if tf, terr := Fuse(frags, answers, FuseOptions{Mode: ModeText, ListQuorum: f.cfg.ListQuorum}); tf != nil {
			fused, err = tf, terr
			f.part.Violation = true
		}
	}
	if err != nil && fused == nil {
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: "fusing fragment answers: " + err.Error()}
	}
	f.note(fused)
	if f.served == nil {
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
			Message: fmt.Sprintf("every replica of all %d fragments failed", len(frags))}
	}
	if f.part.FragmentsOK == 0 {
		// Replicas answered, but no answer was a JSON object: an empty
		// fused object would be a fake.
		return nil, &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshSchemaViolation,
			Message: fmt.Sprintf("no replica of any of the %d fragments answered a JSON object", len(frags))}
	}
	return fused, nil
}

// note records the fusion. Fuse decides which fragments were lost (every
// replica failed, or none gave a usable answer), so FragmentsOK,
// LostRanges and Details all come from its one list: the headers, the
// debug trace and the report read these fields and cannot disagree.
func (f *fanout) note(fused *Result) {
	p := &f.part
	p.FragmentsOK = len(f.frags) - len(fused.LostFragments)
	p.Details = make([]Detail, len(f.frags))
	for i, fr := range f.frags {
		d := Detail{Start: fr.Start, End: fr.End, Outcome: OutcomeOK}
		for _, rp := range f.replicas[i] {
			for _, ep := range rp.Endpoints() {
				if !slices.Contains(d.Endpoints, ep) {
					d.Endpoints = append(d.Endpoints, ep)
				}
			}
		}
		if slices.Contains(fused.LostFragments, fr.Index) {
			d.Outcome = OutcomeFailed
			if slices.ContainsFunc(f.answers[i], func(a FragmentAnswer) bool { return a.Err == nil }) {
				d.Outcome = OutcomeInvalid
			}
		}
		p.Details[i] = d
	}
	p.Fusions = fused.Fields
	p.FusionConflicts = len(fused.Conflicts)
	for _, c := range fused.Conflicts {
		p.Conflicts = append(p.Conflicts, fmt.Sprintf("fragment %d %s: %v", c.Fragment, c.Path, c.Values))
	}
	for _, l := range fused.Lost {
		p.LostRanges = append(p.LostRanges, strconv.Itoa(l.Start)+"-"+strconv.Itoa(l.End))
	}
}

// text is the fused answer's text: merged by one more call when the
// config asks for it (the concatenation stands if that fails: it lost
// nothing), and never a silent gap: lost input is said.
func (f *fanout) text(ctx context.Context, fused *Result) (string, error) {
	text := fused.Text
	if f.cfg.MergeCall && !fused.Structured && len(f.frags) > 1 {
		if r := f.rep.Merge(ctx, MergeRequest(f.c.Request, f.idx, text)); r != nil {
			if t := r.Text(); t != "" {
				text = t
				f.part.Usage.InputTokens += r.Usage.InputTokens
				f.part.Usage.OutputTokens += r.Usage.OutputTokens
				f.part.Merged = true
			}
		}
	}
	if len(fused.Lost) > 0 && !fused.Structured {
		text += fmt.Sprintf("\n\n[keel: input byte ranges %s could not be processed; every replica failed]", strings.Join(f.part.LostRanges, ", "))
	}
	return text, nil
}

// MergeRequest asks for one answer made of the fragment answers parts.
func MergeRequest(req *llm.Request, idx int, parts string) *llm.Request {
	out := *req
	out.Stream = false
	msgs := make([]llm.Message, len(req.Messages))
	copy(msgs, req.Messages)
	msgs[idx] = llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText,
		Text: "The input was answered in parts. Merge these partial answers, in order, into one coherent answer; keep every fact, number and name exactly as written:\n\n" + parts}}}
	out.Messages = msgs
	return &out
}

// Request is req with the document (message idx) replaced by fragment fr
// of n; never a stream.
func Request(req *llm.Request, idx int, fr Fragment, n int) *llm.Request {
	out := *req
	out.Stream = false
	msgs := make([]llm.Message, len(req.Messages))
	copy(msgs, req.Messages)
	msgs[idx] = llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText,
		Text: fmt.Sprintf("[Part %d of %d of a longer input]\n\n%s", fr.Index+1, n, fr.Text)}}}
	out.Messages = msgs
	return &out
}
