package assemble

import (
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

// A logged body is cut at MaxLoggedBody, and the cut is noted.
func TestLoggedBodyIsBounded(t *testing.T) {
	big := strings.Repeat("x", 3*MaxLoggedBody)
	r := &callrec.Record{
		Call: callrec.Call{Format: llm.FormatOpenAI},
		Result: callrec.Result{Request: &llm.Request{Format: llm.FormatOpenAI, Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: big}}}}},

			Response: &llm.Response{Model: "m", Content: []llm.Block{{Type: llm.BlockText, Text: "short"}}}},
	}
	prompt, answer := recordBodies(r)
	head, note, ok := strings.Cut(prompt, "…[cut: ")
	if !ok || len(head) != MaxLoggedBody || !strings.HasSuffix(note, " more bytes]") {
		t.Errorf("prompt of %d bytes: kept %d, note %q; want %d bytes then the cut noted", len(big), len(head), note, MaxLoggedBody)
	}
	if !strings.Contains(answer, `"short"`) || strings.Contains(answer, "[cut:") {
		t.Errorf("short answer %q was cut or lost", answer)
	}
}
