package openai

import (
	"bytes"
	"io"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

// FuzzParseRequest checks that ParseRequest never panics and that whatever it
// accepts has max tokens within bounds, encodes to text with no invalid UTF-8
// or unpaired surrogate, and survives EncodeRequest and a second
// ParseRequest unchanged.
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
		w := NewStreamWriter(sse.NewWriter(io.Discard, nil), StreamOptions{IncludeUsage: true})
		for n := 0; ; n++ {
			if n > 4*len(in)+16 {
				t.Fatalf("more than %d events from %d bytes", n, len(in))
			}
			ev, err := r.Next()
			if err != nil {
				return
			}
			_ = w.Write(ev)
		}
	})
}
