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
