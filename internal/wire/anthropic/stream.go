package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// ErrStreamCut is returned by StreamReader.Next when the stream ends before
// message_stop, cleanly or in the middle of an event. It wraps
// io.ErrUnexpectedEOF.
var ErrStreamCut = fmt.Errorf("anthropic stream cut before message_stop: %w", io.ErrUnexpectedEOF)

// StreamOptions configures a StreamWriter. The Anthropic wire has no options;
// the type exists so both codecs share one constructor shape.
type StreamOptions struct{}

// StreamWriter writes canonical events as Anthropic SSE events. Every event
// gets an "event:" line and ends with a blank line, because the Anthropic SDK
// ignores events without a name and drops an unterminated last event.
// A StreamWriter is not safe for concurrent use.
type StreamWriter struct {
	w   *sse.Writer
	buf []byte
}

// NewStreamWriter returns a StreamWriter onto w.
func NewStreamWriter(w *sse.Writer, opt StreamOptions) *StreamWriter {
	return &StreamWriter{w: w, buf: make([]byte, 0, 512)}
}

// Write writes one event. An event decoded from the Anthropic wire
// (Raw set, RawFormat FormatAnthropic) is written verbatim; others are
// encoded from their fields. Error events become the wire's in-stream error
// event. A delta whose DeltaType is not one of the four canonical ones
// carries the whole delta object in Delta and is written as is.
func (s *StreamWriter) Write(ev *llm.Event) error {
	name := ev.Type.String()
	if name == "unknown" {
		return fmt.Errorf("anthropic stream writer: unknown event type %d", ev.Type)
	}
	if ev.Raw != nil && ev.RawFormat == llm.FormatAnthropic {
		return s.w.WriteEvent(name, ev.Raw)
	}
	b, err := appendEvent(s.buf[:0], ev)
	if err != nil {
		return fmt.Errorf("anthropic stream writer: %s: %w", name, err)
	}
	s.buf = b
	return s.w.WriteEvent(name, b)
}

func appendEvent(b []byte, ev *llm.Event) ([]byte, error) {
	var err error
	b = append(b, `{"type":"`...)
	b = append(b, ev.Type.String()...)
	b = append(b, '"')
	switch ev.Type {
	case llm.EventMessageStart:
		if ev.Message == nil {
			return b, errors.New("no Message")
		}
		b = append(b, `,"message":`...)
		if b, err = appendMessage(b, ev.Message, ev.Message.Content); err != nil {
			return b, err
		}
	case llm.EventBlockStart:
		if ev.Block == nil {
			return b, errors.New("no Block")
		}
		b = appendIndex(b, ev.Index)
		b = append(b, `,"content_block":`...)
		if b, err = appendBlock(b, root("content_block"), ev.Block); err != nil {
			return b, err
		}
	case llm.EventBlockDelta:
		b = appendIndex(b, ev.Index)
		b = append(b, `,"delta":`...)
		field := deltaField(ev.DeltaType)
		if field == "" {
			if b, err = appendRaw(b, root("delta"), json.RawMessage(ev.Delta)); err != nil {
				return b, err
			}
			break
		}
		b = append(b, `{"type":`...)
		b = jsonx.AppendString(b, string(ev.DeltaType))
		b = jsonx.AppendKey(b, field)
		b = jsonx.AppendString(b, ev.Delta)
		b = append(b, '}')
	case llm.EventBlockStop:
		b = appendIndex(b, ev.Index)
	case llm.EventMessageDelta:
		b = append(b, `,"delta":{"stop_reason":`...)
		b = appendStringOrNull(b, string(ev.StopReason))
		b = append(b, `,"stop_sequence":`...)
		b = appendStringOrNull(b, ev.StopSequence)
		b = append(b, '}')
		if ev.Usage != nil {
			b = append(b, `,"usage":`...)
			if b, err = appendUsage(b, root("usage"), ev.Usage, usageDeltaOnly); err != nil {
				return b, err
			}
		}
	case llm.EventMessageStop, llm.EventPing:
	case llm.EventError:
		if ev.Err == nil {
			return b, errors.New("no Err")
		}
		b = append(b, `,"error":`...)
		b = appendErrorObject(b, ev.Err)
		if ev.Err.RequestID != "" {
			b = append(b, `,"request_id":`...)
			b = jsonx.AppendString(b, ev.Err.RequestID)
		}
	}
	return append(b, '}'), nil
}

func appendIndex(b []byte, i int) []byte {
	b = append(b, `,"index":`...)
	return jsonx.AppendInt(b, int64(i))
}

// deltaField is the member that carries the payload of a delta type, "" for
// types outside the canonical four.
func deltaField(t llm.DeltaType) string {
	switch t {
	case llm.DeltaText:
		return "text"
	case llm.DeltaInputJSON:
		return "partial_json"
	case llm.DeltaThinking:
		return "thinking"
	case llm.DeltaSignature:
		return "signature"
	}
	return ""
}

// StreamReader decodes an Anthropic SSE stream into canonical events and
// checks it follows the protocol: message_start first, content block starts
// numbered from 0 without gaps, deltas and stops for started blocks only.
// Events of unknown types are skipped. A StreamReader is not safe for
// concurrent use.
type StreamReader struct {
	r       EventSource
	started bool // message_start seen
	blocks  int  // content_block_start events seen
	err     error
	free    *llm.Event // given back by Recycle, reused with its Raw buffer
}

// Recycle takes back a content_block_delta, content_block_stop or ping
// event the caller is done with: the next event reuses it and its Raw
// buffer (their decoded fields are copies, never slices of Raw). Other
// events may hold slices of their Raw (a block's input, a message's
// unknown members) and are left alone.
func (s *StreamReader) Recycle(ev *llm.Event) {
	switch ev.Type {
	case llm.EventBlockDelta, llm.EventBlockStop, llm.EventPing:
		s.free = ev
	}
}

// NewStreamReader returns a StreamReader over r.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: sse.NewReader(r)}
}

// EventSource yields a stream's events as SSE gives them (an event name
// and its data); Next returns io.EOF or io.ErrUnexpectedEOF at the end of
// the stream. *sse.Reader is one; a cloud's framing of Anthropic's events
// (Amazon Bedrock's eventstream) is another.
type EventSource interface {
	Next() (sse.Event, error)
}

// NewEventReader returns a StreamReader over events from src: the same
// checks and decoding as over SSE, for an Anthropic stream in another
// framing. The reader copies an event's Data before src's next Next.
func NewEventReader(src EventSource) *StreamReader {
	return &StreamReader{r: src}
}

// Next returns the next event, with Raw holding a copy of its data and
// RawFormat FormatAnthropic. It returns io.EOF once message_stop or an error
// event (the wire's two ways to end a stream) has been returned, without
// reading further; ErrStreamCut when the stream ends before either; an
// *llm.APIError with status 502 and MeshCode MESH_UPSTREAM_PROTOCOL for an
// event that breaks the protocol (invalid JSON, an event without an
// "event:" line, out-of-order indexes); or the underlying reader's error.
// An error event whose data is not a JSON error object still yields an
// EventError, with the data as its message. Errors are sticky.
func (s *StreamReader) Next() (*llm.Event, error) {
	if s.err != nil {
		return nil, s.err
	}
	ev, err := s.next()
	if err != nil {
		s.err = err
		return nil, err
	}
	if ev.Type == llm.EventMessageStop || ev.Type == llm.EventError {
		s.err = io.EOF
	}
	return ev, nil
}

func (s *StreamReader) next() (*llm.Event, error) {
	for {
		sev, err := s.r.Next()
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return nil, ErrStreamCut
		case err != nil:
			return nil, fmt.Errorf("anthropic stream: %w", err)
		}
		var typ llm.EventType
		switch sev.Event {
		case "":
			if len(sev.Data) == 0 {
				continue
			}
			// The SDK would silently skip this; a data-only stream is most likely
			// an OpenAI-format upstream, so say so instead of reporting nothing.
			return nil, protocolError(fmt.Sprintf("stream event without an \"event:\" line (data %q)", bodyPrefix(sev.Data[:min(len(sev.Data), 64)])))
		case "message_start":
			typ = llm.EventMessageStart
		case "content_block_start":
			typ = llm.EventBlockStart
		case "content_block_delta":
			typ = llm.EventBlockDelta
		case "content_block_stop":
			typ = llm.EventBlockStop
		case "message_delta":
			typ = llm.EventMessageDelta
		case "message_stop":
			typ = llm.EventMessageStop
		case "ping":
			typ = llm.EventPing
		case "error":
			typ = llm.EventError
		default:
			continue // unknown event types are tolerated, as the API docs require
		}
		var ev *llm.Event
		if f := s.free; f != nil {
			s.free = nil
			*f = llm.Event{Type: typ, Raw: append(f.Raw[:0], sev.Data...), RawFormat: llm.FormatAnthropic}
			ev = f
		} else {
			ev = &llm.Event{Type: typ, Raw: bytes.Clone(sev.Data), RawFormat: llm.FormatAnthropic}
		}
		if ev.Raw == nil {
			ev.Raw = []byte{}
		}
		if err := s.decode(ev); err != nil {
			return nil, protocolError(fmt.Sprintf("stream event %q: %v", sev.Event, err))
		}
		return ev, nil
	}
}

// decode fills ev from ev.Raw and checks the event's place in the stream.
func (s *StreamReader) decode(ev *llm.Event) error {
	data := jsonx.TrimSpace(ev.Raw)
	if ev.Type == llm.EventError {
		ev.Err = &llm.APIError{Status: 200}
		if !parseErrorBody(ev.Err, data) {
			ev.Err = &llm.APIError{Status: 200, Type: llm.ErrAPI, Message: bodyPrefix(data)}
		}
		return nil
	}
	if ev.Type == llm.EventPing && len(data) == 0 {
		return nil
	}
	if len(data) == 0 {
		return errors.New("empty data")
	}
	if !jsonx.Valid(data) {
		return errors.New(invalidJSON(data))
	}
	var (
		typ                                      string
		sawIndex, sawMessage, sawBlock, sawDelta bool
		msgDelta, usage                          []byte
	)
	err := eachMember(nil, data, func(k string, v []byte) error {
		var err error
		switch k {
		case "type":
			typ, err = unquote(root(k), v)
		case "index":
			if ev.Type == llm.EventBlockStart || ev.Type == llm.EventBlockDelta || ev.Type == llm.EventBlockStop {
				ev.Index, err = integer(root(k), v)
				sawIndex = !jsonx.IsNull(v)
			}
		case "message":
			if ev.Type == llm.EventMessageStart {
				ev.Message, err = parseMessage(root(k), v)
				sawMessage = true
			}
		case "content_block":
			if ev.Type == llm.EventBlockStart {
				var b llm.Block
				b, err = parseBlock(root(k), v)
				ev.Block = &b
				sawBlock = true
			}
		case "delta":
			switch ev.Type {
			case llm.EventBlockDelta:
				err = parseDelta(ev, v)
				sawDelta = true
			case llm.EventMessageDelta:
				msgDelta = v
			}
		case "usage":
			if ev.Type == llm.EventMessageDelta && !jsonx.IsNull(v) {
				usage = v
			}
		}
		return err
	})
	if err != nil {
		return err
	}
	if name := ev.Type.String(); typ != name {
		return fmt.Errorf("data type %q does not match the event name", typ)
	}
	switch ev.Type {
	case llm.EventBlockStart, llm.EventBlockDelta, llm.EventBlockStop:
		if !sawIndex {
			return errors.New("index: field required")
		}
	}
	if ev.Type != llm.EventPing && ev.Type != llm.EventMessageStart && !s.started {
		return errors.New("event before message_start")
	}
	switch ev.Type {
	case llm.EventMessageStart:
		if s.started {
			return errors.New("message_start repeated")
		}
		if !sawMessage || ev.Message == nil {
			return errors.New("message: field required")
		}
		s.started = true
	case llm.EventBlockStart:
		if !sawBlock {
			return errors.New("content_block: field required")
		}
		if ev.Index != s.blocks {
			return fmt.Errorf("index %d out of order, expected %d", ev.Index, s.blocks)
		}
		s.blocks++
	case llm.EventBlockDelta, llm.EventBlockStop:
		if !sawDelta && ev.Type == llm.EventBlockDelta {
			return errors.New("delta: field required")
		}
		if ev.Index < 0 || ev.Index >= s.blocks {
			return fmt.Errorf("index %d names no started content block", ev.Index)
		}
	case llm.EventMessageDelta:
		if msgDelta != nil {
			if err := parseMessageDelta(ev, msgDelta); err != nil {
				return err
			}
		}
		if usage != nil {
			ev.Usage = &llm.Usage{}
			if _, err := parseUsage(root("usage"), usage, ev.Usage); err != nil {
				return err
			}
		}
	}
	return nil
}

// parseDelta reads a content_block_delta's delta. Types outside the canonical
// four keep the whole delta object in Delta.
func parseDelta(ev *llm.Event, v []byte) error {
	typ, err := blockType(root("delta"), v)
	if err != nil {
		return err
	}
	ev.DeltaType = llm.DeltaType(typ)
	field := deltaField(ev.DeltaType)
	if field == "" {
		ev.Delta = string(v)
		return nil
	}
	return eachMember(root("delta"), v, func(k string, dv []byte) error {
		if k != field {
			return nil
		}
		var err error
		ev.Delta, err = str(join(root("delta"), k), dv)
		return err
	})
}

func parseMessageDelta(ev *llm.Event, v []byte) error {
	return eachMember(root("delta"), v, func(k string, dv []byte) error {
		var err error
		switch k {
		case "stop_reason":
			var s string
			s, err = str(join(root("delta"), k), dv)
			ev.StopReason = llm.StopReason(s)
		case "stop_sequence":
			ev.StopSequence, err = str(join(root("delta"), k), dv)
		}
		return err
	})
}
