package openai

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// FuzzParseRequest checks that ParseRequest never panics and that whatever it
// accepts has max tokens within bounds, encodes to text with no invalid UTF-8
// or unpaired surrogate, and survives EncodeRequest and a second
// ParseRequest unchanged; ParseRequestOwned reads it alike.
func FuzzParseRequest(f *testing.F) {
	paths, _ := filepath.Glob("testdata/request/*.json")
	for _, p := range paths {
		f.Add(readFile(f, p))
	}
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"tool","tool_call_id":"a","content":[]},{"role":"assistant","content":[]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"\ud800 \u2028 caf\u00e9"}],"stop":[]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"x","function":{"name":"f","arguments":"[1]"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"n":2}`,
		`{"model":`,
		`{"model":"m","messages":[{"role":"user","content":"\ud83d\ude00 \\ud800 \ud55c"}],"max_completion_tokens":2147483647,"x":"\uDBFF\uDFFF"}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_tokens":1e3}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"max_completion_tokens":2147483648}`,
		`{"model":"m","messages":[{"role":"user","content":"\ude00"}]}`,
		"{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80 \xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ownedMatches(t, body)
		r, err := ParseRequest(body)
		if err != nil {
			if _, ok := err.(*llm.APIError); !ok {
				t.Fatalf("error %T is not *llm.APIError", err)
			}
			return
		}
		if r.MaxTokens < 0 || r.MaxTokens > MaxTokensLimit {
			t.Fatalf("accepted max tokens %d", r.MaxTokens)
		}
		enc, err := EncodeRequest(r)
		if err != nil {
			t.Fatalf("EncodeRequest of a parsed request: %v", err)
		}
		if msg := brokenText(enc); msg != "" {
			t.Fatalf("EncodeRequest wrote broken text (%s): %q", msg, enc)
		}
		r2, err := ParseRequest(enc)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", enc, err)
		}
		r2.MeshBehavior = r.MeshBehavior
		if !reflect.DeepEqual(r2, r) {
			t.Fatalf("round trip differs for %s (-got +want):\n%s", body, diff(string(dump(t, r2)), string(dump(t, r))))
		}
	})
}

// FuzzParseError checks that ParseError never panics, always names a type
// and a message, and keeps the status it was given.
func FuzzParseError(f *testing.F) {
	for _, tc := range parseErrorCases {
		f.Add(tc.status, tc.h.Get("X-Amzn-Errortype"), []byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, status int, awsType string, body []byte) {
		e := ParseError(status, http.Header{"X-Amzn-Errortype": {awsType}}, body)
		if e.Status != status || e.Type == "" || e.Message == "" {
			t.Fatalf("ParseError(%d, %q) = %+v", status, body, e)
		}
	})
}

// FuzzStreamReader checks that StreamReader never panics or loops, always
// ends with an error, and that its events can be written back.
func FuzzStreamReader(f *testing.F) {
	paths, _ := filepath.Glob("testdata/stream/*.sse")
	for _, p := range paths {
		f.Add(readFile(f, p))
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"index\":-1,\"function\":{\"arguments\":\"{\"}}]}}]}\n\ndata: [DONE]\n\n"))
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"tool_calls\":[{\"id\":\"a\"},{\"index\":99999999999}]}}]}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := NewStreamReader(bytes.NewReader(in))
		var out bytes.Buffer
		w := NewStreamWriter(sse.NewWriter(&out, nil), StreamOptions{IncludeUsage: true})
		var evs []*llm.Event
		for n := 0; ; n++ {
			if n > 4*len(in)+16 {
				t.Fatalf("more than %d events from %d bytes", n, len(in))
			}
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF || len(evs) == 0 || evs[len(evs)-1].Type == llm.EventError {
					return
				}
				break
			}
			evs = append(evs, ev.Detach())
			if err := w.Write(ev); err != nil {
				return
			}
		}
		// A whole stream passed through (every chunk's group intact) reads
		// back with the same content — blocks, deltas, stops and the stop
		// reason: nothing lost, nothing twice. (The message's start, usage
		// and end may be encoded by the writer, which fills created.)
		again, err := readAll(t, out.Bytes())
		if err != io.EOF {
			t.Fatalf("re-reading the pass-through ended with %v:\n%s", err, out.Bytes())
		}
		if got, want := content(again), content(evs); !reflect.DeepEqual(got, want) {
			t.Fatalf("pass-through changed the content (-got +want):\n%s\nin:\n%s\nout:\n%s", diff(strings.Join(got, "\n"), strings.Join(want, "\n")), in, out.Bytes())
		}
	})
}

// content is what a stream says, block by block, and its stop reason:
// each block's type, id, name and its deltas joined by kind. A tool call
// that got no arguments counts as "{}", which the writer sends for one
// (OpenAI clients expect a JSON object).
func content(evs []*llm.Event) []string {
	type block struct {
		head  string
		parts map[llm.DeltaType]string
	}
	var blocks []*block
	out := []string{}
	for _, ev := range evs {
		switch ev.Type {
		case llm.EventBlockStart:
			b := &block{parts: map[llm.DeltaType]string{}}
			if ev.Block != nil {
				b.head = fmt.Sprintf("%s %q %q", ev.Block.Type, ev.Block.ID, ev.Block.Name)
				if ev.Block.Type == llm.BlockToolUse {
					b.parts[llm.DeltaInputJSON] = ""
				}
			}
			for len(blocks) <= ev.Index {
				blocks = append(blocks, nil)
			}
			blocks[ev.Index] = b
		case llm.EventBlockDelta:
			if ev.Index < len(blocks) && blocks[ev.Index] != nil {
				blocks[ev.Index].parts[ev.DeltaType] += ev.Delta
			}
		case llm.EventMessageDelta:
			out = append(out, "stop "+string(ev.StopReason))
		}
	}
	for _, b := range blocks {
		if b == nil {
			out = append(out, "nil")
			continue
		}
		if v, ok := b.parts[llm.DeltaInputJSON]; ok && v == "" {
			b.parts[llm.DeltaInputJSON] = "{}"
		}
		out = append(out, fmt.Sprintf("%s %q", b.head, b.parts))
	}
	return out
}
