package responses

import (
	"bytes"
	"io"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

func BenchmarkParseRequest(b *testing.B) {
	body := readFile(b, "testdata/request/codex.json")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	r, err := ParseRequest(readFile(b, "testdata/request/codex.json"))
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

func BenchmarkParseResponse(b *testing.B) {
	body := readFile(b, "testdata/response/text.json")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseResponse(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	r, err := ParseResponse(readFile(b, "testdata/response/tool_reasoning.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := EncodeResponse(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamWriter measures one text delta written (encoded).
func BenchmarkStreamWriter(b *testing.B) {
	w := NewStreamWriter(sse.NewWriter(io.Discard, nil))
	for _, ev := range []*llm.Event{
		{Type: llm.EventMessageStart, Message: &llm.Response{ID: "resp_123", Model: "gpt-5", Created: 1767225700}},
		{Type: llm.EventBlockStart, Block: &llm.Block{Type: llm.BlockText}},
	} {
		if err := w.Write(ev); err != nil {
			b.Fatal(err)
		}
	}
	delta := &llm.Event{Type: llm.EventBlockDelta, DeltaType: llm.DeltaText, Delta: "Hello, this is a \"typical\" token run."}
	b.ReportAllocs()
	for b.Loop() {
		if err := w.Write(delta); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkStreamReader measures one whole stream read (22 events).
func BenchmarkStreamReader(b *testing.B) {
	in := readFile(b, "testdata/stream/reasoning_text_tool.sse")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		rd := NewStreamReader(bytes.NewReader(in))
		for {
			if _, err := rd.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}
