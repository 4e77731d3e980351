package openai

import (
	"errors"
	"time"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// StreamOptions configures a StreamWriter.
type StreamOptions struct {
	// IncludeUsage makes the writer send, right before [DONE], one chunk with
	// "choices":[] and the full usage, as a client asks for with
	// stream_options.include_usage.
	IncludeUsage bool
}

// maxBlocks bounds the block indexes a writer tracks (a guard against a
// corrupt upstream index making it allocate without limit).
const maxBlocks = 1 << 16

var errBlockIndex = errors.New("openai: stream event block index out of range")

// blockKind is what a canonical block becomes on the OpenAI wire.
type blockKind uint8

const (
	kindNone    blockKind = iota
	kindText              // deltas become delta.content
	kindTool              // deltas become delta.tool_calls[k].function.arguments
	kindDropped           // thinking and unknown blocks: dropped
)

type writerBlock struct {
	kind    blockKind
	sawArgs bool
	tool    int
	// raw: the tool call was started by the upstream's own chunk, passed
	// as it came (with the upstream's numbering): Keel adds nothing to it.
	raw bool
}

// StreamWriter turns canonical stream events into OpenAI chat.completion.chunk
// SSE events ("data: <json>" with no event line, ended by "data: [DONE]").
// Every chunk repeats the id, created and model of message_start. A
// StreamWriter is not safe for concurrent use; Write blocks while the
// underlying writer does.
type StreamWriter struct {
	w   *sse.Writer
	opt StreamOptions

	prefix []byte // `{"id":…,"object":"chat.completion.chunk","created":…,"model":…`
	buf    []byte

	blocks   []writerBlock // by canonical block index
	nextTool int
	usage    llm.Usage
	done     bool

	// An upstream chunk's group of events being held (see Write): their
	// encoding, chunk by chunk, in case the group does not arrive whole.
	held     uint16
	holding  bool
	pend     []byte
	pendEnds []int
	// heldTools are the tool blocks a held group started: passed raw if
	// the group arrives whole, encoded (Keel's numbering) if not.
	heldTools []int
}

// NewStreamWriter returns a StreamWriter writing to w.
func NewStreamWriter(w *sse.Writer, opt StreamOptions) *StreamWriter {
	return &StreamWriter{w: w, opt: opt, buf: make([]byte, 0, 512)}
}

// Write encodes one canonical event:
//   - message_start: the first chunk, delta {"role":"assistant","content":""};
//     created is the message's Created, or now when it is 0;
//   - text deltas: delta.content; tool_use block start: delta.tool_calls with
//     index k (k counts tool blocks from 0), id, type and name; input_json
//     deltas: that tool call's arguments fragment (a tool that got no
//     fragment gets "{}" when its block stops); thinking is dropped;
//   - message_delta: a chunk with delta {} and the mapped finish_reason;
//   - message_stop: the usage chunk when IncludeUsage, then data: [DONE];
//   - error: data: {"error":{"message","type","code"}}, the end of the stream;
//   - ping: an SSE comment.
//
// After message_stop or an error event, Write writes nothing and returns nil.
// Normal chunks never carry an "error" member: openai-go treats any
// top-level "error" key, even null, as a stream error.
//
// Pass-through: the events decoded from one upstream OpenAI chunk (Raw set,
// RawFormat FormatOpenAI, numbered by RawSeq) are written as that chunk,
// byte for byte, when every one of them arrives in order and untouched; the
// writer holds their encoding until the group's last event and writes it
// instead if the group breaks (an event changed or missing). So a same-format
// stream nothing changes reaches the client chunk for chunk, with every
// member the upstream sent. Error events are always encoded.
func (s *StreamWriter) Write(ev *llm.Event) error {
	if s.done {
		return nil
	}
	raw := ev.RawSeq > 0 && ev.Raw != nil && ev.RawFormat == llm.FormatOpenAI && ev.Type != llm.EventError
	if s.held > 0 && (!raw || ev.RawSeq != s.held+1) {
		if err := s.flushHeld(); err != nil {
			return err
		}
	}
	if !raw || ev.RawSeq != s.held+1 {
		return s.encode(ev)
	}
	s.holding = true
	err := s.encode(ev)
	s.holding = false
	s.held++
	if err != nil || !ev.RawLast {
		return err
	}
	// The group arrived whole: the upstream's chunk replaces its encoding.
	for _, i := range s.heldTools {
		s.blocks[i].raw = true
	}
	s.held, s.pend, s.pendEnds, s.heldTools = 0, s.pend[:0], s.pendEnds[:0], s.heldTools[:0]
	if ev.Type != llm.EventMessageStop {
		return s.w.WriteEvent("", ev.Raw)
	}
	// message_stop carries the upstream's usage chunk: the client gets it
	// when it asked for usage (Keel may have asked upstream on its own).
	if s.opt.IncludeUsage {
		if err := s.w.WriteEvent("", ev.Raw); err != nil {
			return err
		}
	}
	return s.w.WriteEvent("", []byte("[DONE]"))
}

// flushHeld writes the encoding of a held group that did not arrive whole.
func (s *StreamWriter) flushHeld() error {
	start := 0
	for _, end := range s.pendEnds {
		if err := s.w.WriteEvent("", s.pend[start:end]); err != nil {
			return err
		}
		start = end
	}
	s.held, s.pend, s.pendEnds, s.heldTools = 0, s.pend[:0], s.pendEnds[:0], s.heldTools[:0]
	return nil
}

// emit writes one chunk's data, or holds it while a group is held.
func (s *StreamWriter) emit(b []byte) error {
	if s.holding {
		s.pend = append(s.pend, b...)
		s.pendEnds = append(s.pendEnds, len(s.pend))
		return nil
	}
	return s.w.WriteEvent("", b)
}

func (s *StreamWriter) encode(ev *llm.Event) error {
	switch ev.Type {
	case llm.EventMessageStart:
		var m llm.Response
		if ev.Message != nil {
			m = *ev.Message
		}
		created := m.Created
		if created == 0 {
			created = time.Now().Unix()
		}
		p := append(s.prefix[:0], `{"id":`...)
		p = jsonx.AppendString(p, m.ID)
		p = append(p, `,"object":"chat.completion.chunk","created":`...)
		p = jsonx.AppendInt(p, created)
		p = append(p, `,"model":`...)
		p = jsonx.AppendString(p, m.Model)
		if m.SystemFingerprint != "" {
			p = append(p, `,"system_fingerprint":`...)
			p = jsonx.AppendString(p, m.SystemFingerprint)
		}
		s.prefix = p
		s.usage = m.Usage
		return s.chunk(`{"role":"assistant","content":""}`, nil)

	case llm.EventBlockStart:
		blk, err := s.block(ev.Index)
		if err != nil {
			return err
		}
		if ev.Block == nil {
			blk.kind = kindDropped
			return nil
		}
		switch ev.Block.Type {
		case llm.BlockText:
			blk.kind = kindText
			if ev.Block.Text != "" {
				return s.content(ev.Block.Text)
			}
			return nil
		case llm.BlockToolUse:
			blk.kind, blk.tool = kindTool, s.nextTool
			s.nextTool++
			if s.holding {
				s.heldTools = append(s.heldTools, ev.Index)
			}
			b := s.beginChunk()
			b = append(b, `{"tool_calls":[{"index":`...)
			b = jsonx.AppendInt(b, int64(blk.tool))
			b = append(b, `,"id":`...)
			b = jsonx.AppendString(b, ev.Block.ID)
			b = append(b, `,"type":"function","function":{"name":`...)
			b = jsonx.AppendString(b, ev.Block.Name)
			b = append(b, `,"arguments":""}}]}`...)
			return s.endChunk(b, nil)
		}
		blk.kind = kindDropped
		return nil

	case llm.EventBlockDelta:
		blk, err := s.block(ev.Index)
		if err != nil {
			return err
		}
		switch {
		case blk.kind == kindText && ev.DeltaType == llm.DeltaText && ev.Delta != "":
			return s.content(ev.Delta)
		case blk.kind == kindTool && ev.DeltaType == llm.DeltaInputJSON && ev.Delta != "":
			blk.sawArgs = true
			return s.arguments(blk.tool, ev.Delta)
		}
		return nil

	case llm.EventBlockStop:
		blk, err := s.block(ev.Index)
		if err != nil {
			return err
		}
		if blk.kind == kindTool && !blk.sawArgs && !blk.raw {
			// Anthropic sends "" first and may send nothing else for a tool
			// without arguments; OpenAI clients expect a JSON object.
			blk.sawArgs = true
			return s.arguments(blk.tool, "{}")
		}
		return nil

	case llm.EventMessageDelta:
		if u := ev.Usage; u != nil {
			mergeUsage(&s.usage, u)
		}
		fr := finishReason(ev.StopReason)
		return s.chunk("{}", &fr)

	case llm.EventMessageStop:
		s.done = true
		if s.opt.IncludeUsage {
			b := s.beginPrefix()
			b = append(b, `,"choices":[],"usage":`...)
			b = appendUsage(b, &s.usage)
			b = append(b, '}')
			s.buf = b
			if err := s.emit(b); err != nil {
				return err
			}
		}
		return s.emit([]byte("[DONE]"))

	case llm.EventPing:
		return s.w.WriteComment("ping")

	case llm.EventError:
		s.done = true
		e := ev.Err
		if e == nil {
			e = &llm.APIError{Type: llm.ErrAPI, Message: "stream error"}
		}
		b := appendErrorBody(s.buf[:0], e, false)
		s.buf = b
		return s.w.WriteEvent("", b)
	}
	return nil
}

// mergeUsage overwrites dst with the non-zero counts of the cumulative src.
func mergeUsage(dst, src *llm.Usage) {
	if src.InputTokens != 0 {
		dst.InputTokens = src.InputTokens
	}
	if src.OutputTokens != 0 {
		dst.OutputTokens = src.OutputTokens
	}
	if src.CacheReadTokens != 0 {
		dst.CacheReadTokens = src.CacheReadTokens
	}
	if src.CacheWriteTokens != 0 {
		dst.CacheWriteTokens = src.CacheWriteTokens
	}
	if src.ReasoningTokens != 0 {
		dst.ReasoningTokens = src.ReasoningTokens
	}
	if src.Extra != nil {
		dst.Extra = src.Extra
	}
}

func (s *StreamWriter) block(i int) (*writerBlock, error) {
	if i < 0 || i >= maxBlocks {
		return nil, errBlockIndex
	}
	for len(s.blocks) <= i {
		s.blocks = append(s.blocks, writerBlock{})
	}
	return &s.blocks[i], nil
}

func (s *StreamWriter) beginPrefix() []byte {
	b := s.buf[:0]
	if len(s.prefix) == 0 {
		// no message_start was seen: still write a well-formed chunk
		return append(b, `{"id":"","object":"chat.completion.chunk","created":0,"model":""`...)
	}
	return append(b, s.prefix...)
}

// beginChunk starts a chunk up to and including `"delta":`.
func (s *StreamWriter) beginChunk() []byte {
	b := s.beginPrefix()
	return append(b, `,"choices":[{"index":0,"delta":`...)
}

// endChunk closes a chunk begun by beginChunk and writes it.
func (s *StreamWriter) endChunk(b []byte, finish *string) error {
	b = append(b, `,"logprobs":null,"finish_reason":`...)
	if finish == nil || *finish == "" {
		b = append(b, "null"...)
	} else {
		b = jsonx.AppendString(b, *finish)
	}
	b = append(b, "}]}"...)
	s.buf = b
	return s.emit(b)
}

func (s *StreamWriter) chunk(delta string, finish *string) error {
	b := s.beginChunk()
	b = append(b, delta...)
	return s.endChunk(b, finish)
}

func (s *StreamWriter) content(text string) error {
	b := s.beginChunk()
	b = append(b, `{"content":`...)
	b = jsonx.AppendString(b, text)
	b = append(b, '}')
	return s.endChunk(b, nil)
}

func (s *StreamWriter) arguments(tool int, frag string) error {
	b := s.beginChunk()
	b = append(b, `{"tool_calls":[{"index":`...)
	b = jsonx.AppendInt(b, int64(tool))
	b = append(b, `,"function":{"arguments":`...)
	b = jsonx.AppendString(b, frag)
	b = append(b, "}}]}"...)
	return s.endChunk(b, nil)
}
