package llm

import (
	"encoding/json"
	"strings"
)

// Accumulator rebuilds a complete answer from stream events, copying what
// it keeps of each (the events may be recycled after Add returns). The
// zero value is ready; an Accumulator is not safe for concurrent use.
type Accumulator struct {
	resp   Response
	blocks []*accBlock
}

type accBlock struct {
	b         Block
	body, sig strings.Builder
}

// Add adds one event of the stream.
func (a *Accumulator) Add(ev *Event) {
	resp := &a.resp
	switch ev.Type {
	case EventMessageStart:
		if ev.Message != nil {
			resp.ID, resp.Model, resp.Usage = ev.Message.ID, ev.Message.Model, ev.Message.Usage
			resp.Created, resp.SystemFingerprint = ev.Message.Created, ev.Message.SystemFingerprint
		}
	case EventBlockStart:
		b := &accBlock{b: Block{Type: BlockText}}
		if ev.Block != nil {
			b.b = *ev.Block
		}
		for len(a.blocks) <= ev.Index {
			a.blocks = append(a.blocks, nil)
		}
		a.blocks[ev.Index] = b
	case EventBlockDelta:
		if ev.Index >= len(a.blocks) || a.blocks[ev.Index] == nil {
			return
		}
		b := a.blocks[ev.Index]
		switch ev.DeltaType {
		case DeltaText, DeltaInputJSON, DeltaThinking:
			b.body.WriteString(ev.Delta)
		case DeltaSignature:
			b.sig.WriteString(ev.Delta)
		}
	case EventMessageDelta:
		resp.StopReason, resp.StopSequence = ev.StopReason, ev.StopSequence
		if ev.Usage != nil {
			u := *ev.Usage
			if u.InputTokens == 0 {
				u.InputTokens, u.CacheReadTokens, u.CacheWriteTokens = resp.Usage.InputTokens, resp.Usage.CacheReadTokens, resp.Usage.CacheWriteTokens
			}
			resp.Usage = u
		}
	}
}

// Response returns the answer the events added so far make.
func (a *Accumulator) Response() *Response {
	resp := a.resp
	resp.Content = nil
	for _, ab := range a.blocks {
		if ab == nil {
			continue
		}
		b := ab.b
		switch b.Type {
		case BlockText:
			b.Text += ab.body.String()
		case BlockThinking:
			b.Thinking += ab.body.String()
		case BlockToolUse:
			if in := ab.body.String(); in != "" {
				b.Input = json.RawMessage(in)
			} else if len(b.Input) == 0 {
				b.Input = json.RawMessage("{}")
			}
		}
		b.Signature += ab.sig.String()
		resp.Content = append(resp.Content, b)
	}
	return &resp
}
