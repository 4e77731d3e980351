package relay

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// TestContinueRequest: each continuation kind gets the request its
// provider continues from (PROTOCOLS.md §0.11: Anthropic's assistant prefill,
// DeepSeek's and Mistral's prefix: true, vLLM's continue_final_message,
// and OpenAI, which cannot continue, the client's request again to be
// spliced); a prefill has no trailing whitespace (Anthropic rejects it),
// joins the client's own prefill, and asks for the tokens left; the
// client's request is never modified.
func TestContinueRequest(t *testing.T) {
	user := llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Tell a story."}}}
	own := llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: "Once"}}}
	for _, tc := range []struct {
		name       string
		kind       provider.Continuation
		msgs       []llm.Message
		delivered  string
		wantSplice bool
		wantLast   string // the last message's text ("" when it is the user's)
		wantPrefix bool
		wantFinal  bool
		wantMax    int
	}{
		{"anthropic prefill", provider.ContinuePrefill, []llm.Message{user}, "Umber fable \n", false, "Umber fable", false, false, 37},
		{"onto the client's own prefill", provider.ContinuePrefill, []llm.Message{user, own}, " upon a time ", false, "Once upon a time", false, false, 37},
		{"prefix", provider.ContinuePrefix, []llm.Message{user}, "Umber fable", false, "Umber fable", true, false, 37},
		{"continue_final_message", provider.ContinueFinalMessage, []llm.Message{user}, "Umber fable", false, "Umber fable", false, true, 37},
		{"none: asked again, spliced", provider.ContinueNone, []llm.Message{user}, "Umber fable", true, "", false, false, 40},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &llm.Request{Model: "m", Messages: tc.msgs, MaxTokens: 40, HasMaxTokens: true}
			n := len(tc.msgs)
			r, splice := ContinueRequest(req, tc.kind, tc.delivered, 3)
			if splice != tc.wantSplice || splice && r != req {
				t.Fatalf("splice %v (want %v), same request %v", splice, tc.wantSplice, r == req)
			}
			last := r.Messages[len(r.Messages)-1]
			if tc.wantLast == "" {
				if last.Role != llm.RoleUser {
					t.Fatalf("last message %+v, want the client's", last)
				}
			} else if last.Role != llm.RoleAssistant || last.Text() != tc.wantLast || last.Prefix != tc.wantPrefix {
				t.Fatalf("last message %q (%s, prefix %v), want the assistant's %q (prefix %v)", last.Text(), last.Role, last.Prefix, tc.wantLast, tc.wantPrefix)
			}
			if r.ContinueFinalMessage != tc.wantFinal || r.MaxTokens != tc.wantMax {
				t.Errorf("continue_final_message %v, max_tokens %d; want %v, %d", r.ContinueFinalMessage, r.MaxTokens, tc.wantFinal, tc.wantMax)
			}
			if len(req.Messages) != n || req.MaxTokens != 40 || req.ContinueFinalMessage || req.Messages[n-1].Prefix || req.Messages[n-1].Text() != tc.msgs[n-1].Text() {
				t.Error("the client's request was modified")
			}
		})
	}
	req := &llm.Request{Messages: []llm.Message{user}, MaxTokens: 4, HasMaxTokens: true}
	if r, _ := ContinueRequest(req, provider.ContinuePrefill, "a b c d e", 9); r.MaxTokens != 1 {
		t.Errorf("max_tokens %d with more delivered than asked, want at least 1", r.MaxTokens)
	}
}
