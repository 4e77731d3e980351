package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/keelmesh/keel/internal/jsonx"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// ErrStreamCut is returned by StreamReader.Next when the stream ends before
// data: [DONE]. errors.Is(err, io.ErrUnexpectedEOF) holds for it.
var ErrStreamCut = fmt.Errorf("openai stream ended before [DONE]: %w", io.ErrUnexpectedEOF)

// maxToolCalls bounds the tool calls one stream may open.
const maxToolCalls = 1 << 12

// readerTool is one tool call seen on the wire.
type readerTool struct {
	wire  int    // tool_calls[].index
	id    string // tool_calls[].id
	block int    // canonical block index
}

// StreamReader turns an OpenAI chat.completion.chunk stream into canonical,
// block-structured events. It is stateful and not safe for concurrent use;
// Next blocks on the underlying reader.
//
// Mapping: the first chunk gives EventMessageStart (id, model, created,
// system_fingerprint); delta.content goes to a text block,
// delta.reasoning_content / delta.reasoning (non-standard, DeepSeek/vLLM) to a
// thinking block, each new tool call (a new tool_calls[].index, or a new id at
// a known index) to a tool_use block whose input_json deltas are its
// arguments fragments. Opening a tool block closes an open text or thinking
// block; tool blocks stay open until finish_reason, because OpenAI may
// interleave fragments of parallel tool calls and a closed block cannot
// take more deltas, so each tool's arguments arrive whole in its own block.
// Content after a tool call opens a new text block. finish_reason closes every
// open block; the message delta is held until [DONE] so that the usage chunk
// (choices: []) that follows can be merged into it. delta.refusal is not
// mapped (the stop reason becomes refusal on content_filter).
//
// A chunk with a top-level "error" member gives EventError, after which Next
// returns io.EOF. Every event carries the chunk it came from (Raw,
// RawFormat FormatOpenAI, grouped by RawSeq and RawLast; see group), so a
// same-format writer can pass the stream on chunk for chunk.
type StreamReader struct {
	r *sse.Reader

	queue []llm.Event
	qi    int
	err   error // returned once the queue is drained

	started  bool
	finished bool
	next     int   // next canonical block index
	open     []int // open canonical block indexes, ascending
	text     int   // open text block, -1 when none
	thinking int   // open thinking block, -1 when none
	tools    []readerTool
	stop     llm.StopReason
	usage    *llm.Usage

	// The upstream bytes of the finish chunk (and the number of events it
	// gave) and of the usage chunk, for the events emitted at [DONE].
	finishRaw  []byte
	finishSeq  int
	usageRaw   []byte
	chunkUsage bool // the chunk being read has a usage member

	free  *llm.Event // given back by Recycle
	spare []byte     // the Raw buffer of a recycled one-event chunk
}

// Pending reports whether Next returns an event without reading (the rest
// of a chunk that gave several, or the end).
func (s *StreamReader) Pending() bool { return s.qi < len(s.queue) }

// Recycle takes back a delta, block stop or ping event the caller is done
// with: the next event reuses it, and the next chunk the Raw buffer of a
// chunk that gave only that event. Other events may share their Raw with
// other events of their chunk, or hold slices of it, and are left alone.
func (s *StreamReader) Recycle(ev *llm.Event) {
	switch ev.Type {
	case llm.EventBlockDelta, llm.EventBlockStop, llm.EventPing:
		if ev.RawSeq == 1 && ev.RawLast && ev.RawFormat == llm.FormatOpenAI && cap(ev.Raw) > cap(s.spare) {
			s.spare = ev.Raw[:0]
		}
		*ev = llm.Event{}
		s.free = ev
	}
}

// NewStreamReader returns a StreamReader over an OpenAI SSE body.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: sse.NewReader(r), text: -1, thinking: -1}
}

// Next returns the next canonical event. It returns io.EOF after the events
// of data: [DONE] (or of an error chunk); ErrStreamCut, possibly wrapping a
// read error, when the stream ends without [DONE]; an *llm.APIError with
// MeshCode MESH_UPSTREAM_PROTOCOL for a chunk that is not valid JSON.
func (s *StreamReader) Next() (*llm.Event, error) {
	for {
		if s.qi < len(s.queue) {
			ev := s.free
			if ev != nil {
				s.free = nil
			} else {
				ev = new(llm.Event)
			}
			*ev = s.queue[s.qi]
			s.queue[s.qi] = llm.Event{}
			s.qi++
			return ev, nil
		}
		if s.err != nil {
			return nil, s.err
		}
		s.queue, s.qi = s.queue[:0], 0
		ev, err := s.r.Next()
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				s.err = ErrStreamCut
			} else {
				s.err = fmt.Errorf("%w: %w", ErrStreamCut, err)
			}
			continue
		}
		data := bytes.TrimSpace(ev.Data)
		if len(data) == 0 {
			continue
		}
		if bytes.HasPrefix(data, []byte("[DONE]")) {
			s.done()
			continue
		}
		wasFinished := s.finished
		s.chunk(data)
		s.group(data, wasFinished)
	}
}

// group gives the events one chunk yielded its bytes (Event.RawSeq): a
// same-format writer then sends the chunk as it came instead of encoding
// each event. The finish chunk's group ends with the message delta emitted
// at [DONE]; a usage chunk (choices: []) yields no event and rides on
// message_stop. Other chunks that yield no event (an empty delta) are not
// passed on.
func (s *StreamReader) group(data []byte, wasFinished bool) {
	n := len(s.queue)
	if n >= 1<<15 || s.err != nil && s.err != io.EOF {
		return
	}
	switch {
	case !wasFinished && s.finished:
		s.finishRaw, s.finishSeq = bytes.Clone(data), n
		for i := range s.queue {
			s.queue[i].Raw, s.queue[i].RawFormat, s.queue[i].RawSeq = s.finishRaw, llm.FormatOpenAI, uint16(i+1)
		}
	case n == 0 && s.chunkUsage:
		// A usage chunk (after the finish, or before it from providers
		// that send one early) rides on message_stop: not lost, and only
		// for a client that asked for usage.
		s.usageRaw = bytes.Clone(data)
	case n > 0:
		var raw []byte
		if n == 1 && s.spare != nil {
			raw, s.spare = append(s.spare, data...), nil
		} else {
			raw = bytes.Clone(data)
		}
		for i := range s.queue {
			s.queue[i].Raw, s.queue[i].RawFormat, s.queue[i].RawSeq, s.queue[i].RawLast = raw, llm.FormatOpenAI, uint16(i+1), i == n-1
		}
	}
}

func (s *StreamReader) emit(ev llm.Event) { s.queue = append(s.queue, ev) }

func (s *StreamReader) fail(format string, args ...any) {
	s.queue = s.queue[:0]
	s.err = protocolError(format, args...)
}

// chunk handles one data payload.
func (s *StreamReader) chunk(data []byte) {
	if !jsonx.Valid(data) || data[0] != '{' {
		s.fail("malformed stream chunk: %s", truncateText(data, 200))
		return
	}
	var id, model, fp, created, choices, usage []byte
	hasError := false
	_ = jsonx.EachMember(data, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "id":
			id = v
		case "model":
			model = v
		case "system_fingerprint":
			fp = v
		case "created":
			created = v
		case "choices":
			choices = v
		case "usage":
			usage = v
		case "error":
			hasError = true
		}
		return nil
	})
	if hasError {
		// openai-go's rule: a top-level "error" key ends the stream.
		e := ParseError(200, nil, data)
		s.emit(llm.Event{Type: llm.EventError, Err: e})
		s.err = io.EOF
		return
	}
	if !s.started && lenientString(id) == "" && jsonx.CountElements(choices) == 0 && (usage == nil || jsonx.IsNull(usage)) {
		// Nothing of the answer yet: Azure OpenAI's first chunk holds the
		// prompt's content filter results, with an empty id and model
		// (learn.microsoft.com/azure/ai-foundry/openai/concepts/content-filter).
		return
	}
	if !s.started {
		s.started = true
		m := &llm.Response{}
		m.ID = lenientString(id)
		m.Model = lenientString(model)
		m.SystemFingerprint = lenientString(fp)
		if created != nil {
			m.Created, _ = strconv.ParseInt(string(created), 10, 64)
		}
		s.emit(llm.Event{Type: llm.EventMessageStart, Message: m})
	}
	if choices != nil && choices[0] == '[' {
		err := jsonx.EachElement(choices, func(_ int, el []byte) error {
			return s.choice(el)
		})
		if err != nil {
			s.fail("%v", err)
			return
		}
	}
	s.chunkUsage = usage != nil && !jsonx.IsNull(usage)
	if s.chunkUsage {
		u := &llm.Usage{}
		if err := parseUsage(usage, u); err != nil {
			s.fail("%v", err)
			return
		}
		s.usage = u
	}
}

func (s *StreamReader) choice(el []byte) error {
	if el[0] != '{' {
		return fmt.Errorf("choices[]: expected an object, got %s", jsonx.KindName(el))
	}
	var index, delta, finish []byte
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "index":
			index = v
		case "delta":
			delta = v
		case "finish_reason":
			finish = v
		}
		return nil
	})
	if index != nil && string(index) != "0" {
		return nil // Keel serves n=1
	}
	if s.finished {
		return nil
	}
	if delta != nil && delta[0] == '{' {
		if err := s.delta(delta); err != nil {
			return err
		}
	}
	if finish != nil && !jsonx.IsNull(finish) {
		fr, err := optString(finish, "finish_reason")
		if err != nil {
			return err
		}
		s.closeAll()
		s.finished = true
		s.stop = stopReason(fr)
	}
	return nil
}

func (s *StreamReader) delta(d []byte) error {
	var content, reasoning, toolCalls []byte
	_ = jsonx.EachMember(d, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "content":
			content = v
		case "reasoning_content", "reasoning":
			reasoning = v
		case "tool_calls":
			toolCalls = v
		}
		return nil
	})
	if reasoning != nil && reasoning[0] == '"' {
		if t, _ := unquote(reasoning); t != "" {
			if s.thinking < 0 {
				s.closeBlock(&s.text)
				s.thinking = s.start(&llm.Block{Type: llm.BlockThinking})
			}
			s.emit(llm.Event{Type: llm.EventBlockDelta, Index: s.thinking, DeltaType: llm.DeltaThinking, Delta: t})
		}
	}
	if content != nil && content[0] == '"' {
		if t, _ := unquote(content); t != "" {
			if s.text < 0 {
				s.closeBlock(&s.thinking)
				s.text = s.start(&llm.Block{Type: llm.BlockText})
			}
			s.emit(llm.Event{Type: llm.EventBlockDelta, Index: s.text, DeltaType: llm.DeltaText, Delta: t})
		}
	}
	if toolCalls == nil || toolCalls[0] != '[' {
		return nil
	}
	return jsonx.EachElement(toolCalls, func(_ int, el []byte) error {
		return s.toolCall(el)
	})
}

func (s *StreamReader) toolCall(el []byte) error {
	if el[0] != '{' {
		return fmt.Errorf("tool_calls[]: expected an object, got %s", jsonx.KindName(el))
	}
	var index, id, fn []byte
	_ = jsonx.EachMember(el, func(k, v []byte) error {
		switch string(bareKey(k)) {
		case "index":
			index = v
		case "id":
			id = v
		case "function":
			fn = v
		}
		return nil
	})
	var name, args string
	if fn != nil && fn[0] == '{' {
		_ = jsonx.EachMember(fn, func(k, v []byte) error {
			switch string(bareKey(k)) {
			case "name":
				name = lenientString(v)
			case "arguments":
				args = lenientString(v)
			}
			return nil
		})
	}
	wire := -1
	if index != nil && !jsonx.IsNull(index) {
		n, err := strconv.Atoi(string(index))
		if err != nil {
			return fmt.Errorf("tool_calls[].index: expected an integer, got %s", index)
		}
		wire = max(n, 0) // some providers send -1 for a single call
	}
	idStr := lenientString(id)
	t := s.findTool(wire, idStr)
	if t == nil {
		if len(s.tools) >= maxToolCalls {
			return errors.New("too many tool calls")
		}
		if wire < 0 {
			wire = len(s.tools)
		}
		s.closeBlock(&s.thinking)
		s.closeBlock(&s.text)
		blk := s.start(&llm.Block{Type: llm.BlockToolUse, ID: idStr, Name: name})
		s.tools = append(s.tools, readerTool{wire: wire, id: idStr, block: blk})
		t = &s.tools[len(s.tools)-1]
	}
	if args != "" {
		s.emit(llm.Event{Type: llm.EventBlockDelta, Index: t.block, DeltaType: llm.DeltaInputJSON, Delta: args})
	}
	return nil
}

// findTool returns the tool call a fragment belongs to, or nil when the
// fragment starts a new one: an unseen index, or a new id at a seen index
// (providers that number every call 0).
func (s *StreamReader) findTool(wire int, id string) *readerTool {
	if wire < 0 {
		if id != "" || len(s.tools) == 0 {
			return nil
		}
		return &s.tools[len(s.tools)-1]
	}
	for i := len(s.tools) - 1; i >= 0; i-- {
		if t := &s.tools[i]; t.wire == wire {
			if id != "" && t.id != "" && id != t.id {
				return nil
			}
			return t
		}
	}
	return nil
}

// start opens a block and returns its index.
func (s *StreamReader) start(b *llm.Block) int {
	i := s.next
	s.next++
	s.open = append(s.open, i)
	s.emit(llm.Event{Type: llm.EventBlockStart, Index: i, Block: b})
	return i
}

// closeBlock closes the block *idx refers to, if open, and sets it to -1.
func (s *StreamReader) closeBlock(idx *int) {
	if *idx < 0 {
		return
	}
	for j, o := range s.open {
		if o == *idx {
			s.open = append(s.open[:j], s.open[j+1:]...)
			break
		}
	}
	s.emit(llm.Event{Type: llm.EventBlockStop, Index: *idx})
	*idx = -1
}

func (s *StreamReader) closeAll() {
	for _, o := range s.open {
		s.emit(llm.Event{Type: llm.EventBlockStop, Index: o})
	}
	s.open = s.open[:0]
	s.text, s.thinking = -1, -1
}

// done handles data: [DONE].
func (s *StreamReader) done() {
	if !s.started {
		s.started = true
		s.emit(llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{}})
	}
	s.closeAll()
	u := s.usage
	if u == nil {
		u = &llm.Usage{}
	}
	md := llm.Event{Type: llm.EventMessageDelta, StopReason: s.stop, Usage: u}
	if s.finishRaw != nil {
		md.Raw, md.RawFormat, md.RawSeq, md.RawLast = s.finishRaw, llm.FormatOpenAI, uint16(s.finishSeq+1), true
	}
	s.emit(md)
	ms := llm.Event{Type: llm.EventMessageStop}
	if s.usageRaw != nil {
		ms.Raw, ms.RawFormat, ms.RawSeq, ms.RawLast = s.usageRaw, llm.FormatOpenAI, 1, true
	}
	s.emit(ms)
	s.err = io.EOF
}
