package sse

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// ev is an Event with Data as a string, for readable tables.
type ev struct {
	Event, Data, ID string
}

// readAll reads events until an error and returns them with that error.
func readAll(t testing.TB, r io.Reader) ([]ev, error) {
	t.Helper()
	sr := NewReader(r)
	var got []ev
	for n := 0; ; n++ {
		if n > 1<<16 {
			t.Fatalf("reader did not stop after %d events", n)
		}
		e, err := sr.Next()
		if err != nil {
			return got, err
		}
		got = append(got, ev{e.Event, string(e.Data), e.ID})
	}
}

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 100<<10) // several times the 16 KiB buffer
	tests := []struct {
		name    string
		in      string
		want    []ev
		wantErr error
	}{
		{name: "empty stream", in: "", wantErr: io.EOF},
		{name: "only blank lines", in: "\n\n\r\n", wantErr: io.EOF},
		{name: "one event", in: "event: a\ndata: x\n\n", want: []ev{{Event: "a", Data: "x"}}, wantErr: io.EOF},
		{name: "two events", in: "event: a\ndata: 1\n\nevent: b\ndata: 2\n\n", want: []ev{{Event: "a", Data: "1"}, {Event: "b", Data: "2"}}, wantErr: io.EOF},
		{name: "leading blank lines", in: "\n\nevent: a\ndata: x\n\n", want: []ev{{Event: "a", Data: "x"}}, wantErr: io.EOF},
		{name: "CRLF", in: "event: a\r\ndata: x\r\n\r\nevent: b\r\ndata: y\r\n\r\n", want: []ev{{Event: "a", Data: "x"}, {Event: "b", Data: "y"}}, wantErr: io.EOF},
		{name: "lone CR is not a line break", in: "data: a\rb\n\n", want: []ev{{Data: "a\rb"}}, wantErr: io.EOF},
		{name: "comments", in: ": keep-alive\nevent: a\n: between\ndata: x\n\n", want: []ev{{Event: "a", Data: "x"}}, wantErr: io.EOF},
		{name: "comment-only block is skipped", in: ": ping\n\nevent: a\ndata: x\n\n", want: []ev{{Event: "a", Data: "x"}}, wantErr: io.EOF},
		{name: "multi-line data", in: "data: a\ndata: b\ndata: c\n\n", want: []ev{{Data: "a\nb\nc"}}, wantErr: io.EOF},
		{name: "data without space", in: "data:x\n\n", want: []ev{{Data: "x"}}, wantErr: io.EOF},
		{name: "only one space is stripped", in: "data:  x\n\n", want: []ev{{Data: " x"}}, wantErr: io.EOF},
		{name: "event without space", in: "event:a\ndata:x\n\n", want: []ev{{Event: "a", Data: "x"}}, wantErr: io.EOF},
		{name: "empty data line", in: "data:\n\n", want: []ev{{}}, wantErr: io.EOF},
		{name: "field name without colon", in: "data\n\n", want: []ev{{}}, wantErr: io.EOF},
		{name: "empty data lines join", in: "data:\ndata:\n\n", want: []ev{{Data: "\n"}}, wantErr: io.EOF},
		{name: "event name only", in: "event: ping\n\n", want: []ev{{Event: "ping"}}, wantErr: io.EOF},
		{name: "colon in value", in: "data: {\"a\":1}\n\n", want: []ev{{Data: `{"a":1}`}}, wantErr: io.EOF},
		{name: "id", in: "id: 7\ndata: x\n\n", want: []ev{{Data: "x", ID: "7"}}, wantErr: io.EOF},
		{name: "retry ignored", in: "retry: 1000\ndata: x\n\n", want: []ev{{Data: "x"}}, wantErr: io.EOF},
		{name: "unknown field ignored", in: "foo: bar\ndata: x\n\n", want: []ev{{Data: "x"}}, wantErr: io.EOF},
		{name: "later event name wins", in: "event: a\nevent: b\ndata: x\n\n", want: []ev{{Event: "b", Data: "x"}}, wantErr: io.EOF},
		{name: "fields reset between events", in: "event: a\nid: 1\ndata: x\n\ndata: y\n\n", want: []ev{{Event: "a", Data: "x", ID: "1"}, {Data: "y"}}, wantErr: io.EOF},
		{name: "long line", in: "data: " + long + "\n\n", want: []ev{{Data: long}}, wantErr: io.EOF},
		{name: "long CRLF line", in: "data: " + long + "\r\n\r\n", want: []ev{{Data: long}}, wantErr: io.EOF},
		{name: "event without trailing blank line", in: "event: a\ndata: x\n", wantErr: io.ErrUnexpectedEOF},
		{name: "last line without newline", in: "event: a\ndata: x", wantErr: io.ErrUnexpectedEOF},
		{name: "complete event then cut event", in: "data: 1\n\ndata: 2\n", want: []ev{{Data: "1"}}, wantErr: io.ErrUnexpectedEOF},
		{name: "CRLF event without trailing blank line", in: "data: x\r\n", wantErr: io.ErrUnexpectedEOF},
		{name: "trailing comment without newline", in: "data: 1\n\n: bye", want: []ev{{Data: "1"}}, wantErr: io.ErrUnexpectedEOF},
		{name: "trailing comment with newline", in: "data: 1\n\n: bye\n", want: []ev{{Data: "1"}}, wantErr: io.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// One byte at a time as well, so line assembly across reads is exercised.
			for _, mode := range []string{"whole", "bytewise"} {
				var r io.Reader = strings.NewReader(tt.in)
				if mode == "bytewise" {
					r = &oneByteReader{r: r}
				}
				got, err := readAll(t, r)
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("%s: events (-got +want):\n-%q\n+%q", mode, got, tt.want)
				}
				if err != tt.wantErr {
					t.Errorf("%s: final error = %v, want %v", mode, err, tt.wantErr)
				}
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// endless yields an unterminated line forever.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func TestReaderLineTooLong(t *testing.T) {
	_, err := NewReader(io.MultiReader(strings.NewReader("data: "), endless{})).Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("Next() error = %v, want %v", err, ErrLineTooLong)
	}
}

func TestReaderPassesReadErrors(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("data: 1\n\ndata: 2"), &errReader{boom})
	got, err := readAll(t, r)
	if want := []ev{{Data: "1"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("events (-got +want):\n-%q\n+%q", got, want)
	}
	if err != boom {
		t.Errorf("final error = %v, want %v", err, boom)
	}
}

type errReader struct{ err error }

func (e *errReader) Read([]byte) (int, error) { return 0, e.err }

func TestWriter(t *testing.T) {
	tests := []struct {
		name      string
		event     string
		data      string
		want      string
		wantRead  ev
		skipRead  bool
		wantError error
	}{
		{name: "named", event: "message_stop", data: `{"type":"message_stop"}`, want: "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"},
		{name: "unnamed", data: `{"a":1}`, want: "data: {\"a\":1}\n\n"},
		{name: "empty data", event: "ping", want: "event: ping\ndata: \n\n"},
		{name: "multi-line data", event: "x", data: "a\nb\nc", want: "event: x\ndata: a\ndata: b\ndata: c\n\n"},
		{name: "trailing newline in data", data: "a\n", want: "data: a\ndata: \n\n"},
		{name: "CRLF in data", data: "a\r\nb", want: "data: a\ndata: b\n\n", wantRead: ev{Data: "a\nb"}},
		{name: "lone CR in data", data: "a\rb\r", want: "data: a\ndata: b\ndata: \n\n", wantRead: ev{Data: "a\nb\n"}},
		{name: "leading space in data", data: " x", want: "data:  x\n\n"},
		{name: "line break in name", event: "a\ndata: injected", wantError: ErrLineBreak},
		{name: "CR in name", event: "a\r", wantError: ErrLineBreak},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			flushes := 0
			w := NewWriter(&buf, func() error { flushes++; return nil })
			err := w.WriteEvent(tt.event, []byte(tt.data))
			if !errors.Is(err, tt.wantError) {
				t.Fatalf("WriteEvent error = %v, want %v", err, tt.wantError)
			}
			if tt.wantError != nil {
				if buf.Len() != 0 || flushes != 0 {
					t.Errorf("rejected event wrote %q and flushed %d times", buf.String(), flushes)
				}
				return
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("output (-got +want):\n-%q\n+%q", got, tt.want)
			}
			if flushes != 1 {
				t.Errorf("flushes = %d, want 1", flushes)
			}
			want := tt.wantRead
			if want == (ev{}) {
				want = ev{Event: tt.event, Data: tt.data}
			}
			got, err := readAll(t, &buf)
			if !reflect.DeepEqual(got, []ev{want}) || err != io.EOF {
				t.Errorf("read back (-got +want):\n-%q, %v\n+%q, EOF", got, err, []ev{want})
			}
		})
	}
}

func TestWriterComment(t *testing.T) {
	var buf bytes.Buffer
	flushes := 0
	w := NewWriter(&buf, func() error { flushes++; return nil })
	if err := w.WriteComment("keep-alive"); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteEvent("a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), ": keep-alive\n\nevent: a\ndata: x\n\n"; got != want {
		t.Errorf("output (-got +want):\n-%q\n+%q", got, want)
	}
	if flushes != 2 {
		t.Errorf("flushes = %d, want 2 (one per event)", flushes)
	}
	if err := w.WriteComment("a\nevent: x"); !errors.Is(err, ErrLineBreak) {
		t.Errorf("WriteComment with a line break: error = %v, want %v", err, ErrLineBreak)
	}
	got, err := readAll(t, &buf)
	if want := []ev{{Event: "a", Data: "x"}}; !reflect.DeepEqual(got, want) || err != io.EOF {
		t.Errorf("read back (-got +want):\n-%q, %v\n+%q, EOF", got, err, want)
	}
}

func TestWriterNilFlush(t *testing.T) {
	var buf bytes.Buffer
	if err := NewWriter(&buf, nil).WriteEvent("a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, want := buf.String(), "event: a\ndata: x\n\n"; got != want {
		t.Errorf("output (-got +want):\n-%q\n+%q", got, want)
	}
}

type failWriter struct{ err error }

func (f failWriter) Write([]byte) (int, error) { return 0, f.err }

func TestWriterErrors(t *testing.T) {
	boom := errors.New("boom")
	flushes := 0
	w := NewWriter(failWriter{boom}, func() error { flushes++; return nil })
	if err := w.WriteEvent("a", nil); err != boom {
		t.Errorf("write error = %v, want %v", err, boom)
	}
	if flushes != 0 {
		t.Errorf("flushed %d times after a failed write", flushes)
	}
	flushErr := errors.New("flush")
	w = NewWriter(io.Discard, func() error { return flushErr })
	if err := w.WriteEvent("a", nil); err != flushErr {
		t.Errorf("flush error = %v, want %v", err, flushErr)
	}
}

// normalizeLineBreaks is what the Writer promises to deliver for data:
// CRLF and lone CR become LF.
func normalizeLineBreaks(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\r"), []byte("\n"))
}

func FuzzReader(f *testing.F) {
	f.Add([]byte("event: a\ndata: x\n\n"), "message_start", []byte(`{"type":"message_start"}`))
	f.Add([]byte("event: a\r\ndata: x\r\n\r\n: c\n"), "", []byte("a\nb"))
	f.Add([]byte("data: 1\n\ndata: 2"), "x", []byte("a\r\nb\r"))
	f.Add([]byte("data\n\nid: 1\nretry: 2\n\n"), "a:b", []byte(""))
	f.Add([]byte(":\n\n\n"), " x", []byte(" lead"))
	f.Fuzz(func(t *testing.T, raw []byte, name string, data []byte) {
		// Any input: no panic, and the reader ends.
		r := NewReader(bytes.NewReader(raw))
		for n := 0; ; n++ {
			if n > len(raw)+1 {
				t.Fatalf("more events (%d) than input bytes (%d)", n, len(raw))
			}
			if _, err := r.Next(); err != nil {
				if err != io.EOF && err != io.ErrUnexpectedEOF {
					t.Fatalf("unexpected error %v", err)
				}
				break
			}
		}

		// Property: what the Writer writes, the Reader reads back.
		var buf bytes.Buffer
		if err := NewWriter(&buf, nil).WriteEvent(name, data); err != nil {
			if !strings.ContainsAny(name, "\r\n") {
				t.Fatalf("WriteEvent(%q) = %v", name, err)
			}
			return
		}
		rd := NewReader(&buf)
		e, err := rd.Next()
		if err != nil {
			t.Fatalf("reading back: %v", err)
		}
		if e.Event != name || !bytes.Equal(e.Data, normalizeLineBreaks(data)) {
			t.Fatalf("read back (-got +want):\n-%q %q\n+%q %q", e.Event, e.Data, name, normalizeLineBreaks(data))
		}
		if _, err := rd.Next(); err != io.EOF {
			t.Fatalf("after the event: %v, want EOF", err)
		}
	})
}
