package responses

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// maxBlocks bounds the blocks a reader tracks (a guard against a corrupt
// upstream making it allocate without limit).
const maxBlocks = 1 << 16

// StreamReader turns a Responses API event stream into canonical events.
// Every upstream event becomes at least one canonical event carrying its
// bytes (Raw, RawFormat FormatResponses): the ones the canonical model has
// no event for (response.in_progress, the .done events that repeat what
// the deltas said, events of built-in tools) become pings, so that a
// Responses writer passes the stream on event for event. An event that
// makes several (response.completed: message_delta and message_stop) marks
// them as one group (RawSeq, RawLast).
//
// Next returns io.EOF after response.completed, response.incomplete,
// response.failed or error (the last two as an EventError first), and
// io.ErrUnexpectedEOF when the stream ends before one of them. A
// StreamReader is used by one goroutine.
type StreamReader struct {
	r     *sse.Reader
	queue []*llm.Event // events are handed out, never reused: callers may hold them
	qi    int
	// blocks maps an upstream place (output index, content index; -1 for
	// an item that is itself a block) to its canonical block index.
	blocks map[[2]int]int
	kinds  []llm.BlockType
	// customs: the custom tool calls' blocks, true once their input's
	// JSON ({"input":" …) has been opened by a delta.
	customs map[int]bool
	sawTool bool
	started bool
	done    bool
}

// NewStreamReader returns a StreamReader over r.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: sse.NewReader(r), blocks: make(map[[2]int]int)}
}

// Pending reports whether Next returns an event without reading.
func (s *StreamReader) Pending() bool { return s.qi < len(s.queue) }

// Next returns the next canonical event.
func (s *StreamReader) Next() (*llm.Event, error) {
	for s.qi >= len(s.queue) {
		if s.done {
			return nil, io.EOF
		}
		s.queue, s.qi = s.queue[:0], 0
		ev, err := s.r.Next()
		if err != nil {
			if err == io.EOF {
				return nil, io.ErrUnexpectedEOF // no terminal event: a cut stream
			}
			return nil, err
		}
		data := jsonx.TrimSpace(ev.Data)
		if len(data) == 0 || string(data) == "[DONE]" {
			continue
		}
		if err := s.decode(bytes.Clone(data)); err != nil {
			return nil, err
		}
	}
	ev := s.queue[s.qi]
	s.queue[s.qi] = nil
	s.qi++
	return ev, nil
}

func (s *StreamReader) emit(raw []byte, evs ...llm.Event) {
	for i := range evs {
		evs[i].Raw, evs[i].RawFormat = raw, llm.FormatResponses
		if len(evs) > 1 {
			evs[i].RawSeq, evs[i].RawLast = uint16(i+1), i == len(evs)-1
		}
	}
	for i := range evs {
		ev := evs[i]
		s.queue = append(s.queue, &ev)
	}
}

func (s *StreamReader) newBlock(at [2]int, t llm.BlockType) (int, error) {
	if len(s.kinds) >= maxBlocks {
		return 0, fmt.Errorf("responses stream: more than %d blocks", maxBlocks)
	}
	if _, dup := s.blocks[at]; dup {
		return 0, fmt.Errorf("responses stream: output %d part %d started twice", at[0], at[1])
	}
	i := len(s.kinds)
	s.blocks[at] = i
	s.kinds = append(s.kinds, t)
	return i, nil
}

func (s *StreamReader) block(at [2]int) (int, error) {
	i, ok := s.blocks[at]
	if !ok {
		return 0, fmt.Errorf("responses stream: output %d part %d was never started", at[0], at[1])
	}
	return i, nil
}

func num(v []byte) int {
	n, _ := strconv.Atoi(string(v))
	return n
}

func (s *StreamReader) decode(data []byte) error {
	if !jsonx.Valid(data) || data[0] != '{' {
		return fmt.Errorf("responses stream: event is not a JSON object")
	}
	var f eventFields
	f.read(data)
	typ := f.typ
	if !s.started && typ != "response.created" && typ != "error" {
		return fmt.Errorf("responses stream: %q before response.created", typ)
	}
	out, part := f.out, f.part
	ping := llm.Event{Type: llm.EventPing}
	switch typ {
	case "response.created":
		if s.started {
			return fmt.Errorf("responses stream: response.created twice")
		}
		s.started = true
		if len(f.response) == 0 || f.response[0] != '{' {
			return fmt.Errorf("responses stream: response.created without a response")
		}
		// The id, model and creation time are all a stream's start says
		// (its settings come again with response.completed).
		r := &llm.Response{}
		_ = jsonx.EachMember(f.response, func(k, v []byte) error {
			switch string(k) {
			case `"id"`:
				r.ID, _ = jsonx.Unquote(v)
			case `"model"`:
				r.Model, _ = jsonx.Unquote(v)
			case `"created_at"`:
				c, _ := strconv.ParseFloat(string(v), 64)
				r.Created = int64(c)
			}
			return nil
		})
		s.emit(data, llm.Event{Type: llm.EventMessageStart, Message: r})
	case "response.output_item.added":
		item := members(f.item)
		it, _ := jsonx.Unquote(item["type"])
		switch it {
		case "function_call":
			m, err := parseItem(f.item, "item")
			if err != nil {
				return err
			}
			b := m.Content[0]
			b.Raw, b.Input = nil, json.RawMessage("{}")
			i, err := s.newBlock([2]int{out, -1}, llm.BlockToolUse)
			if err != nil {
				return err
			}
			s.sawTool = true
			s.emit(data, llm.Event{Type: llm.EventBlockStart, Index: i, Block: &b})
		case "custom_tool_call":
			// Its input is text; the canonical call holds {"input": text},
			// so the deltas below are that JSON's pieces.
			b := llm.Block{Type: llm.BlockToolUse, Input: json.RawMessage("{}"), Raw: json.RawMessage(CustomCallMarker)}
			b.ID, _ = jsonx.Unquote(item["call_id"])
			b.Name, _ = jsonx.Unquote(item["name"])
			i, err := s.newBlock([2]int{out, -1}, llm.BlockToolUse)
			if err != nil {
				return err
			}
			if s.customs == nil {
				s.customs = map[int]bool{}
			}
			s.customs[i], s.sawTool = false, true
			s.emit(data, llm.Event{Type: llm.EventBlockStart, Index: i, Block: &b})
		case "reasoning":
			id, _ := jsonx.Unquote(item["id"])
			i, err := s.newBlock([2]int{out, -1}, llm.BlockReasoning)
			if err != nil {
				return err
			}
			s.emit(data, llm.Event{Type: llm.EventBlockStart, Index: i, Block: &llm.Block{Type: llm.BlockReasoning, ID: id}})
		default:
			s.emit(data, ping)
		}
	case "response.content_part.added":
		pt, _ := jsonx.Unquote(members(f.partv)["type"])
		if pt != "output_text" {
			s.emit(data, ping)
			break
		}
		i, err := s.newBlock([2]int{out, part}, llm.BlockText)
		if err != nil {
			return err
		}
		s.emit(data, llm.Event{Type: llm.EventBlockStart, Index: i, Block: &llm.Block{Type: llm.BlockText}})
	case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
		at, dt := [2]int{out, part}, llm.DeltaText
		switch typ {
		case "response.function_call_arguments.delta":
			at, dt = [2]int{out, -1}, llm.DeltaInputJSON
		case "response.reasoning_summary_text.delta":
			at, dt = [2]int{out, -1}, llm.DeltaThinking
		}
		i, err := s.block(at)
		if err != nil {
			return err
		}
		d, err := str(f.delta, "delta")
		if err != nil {
			return err
		}
		s.emit(data, llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: dt, Delta: d})
	case "response.custom_tool_call_input.delta":
		i, err := s.block([2]int{out, -1})
		if err != nil {
			return err
		}
		d, err := str(f.delta, "delta")
		if err != nil {
			return err
		}
		s.emit(data, llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaInputJSON, Delta: s.customPiece(i, d)})
	case "response.reasoning_summary_part.added":
		if f.summary == 0 {
			s.emit(data, ping)
			break
		}
		i, err := s.block([2]int{out, -1})
		if err != nil {
			return err
		}
		s.emit(data, llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaThinking, Delta: "\n\n"})
	case "response.content_part.done":
		i, ok := s.blocks[[2]int{out, part}]
		if !ok {
			s.emit(data, ping)
			break
		}
		s.emit(data, llm.Event{Type: llm.EventBlockStop, Index: i})
	case "response.output_item.done":
		i, ok := s.blocks[[2]int{out, -1}]
		if !ok {
			s.emit(data, ping)
			break
		}
		if opened, ok := s.customs[i]; ok {
			end := `"}`
			if !opened {
				// no delta came: the whole input is in the item
				in, _ := jsonx.Unquote(members(f.item)["input"])
				end = string(customInput(in))
			}
			s.emit(data, llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaInputJSON, Delta: end},
				llm.Event{Type: llm.EventBlockStop, Index: i})
			break
		}
		if s.kinds[i] == llm.BlockReasoning {
			enc, _ := jsonx.Unquote(members(f.item)["encrypted_content"])
			if enc != "" {
				s.emit(data, llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaSignature, Delta: enc},
					llm.Event{Type: llm.EventBlockStop, Index: i})
				break
			}
		}
		s.emit(data, llm.Event{Type: llm.EventBlockStop, Index: i})
	case "response.completed", "response.incomplete":
		r, err := parseResponseObject(f.response)
		if err != nil {
			return err
		}
		stop := r.StopReason
		if s.sawTool && stop == llm.StopEndTurn {
			stop = llm.StopToolUse
		}
		u := r.Usage
		s.done = true
		s.emit(data, llm.Event{Type: llm.EventMessageDelta, StopReason: stop, Usage: &u}, llm.Event{Type: llm.EventMessageStop})
	case "response.failed":
		s.done = true
		resp := members(f.response)
		s.emit(data, llm.Event{Type: llm.EventError, Err: withStreamStatus(failureError(resp["error"]))})
	case "error":
		s.done = true
		e := &llm.APIError{Status: 200, Type: llm.ErrAPI}
		e.Message, _ = jsonx.Unquote(f.message)
		e.Code, _ = jsonx.Unquote(f.code)
		e.Param, _ = jsonx.Unquote(f.param)
		if e.Type = codeType(e.Code); e.Message == "" {
			e.Message = "stream error"
		}
		s.emit(data, llm.Event{Type: llm.EventError, Err: e})
	default:
		s.emit(data, ping)
	}
	return nil
}

func withStreamStatus(e *llm.APIError) *llm.APIError {
	e.Status = 200
	return e
}

// codeType maps an error event's code onto the canonical type.
func codeType(code string) llm.ErrorType {
	switch code {
	case "rate_limit_exceeded":
		return llm.ErrRateLimit
	case "server_is_overloaded", "slow_down":
		return llm.ErrOverloaded
	case "invalid_prompt", "context_length_exceeded":
		return llm.ErrInvalidRequest
	}
	return llm.ErrAPI
}

// eventFields are the top-level members of a stream event the reader
// looks at, read without building a map (the raw keys of the names the
// API sends need no decoding).
type eventFields struct {
	typ                                                string
	out, part, summary                                 int
	delta, item, response, partv, message, code, param []byte
}

func (f *eventFields) read(data []byte) {
	_ = jsonx.EachMember(data, func(k, v []byte) error {
		switch string(k) {
		case `"type"`:
			f.typ = eventType(v)
		case `"output_index"`:
			f.out = num(v)
		case `"content_index"`:
			f.part = num(v)
		case `"summary_index"`:
			f.summary = num(v)
		case `"delta"`:
			f.delta = v
		case `"item"`:
			f.item = v
		case `"response"`:
			f.response = v
		case `"part"`:
			f.partv = v
		case `"message"`:
			f.message = v
		case `"code"`:
			f.code = v
		case `"param"`:
			f.param = v
		}
		return nil
	})
}

// eventType decodes an event's type without allocating for the common ones.
func eventType(v []byte) string {
	switch string(v) {
	case `"response.output_text.delta"`:
		return "response.output_text.delta"
	case `"response.function_call_arguments.delta"`:
		return "response.function_call_arguments.delta"
	case `"response.reasoning_summary_text.delta"`:
		return "response.reasoning_summary_text.delta"
	}
	s, _ := jsonx.Unquote(v)
	return s
}

// customPiece is a custom tool call's text delta as a piece of its
// {"input": text} JSON: escaped, the first one opening the object.
func (s *StreamReader) customPiece(i int, d string) string {
	piece := jsonx.AppendString(nil, d)
	piece = piece[1 : len(piece)-1]
	if opened, ok := s.customs[i]; ok && !opened {
		s.customs[i] = true
		return `{"input":"` + string(piece)
	}
	return string(piece)
}
