package sim

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

// manyMessages is a request of n tiny user messages, the shape of a client
// that sends a document line by line: one turn of n merged messages.
func manyMessages(model string, n int) *llm.Request {
	r := &llm.Request{Model: model, MaxTokens: 64, HasMaxTokens: true, Messages: make([]llm.Message, n)}
	for i := range r.Messages {
		r.Messages[i] = llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "m" + strconv.Itoa(i)}}}
	}
	return r
}

// BenchmarkAnswerManyMessages measures Answer on one request of many tiny
// messages: the per-request passes over messages must be linear.
func BenchmarkAnswerManyMessages(b *testing.B) {
	cfg := DefaultConfig()
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("%dk", n/1000), func(b *testing.B) {
			req := manyMessages("sim-sonnet", n)
			b.ReportAllocs()
			for b.Loop() {
				Answer(cfg, req)
			}
		})
	}
}

// manyMessagesBody is a wire request body of n tiny user messages.
func manyMessagesBody(format Format, model string, n int) string {
	var sb strings.Builder
	sb.WriteString(`{"model":"` + model + `","max_tokens":64,"messages":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`{"role":"user","content":"m` + strconv.Itoa(i) + `"}`)
	}
	sb.WriteString("]}")
	return sb.String()
}

// A request of 100,000 tiny messages is answered, over either wire, with
// the answer Answer computes for it.
func TestSimManyMessagesAnswered(t *testing.T) {
	cfg := ZeroLatency()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	const n = 100_000
	want := Answer(cfg, manyMessages("sim-sonnet", n)).Text()
	for _, format := range formats {
		t.Run(format.String(), func(t *testing.T) {
			status, text, ae := postText(t, h, format, manyMessagesBody(format, "sim-sonnet", n))
			if status != http.StatusOK {
				t.Fatalf("status %d: %v", status, ae)
			}
			if text != want {
				t.Errorf("answer %q, want %q", text, want)
			}
		})
	}
}

// Consecutive messages of one role merge into one turn, their non-empty
// texts joined by newlines, system and developer messages skipped; the
// turn ends in a tool result when its last message holds one.
func TestMergeTurns(t *testing.T) {
	txt := func(role llm.Role, s string) llm.Message {
		return llm.Message{Role: role, Content: []llm.Block{{Type: llm.BlockText, Text: s}}}
	}
	result := llm.Message{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockToolResult, Content: []llm.Block{{Type: llm.BlockText, Text: "42"}}}}}
	cases := []struct {
		name string
		ms   []llm.Message
		want []turn
	}{
		{"empty", nil, nil},
		{"one", []llm.Message{txt(llm.RoleUser, "a")}, []turn{{llm.RoleUser, "a", false}}},
		{"merged", []llm.Message{txt(llm.RoleUser, "a"), txt(llm.RoleUser, ""), txt(llm.RoleUser, "b")}, []turn{{llm.RoleUser, "a\nb", false}}},
		{"empty first", []llm.Message{txt(llm.RoleUser, ""), txt(llm.RoleUser, "b")}, []turn{{llm.RoleUser, "b", false}}},
		{"system between", []llm.Message{txt(llm.RoleUser, "a"), txt(llm.RoleSystem, "s"), txt(llm.RoleDeveloper, "d"), txt(llm.RoleUser, "b")}, []turn{{llm.RoleUser, "a\nb", false}}},
		{"alternating", []llm.Message{txt(llm.RoleUser, "a"), txt(llm.RoleAssistant, "b"), txt(llm.RoleUser, "c"), txt(llm.RoleUser, "d")},
			[]turn{{llm.RoleUser, "a", false}, {llm.RoleAssistant, "b", false}, {llm.RoleUser, "c\nd", false}}},
		{"ends in tool result", []llm.Message{txt(llm.RoleUser, "a"), result}, []turn{{llm.RoleUser, "a\n42", true}}},
		{"tool result then text", []llm.Message{result, txt(llm.RoleUser, "a")}, []turn{{llm.RoleUser, "42\na", false}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := mergeTurns(context.Background(), nil, tc.ms)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("mergeTurns (-got +want):\n-%+v\n+%+v", got, tc.want)
			}
		})
	}
}
