package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/translate"
)

// Stream is a committed answer stream. It forwards the serving upstream's
// events with block indexes the client can rely on; when that upstream
// fails mid-way (cut, silent past the idle timeout, an error event, no
// terminator) it continues the answer on another endpoint, sending what
// the client already has as an assistant prefill and forwarding only the
// continuation, so the client sees one coherent stream. When it cannot, it
// ends with an error event — never a fake clean finish.
//
// A Stream is used by one goroutine; Close must be called.
type Stream struct {
	ctx    context.Context
	cancel context.CancelFunc
	x      *exec
	cur    *attempt
	buf    []*llm.Event

	started  bool
	finished bool
	failed   bool
	closed   bool
	nextIdx  int
	idxMap   map[int]int
	// blocks is what the client has received, by client index: text so
	// far for text blocks; tool and thinking blocks make recovery
	// impossible (they cannot be continued by prefill).
	blocks     []clientBlock
	continuing bool
	// trimmed is whitespace cut from the end of the prefill (the API
	// rejects trailing whitespace there); it is removed from the start of
	// the continuation because the client already has it.
	trimmed string
	// echo, after a continuation, is the prefill it was sent, which an
	// echoing server (llama.cpp's llama-server, PROTOCOLS.md §6.2) repeats
	// at the start of its answer; held is the text read so far that may
	// still be that echo. Both are "" once the answer's start is settled.
	echo, held string
	heldIndex  int
	// pending, after a re-ask (splice), is per client block the text the
	// new answer must repeat before anything of it is forwarded.
	pending     []string
	inputUsage  *llm.Usage
	priorOutput int
	deltas      int
	finalUsage  *llm.Usage
	endErr      *llm.APIError
	// own is the current attempt's usage as its upstream reported it
	// (message start, then the cumulative message delta), ownOut whether
	// a delta reported output, and ownDeltas its content deltas: its cost
	// (costAttempt), a continuation's prefilled prompt included.
	own       llm.Usage
	ownOut    bool
	ownDeltas int

	// synth, when set, replaces the upstream: a buffered, validated answer
	// re-emitted as events (strict structured output).
	synth     []*llm.Event
	synthMode bool
	// hit, when set, is the cached answer synth re-emits (no upstream).
	hit *CacheEntry
	// store, when set, rebuilds the answer the client receives, to be
	// stored in the response cache if it ends complete.
	store *streamStore
	// relaxed, when set, is validated at the end of a streamed-through answer.
	relaxed *outputSpec
	text    strings.Builder
	// schemaErr is set when a strict structured answer was refused.
	schemaErr *llm.APIError
	// pii, when set, restores the call's placeholders in what Next returns
	// (everything before it, the record and the cache included, sees the
	// placeholders).
	pii *streamPII

	// lent is the event Next returned last and lentFrom the upstream stream
	// it came from: at the next call the caller is done with it, and the
	// upstream's reader may reuse it (wire.Recycler).
	lent     *llm.Event
	lentFrom provider.Stream
}

// strict buffers the whole answer, validates and repairs it (re-asking
// once if needed), and replaces the stream by the result.
func (s *Stream) strict(ctx context.Context, sp *outputSpec) error {
	resp, err := accumulate(s)
	if err != nil || s.failed {
		if s.endErr != nil {
			return s.endErr
		}
		if ae, ok := err.(*llm.APIError); ok {
			return ae
		}
		return &llm.APIError{Status: http.StatusBadGateway, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted, Message: "upstream stream failed"}
	}
	s.x.rec.Usage = resp.Usage
	if s.cur != nil && s.cur.tool {
		translate.FoldOutputTool(resp)
	}
	resp, err = s.x.checkStructured(ctx, sp, resp)
	if err != nil {
		return err
	}
	s.synth = synthesize(resp, 64)
	s.synthMode = true
	u := resp.Usage
	s.finalUsage = &u
	return nil
}

// SchemaValid reports, for a relaxed structured stream after its end,
// whether the answer was valid; ok is false when no schema applied.
func (s *Stream) SchemaValid() (valid, ok bool) {
	if s.relaxed == nil || !s.finished {
		return false, false
	}
	return !s.x.rec.SchemaViolation, true
}

type clientBlock struct {
	typ  llm.BlockType
	text strings.Builder
	open bool
}

func newStream(ctx context.Context, cancel context.CancelFunc, x *exec, a *attempt) *Stream {
	return &Stream{ctx: ctx, cancel: cancel, x: x, cur: a, buf: a.first, idxMap: map[int]int{}}
}

// Record returns the call's record; final after Close.
func (s *Stream) Record() *Record { return s.x.rec }

// Attempts is the number of upstream attempts so far.
func (s *Stream) Attempts() int { return s.x.attempts }

// Served is the endpoint serving the stream now.
func (s *Stream) Served() *provider.Endpoint {
	if s.hit != nil {
		return s.hit.Endpoint
	}
	if s.cur == nil {
		return s.x.fragServed.Endpoint
	}
	return s.served().Endpoint
}

// served is the endpoint credited with the answer: the one whose re-asked
// answer replaced the first (strict structured streams), else the current.
func (s *Stream) served() *endpoint {
	if s.x.reasked != nil {
		return s.x.reasked
	}
	return s.cur.ep
}

// Recovered reports how many times the stream was continued elsewhere.
func (s *Stream) Recovered() int { return s.x.rec.Recovered }

// Next returns the next event for the client; io.EOF after message_stop.
// After an error event Next returns io.EOF. The event is the caller's
// until the next call to Next: it must copy what it keeps of it.
func (s *Stream) Next() (*llm.Event, error) {
	if s.pii != nil {
		return s.pii.next(s)
	}
	return s.next()
}

// next is Next before the call's placeholders are restored.
func (s *Stream) next() (*llm.Event, error) {
	if s.lent != nil {
		if r, ok := s.lentFrom.(wire.Recycler); ok {
			r.Recycle(s.lent)
		}
		s.lent, s.lentFrom = nil, nil
	}
	if s.synthMode {
		if len(s.synth) == 0 {
			return nil, io.EOF
		}
		ev := s.synth[0]
		s.synth = s.synth[1:]
		s.keep(ev)
		return ev, nil
	}
	if s.finished || s.failed {
		return nil, io.EOF
	}
	for {
		ev, err := s.upstreamNext()
		if err == nil {
			s.noteOwn(ev)
		}
		if err == nil && ev.Type == llm.EventError {
			err = &provider.Error{Kind: provider.KindStatus, Endpoint: s.cur.ep.ID, API: ev.Err}
		}
		if err == io.EOF && !s.finished {
			err = &provider.Error{Kind: provider.KindProtocol, Endpoint: s.cur.ep.ID, Err: errors.New("stream ended without its terminal event")}
		}
		if err != nil {
			if rerr := s.recover(err); rerr != nil {
				s.failed = true
				s.endErr = rerr
				return &llm.Event{Type: llm.EventError, Err: rerr}, nil
			}
			continue
		}
		out, emit, err := s.translate(ev)
		if err != nil {
			// A re-asked answer that differs from the text sent: the client
			// gets the wire's error event, never a glued answer.
			s.cur.end = s.x.e.now()
			s.costAttempt()
			s.cur.settle(policy.Diverged(err))
			s.failed = true
			s.endErr = &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
				Message: "upstream stream failed and could not be continued: " + err.Error()}
			return &llm.Event{Type: llm.EventError, Err: s.endErr}, nil
		}
		if emit {
			s.keep(out)
			if out == ev {
				s.lent, s.lentFrom = out, s.cur.res.Stream
			}
			return out, nil
		}
	}
}

// Ready reports whether Next returns an event without waiting on an
// upstream: events read before the stream was committed (its first ones,
// up to the first content), a synthesized answer, or the rest of an
// upstream chunk that gave several events. A writer need not flush before
// a ready event: the client gets them in one write.
func (s *Stream) Ready() bool {
	if s.pii != nil {
		// Any next event may be held back whole (a placeholder's start),
		// so only a queued one is sure to need no wait.
		return len(s.pii.queue) > 0
	}
	if s.synthMode {
		return len(s.synth) > 0
	}
	if s.finished || s.failed || s.cur == nil || s.x.rec.Recovered > 0 {
		// After a recovery, buffered events may all be dropped (what the
		// client has): Next could then wait on the upstream.
		return false
	}
	if len(s.buf) > 0 {
		return true
	}
	p, ok := s.cur.res.Stream.(wire.Pending)
	return ok && p.Pending()
}

func (s *Stream) upstreamNext() (*llm.Event, error) {
	if len(s.buf) > 0 {
		ev := s.buf[0]
		s.buf = s.buf[1:]
		return ev, nil
	}
	return s.cur.res.Stream.Next()
}

// translate maps an upstream event to the client's stream; emit is false
// for events the client must not see twice (a continuation's start).
// After a re-ask it first drops what repeats the text the client has.
func (s *Stream) translate(ev *llm.Event) (*llm.Event, bool, error) {
	if s.x.rec.Recovered > 0 && ev.Raw != nil {
		// A continuation's bytes carry another upstream's ids, model and
		// indexes: the client gets its events encoded from their fields.
		ev = ev.Detach()
	}
	if s.pending != nil {
		ev2, drop, err := s.splice(ev)
		if err != nil || drop {
			return nil, false, err
		}
		ev = ev2
	}
	if s.echo != "" {
		ev2, drop := s.dropEcho(ev)
		if drop {
			return nil, false, nil
		}
		ev = ev2
	}
	out, emit := s.forward(ev)
	return out, emit, nil
}

// dropEcho filters a continuation's first text while it may repeat the
// prefill it was sent: an answer that starts with the whole prefill loses
// it (the client has that text); one that departs from it is forwarded
// from its start, the text held meanwhile included. drop is set while the
// text read is still a part of the prefill.
func (s *Stream) dropEcho(ev *llm.Event) (ev2 *llm.Event, drop bool) {
	if ev.Type != llm.EventBlockDelta || ev.DeltaType != llm.DeltaText {
		if s.held == "" || ev.Type == llm.EventBlockStart || ev.Type == llm.EventMessageStart {
			return ev, false
		}
		// The answer ended (or changed block) inside the prefill: it was
		// not an echo. The held text goes first, ev after it.
		s.buf = append([]*llm.Event{ev}, s.buf...)
		cp := &llm.Event{Type: llm.EventBlockDelta, Index: s.heldIndex, DeltaType: llm.DeltaText, Delta: s.held}
		s.echo, s.held = "", ""
		return cp, false
	}
	text := s.held + ev.Delta
	switch {
	case strings.HasPrefix(text, s.echo):
		text = text[len(s.echo):]
		s.echo, s.held = "", ""
		if text == "" {
			return nil, true
		}
	case strings.HasPrefix(s.echo, text):
		s.held, s.heldIndex = text, ev.Index
		return nil, true
	default:
		s.echo, s.held = "", ""
	}
	if text == ev.Delta {
		return ev, false
	}
	cp := ev.Detach()
	cp.Delta = text
	return cp, false
}

// splice filters an event of a re-asked answer while it repeats what the
// client already has: drop is set for what the client has, ev2 is what is
// left of ev, and errDiverged says the new answer differs from the text
// sent, so it cannot be spliced on.
func (s *Stream) splice(ev *llm.Event) (ev2 *llm.Event, drop bool, err error) {
	k, mapped := s.idxMap[ev.Index]
	inPending := mapped && k < len(s.pending)
	switch ev.Type {
	case llm.EventMessageStart:
		return nil, true, nil
	case llm.EventBlockStart:
		if ev.Index < len(s.pending) {
			if ev.Block != nil && ev.Block.Type != llm.BlockText {
				return nil, false, policy.ErrDiverged
			}
			s.idxMap[ev.Index] = ev.Index
			return nil, true, nil
		}
	case llm.EventBlockDelta:
		if !inPending || s.pending[k] == "" {
			break
		}
		if ev.DeltaType != llm.DeltaText {
			return nil, false, policy.ErrDiverged
		}
		p, d := s.pending[k], ev.Delta
		switch {
		case strings.HasPrefix(p, d):
			s.pending[k] = p[len(d):]
			return nil, true, nil
		case strings.HasPrefix(d, p):
			s.pending[k] = ""
			cp := ev.Detach()
			cp.Delta = d[len(p):]
			return cp, false, nil
		}
		return nil, false, policy.ErrDiverged
	case llm.EventBlockStop:
		if inPending {
			if s.pending[k] != "" {
				return nil, false, policy.ErrDiverged
			}
			if !s.blocks[k].open {
				return nil, true, nil // the client has this block's end already
			}
		}
	case llm.EventMessageDelta, llm.EventMessageStop:
		for _, p := range s.pending {
			if p != "" {
				return nil, false, policy.ErrDiverged
			}
		}
	}
	return ev, false, nil
}

// forward maps an upstream event to the client's stream; emit is false
// for events the client must not see twice (a continuation's start).
func (s *Stream) forward(ev *llm.Event) (*llm.Event, bool) {
	switch ev.Type {
	case llm.EventMessageStart:
		if s.started {
			return nil, false
		}
		s.started = true
		if ev.Message != nil {
			u := ev.Message.Usage
			s.inputUsage = &u
		}
		return ev, true
	case llm.EventBlockStart:
		if s.continuing && ev.Index == 0 && ev.Block != nil && ev.Block.Type == llm.BlockText {
			if k := len(s.blocks) - 1; k >= 0 && s.blocks[k].open && s.blocks[k].typ == llm.BlockText {
				// The continuation's first text block is the rest of the
				// block the client has open.
				s.idxMap[0] = k
				return nil, false
			}
		}
		k := s.nextIdx
		s.nextIdx++
		s.idxMap[ev.Index] = k
		typ := llm.BlockText
		if ev.Block != nil {
			typ = ev.Block.Type
		}
		s.blocks = append(s.blocks, clientBlock{typ: typ, open: true})
		return reindex(ev, k), true
	case llm.EventBlockDelta:
		k, ok := s.idxMap[ev.Index]
		if !ok {
			return nil, false
		}
		s.deltas++
		if ev.DeltaType == llm.DeltaText {
			text := ev.Delta
			if s.trimmed != "" {
				if strings.HasPrefix(text, s.trimmed) {
					text = text[len(s.trimmed):]
				}
				s.trimmed = ""
				if text != ev.Delta {
					ev = ev.Detach()
					ev.Delta = text
				}
			}
			s.blocks[k].text.WriteString(text)
			if s.relaxed != nil {
				s.text.WriteString(text)
			}
		} else if ev.DeltaType == llm.DeltaInputJSON && s.relaxed != nil && s.relaxed.tool != "" {
			s.text.WriteString(ev.Delta)
		}
		return reindex(ev, k), true
	case llm.EventBlockStop:
		k, ok := s.idxMap[ev.Index]
		if !ok {
			return nil, false
		}
		s.blocks[k].open = false
		return reindex(ev, k), true
	case llm.EventMessageDelta:
		if ev.Usage != nil {
			u := *ev.Usage
			if s.x.rec.Recovered > 0 {
				// The client's usage covers the whole answer: the original
				// prompt once, and every output token it received. A
				// re-asked answer counts the whole answer and the original
				// prompt itself; a continuation counts only its part, and
				// its prompt holds the prefill.
				if !s.cur.splice {
					u.OutputTokens += s.priorOutput
				}
				if in := s.inputUsage; in != nil && in.InputTokens+in.CacheReadTokens+in.CacheWriteTokens > 0 {
					u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = in.InputTokens, in.CacheReadTokens, in.CacheWriteTokens
				}
				ev = ev.Detach()
				ev.Usage = &u
			}
			s.finalUsage = &u
		}
		return ev, true
	case llm.EventMessageStop:
		s.finished = true
		if s.relaxed != nil {
			res := structured.Repair(s.text.String(), s.relaxed.schema, structured.Options{})
			s.x.e.smetrics.Observe(res)
			if !res.Valid || res.Changed {
				// Relaxed mode delivers the answer as streamed: a repair
				// that would change it cannot be applied any more.
				s.x.rec.SchemaViolation = true
				s.x.e.smetrics.Failed.Add(1)
			}
		}
		return ev, true
	}
	return ev, true
}

// reindex returns ev with client index k (dropping the raw bytes, which
// carry the upstream's index, when it differs).
func reindex(ev *llm.Event, k int) *llm.Event {
	if ev.Index == k {
		return ev
	}
	cp := ev.Detach()
	cp.Index = k
	return cp
}

// recover continues the answer on another endpoint after cause, or says
// why it cannot. The endpoint that failed the stream is not used again
// while another exists. Each endpoint gets the continuation its kind
// allows (continuationFor); one that cannot continue is re-asked for the
// whole answer, which is spliced on only if it starts with exactly the
// text the client has.
func (s *Stream) recover(cause error) *llm.APIError {
	x := s.x
	f := policy.Classify(cause)
	s.cur.end = x.e.now()
	s.costAttempt()
	s.cur.settle(f)
	s.cur.cancel()
	s.cur.res.Stream.Close()
	fail := func(why string) *llm.APIError {
		return &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
			Message: fmt.Sprintf("upstream stream failed (%s) and %s", f.Reason, why)}
	}
	if s.ctx.Err() != nil {
		return &llm.APIError{Status: http.StatusOK, Type: llm.ErrTimeout, MeshCode: llm.MeshTimeout, Message: "stream cancelled or past its deadline"}
	}
	if f.Decision == policy.DecideFail {
		return fail("the failure is not retryable")
	}
	if x.e.recoveryOff.Load() || x.legacy {
		return fail("mid-stream recovery is off")
	}
	delivered := ""
	for _, b := range s.blocks {
		if b.typ != llm.BlockText {
			return fail("a " + string(b.typ) + " block cannot be continued")
		}
		delivered += b.text.String()
	}
	switch err := x.TakeRetry(); {
	case errors.Is(err, policy.ErrAttemptsSpent):
		return fail(fmt.Sprintf("%d attempts were made", x.Attempts()))
	case err != nil:
		return &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshBudgetExhausted,
			Message: fmt.Sprintf("upstream stream failed (%s) and the retry budget is exhausted", f.Reason)}
	}
	x.mu.Lock()
	x.avoid[s.cur.idx] = true
	clear(x.tried)
	x.mu.Unlock()
	// The continuation's own prompt usage and output are not the client's:
	// remember what the client already received.
	s.priorOutput += s.deltas
	s.deltas = 0
	a, err := x.runTry(s.ctx, &try{req: x.req, pass: policy.Pass{Kind: "continuation"}, cont: &delivered, contOut: s.priorOutput})
	if err != nil {
		ae := x.clientError(s.ctx, err)
		ae.Status = http.StatusOK
		ae.Message = "upstream stream failed (" + f.Reason + ") and could not be continued: " + ae.Message
		return ae
	}
	x.rec.Recovered++
	s.cur = a
	s.buf = a.first
	s.continuing = true
	s.idxMap = map[int]int{}
	s.trimmed = ""
	s.pending = nil
	s.echo, s.held = "", ""
	if a.splice {
		// The new answer starts from the beginning: each of its first
		// blocks must repeat what the client has of that block.
		s.pending = make([]string, len(s.blocks))
		for k := range s.blocks {
			s.pending[k] = s.blocks[k].text.String()
		}
	} else {
		trimmed := strings.TrimRight(delivered, " \t\r\n")
		s.trimmed = delivered[len(trimmed):]
		if n := len(a.req.Messages); n > 0 && a.req.Messages[n-1].Role == llm.RoleAssistant {
			s.echo = a.req.Messages[n-1].Text()
		}
	}
	return nil
}

// continuationFor is the request that continues delivered on ep, by ep's
// continuation kind; splice is set when ep cannot continue an answer and
// is re-asked for the whole of it.
// A continuation asks only for the tokens the client has left: out is the
// output already delivered (content deltas, one token each on the servers
// that send a token per chunk; a lower bound where a delta holds several).
func (x *exec) continuationFor(ep *endpoint, delivered string, out int) (req *llm.Request, splice bool) {
	switch ep.ContinuationKind() {
	case provider.ContinueNone:
		// OpenAI starts a new answer after a trailing assistant message:
		// ask again and keep only what follows the text already sent.
		return x.req, true
	case provider.ContinueFinalMessage:
		// vLLM / SGLang continue the final message only when told to.
		r := continuation(x.req, delivered, out)
		r.ContinueFinalMessage = true
		return r, false
	case provider.ContinuePrefix:
		// DeepSeek / Mistral continue a final assistant message marked
		// "prefix": true.
		r := continuation(x.req, delivered, out)
		if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == llm.RoleAssistant {
			r.Messages[n-1].Prefix = true
		}
		return r, false
	}
	return continuation(x.req, delivered, out), false // Anthropic prefill
}

// continuation is req with the text the client already has as an assistant
// prefill (appended to the client's own prefill if it sent one), asking
// for the client's max_tokens less the out tokens it has (at least one).
func continuation(req *llm.Request, prefill string, had int) *llm.Request {
	out := *req
	if out.HasMaxTokens {
		out.MaxTokens = max(1, req.MaxTokens-had)
	}
	trimmed := strings.TrimRight(prefill, " \t\r\n")
	msgs := make([]llm.Message, len(req.Messages), len(req.Messages)+1)
	copy(msgs, req.Messages)
	if n := len(msgs); n > 0 && msgs[n-1].Role == llm.RoleAssistant {
		last := msgs[n-1]
		text := strings.TrimRight(last.Text()+trimmed, " \t\r\n")
		msgs[n-1] = llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}
	} else if trimmed != "" {
		msgs = append(msgs, llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: trimmed}}})
	}
	out.Messages = msgs
	return &out
}

// Close ends the stream, cancels the upstream and reports the record.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	x := s.x
	if s.hit != nil {
		// A cached answer: no attempt to settle, Record filled at the hit.
		x.finish(nil, nil)
		return nil
	}
	if s.cur == nil {
		// A fused answer: its attempts were settled as they finished.
		s.cancel()
		x.finish(x.fragServed, nil)
		return nil
	}
	if !s.failed {
		s.cur.end = x.e.now()
		s.costAttempt()
		if s.finished {
			s.cur.settle(nil)
		} else {
			// The client left before the end: not the endpoint's fault.
			x.mu.Lock()
			r := &x.rec.Attempts[s.cur.recIdx]
			r.End, r.Outcome = s.cur.end, "client_gone"
			x.mu.Unlock()
			s.cur.discard()
		}
	}
	s.cur.cancel()
	if s.cur.res != nil && s.cur.res.Stream != nil {
		s.cur.res.Stream.Close()
	}
	s.cancel()
	x.seal()
	rec := x.rec
	if s.finalUsage != nil {
		rec.Usage = *s.finalUsage
	} else if s.inputUsage != nil {
		rec.Usage = *s.inputUsage
	}
	rec.TTFT = s.cur.ttft
	if !s.failed && s.schemaErr == nil {
		// The answer as the client received it, for the request log.
		resp := &llm.Response{}
		for i := range s.blocks {
			if b := &s.blocks[i]; b.typ == llm.BlockText {
				resp.Content = append(resp.Content, llm.Block{Type: llm.BlockText, Text: b.text.String()})
			}
		}
		rec.Response = resp
	}
	if s.failed {
		x.e.finish(rec, nil, s.endErr)
	} else if s.schemaErr != nil {
		x.e.finish(rec, nil, s.schemaErr)
	} else if !s.finished {
		x.e.finish(rec, s.served(), &llm.APIError{Status: 499, Type: llm.ErrAPI, Message: "client closed the stream"})
	} else {
		x.e.finish(rec, s.served(), nil)
	}
	return nil
}

// streamStore rebuilds a streamed answer for the response cache.
type streamStore struct {
	use cacheUse
	acc llm.Accumulator
}

// keep adds an event sent to the client to the answer being rebuilt for
// the response cache, and stores the answer at its message_stop: before
// the client can ask again (an OpenAI SDK stops reading at [DONE], before
// the stream is closed).
func (s *Stream) keep(ev *llm.Event) {
	st := s.store
	if st == nil {
		return
	}
	st.acc.Add(ev)
	if ev.Type != llm.EventMessageStop {
		return
	}
	s.store = nil
	if resp := st.acc.Response(); !s.failed && s.schemaErr == nil && cacheable(resp, s.x.rec) {
		s.x.e.cachePut(st.use, resp, s.Served())
	}
}

// noteOwn keeps what an event of the current attempt says of its usage.
func (s *Stream) noteOwn(ev *llm.Event) {
	switch ev.Type {
	case llm.EventMessageStart:
		if ev.Message != nil {
			s.own = ev.Message.Usage
		}
	case llm.EventBlockDelta:
		s.ownDeltas++
	case llm.EventMessageDelta:
		if u := ev.Usage; u != nil {
			if u.PromptTokens() > 0 {
				s.own.InputTokens, s.own.CacheReadTokens, s.own.CacheWriteTokens = u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens
			}
			s.own.OutputTokens, s.ownOut = u.OutputTokens, true
		}
	}
}

// costAttempt writes the current attempt's own usage and its cost into
// its record, once, and starts the next attempt's count. An attempt cut
// before its usage came counts a token per content event received.
func (s *Stream) costAttempt() {
	u := s.own
	if !s.ownOut {
		u.OutputTokens = max(u.OutputTokens, s.ownDeltas)
	}
	s.own, s.ownOut, s.ownDeltas = llm.Usage{}, false, 0
	x := s.x
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.sealed || u.PromptTokens()+u.OutputTokens == 0 {
		return
	}
	r := &x.rec.Attempts[s.cur.recIdx]
	r.InputTokens, r.OutputTokens = u.PromptTokens(), u.OutputTokens
	r.Cost = x.e.cost(s.cur.ep, u)
}
