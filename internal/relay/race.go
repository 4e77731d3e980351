package relay

import (
	"strings"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// Slow-stream hedging: a stream that started on time and then crawls (an
// overloaded node streaming slowly) is raced against a continuation of
// the text the client has, on another endpoint, and the client goes on
// with whichever extends that text first.
//
// The relay times the current leg's content events; once the mean gap of
// the last paceWindow of them exceeds the leg's slow gap (its endpoint's
// normal gap times the threshold, Pacer.SlowGap), it stops forwarding that
// leg and has the Pacer start the continuation (Race). While the race
// runs the current leg's events are held, not forwarded; the
// continuation wins when it has text that extends what the client has
// (for a re-asked answer, once it repeated that text exactly and went
// beyond it), and the current leg wins when it ends first, when the
// continuation fails or departs from the text (a re-ask above
// temperature 0), or when the continuation took longer than the race's
// patience. The loser is cancelled; the winner's held events then go to
// the client through the relay's usual path, so the client never sees a
// duplicated or altered text, and a continuation that cannot splice
// leaves the stream as it was. One race per stream.

// paceWindow is how many content-event gaps the pace is judged over: a
// crawl sustained over as many tokens, not one late token (a proxy's
// buffering, a scheduler's pause).
const paceWindow = 8

// Pacer is what an Upstream offers for slow-stream hedging (the relay
// uses it when the Upstream implements it).
type Pacer interface {
	// SlowGap is the mean gap between content events above which the
	// current leg is slow; 0 when it is not judged (its endpoint's pace is
	// not known yet, or slow-stream hedging is off for the call).
	SlowGap() time.Duration
	// Paced reports the mean gap between the current leg's content
	// events over an answer that ran to its end at a normal pace.
	Paced(gap time.Duration)
	// Race books a slow-stream hedge and starts a continuation of cut on
	// another endpoint; nil when none may be made now (the hedge budget,
	// the attempt cap, no endpoint available).
	Race(cut Cut) Race
}

// Item is one read of a leg: an event, or the error that ended it
// (io.EOF after its end).
type Item struct {
	Ev  *llm.Event
	Err error
}

// Race is a slow-stream hedge in flight. Exactly one of Won and Lost is
// called, once.
type Race interface {
	// Current delivers the current leg's events from the race's start,
	// Hedge the continuation's from its first (once its attempt was made);
	// each ends with its error item.
	Current() <-chan Item
	Hedge() <-chan Item
	// Leg is the continuation's kind, valid once Hedge delivered an event.
	Leg() Leg
	// Patience is how long from now the continuation may take to extend
	// the text (read as the race starts and again at its first event).
	Patience() time.Duration
	// Won makes the continuation the current leg (its events read so far
	// are the caller's to replay) and cancels the leg it replaces, whose
	// own usage was u. Later reads of the upstream continue the winner.
	Won(u llm.Usage)
	// Lost cancels the continuation, whose own usage was u; the current
	// leg goes on (its events read so far are the caller's to replay).
	Lost(u llm.Usage)
}

// pace notes a content event of the current leg at now and judges the
// leg's pace.
func (s *Relay) pace(now time.Time) {
	s.paceN++
	s.paceAt[s.paceN%(paceWindow+1)] = now
	if s.paceN == 1 {
		s.paceFirst = now
	}
	if s.pacer == nil || s.paceN <= paceWindow || s.legSlow {
		return
	}
	slow := s.pacer.SlowGap()
	if slow > 0 && now.Sub(s.paceAt[(s.paceN-paceWindow)%(paceWindow+1)]) > paceWindow*slow {
		s.legSlow = true
		s.slow = !s.raced
	}
}

// pacedEnd reports the current leg's pace at its end, unless it was slow.
func (s *Relay) pacedEnd() {
	if s.pacer != nil && !s.legSlow && s.recovered == 0 && s.paceN >= 2 {
		s.pacer.Paced(s.paceAt[s.paceN%(paceWindow+1)].Sub(s.paceFirst) / time.Duration(s.paceN-1))
	}
}

// race runs a slow-stream hedge of the current leg, if one may be made
// (see the comment at the top of this file).
func (s *Relay) race() {
	s.slow = false
	if len(s.back) > 0 || s.pending != nil || s.echo != "" || len(s.blocks) != 1 || s.blocks[0].typ != llm.BlockText {
		// Only a single text block, with nothing of a continuation still
		// being matched, is raced.
		return
	}
	cut := Cut{Delivered: s.blocks[0].text.String(), Output: s.priorOutput + s.deltas}
	r := s.pacer.Race(cut)
	if r == nil {
		return
	}
	s.raced = true
	var held, hedged []*llm.Event
	m := extension{want: cut.Delivered}
	timer := time.NewTimer(r.Patience())
	defer timer.Stop()
	cur, hedge := r.Current(), r.Hedge()
	won := false
race:
	for {
		select {
		case it := <-cur:
			if it.Err != nil {
				// The leg ended without its terminator: the hedge may still
				// win; else its error comes again from the upstream.
				cur = nil
				continue
			}
			held = append(held, it.Ev)
			if it.Ev.Type == llm.EventMessageStop {
				break race // it finished first
			}
		case it := <-hedge:
			if it.Err != nil {
				break race
			}
			if len(hedged) == 0 {
				// Its attempt is made: the patience it has left (a
				// re-asked answer must first repeat the text).
				timer.Reset(r.Patience())
			}
			hedged = append(hedged, it.Ev)
			switch m.feed(it.Ev, r.Leg()) {
			case extends:
				won = true
				break race
			case departs:
				break race
			}
		case <-timer.C:
			break race
		}
	}
	if !won {
		r.Lost(usageOf(hedged))
		s.back = held
		return
	}
	for _, ev := range held {
		s.noteOwn(ev) // the replaced leg's, paid for
	}
	r.Won(s.takeOwn())
	s.priorOutput += s.deltas
	s.deltas = 0
	s.follow(r.Leg(), cut)
	s.back = hedged
}

// follow makes the relay follow a continuation of kind leg of cut.
func (s *Relay) follow(leg Leg, cut Cut) {
	s.recovered++
	s.splice = leg.Splice
	s.continuing = true
	s.idxMap = map[int]int{}
	s.trimmed = ""
	s.pending = nil
	s.echo, s.held = "", ""
	s.paceN, s.legSlow = 0, false
	if leg.Splice {
		// The new answer starts from the beginning: each of its first
		// blocks must repeat what the client has of that block.
		s.pending = make([]string, len(s.blocks))
		for k := range s.blocks {
			s.pending[k] = s.blocks[k].text.String()
		}
	} else {
		trimmed := strings.TrimRight(cut.Delivered, " \t\r\n")
		s.trimmed = cut.Delivered[len(trimmed):]
		s.echo = leg.Echo
	}
}

// usageOf is the own usage of a leg whose events were evs.
func usageOf(evs []*llm.Event) llm.Usage {
	var s Relay
	for _, ev := range evs {
		s.noteOwn(ev)
	}
	return s.takeOwn()
}

// verdict is what a continuation's events so far say of it.
type verdict uint8

const (
	undecided verdict = iota
	extends           // it has text beyond what the client has
	departs           // it cannot be spliced on
)

// extension judges a continuation against want, the text the client has:
// a re-asked answer (Leg.Splice) must repeat want exactly and go beyond
// it; a continuation extends it with its first text, unless that text may
// still be an echo of its prefill (Leg.Echo), which it then must repeat
// and go beyond (or depart from, which makes it the continuation itself).
type extension struct {
	want string
	text strings.Builder
}

func (m *extension) feed(ev *llm.Event, leg Leg) verdict {
	switch ev.Type {
	case llm.EventBlockStart:
		if ev.Block != nil && ev.Block.Type != llm.BlockText {
			return departs
		}
		return undecided
	case llm.EventBlockDelta:
		if ev.DeltaType != llm.DeltaText {
			return departs
		}
	case llm.EventMessageDelta, llm.EventMessageStop, llm.EventBlockStop:
		return departs // it ended (or closed its text) before extending it
	default:
		return undecided
	}
	m.text.WriteString(ev.Delta)
	got := m.text.String()
	prefix := m.want
	if !leg.Splice {
		prefix = leg.Echo
	}
	switch {
	case prefix == "":
		if got == "" {
			return undecided
		}
		return extends
	case len(got) <= len(prefix) && strings.HasPrefix(prefix, got):
		return undecided
	case strings.HasPrefix(got, prefix):
		return extends
	case leg.Splice:
		return departs
	}
	return extends // not an echo: the continuation itself
}
