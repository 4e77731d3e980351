package openai

import (
	"io"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

func BenchmarkParseRequest(b *testing.B) {
	body := readFile(b, "testdata/request/multi_turn_tools.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	r, err := ParseRequest(readFile(b, "testdata/request/multi_turn_tools.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeRequest(r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	r, err := ParseResponse(readFile(b, "testdata/response/tool_calls.json"))
	if err != nil {
		b.Fatal(err)
	}
	r.Content = append([]llm.Block{{Type: llm.BlockText, Text: "Checking the weather in both cities for you now."}}, r.Content...)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamWriter measures one event written (a typical text delta).
func BenchmarkStreamWriter(b *testing.B) {
	start := &llm.Event{Type: llm.EventMessageStart, Message: &llm.Response{ID: "chatcmpl-123", Model: "gpt-4o", Created: 1767225700}}
	blk := &llm.Event{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockText}}
	delta := &llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: "Hello, this is a \"typical\" token run."}
	w := NewStreamWriter(sse.NewWriter(io.Discard, nil), StreamOptions{IncludeUsage: true})
	if err := w.Write(start); err != nil {
		b.Fatal(err)
	}
	if err := w.Write(blk); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(delta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamReader measures reading the full golden stream (16 events).
func BenchmarkStreamReader(b *testing.B) {
	in := readFile(b, "testdata/stream/full.sse")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewStreamReader(&byteReader{b: in})
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
