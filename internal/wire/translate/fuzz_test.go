package translate

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// FuzzPrepare parses arbitrary bodies in either format and prepares them for
// the other under both policies: Prepare must not panic, must not modify
// its input, and its result must encode.
func FuzzPrepare(f *testing.F) {
	for _, c := range requestCases {
		f.Add(c.from == llm.FormatOpenAI, []byte(c.body))
	}
	f.Fuzz(func(t *testing.T, fromOpenAI bool, body []byte) {
		var req *llm.Request
		var err error
		target := llm.FormatOpenAI
		if fromOpenAI {
			req, err = openai.ParseRequest(body)
			target = llm.FormatAnthropic
		} else {
			req, err = anthropic.ParseRequest(body)
		}
		if err != nil {
			return
		}
		before := dump(req)
		for _, p := range []Policy{{}, {Unsupported: Drop}, {Unsupported: Reject}} {
			out, _, err := Prepare(req, target, p)
			if after := dump(req); after != before {
				t.Fatalf("Prepare modified its input (-got +want):\n%s", diffLines(after, before))
			}
			if err != nil {
				continue
			}
			if target == llm.FormatOpenAI {
				_, err = openai.EncodeUpstreamRequest(out)
			} else {
				_, err = anthropic.EncodeRequest(out)
			}
			if err != nil {
				t.Fatalf("encoding the prepared request: %v", err)
			}
		}
	})
}
