package engine

import (
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// No-config mode with only an Anthropic key: an OpenAI-format call for
// gpt-4o is not translated to Anthropic (which has no gpt-4o); it is a 404
// naming the missing key, and the upstream receives nothing. A call of the
// provider's own format is served by it.
func TestPassthroughNeedsAProviderOfTheClientsFormat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &scripted{id: "up", format: llm.FormatAnthropic, script: always(anthropicJSON("hi"))}
		h := newHarness(t, up)
		pass := h.endpoints("", "up")[0]
		pass.ID, pass.Model, pass.UpstreamModel = "", "", ""
		e := h.engine(Options{Passthrough: []*provider.Endpoint{pass}})
		r := call(t, e, ask(llm.FormatOpenAI, "gpt-4o", false))
		if r.err == nil || r.err.Status != http.StatusNotFound || r.err.Type != llm.ErrNotFound || !strings.Contains(r.err.Message, "OPENAI_API_KEY") {
			t.Fatalf("openai call with only an anthropic provider: err %+v, want 404 not_found_error naming OPENAI_API_KEY", r.err)
		}
		if n := up.count(); n != 0 {
			t.Errorf("the anthropic upstream received %d calls for an openai-format gpt-4o call, want 0", n)
		}
		if r := call(t, e, ask(llm.FormatAnthropic, "claude-x", false)); r.err != nil {
			t.Fatalf("anthropic call: %+v", r.err)
		}
	})
}

// No-config mode with an OpenAI key: a Responses API call goes to the
// same provider's Responses API (OpenAI serves both), not translated to
// Chat Completions; a Chat call still goes to Chat Completions.
func TestPassthroughResponsesToTheOpenAIProvider(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		up := &scripted{id: "up", format: llm.FormatOpenAI, script: func(n int, body map[string]any) reply {
			if body["input"] != nil {
				return reply{body: `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-5","output":[` +
					`{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"hi","annotations":[]}]}],` +
					`"usage":{"input_tokens":3,"output_tokens":1,"total_tokens":4}}`}
			}
			return openaiJSON("hi")
		}}
		h := newHarness(t, up)
		pass := h.endpoints("", "up")[0]
		pass.ID, pass.Model, pass.UpstreamModel = "", "", ""
		e := h.engine(Options{Passthrough: []*provider.Endpoint{pass}})
		r := call(t, e, ask(llm.FormatResponses, "gpt-5", false))
		if r.err != nil || r.text != "hi" {
			t.Fatalf("responses call: %q %+v", r.text, r.err)
		}
		if b := up.lastBody(); b["input"] == nil || b["messages"] != nil {
			t.Errorf("the provider got %v, want a Responses API body", b)
		}
		if r := call(t, e, ask(llm.FormatOpenAI, "gpt-5", false)); r.err != nil || up.lastBody()["messages"] == nil {
			t.Fatalf("chat call: %+v, body %v", r.err, up.lastBody())
		}
	})
}
