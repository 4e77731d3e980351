package responses

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func seedDir(f *testing.F, dir, ext string) {
	paths, _ := filepath.Glob(filepath.Join("testdata", dir, "*"+ext))
	if len(paths) == 0 {
		f.Fatalf("no seeds in %s", dir)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzParseRequest: no input makes ParseRequest panic; what it accepts
// encodes to a body it accepts again, to the same canonical request; and
// ParseRequestOwned reads it alike.
func FuzzParseRequest(f *testing.F) {
	seedDir(f, "request", ".json")
	for _, s := range []string{`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"[1]"}]}`,
		`{"model":"m","input":[{"type":"reasoning","encrypted_content":"keel.anthropic.thinking.sig","summary":[]}]}`,
		`{"model":"m","input":"x","text":{"format":{"type":"grammar"}}}`, `{"model":"m","input":[{"type":"message"}]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ownedMatches(t, body)
		r, err := ParseRequest(body)
		if err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 {
				t.Fatalf("error %v is not a 400", err)
			}
			return
		}
		enc, err := EncodeRequest(r)
		if err != nil {
			return // a number JSON allows and the encoder refuses (NaN cannot come from JSON; kept for safety)
		}
		if _, err := ParseRequest(enc); err != nil {
			t.Fatalf("re-encoded request rejected: %v\n%s", err, enc)
		}
	})
}

// FuzzParseResponse: no answer makes ParseResponse panic; what it
// accepts encodes to an answer it accepts again; ParseResponseOwned reads
// every input alike.
func FuzzParseResponse(f *testing.F) {
	seedDir(f, "response", ".json")
	f.Fuzz(func(t *testing.T, body []byte) {
		ownedAnswerMatches(t, body)
		r, err := ParseResponse(body)
		if err != nil {
			return
		}
		r.Touch()
		enc, err := EncodeResponse(r)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ParseResponse(enc); err != nil {
			t.Fatalf("re-encoded answer rejected: %v\n%s", err, enc)
		}
	})
}

// FuzzStreamReader: no stream makes the reader panic or loop; what it
// reads the writer writes, from the events' bytes or their fields.
func FuzzStreamReader(f *testing.F) {
	seedDir(f, "stream", ".sse")
	f.Fuzz(func(t *testing.T, in []byte) {
		rd := NewStreamReader(bytes.NewReader(in))
		var evs []*llm.Event
		for i := 0; i < 1<<12; i++ {
			ev, err := rd.Next()
			if err == io.EOF || err != nil {
				break
			}
			evs = append(evs, ev)
		}
		var buf bytes.Buffer
		_ = writeAllLenient(&buf, evs)
		_ = writeAllLenient(&buf, detached(evs))
	})
}
