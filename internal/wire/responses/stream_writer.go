package responses

import (
	"errors"
	"strings"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

var errBlockIndex = errors.New("responses: stream event block index out of range")

// wItem is one output item of the answer being written.
type wItem struct {
	kind   llm.BlockType // text (a message item), tool_use, reasoning, thinking, redacted_thinking; "" for an upstream item Keel only counts
	out    int           // its output_index
	id     string
	callID string
	name   string
	text   strings.Builder // the text, the arguments or the summary
	opaque string          // encrypted_content, or the signature / redacted data
	parts  int             // content parts opened (message items)
	open   bool
	// upstream: opened by the upstream's own event passed through; its
	// output_item.done comes from the upstream too.
	upstream bool
	summary  bool // a summary part is open
	custom   bool // a custom tool's call: its input is text
}

// StreamWriter turns canonical events into the Responses API's event
// stream (docs/RESPONSES.md §3): response.created and response.in_progress,
// then per block its output item's events, and response.completed or
// response.incomplete with the whole response (response.failed for an
// error event). Every event carries its sequence_number.
//
// Events decoded from a Responses upstream are written as they came, as
// long as their sequence numbers continue the client's; from the first
// event that must be encoded (changed on the way, or from another format)
// on, the writer encodes every event itself and numbers them on from where
// the stream was. A StreamWriter is not safe for concurrent use; Write
// blocks while the underlying writer does.
type StreamWriter struct {
	w   *sse.Writer
	buf []byte

	seq   int
	synth bool // encoding every event from now on
	quiet bool // updating state only: the event's upstream bytes are written instead

	resp    llm.Response
	items   []*wItem
	blocks  []*wItem // by canonical block index; nil: not an output item
	partOf  []int    // by block: the content index of a text block
	openMsg *wItem   // a message item the upstream opened, taking the next text block
	stop    llm.StopReason
	usage   llm.Usage
	started bool
	done    bool
}

// NewStreamWriter returns a StreamWriter writing to w.
func NewStreamWriter(w *sse.Writer) *StreamWriter {
	return &StreamWriter{w: w, buf: make([]byte, 0, 512)}
}

// rawSeq reads an upstream event's type and sequence_number.
func rawSeq(raw []byte) (typ string, seq int, ok bool) {
	seq = -1
	_ = jsonx.EachMember(raw, func(k, v []byte) error {
		switch string(k) {
		case `"type"`:
			typ = eventType(v)
		case `"sequence_number"`:
			seq = num(v)
			ok = true
		}
		return nil
	})
	return typ, seq, ok
}

// Write encodes one canonical event.
func (s *StreamWriter) Write(ev *llm.Event) error {
	if s.done {
		return nil
	}
	if ev.Raw != nil && ev.RawFormat == llm.FormatResponses && !s.synth {
		typ, seq, ok := rawSeq(ev.Raw)
		if ev.RawSeq <= 1 {
			if !ok || seq != s.seq {
				s.synth = true
			} else if ev.Type == llm.EventPing {
				s.track(typ, ev.Raw)
			}
		}
		if !s.synth {
			s.quiet = true
			err := s.encode(ev)
			s.quiet = false
			if err != nil {
				return err
			}
			if ev.RawSeq == 0 || ev.RawLast {
				s.seq++
				if ev.Type == llm.EventMessageStop || ev.Type == llm.EventError {
					s.done = true
				}
				return s.w.WriteEvent(typ, ev.Raw)
			}
			return nil
		}
	}
	if ev.Raw == nil || ev.RawFormat != llm.FormatResponses {
		s.synth = s.synth || s.started
	}
	if ev.Type == llm.EventPing {
		return nil // the upstream's own bookkeeping, or a keep-alive: nothing to say
	}
	return s.encode(ev)
}

// track follows the output items an upstream event passed through opens
// and closes that the canonical model has no block for (message items;
// built-in tools' items), so that output indexes stay the upstream's.
func (s *StreamWriter) track(typ string, raw []byte) {
	switch typ {
	case "response.output_item.added":
		item := members(members(raw)["item"])
		it, _ := jsonx.Unquote(item["type"])
		id, _ := jsonx.Unquote(item["id"])
		w := &wItem{id: id, open: true, upstream: true}
		if it == "message" {
			w.kind = llm.BlockText
			s.openMsg = w
		}
		s.add(w)
	case "response.output_item.done":
		if s.openMsg != nil {
			s.openMsg.open = false
			s.openMsg = nil
		}
	}
}

func (s *StreamWriter) outIndex(w *wItem) int { return w.out }

// add appends an output item.
func (s *StreamWriter) add(w *wItem) {
	w.out = len(s.items)
	s.items = append(s.items, w)
}

// event writes one encoded event: b holds its members after "type" and
// before sequence_number.
func (s *StreamWriter) event(typ string, members func(b []byte) []byte) error {
	if s.quiet {
		return nil
	}
	b := append(s.buf[:0], `{"type":`...)
	b = jsonx.AppendString(b, typ)
	b = members(b)
	b = append(b, `,"sequence_number":`...)
	b = jsonx.AppendInt(b, int64(s.seq))
	b = append(b, '}')
	s.buf = b
	s.seq++
	return s.w.WriteEvent(typ, b)
}

func (s *StreamWriter) itemHead(b []byte, w *wItem) []byte {
	b = append(b, `,"output_index":`...)
	b = jsonx.AppendInt(b, int64(s.outIndex(w)))
	return b
}

func (s *StreamWriter) itemRef(b []byte, w *wItem) []byte {
	b = append(b, `,"item_id":`...)
	b = jsonx.AppendString(b, w.id)
	return s.itemHead(b, w)
}

// appendItem writes the item as the output holds it.
func (s *StreamWriter) appendItem(b []byte, w *wItem, status string) []byte {
	if w.kind == llm.BlockText && status == "in_progress" {
		// an item just opened has no content yet
		b = append(b, `{"id":`...)
		b = jsonx.AppendString(b, w.id)
		return append(b, `,"type":"message","status":"in_progress","role":"assistant","content":[]}`...)
	}
	bl := w.block()
	return appendOutputItem(b, &bl, s.resp.ID, s.outIndex(w), status)
}

// block is the canonical block the item's content amounts to.
func (w *wItem) block() llm.Block {
	switch w.kind {
	case llm.BlockToolUse:
		args := w.text.String()
		if args == "" {
			args = "{}"
		}
		if w.custom {
			if w.text.Len() == 0 {
				args = `{"input":""}`
			}
			return llm.Block{Type: llm.BlockToolUse, ID: w.callID, Name: w.name, Input: []byte(args), Raw: []byte(CustomCallMarker)}
		}
		return llm.Block{Type: llm.BlockToolUse, ID: w.callID, Name: w.name, Input: []byte(args)}
	case llm.BlockReasoning:
		return llm.Block{Type: llm.BlockReasoning, ID: w.id, Thinking: w.text.String(), Data: w.opaque}
	case llm.BlockThinking:
		return llm.Block{Type: llm.BlockThinking, ID: w.id, Thinking: w.text.String(), Signature: w.opaque}
	case llm.BlockRedactedThinking:
		return llm.Block{Type: llm.BlockRedactedThinking, ID: w.id, Data: w.opaque}
	}
	return llm.Block{Type: llm.BlockText, Text: w.text.String()}
}

func (s *StreamWriter) blockAt(i int) (*wItem, error) {
	if i < 0 || i >= len(s.blocks) {
		return nil, errBlockIndex
	}
	return s.blocks[i], nil
}

func (s *StreamWriter) encode(ev *llm.Event) error {
	switch ev.Type {
	case llm.EventMessageStart:
		if s.started {
			return nil
		}
		s.started = true
		if ev.Message != nil {
			s.resp.ID, s.resp.Model, s.resp.Created = ev.Message.ID, ev.Message.Model, ev.Message.Created
			s.resp.Extra = ev.Message.Extra
		}
		s.resp.ID = ResponseID(s.resp.ID)
		for _, typ := range [...]string{"response.created", "response.in_progress"} {
			if err := s.event(typ, func(b []byte) []byte {
				b = append(b, `,"response":`...)
				return appendResponse(b, &s.resp, "in_progress", nil)
			}); err != nil {
				return err
			}
			if s.quiet {
				break // the upstream's own in_progress follows as a ping
			}
		}
	case llm.EventBlockStart:
		if ev.Index != len(s.blocks) || len(s.blocks) >= maxBlocks || ev.Block == nil {
			return errBlockIndex
		}
		return s.start(ev.Block)
	case llm.EventBlockDelta:
		w, err := s.blockAt(ev.Index)
		if err != nil || w == nil {
			return err
		}
		return s.delta(ev.Index, w, ev.DeltaType, ev.Delta)
	case llm.EventBlockStop:
		w, err := s.blockAt(ev.Index)
		if err != nil || w == nil {
			return err
		}
		return s.stopBlock(ev.Index, w)
	case llm.EventMessageDelta:
		if ev.StopReason != "" {
			s.stop = ev.StopReason
		}
		if ev.StopSequence != "" {
			s.resp.StopSequence = ev.StopSequence
		}
		if ev.Usage != nil {
			s.usage = *ev.Usage
		}
	case llm.EventMessageStop:
		return s.finish(nil)
	case llm.EventError:
		return s.finish(ev.Err)
	}
	return nil
}

func (s *StreamWriter) start(bl *llm.Block) error {
	switch bl.Type {
	case llm.BlockText:
		w := s.openMsg
		if w == nil || !s.quiet {
			if w != nil {
				// the upstream opened the message, but this part is Keel's
				w.upstream = false
			} else {
				w = &wItem{kind: llm.BlockText, open: true}
				s.add(w)
				w.id = itemID("msg_", s.resp.ID, s.outIndex(w))
				if err := s.event("response.output_item.added", func(b []byte) []byte {
					b = s.itemHead(b, w)
					b = append(b, `,"item":`...)
					return s.appendItem(b, w, "in_progress")
				}); err != nil {
					return err
				}
			}
		}
		s.openMsg = nil
		w.text.Reset()
		s.blocks = append(s.blocks, w)
		s.partOf = append(s.partOf, w.parts)
		w.parts++
		return s.event("response.content_part.added", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"content_index":`...)
			b = jsonx.AppendInt(b, int64(s.partOf[len(s.partOf)-1]))
			return append(b, `,"part":{"type":"output_text","annotations":[],"text":""}`...)
		})
	case llm.BlockToolUse, llm.BlockReasoning, llm.BlockThinking, llm.BlockRedactedThinking:
		w := &wItem{kind: bl.Type, open: true, callID: bl.ID, name: bl.Name}
		s.add(w)
		s.blocks = append(s.blocks, w)
		s.partOf = append(s.partOf, 0)
		switch bl.Type {
		case llm.BlockToolUse:
			w.id = itemID("fc_", s.resp.ID, s.outIndex(w))
			if w.custom = isCustomCall(bl); w.custom {
				w.id = itemID("ctc_", s.resp.ID, s.outIndex(w))
			}
		case llm.BlockReasoning:
			w.id = bl.ID
		case llm.BlockRedactedThinking:
			w.opaque = bl.Data
		}
		if w.id == "" {
			w.id = itemID("rs_", s.resp.ID, s.outIndex(w))
		}
		return s.event("response.output_item.added", func(b []byte) []byte {
			b = s.itemHead(b, w)
			b = append(b, `,"item":`...)
			return s.appendItem(b, w, "in_progress")
		})
	}
	// a block no output item expresses (a server tool's, from another format)
	s.blocks = append(s.blocks, nil)
	s.partOf = append(s.partOf, 0)
	return nil
}

func (s *StreamWriter) delta(i int, w *wItem, dt llm.DeltaType, d string) error {
	switch {
	case w.kind == llm.BlockText && dt == llm.DeltaText:
		w.text.WriteString(d)
		return s.event("response.output_text.delta", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"content_index":`...)
			b = jsonx.AppendInt(b, int64(s.partOf[i]))
			b = append(b, `,"delta":`...)
			b = jsonx.AppendString(b, d)
			return append(b, `,"logprobs":[]`...)
		})
	case w.kind == llm.BlockToolUse && dt == llm.DeltaInputJSON && w.custom:
		w.text.WriteString(d) // JSON around the text: written whole when the call ends
	case w.kind == llm.BlockToolUse && dt == llm.DeltaInputJSON:
		w.text.WriteString(d)
		return s.event("response.function_call_arguments.delta", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"delta":`...)
			return jsonx.AppendString(b, d)
		})
	case (w.kind == llm.BlockReasoning || w.kind == llm.BlockThinking) && dt == llm.DeltaThinking:
		if !w.summary {
			w.summary = true
			if err := s.event("response.reasoning_summary_part.added", func(b []byte) []byte {
				b = s.itemRef(b, w)
				return append(b, `,"summary_index":0,"part":{"type":"summary_text","text":""}`...)
			}); err != nil {
				return err
			}
		}
		w.text.WriteString(d)
		return s.event("response.reasoning_summary_text.delta", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"summary_index":0,"delta":`...)
			return jsonx.AppendString(b, d)
		})
	case dt == llm.DeltaSignature:
		w.opaque += d
	}
	return nil
}

func (s *StreamWriter) stopBlock(i int, w *wItem) error {
	if !w.open {
		return nil
	}
	switch w.kind {
	case llm.BlockText:
		text := w.text.String()
		if err := s.event("response.output_text.done", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"content_index":`...)
			b = jsonx.AppendInt(b, int64(s.partOf[i]))
			b = append(b, `,"text":`...)
			b = jsonx.AppendString(b, text)
			return append(b, `,"logprobs":[]`...)
		}); err != nil {
			return err
		}
		if err := s.event("response.content_part.done", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"content_index":`...)
			b = jsonx.AppendInt(b, int64(s.partOf[i]))
			b = append(b, `,"part":{"type":"output_text","annotations":[],"text":`...)
			b = jsonx.AppendString(b, text)
			return append(b, '}')
		}); err != nil {
			return err
		}
		if w.upstream && s.quiet {
			return nil // the upstream closes its own message item
		}
	case llm.BlockToolUse:
		if w.custom {
			input := customText(w.text.String())
			if err := s.event("response.custom_tool_call_input.delta", func(b []byte) []byte {
				b = s.itemRef(b, w)
				b = append(b, `,"delta":`...)
				return jsonx.AppendString(b, input)
			}); err != nil {
				return err
			}
			if err := s.event("response.custom_tool_call_input.done", func(b []byte) []byte {
				b = s.itemRef(b, w)
				b = append(b, `,"input":`...)
				return jsonx.AppendString(b, input)
			}); err != nil {
				return err
			}
			break
		}
		args := w.text.String()
		if args == "" {
			args = "{}"
		}
		if err := s.event("response.function_call_arguments.done", func(b []byte) []byte {
			b = s.itemRef(b, w)
			b = append(b, `,"arguments":`...)
			return jsonx.AppendString(b, args)
		}); err != nil {
			return err
		}
	default:
		if w.summary {
			text := w.text.String()
			if err := s.event("response.reasoning_summary_text.done", func(b []byte) []byte {
				b = s.itemRef(b, w)
				b = append(b, `,"summary_index":0,"text":`...)
				return jsonx.AppendString(b, text)
			}); err != nil {
				return err
			}
			if err := s.event("response.reasoning_summary_part.done", func(b []byte) []byte {
				b = s.itemRef(b, w)
				b = append(b, `,"summary_index":0,"part":{"type":"summary_text","text":`...)
				b = jsonx.AppendString(b, text)
				return append(b, '}')
			}); err != nil {
				return err
			}
		}
	}
	return s.closeItem(w)
}

func (s *StreamWriter) closeItem(w *wItem) error {
	w.open = false
	return s.event("response.output_item.done", func(b []byte) []byte {
		b = s.itemHead(b, w)
		b = append(b, `,"item":`...)
		if w.kind == llm.BlockText {
			b = append(b, `{"id":`...)
			b = jsonx.AppendString(b, w.id)
			b = append(b, `,"type":"message","status":"completed","role":"assistant","content":[`...)
			bl := w.block()
			b = appendPart(b, &bl, true)
			return append(b, "]}"...)
		}
		return s.appendItem(b, w, "completed")
	})
}

// finish closes what is open and writes the terminal event.
func (s *StreamWriter) finish(failure *llm.APIError) error {
	s.done = true
	if !s.started {
		s.started = true
		s.resp.ID = ResponseID(s.resp.ID)
	}
	for _, w := range s.items {
		if w.open && w.kind != "" && !s.quiet {
			if err := s.closeItem(w); err != nil {
				return err
			}
		}
	}
	r := s.resp
	r.StopReason, r.Usage = s.stop, s.usage
	for _, w := range s.items {
		if w.kind != "" {
			r.Content = append(r.Content, w.block())
		}
	}
	typ, status := "response.completed", ""
	switch {
	case failure != nil:
		typ, status = "response.failed", "failed"
	case r.StopReason == llm.StopMaxTokens || r.StopReason == llm.StopContextLimit:
		typ = "response.incomplete"
	}
	return s.event(typ, func(b []byte) []byte {
		b = append(b, `,"response":`...)
		return appendResponse(b, &r, status, failure)
	})
}
