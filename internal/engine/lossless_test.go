package engine

import (
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
)

// Routing prefers the endpoints that can carry the whole request (issue
// 25): an Anthropic client's document goes to the model's Anthropic-format
// endpoint, not to its OpenAI-format one, whatever their order; when only
// the OpenAI-format endpoint is left, the call is a 400 naming the block,
// and nothing is sent to it.
func TestRoutingPrefersEndpointsThatCarryTheRequest(t *testing.T) {
	const body = `{"model":"m","max_tokens":64,"messages":[{"role":"user","content":[` +
		`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"JVBERi0xLjQK"}},` +
		`{"type":"text","text":"Summarise it."}]}]}`
	for _, anthropicUp := range []bool{true, false} {
		name := "anthropic endpoint up"
		if !anthropicUp {
			name = "anthropic endpoint failing"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				o := &scripted{id: "o", format: llm.FormatOpenAI, script: always(openaiJSON("from openai"))}
				reply := anthropicJSON("read the document")
				if !anthropicUp {
					reply = anthropicError(500, "api_error", "")
				}
				a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(reply)}
				h := newHarness(t, o, a)
				e := h.engine(Options{},
					append(h.endpoints("m", "o"), h.endpoints("m", "a")...)...)
				req, err := anthropic.ParseRequest([]byte(body))
				if err != nil {
					t.Fatal(err)
				}
				r := call(t, e, req)
				if o.count() != 0 {
					t.Errorf("the OpenAI-format endpoint got %d calls; a document cannot go there", o.count())
				}
				if anthropicUp {
					if r.err != nil || r.text != "read the document" {
						t.Fatalf("error %v text %q, want the Anthropic endpoint's answer", r.err, r.text)
					}
					return
				}
				if r.err == nil || r.err.Status != 400 || !strings.Contains(r.err.Message, "document_block") {
					t.Fatalf("error %v, want a 400 naming document_block", r.err)
				}
			})
		})
	}
}
