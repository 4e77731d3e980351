// Package relay is the stream relay: it forwards an upstream's answer
// events to the client with block indexes the client can rely on, and
// when that upstream fails mid-way (cut, silent past the idle timeout, an
// error event, no terminator) has the attempt path continue the answer on
// another endpoint — sending what the client already has as an assistant
// prefill and forwarding only the continuation — so the client sees one
// coherent stream. When it cannot, the stream ends with an error event,
// never a fake clean finish. A stream that slows down mid-way is raced
// against such a continuation (race.go: slow-stream hedging).
//
// The relay knows nothing of endpoints' health or budgets: the attempt
// path is behind Upstream (the engine's), and a continuation, a retry of
// work, is taken from the call's Retries (policy.Retries: the attempt cap,
// then the route's retry budget) like any other retry. A Relay is the
// innermost pipeline.Events of a streamed call; it is used by one
// goroutine.
package relay

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
)

// Upstream is the attempt side of a relayed stream: the current leg (one
// upstream attempt's answer) and what the attempt path does with legs.
type Upstream interface {
	// Next is the current leg's next event (those read before the stream
	// was committed first).
	Next() (*llm.Event, error)
	// Ready reports whether Next returns without waiting on the upstream.
	Ready() bool
	// EndpointID names the current leg's endpoint.
	EndpointID() string
	// Lend says the client got ev, an event of the current leg, unchanged;
	// Recycle says the client is done with the event lent last.
	Lend(ev *llm.Event)
	Recycle()
	// Diverged settles the current leg, whose own usage was u, as a
	// re-asked answer that differs from the text sent.
	Diverged(u llm.Usage, err error)
	// Stop settles the current leg (own usage u) after cause and names
	// the failure (reason, its label); err, the client's error, when the
	// answer cannot be continued whatever is left (the caller left or the
	// deadline passed, the failure is not retryable, recovery is off).
	Stop(cause error, u llm.Usage) (reason string, err *llm.APIError)
	// Continue continues the answer from cut on another endpoint, a retry
	// already taken, or returns the attempt path's error.
	Continue(cut Cut) (Leg, *llm.APIError)
	// End settles the last leg (own usage u): finished, or the client
	// left before its end.
	End(u llm.Usage, finished bool)
}

// Retries is what the relay needs of the call's retries of work
// (policy.Retries through the call).
type Retries interface {
	// TakeRetry takes one: policy.ErrAttemptsSpent when the call made all
	// its attempts, policy.ErrBudgetExhausted when the route's budget
	// refuses.
	TakeRetry() error
	// Attempts is the number of attempts the call made.
	Attempts() int
}

// CannotContinue is the client's error (the stream's error event) when an
// answer that failed for reason cannot be continued, and why.
func CannotContinue(reason, why string) *llm.APIError {
	return &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
		Message: fmt.Sprintf("upstream stream failed (%s) and %s", reason, why)}
}

// Cut is what the client has when a leg fails: the text of its blocks, the
// type of its first block that is not text (which cannot be continued by
// prefill; "" when all are text), and its output so far (content deltas).
type Cut struct {
	Delivered string
	Blocker   llm.BlockType
	Output    int
}

// Leg is a continuation that took over: Splice when its endpoint was
// re-asked for the whole answer (only what follows the text the client
// has is forwarded), else Echo, the prefill it was sent, which an echoing
// server may repeat.
type Leg struct {
	Splice bool
	Echo   string
}

// Relay is a committed answer stream (see the package doc).
type Relay struct {
	up      Upstream
	retries Retries
	// back holds events pushed back before the upstream's next.
	back []*llm.Event

	started  bool
	finished bool
	failed   bool
	closed   bool
	// recovered counts continuations; splice is the current leg's kind.
	recovered int
	splice    bool
	nextIdx   int
	idxMap    map[int]int
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
	// own is the current leg's usage as its upstream reported it (message
	// start, then the cumulative message delta), ownOut whether a delta
	// reported output, and ownDeltas its content deltas: its cost, a
	// continuation's prefilled prompt included.
	own       llm.Usage
	ownOut    bool
	ownDeltas int

	// Slow-stream hedging (race.go): pacer is up as a Pacer (nil when it
	// is not one); paceAt holds the arrival times of the current leg's
	// last content events (paceN of them so far, the first at
	// paceFirst); legSlow is set once the leg was judged slow, slow when
	// the next read is to race it, raced once the stream had its race.
	pacer     Pacer
	paceAt    [paceWindow + 1]time.Time
	paceFirst time.Time
	paceN     int
	legSlow   bool
	slow      bool
	raced     bool
}

type clientBlock struct {
	typ  llm.BlockType
	text strings.Builder
	open bool
}

// Init makes a zero Relay relay up's answer (a Relay is held by value in
// the caller's stream), taking a continuation's retry from r.
func (s *Relay) Init(up Upstream, r Retries) {
	s.up, s.retries, s.idxMap = up, r, map[int]int{}
	s.pacer, _ = up.(Pacer)
}

// Finished reports whether the answer reached its message_stop; Failed
// whether the stream ended with an error event, and that error.
func (s *Relay) Finished() bool { return s.finished }

// Failed reports whether the stream ended with an error event, and that
// error.
func (s *Relay) Failed() (bool, *llm.APIError) { return s.failed, s.endErr }

// Usage is the usage the client got: the final one, else the prompt's.
func (s *Relay) Usage() (llm.Usage, bool) {
	if s.finalUsage != nil {
		return *s.finalUsage, true
	}
	if s.inputUsage != nil {
		return *s.inputUsage, true
	}
	return llm.Usage{}, false
}

// Received is the answer's text blocks as the client received them.
func (s *Relay) Received() *llm.Response {
	resp := &llm.Response{}
	for i := range s.blocks {
		if b := &s.blocks[i]; b.typ == llm.BlockText {
			resp.Content = append(resp.Content, llm.Block{Type: llm.BlockText, Text: b.text.String()})
		}
	}
	return resp
}

// Next returns the next event for the client; io.EOF after message_stop.
// After an error event Next returns io.EOF. The event is the caller's
// until the next call to Next: it must copy what it keeps of it.
func (s *Relay) Next() (*llm.Event, error) {
	s.up.Recycle()
	if s.finished || s.failed {
		return nil, io.EOF
	}
	if s.slow {
		s.race()
	}
	for {
		ev, err := s.upstreamNext()
		if err == nil {
			s.noteOwn(ev)
			if s.pacer != nil && ev.Type == llm.EventBlockDelta {
				s.pace(time.Now())
			}
		}
		if err == nil && ev.Type == llm.EventError {
			err = &provider.Error{Kind: provider.KindStatus, Endpoint: s.up.EndpointID(), API: ev.Err}
		}
		if err == io.EOF && !s.finished {
			err = &provider.Error{Kind: provider.KindProtocol, Endpoint: s.up.EndpointID(), Err: errors.New("stream ended without its terminal event")}
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
			s.up.Diverged(s.takeOwn(), err)
			s.failed = true
			s.endErr = &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshFallbackExhausted,
				Message: "upstream stream failed and could not be continued: " + err.Error()}
			return &llm.Event{Type: llm.EventError, Err: s.endErr}, nil
		}
		if emit {
			if out == ev {
				s.up.Lend(out)
			}
			return out, nil
		}
	}
}

// Ready reports whether Next returns an event without waiting on an
// upstream: events read before the stream was committed (its first ones,
// up to the first content), or the rest of an upstream chunk that gave
// several events. A writer need not flush before a ready event: the
// client gets them in one write.
func (s *Relay) Ready() bool {
	if s.finished || s.failed || s.recovered > 0 || s.slow {
		// After a recovery, buffered events may all be dropped (what the
		// client has): Next could then wait on the upstream.
		return false
	}
	return len(s.back) > 0 || s.up.Ready()
}

// Close settles the last leg, unless the stream failed (its leg was
// settled then). The Upstream releases the rest.
func (s *Relay) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if !s.failed {
		s.up.End(s.takeOwn(), s.finished)
	}
	return nil
}

func (s *Relay) upstreamNext() (*llm.Event, error) {
	if len(s.back) > 0 {
		ev := s.back[0]
		s.back = s.back[1:]
		return ev, nil
	}
	return s.up.Next()
}

// translate maps an upstream event to the client's stream; emit is false
// for events the client must not see twice (a continuation's start).
// After a re-ask it first drops what repeats the text the client has.
func (s *Relay) translate(ev *llm.Event) (*llm.Event, bool, error) {
	if s.recovered > 0 && ev.Raw != nil {
		// A continuation's bytes carry another upstream's ids, model and
		// indexes: the client gets its events encoded from their fields.
		ev = ev.Detach()
	}
	if s.pending != nil {
		ev2, drop, err := s.spliceEvent(ev)
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
func (s *Relay) dropEcho(ev *llm.Event) (ev2 *llm.Event, drop bool) {
	if ev.Type != llm.EventBlockDelta || ev.DeltaType != llm.DeltaText {
		if s.held == "" || ev.Type == llm.EventBlockStart || ev.Type == llm.EventMessageStart {
			return ev, false
		}
		// The answer ended (or changed block) inside the prefill: it was
		// not an echo. The held text goes first, ev after it.
		s.back = append([]*llm.Event{ev}, s.back...)
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

// spliceEvent filters an event of a re-asked answer while it repeats what
// the client already has: drop is set for what the client has, ev2 is
// what is left of ev, and policy.ErrDiverged says the new answer differs from
// the text sent, so it cannot be spliced on.
func (s *Relay) spliceEvent(ev *llm.Event) (ev2 *llm.Event, drop bool, err error) {
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
		return s.spliceDelta(ev, k)
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

// spliceDelta matches a re-asked delta against what client block k still
// has to repeat.
func (s *Relay) spliceDelta(ev *llm.Event, k int) (*llm.Event, bool, error) {
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
}

// forward maps an upstream event to the client's stream; emit is false
// for events the client must not see twice (a continuation's start).
func (s *Relay) forward(ev *llm.Event) (*llm.Event, bool) {
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
		return s.blockStart(ev)
	case llm.EventBlockDelta:
		return s.blockDelta(ev)
	case llm.EventBlockStop:
		k, ok := s.idxMap[ev.Index]
		if !ok {
			return nil, false
		}
		s.blocks[k].open = false
		return reindex(ev, k), true
	case llm.EventMessageDelta:
		return s.messageDelta(ev), true
	case llm.EventMessageStop:
		s.finished = true
		s.pacedEnd()
		return ev, true
	}
	return ev, true
}

// blockStart opens a client block for an upstream one, or, for a
// continuation's first text block, maps it onto the block the client has
// open.
func (s *Relay) blockStart(ev *llm.Event) (*llm.Event, bool) {
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
}

// blockDelta forwards a delta of a mapped block, keeping the text the
// client has (less the whitespace a continuation's prefill lost).
func (s *Relay) blockDelta(ev *llm.Event) (*llm.Event, bool) {
	k, ok := s.idxMap[ev.Index]
	if !ok {
		return nil, false
	}
	s.deltas++
	if ev.DeltaType == llm.DeltaText {
		text := ev.Delta
		if s.trimmed != "" {
			text = strings.TrimPrefix(text, s.trimmed)
			s.trimmed = ""
			if text != ev.Delta {
				ev = ev.Detach()
				ev.Delta = text
			}
		}
		s.blocks[k].text.WriteString(text)
	}
	return reindex(ev, k), true
}

// messageDelta keeps the final usage; after a continuation it is the
// client's: the original prompt once, and every output token it received.
// A re-asked answer counts the whole answer and the original prompt
// itself; a continuation counts only its part, and its prompt holds the
// prefill.
func (s *Relay) messageDelta(ev *llm.Event) *llm.Event {
	if ev.Usage == nil {
		return ev
	}
	u := *ev.Usage
	if s.recovered > 0 {
		if !s.splice {
			u.OutputTokens += s.priorOutput
		}
		if in := s.inputUsage; in != nil && in.InputTokens+in.CacheReadTokens+in.CacheWriteTokens > 0 {
			u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = in.InputTokens, in.CacheReadTokens, in.CacheWriteTokens
		}
		ev = ev.Detach()
		ev.Usage = &u
	}
	s.finalUsage = &u
	return ev
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

// recover has the attempt path continue the answer after cause, or says
// why it cannot; on success the relay follows the new leg.
func (s *Relay) recover(cause error) *llm.APIError {
	cut := Cut{}
	for _, b := range s.blocks {
		if b.typ != llm.BlockText {
			cut.Blocker = b.typ
			break
		}
		cut.Delivered += b.text.String()
	}
	// The continuation's own prompt usage and output are not the client's:
	// remember what the client already received.
	own := s.takeOwn()
	prior, deltas := s.priorOutput, s.deltas
	s.priorOutput += s.deltas
	s.deltas = 0
	cut.Output = s.priorOutput
	leg, ae := s.continueAfter(cause, own, cut)
	if ae != nil {
		s.priorOutput, s.deltas = prior, deltas
		return ae
	}
	s.follow(leg, cut)
	return nil
}

// continueAfter settles the current leg (own usage u) after cause and,
// when the answer may be continued from cut (the upstream allows it, no
// block that prefill cannot continue, a retry is left), has the upstream
// continue it; else it returns the client's error.
func (s *Relay) continueAfter(cause error, u llm.Usage, cut Cut) (Leg, *llm.APIError) {
	reason, ae := s.up.Stop(cause, u)
	if ae != nil {
		return Leg{}, ae
	}
	if cut.Blocker != "" {
		return Leg{}, CannotContinue(reason, "a "+string(cut.Blocker)+" block cannot be continued")
	}
	switch err := s.retries.TakeRetry(); {
	case errors.Is(err, policy.ErrAttemptsSpent):
		return Leg{}, CannotContinue(reason, fmt.Sprintf("%d attempts were made", s.retries.Attempts()))
	case err != nil:
		return Leg{}, &llm.APIError{Status: http.StatusOK, Type: llm.ErrAPI, MeshCode: llm.MeshBudgetExhausted,
			Message: fmt.Sprintf("upstream stream failed (%s) and the retry budget is exhausted", reason)}
	}
	leg, ae := s.up.Continue(cut)
	if ae != nil {
		ae.Status = http.StatusOK
		ae.Message = "upstream stream failed (" + reason + ") and could not be continued: " + ae.Message
	}
	return leg, ae
}

// noteOwn keeps what an event of the current leg says of its usage.
func (s *Relay) noteOwn(ev *llm.Event) {
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

// takeOwn is the current leg's own usage, and starts the next leg's count.
// A leg cut before its usage came counts a token per content event
// received.
func (s *Relay) takeOwn() llm.Usage {
	u := s.own
	if !s.ownOut {
		u.OutputTokens = max(u.OutputTokens, s.ownDeltas)
	}
	s.own, s.ownOut, s.ownDeltas = llm.Usage{}, false, 0
	return u
}
