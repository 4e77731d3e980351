package translate

import (
	"encoding/json"

	"github.com/keelmesh/keel/internal/llm"
)

// knownStop reports the stop reasons both SDKs know (PROTOCOLS §5.2: only
// emit values the client SDK knows).
func knownStop(s llm.StopReason) bool {
	switch s {
	case "", llm.StopEndTurn, llm.StopMaxTokens, llm.StopSequence, llm.StopToolUse,
		llm.StopRefusal, llm.StopPauseTurn, llm.StopContextLimit:
		return true
	}
	return false
}

// restoreStop maps a stop reason the client's SDK would not know (an
// OpenAI-compatible server's own finish_reason) to end_turn.
func restoreStop(s llm.StopReason) llm.StopReason {
	if knownStop(s) {
		return s
	}
	return llm.StopEndTurn
}

// RestoreResponse returns resp as the client should receive it after a
// translated call: tool names and ids mapped by Prepare restored, members
// only the upstream's format understands (Extra, ChoiceExtra, MessageExtra,
// Usage.Extra) removed, a stop reason the client's SDK does not know
// replaced by end_turn, and, for an Anthropic-format client, an OpenAI
// refusal given as the text of the answer when it has no other text.
// resp is not modified; it is returned as is when the call was not
// translated.
func (r Report) RestoreResponse(resp *llm.Response) *llm.Response {
	if !r.Translated() || resp == nil {
		return resp
	}
	out := *resp
	out.Extra, out.ChoiceExtra, out.MessageExtra, out.Usage.Extra = nil, nil, nil, nil
	out.StopReason = restoreStop(out.StopReason)
	out.Content = r.restoreBlocks(r.keepBlocks(resp.Content))
	if r.client == llm.FormatAnthropic && out.Refusal != "" {
		if out.Text() == "" {
			out.Content = append([]llm.Block{{Type: llm.BlockText, Text: out.Refusal}}, out.Content...)
		}
		out.Refusal = ""
	}
	return &out
}

// keepBlocks returns the blocks of a translated answer the client's format
// can hold: a block kept verbatim (Raw: a server tool's call or result, a
// built-in tool's item) belongs to the upstream's format, and OpenAI's
// reasoning to a Responses client only. Text blocks lose the upstream's
// own members (citations, annotations). bs is not modified.
func (r Report) keepBlocks(bs []llm.Block) []llm.Block {
	drop := func(b *llm.Block) bool {
		return b.Raw != nil && b.Type != llm.BlockToolUse && webSearchCall(b, r.client) == nil ||
			b.Type == llm.BlockReasoning && r.client != llm.FormatResponses
	}
	n := 0
	for i := range bs {
		if drop(&bs[i]) || bs[i].Type == llm.BlockText && bs[i].Extra != nil || webSearchCall(&bs[i], r.client) != nil {
			n++
		}
	}
	if n == 0 {
		return bs
	}
	out := make([]llm.Block, 0, len(bs))
	for _, b := range bs {
		if drop(&b) {
			continue
		}
		if item := webSearchCall(&b, r.client); item != nil {
			b = llm.Block{Type: "web_search_call", Raw: item}
		}
		if b.Type == llm.BlockText {
			b.Extra = nil
		}
		out = append(out, b)
	}
	return out
}

// StreamRestorer is RestoreEvent for one translated stream, which also
// leaves out what the client's format cannot hold: OpenAI's reasoning
// blocks for a client other than Responses, and the events a Responses
// upstream sends that say nothing to another format (read as pings); the
// blocks kept are numbered from 0 without gaps. One per stream; not safe
// for concurrent use.
type StreamRestorer struct {
	r       Report
	dropped []int // upstream block indexes left out, ascending
}

// NewStreamRestorer returns the restorer of one stream of this call.
func (r Report) NewStreamRestorer() *StreamRestorer { return &StreamRestorer{r: r} }

// Restore returns ev as the client should receive it, or nil when the
// client is to receive nothing for it.
func (s *StreamRestorer) Restore(ev *llm.Event) *llm.Event {
	r := s.r
	if !r.Translated() || ev == nil {
		return ev
	}
	switch ev.Type {
	case llm.EventPing:
		if ev.RawFormat == llm.FormatResponses {
			return nil
		}
	case llm.EventBlockStart, llm.EventBlockDelta, llm.EventBlockStop:
		if ev.Type == llm.EventBlockStart && ev.Block != nil && ev.Block.Type == llm.BlockReasoning && r.client != llm.FormatResponses {
			s.dropped = append(s.dropped, ev.Index)
			return nil
		}
		shift := 0
		for _, d := range s.dropped {
			if d == ev.Index {
				return nil
			}
			if d < ev.Index {
				shift++
			}
		}
		if shift > 0 {
			ev = ev.Detach()
			ev.Index -= shift
		}
	}
	return r.RestoreEvent(ev)
}

// restoreBlocks returns bs with tool names and ids restored, copying only
// when something changes.
func (r Report) restoreBlocks(bs []llm.Block) []llm.Block {
	if r.names == nil && r.ids == nil && r.customs == nil {
		return bs
	}
	var out []llm.Block
	for i := range bs {
		b := &bs[i]
		if b.Type != llm.BlockToolUse {
			continue
		}
		name, id, custom := r.RestoreName(b.Name), r.RestoreID(b.ID), r.customs[b.Name]
		if name == b.Name && id == b.ID && !custom {
			continue
		}
		if out == nil {
			out = append([]llm.Block(nil), bs...)
		}
		out[i].Name, out[i].ID, out[i].Raw = name, id, nil
		if custom {
			out[i].Raw = json.RawMessage(customCallMarker)
		}
	}
	if out == nil {
		return bs
	}
	return out
}

// RestoreEvent returns ev as the client should receive it after a
// translated call: a tool_use block start with its name and id restored,
// message_start and message_delta without the upstream format's unknown
// members, unknown stop reasons as end_turn. Events that need no change are
// returned as they are; changed ones are copies with Raw cleared. ev is not
// modified.
func (r Report) RestoreEvent(ev *llm.Event) *llm.Event {
	if !r.Translated() || ev == nil {
		return ev
	}
	switch ev.Type {
	case llm.EventMessageStart:
		m := ev.Message
		if m == nil || (m.Extra == nil && m.ChoiceExtra == nil && m.MessageExtra == nil && m.Usage.Extra == nil) {
			return ev
		}
		cp := ev.Detach()
		cp.Message = r.RestoreResponse(m)
		return cp
	case llm.EventBlockStart:
		b := ev.Block
		if b == nil || b.Type != llm.BlockToolUse {
			return ev
		}
		name, id, custom := r.RestoreName(b.Name), r.RestoreID(b.ID), r.customs[b.Name]
		if name == b.Name && id == b.ID && !custom {
			return ev
		}
		nb := *b
		nb.Name, nb.ID, nb.Raw = name, id, nil
		if custom {
			nb.Raw = json.RawMessage(customCallMarker)
		}
		cp := ev.Detach()
		cp.Block = &nb
		return cp
	case llm.EventMessageDelta:
		stop := restoreStop(ev.StopReason)
		if stop == ev.StopReason && (ev.Usage == nil || ev.Usage.Extra == nil) {
			return ev
		}
		cp := ev.Detach()
		cp.StopReason = stop
		if ev.Usage != nil && ev.Usage.Extra != nil {
			u := *ev.Usage
			u.Extra = nil
			cp.Usage = &u
		}
		return cp
	}
	return ev
}
