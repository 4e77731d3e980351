package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// seedFiles adds every file of testdata/dir with the extension to f's corpus.
func seedFiles(f *testing.F, dir, ext string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if len(paths) == 0 {
		f.Fatalf("no seeds in testdata/%s", dir)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseRequest checks ParseRequest never panics, rejects only with a 400
// *llm.APIError, and that whatever it accepts has max_tokens within bounds,
// encodes to text with no invalid UTF-8 or unpaired surrogate, and survives
// EncodeRequest and a second parse unchanged; ParseRequestOwned reads it
// alike.
func FuzzParseRequest(f *testing.F) {
	seedFiles(f, "requests", ".json")
	for _, s := range []string{
		``, `{`, `[]`, `null`, `{"model":"m"}`, `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"a","data":"b"}}]}]}`,
		`{"model":"m","max_tokens":1e3,"messages":[{"role":"user","content":"\ud800 \u2028 \u0000"}],"temperature":-0,"top_k":2.0}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]}],"tools":[],"stop_sequences":[],"system":[],"metadata":{"user_id":""}}`,
		`{"mod\u0065l":"m","max_tokens":1,"model":"n","messages":[{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t","content":[]}]}]}`,
		`{"model":"m","max_tokens":2147483647,"messages":[{"role":"user","content":"\ud83d\ude00 \\ud800 \ud55c"}],"x":"\uDBFF\uDFFF"}`,
		`{"model":"m","max_tokens":2147483648,"messages":[{"role":"user","content":"x"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"\ude00"}]}`,
		"{\"model\":\"m\",\"max_tokens\":1,\"messages\":[{\"role\":\"user\",\"content\":\"\xed\xa0\x80 \xff\"}]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ownedMatches(t, body)
		r1, err := ParseRequest(body)
		if err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != llm.ErrInvalidRequest || ae.MeshCode != llm.MeshBadRequest || ae.Message == "" {
				t.Fatalf("error %#v is not a 400 APIError", err)
			}
			return
		}
		if r1.MaxTokens < 0 || r1.MaxTokens > MaxTokensLimit {
			t.Fatalf("accepted max_tokens %d", r1.MaxTokens)
		}
		out, err := EncodeRequest(r1)
		if err != nil {
			t.Fatalf("EncodeRequest of a parsed request: %v", err)
		}
		if msg := brokenText(out); msg != "" {
			t.Fatalf("EncodeRequest wrote broken text (%s): %q", msg, out)
		}
		if !json.Valid(out) {
			t.Fatalf("EncodeRequest wrote invalid JSON: %s", out)
		}
		r2, err := ParseRequest(out)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", out, err)
		}
		want := *r1
		want.MeshBehavior = nil
		mustEqual(t, "round trip", r2, &want)
	})
}

// FuzzParseResponse checks ParseResponse never panics, refuses only with a
// 502 *llm.APIError (MESH_UPSTREAM_PROTOCOL), and that ParseResponseOwned
// reads every input alike.
func FuzzParseResponse(f *testing.F) {
	seedFiles(f, "responses", ".json")
	for _, s := range []string{``, `{`, `[]`, `null`, `{"type":"message"}`, ownedAnswer,
		`{"type":"message","role":"user"}`, `{"content":[{"type":"x","y":1}],"usage":{"z":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ownedAnswerMatches(t, body)
		if _, err := ParseResponse(body); err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 502 || ae.MeshCode != llm.MeshUpstreamProtocolFailed || ae.Message == "" {
				t.Fatalf("error %#v is not a 502 APIError", err)
			}
		}
	})
}

// FuzzStreamReader checks StreamReader never panics or loops, and that a
// stream it reads to a clean end survives StreamWriter (from the canonical
// fields) and a second read unchanged.
func FuzzStreamReader(f *testing.F) {
	seedFiles(f, "streams", ".sse")
	for _, s := range []string{
		"", "data: x\n\n", "event: error\ndata: x\n\n", "event: ping\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"a\"}]}}\n\nevent: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"x\"},\"usage\":{\"output_tokens_details\":{\"thinking_tokens\":1,\"z\":2}}}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		evs, err := readEvents(t, in)
		if err != io.EOF {
			var ae *llm.APIError
			if err == nil || (err != ErrStreamCut && !errors.As(err, &ae)) {
				t.Fatalf("unexpected final error %v", err)
			}
			return
		}
		for _, ev := range evs {
			if ev.Raw == nil || ev.RawFormat != llm.FormatAnthropic {
				t.Fatalf("%v event without Raw", ev.Type)
			}
		}
		out := writeEvents(t, stripRaw(evs))
		again, err := readEvents(t, out)
		if err != io.EOF {
			t.Fatalf("re-reading the writer's output: %v\n%s", err, out)
		}
		mustEqual(t, "round trip", stripRaw(again), stripRaw(evs))
	})
}
