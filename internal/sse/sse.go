// Package sse reads and writes Server-Sent Events (text/event-stream) as the
// Anthropic and OpenAI APIs and their Go SDKs use them.
//
// A Reader decodes one event at a time from an io.Reader and never buffers
// more than one event; a Writer frames and flushes one event at a time. Both
// follow the SDK decoders' rules: lines end in "\n" or "\r\n", "event:" and
// "data:" take one optional space after the colon, lines starting with ":"
// are comments, several data lines join with "\n", and an event is dispatched
// only on a blank line. Neither type is safe for concurrent use.
// The package imports only the standard library.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
)

// MaxLineBytes bounds one line, as the SDK decoders do (32 MiB).
const MaxLineBytes = 32 << 20

// ErrLineTooLong is returned when a line exceeds MaxLineBytes.
var ErrLineTooLong = errors.New("sse: line too long")

// ErrLineBreak is returned by the Writer for an event name or comment that
// contains a line break, which would end the field early and let the rest be
// read as other fields or events.
var ErrLineBreak = errors.New("sse: line break in event name or comment")

// Event is one decoded event. Data aliases the Reader's buffer and is valid
// only until the next call to Next.
type Event struct {
	// Event is the "event:" field, empty when the event had none.
	Event string
	Data  []byte
	ID    string
}

// Reader decodes events from a stream.
type Reader struct {
	br   *bufio.Reader
	data []byte
	line []byte
}

// NewReader returns a Reader over r. Its buffer is small (a stream's
// events are short; longer lines are assembled piecewise): with thousands
// of concurrent streams, 16 KiB each was a fifth of Keel's memory.
func NewReader(r io.Reader) *Reader {
	return &Reader{br: bufio.NewReaderSize(r, 1<<10)}
}

// Next returns the next event. At a clean end of stream (after a blank line
// or with nothing pending) it returns io.EOF; when the stream ends in the
// middle of an event (no terminating blank line) it returns
// io.ErrUnexpectedEOF, which callers treat as a cut stream. Events with
// neither an event name nor data (a lone comment block) are skipped.
func (r *Reader) Next() (Event, error) {
	r.data = r.data[:0]
	var ev Event
	sawField := false
	hasData := false
	for {
		line, err := r.readLine()
		if err != nil {
			if err == io.EOF {
				if sawField {
					return Event{}, io.ErrUnexpectedEOF
				}
				return Event{}, io.EOF
			}
			return Event{}, err
		}
		if len(line) == 0 {
			if !sawField {
				continue
			}
			ev.Data = r.data
			return ev, nil
		}
		if line[0] == ':' {
			continue
		}
		name, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			name, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(name) {
		case "event":
			ev.Event = eventName(value)
			sawField = true
		case "data":
			if hasData {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			hasData = true
			sawField = true
		case "id":
			ev.ID = string(value)
			sawField = true
		default:
			// "retry" and unknown fields are ignored, as the SDKs do.
		}
	}
}

// eventName returns the event name in value as a string, without allocating
// for the names the Anthropic API sends.
func eventName(value []byte) string {
	switch string(value) {
	case "message_start":
		return "message_start"
	case "content_block_start":
		return "content_block_start"
	case "content_block_delta":
		return "content_block_delta"
	case "content_block_stop":
		return "content_block_stop"
	case "message_delta":
		return "message_delta"
	case "message_stop":
		return "message_stop"
	case "ping":
		return "ping"
	case "error":
		return "error"
	}
	return string(value)
}

// readLine returns one line without its terminator. The line aliases either
// the bufio.Reader's buffer or r.line, and is valid until the next read. A
// final line without a terminator is an io.ErrUnexpectedEOF.
func (r *Reader) readLine() ([]byte, error) {
	chunk, err := r.br.ReadSlice('\n')
	if err == nil && len(chunk) <= MaxLineBytes {
		// The whole line is in the buffer (the common case): no copy.
		l := chunk[:len(chunk)-1]
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		return l, nil
	}
	r.line = r.line[:0]
	for {
		r.line = append(r.line, chunk...)
		if len(r.line) > MaxLineBytes {
			return nil, ErrLineTooLong
		}
		if err == bufio.ErrBufferFull {
			chunk, err = r.br.ReadSlice('\n')
			continue
		}
		if err != nil {
			if err == io.EOF && len(r.line) > 0 {
				// A last line with no newline is incomplete: the event it
				// belongs to was never terminated.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		l := r.line[:len(r.line)-1]
		if n := len(l); n > 0 && l[n-1] == '\r' {
			l = l[:n-1]
		}
		return l, nil
	}
}

// Writer frames events onto a stream and flushes each one.
type Writer struct {
	w     io.Writer
	flush func() error
	buf   []byte
}

// NewWriter returns a Writer onto w; flush, when not nil, is called after
// every event so it leaves the process at once (http.ResponseController.Flush).
func NewWriter(w io.Writer, flush func() error) *Writer {
	return &Writer{w: w, flush: flush}
}

// WriteEvent writes "event: name" (omitted when name is empty), one "data:"
// line per line of data, and the terminating blank line, then flushes.
// Lines of data may end in "\n", "\r\n" or a lone "\r" (the SSE spec's line
// ends); each becomes one data line, so a Reader returns the data with every
// line break as "\n". A name containing "\r" or "\n" is rejected with
// ErrLineBreak and nothing is written.
func (w *Writer) WriteEvent(name string, data []byte) error {
	if strings.ContainsAny(name, "\r\n") {
		return ErrLineBreak
	}
	b := w.buf[:0]
	if name != "" {
		b = append(b, "event: "...)
		b = append(b, name...)
		b = append(b, '\n')
	}
	for {
		// A "\r" left inside a line would be lost (before "\n") or kept where
		// SSE readers that follow the spec end the line, so split on it too.
		i := bytes.IndexAny(data, "\r\n")
		b = append(b, "data: "...)
		if i < 0 {
			b = append(b, data...)
			b = append(b, '\n')
			break
		}
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, '\n')
	w.buf = b
	return w.write(b)
}

// WriteComment writes ": text" and a blank line, then flushes (a keep-alive).
// Text containing "\r" or "\n" is rejected with ErrLineBreak.
func (w *Writer) WriteComment(text string) error {
	if strings.ContainsAny(text, "\r\n") {
		return ErrLineBreak
	}
	b := append(w.buf[:0], ": "...)
	b = append(b, text...)
	b = append(b, "\n\n"...)
	w.buf = b
	return w.write(b)
}

func (w *Writer) write(b []byte) error {
	if _, err := w.w.Write(b); err != nil {
		return err
	}
	if w.flush != nil {
		return w.flush()
	}
	return nil
}
