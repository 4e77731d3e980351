package structured

import (
	"strings"
	"unicode/utf8"
)

// StreamValidator collects the text deltas, or the tool-input JSON deltas
// (Anthropic input_json_delta.partial_json, OpenAI tool_calls arguments), of
// one streamed answer that must be JSON, and validates the whole at the end.
//
// Relaxed mode: the engine forwards every delta to the client as it arrives
// and calls Finish at the end of the stream; the Result reports whether what
// the client received was valid (the engine puts that in the final event or
// header) and cannot change it.
//
// Strict mode (the default of the engine): the engine forwards nothing while
// the answer streams, calls FinishStrict at the end, and emits the deltas it
// returns. Their concatenation is the repaired document byte for byte, so a
// client that reassembles tool-input JSON from deltas gets the repaired JSON;
// an answer that needed no repair is re-emitted in its original deltas. When
// the Result is not valid, nothing has reached the client and the engine
// re-asks.
//
// A StreamValidator belongs to one stream: it is not safe for concurrent use.
type StreamValidator struct {
	s      *Schema
	opt    Options
	buf    strings.Builder
	deltas []string
}

// NewStreamValidator returns a validator for one stream against s (nil: any
// well-formed JSON) with the repair options opt.
func NewStreamValidator(s *Schema, opt Options) *StreamValidator {
	return &StreamValidator{s: s, opt: opt}
}

// Add appends one delta.
func (v *StreamValidator) Add(delta string) {
	v.buf.WriteString(delta)
	v.deltas = append(v.deltas, delta)
}

// Len returns the number of bytes collected so far.
func (v *StreamValidator) Len() int { return v.buf.Len() }

// Finish validates (and, for the report, repairs) the collected text: the
// relaxed-mode check. Result.Valid && !Result.Changed means the client
// received a valid answer.
func (v *StreamValidator) Finish() Result {
	return Repair(v.buf.String(), v.s, v.opt)
}

// FinishStrict repairs the collected text and returns the deltas to emit:
// the original deltas when the answer was valid as received, the repaired
// document cut into deltas no longer than the longest delta received when it
// was repaired, and nil when it could not be made valid.
func (v *StreamValidator) FinishStrict() (Result, []string) {
	r := v.Finish()
	switch {
	case !r.Valid:
		return r, nil
	case !r.Changed:
		return r, append([]string(nil), v.deltas...)
	}
	longest := 1
	for _, d := range v.deltas {
		longest = max(longest, len(d))
	}
	return r, Deltas(r.Output, longest)
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
