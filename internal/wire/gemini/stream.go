package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// ErrStreamCut is returned by StreamReader.Next when the stream ends
// before a chunk with a finishReason. errors.Is(err, io.ErrUnexpectedEOF)
// holds for it.
var ErrStreamCut = fmt.Errorf("gemini stream ended before a finishReason: %w", io.ErrUnexpectedEOF)

// StreamReader turns the events of :streamGenerateContent?alt=sse into
// canonical events. Each event's data is a GenerateContentResponse whose
// first candidate's parts continue the answer: text parts are deltas, a
// thought part a thinking delta, a functionCall part a whole call;
// usageMetadata repeats on every chunk, cumulative; the last chunk has
// the finishReason, and the stream then ends without a terminator
// (simonw/llm-gemini#97 shows such a stream). So the first chunk gives
// message_start; a run of text (or thought) parts one block; each call a
// tool_use block with its arguments in one input_json delta; the finish
// reason closes the open block, and the end of the body after it gives
// message_delta (the last usage) and message_stop. A body that ends
// before a finish reason is cut (ErrStreamCut). A chunk holding an error
// object, or a prompt block with no candidates, gives EventError.
// Not safe for concurrent use; Next blocks on the underlying reader.
type StreamReader struct {
	r     *sse.Reader
	queue []llm.Event
	qi    int

	started  bool
	finished bool // a finishReason was seen
	done     bool // message_stop or an error was returned
	open     llm.BlockType
	index    int // next block index
	calls    int
	id       string
	stop     llm.StopReason
	usage    llm.Usage
}

// NewStreamReader returns a reader over r.
func NewStreamReader(r io.Reader) *StreamReader {
	return &StreamReader{r: sse.NewReader(r)}
}

// Next returns the next event; io.EOF after message_stop or an error
// event.
func (s *StreamReader) Next() (*llm.Event, error) {
	for {
		if s.qi < len(s.queue) {
			ev := &s.queue[s.qi]
			s.qi++
			return ev, nil
		}
		if s.done {
			return nil, io.EOF
		}
		s.queue, s.qi = s.queue[:0], 0
		ev, err := s.r.Next()
		if err == io.EOF {
			if !s.finished {
				return nil, ErrStreamCut
			}
			s.end()
			continue
		}
		if err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, ErrStreamCut
			}
			return nil, err
		}
		if len(ev.Data) == 0 {
			continue
		}
		if err := s.chunk(ev.Data); err != nil {
			return nil, err
		}
	}
}

func (s *StreamReader) push(ev llm.Event) { s.queue = append(s.queue, ev) }

// chunk queues the events of one GenerateContentResponse.
func (s *StreamReader) chunk(data []byte) error {
	var in response
	if err := json.Unmarshal(data, &in); err != nil {
		return fmt.Errorf("gemini stream: %w", err)
	}
	if in.Error != nil {
		s.fail(in.Error.apiError(200))
		return nil
	}
	if len(in.Candidates) == 0 && in.PromptFeedback != nil && in.PromptFeedback.BlockReason != "" {
		s.fail(blocked(in.PromptFeedback.BlockReason))
		return nil
	}
	if in.UsageMetadata != nil {
		s.usage = in.UsageMetadata.usage()
	}
	if !s.started {
		s.started, s.id = true, in.ResponseID
		u := s.usage
		u.OutputTokens, u.ReasoningTokens = 0, 0
		s.push(llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: in.ResponseID, Model: in.ModelVersion, Usage: u}})
	}
	if len(in.Candidates) == 0 {
		return nil
	}
	c := in.Candidates[0]
	if c.Content != nil {
		for _, p := range c.Content.Parts {
			s.part(p)
		}
	}
	if c.FinishReason != "" {
		s.closeOpen()
		s.finished = true
		s.stop = stopReason(c.FinishReason, s.calls > 0)
	}
	return nil
}

// part queues the events of one part.
func (s *StreamReader) part(p part) {
	switch {
	case p.FunctionCall != nil:
		s.closeOpen()
		b, _ := answerBlock(p, s.id, &s.calls)
		input := string(b.Input)
		b.Input = json.RawMessage("{}")
		i := s.index
		s.index++
		s.push(llm.Event{Type: llm.EventBlockStart, Index: i, Block: &b})
		s.push(llm.Event{Type: llm.EventBlockDelta, Index: i, DeltaType: llm.DeltaInputJSON, Delta: input})
		s.push(llm.Event{Type: llm.EventBlockStop, Index: i})
	case p.Text != nil && *p.Text != "":
		typ, dt := llm.BlockText, llm.DeltaText
		blk := &llm.Block{Type: llm.BlockText}
		if p.Thought {
			typ, dt = llm.BlockThinking, llm.DeltaThinking
			blk = &llm.Block{Type: llm.BlockThinking}
		}
		if s.open != typ {
			s.closeOpen()
			s.open = typ
			s.push(llm.Event{Type: llm.EventBlockStart, Index: s.index, Block: blk})
		}
		s.push(llm.Event{Type: llm.EventBlockDelta, Index: s.index, DeltaType: dt, Delta: *p.Text})
	}
}

// closeOpen ends the open text or thinking block.
func (s *StreamReader) closeOpen() {
	if s.open == "" {
		return
	}
	s.push(llm.Event{Type: llm.EventBlockStop, Index: s.index})
	s.open = ""
	s.index++
}

// end queues the final events.
func (s *StreamReader) end() {
	u := s.usage
	s.push(llm.Event{Type: llm.EventMessageDelta, StopReason: s.stop, Usage: &u})
	s.push(llm.Event{Type: llm.EventMessageStop})
	s.done = true
}

// fail queues an error event, after which the stream ends.
func (s *StreamReader) fail(e *llm.APIError) {
	s.push(llm.Event{Type: llm.EventError, Err: e})
	s.done = true
}

// StreamWriter writes canonical events as :streamGenerateContent?alt=sse
// chunks (what the simulator streams): a chunk per text or thinking
// delta, one per function call, and a last chunk with the finish reason
// and the usage; an error event as an error object. Every chunk carries
// the usage so far, the model version and the response id, as Gemini's
// do. Not safe for concurrent use.
type StreamWriter struct {
	w      *sse.Writer
	id     string
	model  string
	usage  llm.Usage
	blocks map[int]*llm.Block // open tool_use blocks and their input
	input  map[int][]byte
}

// NewStreamWriter returns a writer onto w.
func NewStreamWriter(w *sse.Writer) *StreamWriter {
	return &StreamWriter{w: w, blocks: map[int]*llm.Block{}, input: map[int][]byte{}}
}

// Write writes ev.
func (s *StreamWriter) Write(ev *llm.Event) error {
	switch ev.Type {
	case llm.EventMessageStart:
		if ev.Message != nil {
			s.id, s.model, s.usage = ev.Message.ID, ev.Message.Model, ev.Message.Usage
		}
	case llm.EventBlockStart:
		if ev.Block != nil && ev.Block.Type == llm.BlockToolUse {
			b := *ev.Block
			s.blocks[ev.Index] = &b
			s.input[ev.Index] = nil
		}
	case llm.EventBlockDelta:
		switch ev.DeltaType {
		case llm.DeltaText:
			return s.chunk([]part{{Text: str(ev.Delta)}}, "")
		case llm.DeltaThinking:
			return s.chunk([]part{{Text: str(ev.Delta), Thought: true}}, "")
		case llm.DeltaInputJSON:
			s.input[ev.Index] = append(s.input[ev.Index], ev.Delta...)
		}
	case llm.EventBlockStop:
		if b := s.blocks[ev.Index]; b != nil {
			args := s.input[ev.Index]
			if len(args) == 0 {
				args = b.Input
			}
			delete(s.blocks, ev.Index)
			delete(s.input, ev.Index)
			return s.chunk([]part{{FunctionCall: &functionCall{Name: b.Name, Args: args}}}, "")
		}
	case llm.EventMessageDelta:
		if ev.Usage != nil {
			s.usage = *ev.Usage
		}
		return s.chunk([]part{{Text: str("")}}, finishReason(ev.StopReason))
	case llm.EventError:
		if ev.Err != nil {
			return s.w.WriteEvent("", EncodeError(ev.Err))
		}
	}
	return nil
}

// chunk writes one GenerateContentResponse.
func (s *StreamWriter) chunk(parts []part, finish string) error {
	out := response{
		Candidates:    []candidate{{Content: &content{Role: roleModel, Parts: parts}, FinishReason: finish}},
		UsageMetadata: metadata(s.usage), ModelVersion: s.model, ResponseID: s.id,
	}
	b, err := json.Marshal(&out)
	if err != nil {
		return err
	}
	return s.w.WriteEvent("", b)
}
