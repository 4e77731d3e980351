package pii

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// Finder finds personal data in one text the model would see. Find must
// return promptly once ctx is done; its matches are sorted and do not
// overlap. The mesh adapts *Detector to it (FinderFunc); tests inject one
// that errors or is slow.
type Finder interface {
	Find(ctx context.Context, text string) ([]Match, error)
}

// FinderFunc adapts a function to Finder.
type FinderFunc func(ctx context.Context, text string) ([]Match, error)

// Find calls f.
func (f FinderFunc) Find(ctx context.Context, text string) ([]Match, error) {
	return f(ctx, text)
}

// The actions (pii.action, a route's pii.action, mesh_behavior.pii).
const (
	// ActionRedact replaces each value by a placeholder ([EMAIL_1]), the
	// same one for the same value throughout the call, and restores the
	// values in the answer.
	ActionRedact = "redact"
	// ActionMask replaces each value by its kind ([EMAIL]); nothing is restored.
	ActionMask = "mask"
	// ActionBlock refuses a request that holds any: 400 MESH_PII_BLOCKED.
	ActionBlock = "block"
	// ActionLog only detects: the upstream gets the values; the audit log
	// and metrics record the findings.
	ActionLog = "log"
	// ActionOff turns detection off for a route.
	ActionOff = "off"
)

// rank orders the actions by how much of a value leaves Keel: a client
// may ask (mesh_behavior.pii) for an action of the route's rank or above.
var rank = map[string]int{ActionOff: 0, ActionLog: 1, ActionRedact: 2, ActionMask: 2, ActionBlock: 3}

// ClientAction reports whether a client may ask for action a
// (mesh_behavior.pii): redact, mask, block or log.
func ClientAction(a string) bool {
	_, ok := rank[a]
	return ok && a != ActionOff
}

// Options turn on personal-data detection in the pipeline's first stage,
// before routing, over every text the model sees: system, messages, tool
// results and tool-call arguments (the string values of the JSON).
type Options struct {
	// Detector finds the values; nil turns detection off (a call that sets
	// mesh_behavior.pii then gets 400).
	Detector Finder
	// Action is the default action: redact (the default), mask, block or log.
	Action string
	// FailOpen sends a request whose detection failed or ran out of time
	// upstream unscanned; false (the default) answers 503 MESH_PII_UNAVAILABLE.
	FailOpen bool
	// TimeBudget bounds detection over one request; default 100ms.
	TimeBudget time.Duration
	// HashKey keys the HMAC-SHA256 of each value the Report carries (for
	// the audit log); nil draws a random key at NewStage (hashes then
	// match only within the process).
	HashKey []byte
	// Routes override Action and FailOpen per model or alias name.
	Routes map[string]Route
}

// Route is one route's policy; zero fields take Options'.
type Route struct {
	Action   string
	FailOpen *bool
}

// Report is what detection found in a call and what was done.
type Report struct {
	// Action is the action applied (redact, mask, block, log).
	Action string
	// Findings are the values found, in the order of the request's texts.
	Findings []Finding
	// Failed is set when detection failed or ran out of its time budget:
	// the call was refused (MESH_PII_UNAVAILABLE), or with fail_open sent
	// upstream unscanned.
	Failed bool
	// RawUpstream is set when the upstream received the values (log, or a
	// failed detection under fail_open): the record then keeps no request
	// body and no upstream request.
	RawUpstream bool
}

// Finding is one value found: never the value, only its kind, where it
// was, and its keyed hash.
type Finding struct {
	Kind string
	// Where names the text: "system[0]", "messages[2].content[1]",
	// "messages[3].content[0].content[0]" (a tool result's text),
	// "messages[1].content[2].input.strings[4]" (the fifth string of a
	// tool call's arguments).
	Where string
	// Start and End are the value's byte offsets in that text.
	Start, End int
	// Hash is the hex HMAC-SHA256 of the value under Options.HashKey.
	Hash string
}

// Counts returns the number of findings per kind, by kind name.
func (p *Report) Counts() map[string]int {
	m := map[string]int{}
	for _, f := range p.Findings {
		m[f.Kind]++
	}
	return m
}

// Kinds returns the kinds found, sorted.
func (p *Report) Kinds() []string {
	var ks []string
	for k := range p.Counts() {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// Part is the stage's part of a call's record.
type Part struct {
	// Report is what detection found and did.
	Report *Report
	// Request is the request the record may keep: the masked copy, or nil
	// when the values went upstream or detection failed (never the values).
	Request *llm.Request
}

// Hooks is what the stage needs of the pipeline that runs it.
type Hooks struct {
	// Log gets a warning when a request goes upstream unscanned; nil
	// discards.
	Log *slog.Logger
	// Record is told the stage's part of a call, once detection ran.
	Record func(*pipeline.Call, Part)
	// Structured reports whether the call's answer is held to a JSON
	// contract (restored values are then escaped for JSON strings); it is
	// asked once the answer is back.
	Structured func(*pipeline.Call) bool
}

// stage is a built Options.
type stage struct {
	Options
	Hooks
}

// NewStage builds personal data's pipeline stage: the request redacted on
// its way down, the call's placeholders restored in the answer on its way
// up (a response, or a stream's deltas). With no Detector it only refuses
// a call that asks for an action (mesh_behavior.pii). The stage is safe
// for concurrent use.
func NewStage(o Options, h Hooks) (pipeline.Stage, error) {
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	if o.Detector == nil {
		return refuseActions, nil
	}
	if o.Action == "" {
		o.Action = ActionRedact
	}
	if _, ok := rank[o.Action]; !ok || o.Action == ActionOff {
		return nil, fmt.Errorf("pii: unknown action %q (want redact, mask, block or log)", o.Action)
	}
	for name, r := range o.Routes {
		if _, ok := rank[r.Action]; !ok && r.Action != "" {
			return nil, fmt.Errorf("pii: route %q: unknown action %q (want redact, mask, block, log or off)", name, r.Action)
		}
	}
	if o.TimeBudget <= 0 {
		o.TimeBudget = 100 * time.Millisecond
	}
	if len(o.HashKey) == 0 {
		o.HashKey = randomKey()
	}
	s := &stage{o, h}
	return s.wrap, nil
}

// refuseActions is the stage of a mesh without detection: a call that asks
// for an action gets 400.
func refuseActions(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		if b := c.Behavior; b != nil && b.PII != "" {
			return nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "mesh_behavior.pii",
				Message: "mesh_behavior.pii: personal-data detection is not enabled on this mesh (pii.enabled)"}
		}
		return next.Serve(ctx, c)
	})
}

func (s *stage) wrap(next pipeline.Handler) pipeline.Handler {
	return pipeline.HandlerFunc(func(ctx context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		req, red, ae := s.redact(ctx, c)
		if ae != nil {
			return nil, ae
		}
		c.Request = req
		ans, err := next.Serve(ctx, c)
		if err != nil || red == nil || red.Len() == 0 {
			return ans, err
		}
		jsonText := s.Structured != nil && s.Structured(c) || req.ResponseFormat != nil && req.ResponseFormat.Type != "" && req.ResponseFormat.Type != "text"
		if ans.Events != nil {
			ans.Events = pipeline.Transform(ans.Events, newStreamRestorer(red, jsonText).event)
		} else if ans.Response != nil {
			ans.Response = RestoreResponse(ans.Response, red, jsonText)
		}
		return ans, nil
	})
}

// policy is the action and fail-open of a call to model.
func (s *stage) policy(model string, b *pipeline.Behavior) (action string, failOpen bool, ae *llm.APIError) {
	action, failOpen = s.Action, s.FailOpen
	if r, ok := s.Routes[model]; ok {
		if r.Action != "" {
			action = r.Action
		}
		if r.FailOpen != nil {
			failOpen = *r.FailOpen
		}
	}
	if b != nil && b.PII != "" {
		if rank[b.PII] < rank[action] {
			return "", false, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshBadRequest, Param: "mesh_behavior.pii",
				Message: fmt.Sprintf("mesh_behavior.pii: %q would let more of the values through than the route's action %q; ask for %s", b.PII, action, strongerThan(action))}
		}
		action = b.PII
	}
	return action, failOpen, nil
}

func strongerThan(action string) string {
	var out []string
	for _, a := range []string{ActionLog, ActionRedact, ActionMask, ActionBlock} {
		if rank[a] >= rank[action] {
			out = append(out, a)
		}
	}
	return strings.Join(out, ", ")
}

// textRef is one text the model sees and where it is in the request.
type textRef struct {
	where string
	text  string
	set   func(string)
}

// redact runs detection over the call's request and applies its action.
// It returns the request to send on (the same one when nothing changed)
// and, for redact, the call's placeholders; the record gets the stage's
// part once detection ran.
func (s *stage) redact(ctx context.Context, c *pipeline.Call) (*llm.Request, *Redaction, *llm.APIError) {
	req := c.Request
	action, failOpen, ae := s.policy(req.Model, c.Behavior)
	if ae != nil || action == ActionOff {
		return req, nil, ae
	}
	part := &Part{Report: &Report{Action: action}}
	out, red, ae := s.apply(ctx, c, part, action, failOpen)
	if s.Record != nil {
		s.Record(c, *part)
	}
	return out, red, ae
}

// apply is redact's detection and action; it fills part.
func (s *stage) apply(ctx context.Context, c *pipeline.Call, part *Part, action string, failOpen bool) (*llm.Request, *Redaction, *llm.APIError) {
	req, rep := c.Request, part.Report
	out := cloneRequest(req)
	texts := collectTexts(out)
	found, err := s.detect(ctx, texts)
	if err != nil && ctx.Err() != nil {
		// The client went away (or the call's own deadline passed): not a
		// failure of detection.
		return nil, nil, &llm.APIError{Status: 499, Type: llm.ErrAPI, MeshCode: llm.MeshTimeout, Message: "request cancelled: " + context.Cause(ctx).Error()}
	}
	if err != nil {
		rep.Failed = true
		if failOpen {
			rep.RawUpstream = true
			s.Log.Warn("pii detection failed; request sent unscanned (fail_open)", "request_id", c.ID, "err", err)
			return req, nil, nil
		}
		return nil, nil, &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: llm.MeshPIIUnavailable,
			Message: "personal-data detection " + err.Error() + "; the request was not sent upstream"}
	}
	mac := hmac.New(sha256.New, s.HashKey)
	for i, ms := range found {
		for _, m := range ms {
			mac.Reset()
			mac.Write([]byte(texts[i].text[m.Start:m.End]))
			rep.Findings = append(rep.Findings, Finding{Kind: string(m.Kind), Where: texts[i].where, Start: m.Start, End: m.End, Hash: hex.EncodeToString(mac.Sum(nil))})
		}
	}
	if len(rep.Findings) == 0 {
		part.Request = req
		return req, nil, nil
	}
	var red *Redaction
	repl := func(k Kind, _ string) string { return Mask(k) }
	if action == ActionRedact {
		red = NewRedaction()
		for _, t := range texts {
			red.Reserve(t.text)
		}
		repl = red.Placeholder
	}
	for i, ms := range found {
		if len(ms) > 0 {
			texts[i].set(Replace(texts[i].text, ms, repl))
		}
	}
	part.Request = out // masked: the values never reach a log
	switch action {
	case ActionBlock:
		return nil, nil, &llm.APIError{Status: http.StatusBadRequest, Type: llm.ErrInvalidRequest, MeshCode: llm.MeshPIIBlocked,
			Message: "the request holds personal data (" + strings.Join(rep.Kinds(), ", ") + ") and this route blocks it; remove it or ask without it"}
	case ActionLog:
		rep.RawUpstream = true
		return req, nil, nil // the upstream gets the values
	}
	return out, red, nil
}

// errBudget is a detection that ran out of its time budget.
var errBudget = errors.New("ran out of its time budget")

// detect runs the detector over texts within the time budget.
func (s *stage) detect(ctx context.Context, texts []textRef) ([][]Match, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, s.TimeBudget, errBudget)
	defer cancel()
	type result struct {
		found [][]Match
		err   error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			// This goroutine is out of reach of net/http's recovery: a
			// detector's panic fails the call closed, not the process. Its
			// value is not quoted: it may hold the text.
			if v := recover(); v != nil {
				done <- result{err: errors.New("panicked")}
			}
		}()
		found := make([][]Match, len(texts))
		for i, t := range texts {
			if err := ctx.Err(); err != nil {
				done <- result{err: err}
				return
			}
			ms, err := s.Detector.Find(ctx, t.text)
			if err == nil {
				err = checkMatches(ms, len(t.text))
			}
			if err != nil {
				done <- result{err: err}
				return
			}
			found[i] = ms
		}
		done <- result{found: found}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			if errors.Is(context.Cause(ctx), errBudget) {
				return nil, fmt.Errorf("detecting: %w (%v)", errBudget, s.TimeBudget)
			}
			return nil, fmt.Errorf("failed: %w", r.err)
		}
		return r.found, nil
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), errBudget) {
			return nil, fmt.Errorf("%w (%v)", errBudget, s.TimeBudget)
		}
		return nil, fmt.Errorf("was cut short: %w", context.Cause(ctx))
	}
}

// checkMatches holds a detector to its contract: matches inside the text,
// sorted, not overlapping. A detector that breaks it has failed (the call
// fails closed), rather than panicking or redacting half a value.
func checkMatches(ms []Match, n int) error {
	at := 0
	for _, m := range ms {
		if m.Start < at || m.End <= m.Start || m.End > n {
			return fmt.Errorf("returned a match [%d, %d) that is out of order, empty or outside the text of %d bytes", m.Start, m.End, n)
		}
		at = m.End
	}
	return nil
}

// cloneRequest copies the parts of req that redaction may change: the
// system blocks, the messages and their blocks (tool results' too).
func cloneRequest(req *llm.Request) *llm.Request {
	out := *req
	out.System = slices.Clone(req.System)
	out.Messages = slices.Clone(req.Messages)
	for i := range out.Messages {
		m := &out.Messages[i]
		m.Content = slices.Clone(m.Content)
		for j := range m.Content {
			m.Content[j].Content = slices.Clone(m.Content[j].Content)
		}
	}
	return &out
}

// collectTexts lists every text of req the model sees (and the end-user
// id the provider gets), each with a setter
// writing into req (which must be a clone: see cloneRequest). Thinking
// blocks are left alone: their signature covers their text.
func collectTexts(req *llm.Request) []textRef {
	var ts []textRef
	var blocks func(where string, bs []llm.Block)
	blocks = func(where string, bs []llm.Block) {
		for i := range bs {
			b := &bs[i]
			w := fmt.Sprintf("%s[%d]", where, i)
			switch {
			case b.Raw != nil:
			case b.Type == llm.BlockText:
				ts = append(ts, textRef{where: w, text: b.Text, set: func(s string) { b.Text = s }})
			case b.Type == llm.BlockToolUse && len(b.Input) > 0:
				ts = append(ts, jsonTexts(w+".input", &b.Input)...)
			case b.Type == llm.BlockToolResult:
				blocks(w+".content", b.Content)
			}
		}
	}
	if req.UserID != "" {
		// Not shown to the model, but sent to the provider, and often an
		// e-mail address.
		ts = append(ts, textRef{where: "user_id", text: req.UserID, set: func(s string) { req.UserID = s }})
	}
	blocks("system", req.System)
	for i := range req.Messages {
		blocks(fmt.Sprintf("messages[%d].content", i), req.Messages[i].Content)
	}
	// The setters of one tool call's strings rebuild its input: jsonTexts.
	return ts
}

// jsonTexts lists the string literals (keys and values) of the JSON at
// *raw; setting one rewrites *raw with that literal re-encoded.
func jsonTexts(where string, raw *json.RawMessage) []textRef {
	type lit struct{ start, end int }
	var lits []lit
	src := *raw
	for i := 0; i < len(src); i++ {
		if src[i] != '"' {
			continue
		}
		j := i + 1
		for j < len(src) && src[j] != '"' {
			if src[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(src) {
			break
		}
		lits = append(lits, lit{i, j + 1})
		i = j
	}
	vals := make([]string, len(lits))
	orig := make([]string, len(lits))
	var ts []textRef
	for k, l := range lits {
		if json.Unmarshal(src[l.start:l.end], &vals[k]) != nil {
			continue
		}
		orig[k] = vals[k]
		ts = append(ts, textRef{where: fmt.Sprintf("%s.strings[%d]", where, k), text: vals[k], set: func(s string) {
			vals[k] = s
			var b []byte
			at := 0
			for n, l := range lits {
				b = append(b, src[at:l.start]...)
				if vals[n] == orig[n] {
					b = append(b, src[l.start:l.end]...)
				} else {
					enc, _ := json.Marshal(vals[n]) // a string always marshals
					b = append(b, enc...)
				}
				at = l.end
			}
			*raw = append(b, src[at:]...)
		}})
	}
	return ts
}

// RestoreResponse returns resp with the call's placeholders replaced by
// their values in text, tool-call arguments and refusal (a copy; resp may
// be a cached answer).
func RestoreResponse(resp *llm.Response, red *Redaction, jsonText bool) *llm.Response {
	r := *resp
	r.Content = slices.Clone(resp.Content)
	changed := false
	for i := range r.Content {
		b := &r.Content[i]
		switch b.Type {
		case llm.BlockText:
			t := red.Restore(b.Text)
			if jsonText || strings.HasPrefix(strings.TrimLeft(b.Text, " \t\r\n"), "{") {
				t = red.RestoreJSON(b.Text)
			}
			if t != b.Text {
				b.Text, changed = t, true
			}
		case llm.BlockToolUse:
			if in := red.RestoreJSON(string(b.Input)); in != string(b.Input) {
				b.Input, changed = json.RawMessage(in), true
			}
		}
	}
	if t := red.Restore(r.Refusal); t != r.Refusal {
		r.Refusal, changed = t, true
	}
	if !changed {
		return resp
	}
	r.Touch()
	return &r
}

// streamRestorer restores the call's placeholders in a stream's text and
// tool-argument deltas. A placeholder split over several deltas is held
// back (at most a placeholder's length) and sent whole, restored; what is
// held when a block ends is sent before its stop event.
type streamRestorer struct {
	red      *Redaction
	jsonText bool
	blocks   map[int]*restoringBlock
}

// restoringBlock is one open block's restorer and its delta type.
type restoringBlock struct {
	r  *Restorer
	dt llm.DeltaType
}

func newStreamRestorer(red *Redaction, jsonText bool) *streamRestorer {
	return &streamRestorer{red: red, jsonText: jsonText, blocks: map[int]*restoringBlock{}}
}

// event restores ev (a pipeline.Transform): out gets what goes up in its
// place, nothing while a placeholder's start is held.
func (p *streamRestorer) event(ev *llm.Event, out []*llm.Event) []*llm.Event {
	switch ev.Type {
	case llm.EventBlockStart:
		if ev.Block != nil {
			switch {
			case ev.Block.Type == llm.BlockToolUse:
				p.blocks[ev.Index] = &restoringBlock{p.red.NewRestorer(RestoreJSONText), llm.DeltaInputJSON}
			case ev.Block.Type == llm.BlockText && p.jsonText:
				p.blocks[ev.Index] = &restoringBlock{p.red.NewRestorer(RestoreJSONText), llm.DeltaText}
			case ev.Block.Type == llm.BlockText:
				p.blocks[ev.Index] = &restoringBlock{p.red.NewRestorer(RestoreAuto), llm.DeltaText}
			}
		}
	case llm.EventBlockDelta:
		b := p.blocks[ev.Index]
		if b == nil || ev.DeltaType != b.dt {
			break
		}
		text := b.r.Write(ev.Delta)
		if text == ev.Delta {
			break
		}
		if text == "" {
			return out // all held: the next delta completes it
		}
		cp := ev.Detach()
		cp.Delta = text
		return append(out, cp)
	case llm.EventBlockStop:
		if f := p.flush(ev.Index); f != nil {
			out = append(out, f)
		}
	case llm.EventMessageDelta, llm.EventMessageStop, llm.EventError:
		idx := make([]int, 0, len(p.blocks))
		for i := range p.blocks {
			idx = append(idx, i)
		}
		sort.Ints(idx)
		for _, i := range idx {
			if f := p.flush(i); f != nil {
				out = append(out, f)
			}
		}
	}
	return append(out, ev)
}

// flush ends block i's restorer: a delta with the text it held, or nil.
func (p *streamRestorer) flush(i int) *llm.Event {
	b := p.blocks[i]
	if b == nil {
		return nil
	}
	delete(p.blocks, i)
	h := b.r.Flush()
	if h == "" {
		return nil
	}
	return &llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: b.dt, Delta: h}
}

// randomKey is a fresh 32-byte HMAC key.
func randomKey() []byte {
	k := make([]byte, 32)
	rand.Read(k) // never fails (crypto/rand)
	return k
}
