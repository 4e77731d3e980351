package anthropic

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// countCases are token-count bodies: what the Anthropic SDKs'
// messages.countTokens sends (no max_tokens) and what ParseCountTokens
// must refuse.
var countCases = []struct {
	name, body string
	err        string // a substring of the error; "" when accepted
}{
	{name: "sdk shape", body: `{"model":"m","messages":[{"role":"user","content":"Hello there"}],"system":"Be brief."}`},
	{name: "tools", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"name":"t","description":"d","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`},
	{name: "thinking kept as extra", body: `{"model":"m","messages":[{"role":"user","content":"x"}],"thinking":{"type":"enabled","budget_tokens":1024}}`},
	{name: "max_tokens accepted", body: `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`},
	{name: "no model", body: `{"messages":[{"role":"user","content":"x"}]}`, err: "model: field required"},
	{name: "no messages", body: `{"model":"m"}`, err: "messages: field required"},
	{name: "empty messages", body: `{"model":"m","messages":[]}`, err: "at least one message"},
	{name: "not json", body: `{"model":`, err: "invalid JSON"},
}

func TestParseCountTokens(t *testing.T) {
	for _, tc := range countCases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseCountTokens([]byte(tc.body))
			if tc.err != "" {
				var ae *llm.APIError
				if !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, tc.err) {
					t.Fatalf("err = %v, want a 400 containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Model != "m" || len(r.Messages) != 1 || r.Format != llm.FormatAnthropic {
				t.Errorf("parsed %+v", r)
			}
		})
	}
}

// FuzzParseCountTokens checks ParseCountTokens never panics, refuses only
// with a 400 *llm.APIError, and reads any body ParseRequest accepts
// exactly as ParseRequest does.
func FuzzParseCountTokens(f *testing.F) {
	for _, tc := range countCases {
		f.Add([]byte(tc.body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseCountTokens(body)
		if err != nil {
			var ae *llm.APIError
			if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != llm.ErrInvalidRequest || ae.Message == "" {
				t.Fatalf("error %#v is not a 400 APIError", err)
			}
		}
		full, ferr := ParseRequest(body)
		if ferr != nil {
			return
		}
		if err != nil {
			t.Fatalf("ParseRequest accepts what ParseCountTokens refuses (%v)", err)
		}
		if !reflect.DeepEqual(r, full) {
			t.Fatalf("ParseCountTokens = %+v, ParseRequest = %+v", r, full)
		}
	})
}
