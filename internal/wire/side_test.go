package wire

import (
	"strings"
	"testing"
)

// TestRewriteCountTokens: the changed system and messages replace the
// sent ones; every other member stays as the client sent it.
func TestRewriteCountTokens(t *testing.T) {
	body := []byte(`{"model":"m","system":"Reply to a@b.c","messages":[{"role":"user","content":"hi a@b.c"}],"thinking":{"type":"enabled","budget_tokens":1024}}`)
	r, err := ParseCountTokens(body)
	if err != nil {
		t.Fatal(err)
	}
	r.System[0].Text = "Reply to [EMAIL]"
	r.Messages[0].Content[0].Text = "hi [EMAIL]"
	out, err := RewriteCountTokens(body, r)
	if err != nil {
		t.Fatal(err)
	}
	got := string(out)
	if strings.Contains(got, "a@b.c") || !strings.Contains(got, `"thinking":{"type":"enabled","budget_tokens":1024}`) || strings.Contains(got, "max_tokens") {
		t.Errorf("rewritten %s", got)
	}
	back, err := ParseCountTokens(out)
	if err != nil || back.SystemText() != "Reply to [EMAIL]" || back.Messages[0].Text() != "hi [EMAIL]" || back.Model != "m" {
		t.Errorf("re-parsed %+v (%v)", back, err)
	}
}
