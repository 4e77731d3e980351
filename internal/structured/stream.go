package structured

import (
	"strings"
	"unicode/utf8"
)

// StreamValidator collects the text deltas, or the tool-input JSON deltas
// (Anthropic input_json_delta.partial_json, OpenAI tool_calls arguments), of
// one streamed answer that must be JSON, and validates the whole at the end:
// the relaxed-stream check of the structured-output stage, which forwards
// every delta to the client as it arrives; the Result reports whether what
// the client received was valid (the X-Mesh-Schema-Valid trailer) and
// cannot change it. (A strict stream is buffered whole and checked as a
// response: NewStage.)
//
// A StreamValidator belongs to one stream: it is not safe for concurrent use.
type StreamValidator struct {
	s   *Schema
	opt Options
	buf strings.Builder
}

// NewStreamValidator returns a validator for one stream against s (nil: any
// well-formed JSON) with the repair options opt.
func NewStreamValidator(s *Schema, opt Options) *StreamValidator {
	return &StreamValidator{s: s, opt: opt}
}

// Add appends one delta.
func (v *StreamValidator) Add(delta string) { v.buf.WriteString(delta) }

// Finish validates (and, for the report, repairs) the collected text.
// Result.Valid && !Result.Changed means the client received a valid answer.
func (v *StreamValidator) Finish() Result {
	return Repair(v.buf.String(), v.s, v.opt)
}

// Deltas cuts doc into consecutive pieces of at most size bytes (at least one
// whole character each), never splitting a UTF-8 sequence, so each piece can
// be sent as a JSON string. Their concatenation is doc. It is safe for
// concurrent use.
func Deltas(doc []byte, size int) []string {
	size = max(size, utf8.UTFMax)
	out := make([]string, 0, len(doc)/size+1)
	for len(doc) > 0 {
		n := min(size, len(doc))
		for n < len(doc) && n > 0 && !utf8.RuneStart(doc[n]) {
			n--
		}
		if n == 0 {
			_, n = utf8.DecodeRune(doc)
		}
		out = append(out, string(doc[:n]))
		doc = doc[n:]
	}
	return out
}
