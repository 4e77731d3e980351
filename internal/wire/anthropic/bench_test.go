package anthropic

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/sse"
)

func readTestdata(b *testing.B, parts ...string) []byte {
	in, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		b.Fatal(err)
	}
	return in
}

func BenchmarkParseRequest(b *testing.B) {
	in := readTestdata(b, "requests", "multi_turn_tools.json")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeRequest(b *testing.B) {
	r, err := ParseRequest(readTestdata(b, "requests", "multi_turn_tools.json"))
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
	in := readTestdata(b, "responses", "usage_cache.json")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseResponse(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeResponse(b *testing.B) {
	r, err := ParseResponse(readTestdata(b, "responses", "tool_use.json"))
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

// BenchmarkStreamWriter encodes the golden stream from canonical fields
// (no Raw), the translation path; one op is the whole stream.
func BenchmarkStreamWriter(b *testing.B) {
	evs, err := readEvents(b, readTestdata(b, "streams", "full.sse"))
	if err != io.EOF {
		b.Fatal(err)
	}
	evs = stripRaw(evs)
	w := NewStreamWriter(sse.NewWriter(io.Discard, nil), StreamOptions{})
	b.ReportAllocs()
	for b.Loop() {
		for _, ev := range evs {
			if err := w.Write(ev); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(len(evs)), "events/op")
}

// BenchmarkStreamReader decodes the golden stream; one op is the whole stream.
func BenchmarkStreamReader(b *testing.B) {
	in := readTestdata(b, "streams", "full.sse")
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewStreamReader(&byteReader{b: in})
		for {
			if _, err := r.Next(); err != nil {
				if err != io.EOF {
					b.Fatal(err)
				}
				break
			}
		}
	}
}

// byteReader is a bytes.Reader without WriterTo, like a network body.
type byteReader struct{ b []byte }

func (r *byteReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

// BenchmarkParseRequestLongPrompt is a 32 KiB prompt in one text block:
// the shape of most real requests' bytes.
func BenchmarkParseRequestLongPrompt(b *testing.B) {
	text := strings.Repeat("The quarterly report shows revenue of $152.37M, up 12 % year on year; margins held. ", 400)
	in := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"system":"You are a careful analyst.","messages":[{"role":"user","content":[{"type":"text","text":` + strconv.Quote(text) + `}]}]}`)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseRequest(in); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBrokenText is the UTF-8 and surrogate check ParseRequest runs on
// every body, alone, on 32 KiB prompts: English (ASCII, the fast path of
// utf8.Valid), Chinese (three bytes a rune), escape-heavy code (a backslash
// every few bytes) and Korean as Python's json.dumps sends it by default
// (ensure_ascii: every syllable a \ud… escape, the worst case for the
// surrogate search). Compare with BenchmarkParseRequestLongPrompt.
func BenchmarkBrokenText(b *testing.B) {
	for _, tc := range []struct{ name, quoted string }{
		{"english", strconv.Quote(strings.Repeat("The quarterly report shows revenue of $152.37M, up 12 % year on year; margins held. ", 400))},
		{"chinese", strconv.Quote(strings.Repeat("季度报告显示收入同比增长百分之十二，利润率保持稳定。", 440))},
		{"escapes", strconv.Quote(strings.Repeat("func f() {\n\tif x {\n\t\treturn \"a\\\\b\"\n\t}\n}\n", 800))},
		{"korean_escaped", `"` + strings.Repeat(`\ud55c\uad6d\uc5b4 \ubcf4\uace0\uc11c. `, 800) + `"`},
	} {
		in := []byte(`{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":[{"role":"user","content":` + tc.quoted + `}]}`)
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				if msg := brokenText(in); msg != "" {
					b.Fatal(msg)
				}
			}
		})
	}
}

// BenchmarkParseCall is the parsing one plain call costs Keel: the client's
// request (BenchmarkEmbedded's and keel bench's body), read as the server
// reads it (ParseRequestOwned, through the codec), and the upstream's
// answer (the zero-latency simulator's, as keel sim sends it) as the
// provider reads it (ParseResponseOwned).
func BenchmarkParseCall(b *testing.B) {
	req := []byte(`{"model":"sim-sonnet","max_tokens":16,"messages":[{"role":"user","content":"Hello there"}]}`)
	resp := []byte(`{"id":"msg_sim_d81403a77fbbe11b","type":"message","role":"assistant","model":"sim-sonnet","content":[{"type":"text","text":"Does circuit compass anchor some span. Queue over moves partial during can guess both follow orchard"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":16,"cache_creation_input_tokens":0,"cache_read_input_tokens":0}}`)
	b.Run("request", func(b *testing.B) {
		b.SetBytes(int64(len(req)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseRequestOwned(req); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("response", func(b *testing.B) {
		b.SetBytes(int64(len(resp)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseResponseOwned(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
}
