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

// withMaxMessages returns cfg with sim-sonnet taking up to n messages on
// either wire, as a server without OpenAI's 2,048 cap does.
func withMaxMessages(cfg Config, n int) Config {
	for i := range cfg.Models {
		if cfg.Models[i].Name == "sim-sonnet" {
			cfg.Models[i].MaxMessages = n
		}
	}
	return cfg
}

// A request of as many tiny messages as the wire allows (100,000 over the
// Anthropic format, 2,048 over the OpenAI format, 100,000 there too for a
// model whose MaxMessages says so) is answered with the answer Answer
// computes for it.
func TestSimManyMessagesAnswered(t *testing.T) {
	cases := []struct {
		name   string
		format Format
		max    int // the model's MaxMessages
		n      int
	}{
		{"anthropic 100k", FormatAnthropic, 0, 100_000},
		{"openai 2048", FormatOpenAI, 0, 2048},
		{"openai 100k without the cap", FormatOpenAI, 100_000, 100_000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := withMaxMessages(ZeroLatency(), tc.max)
			f, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			want := Answer(cfg, manyMessages("sim-sonnet", tc.n)).Text()
			status, text, ae := postText(t, memHarness(f), tc.format, manyMessagesBody(tc.format, "sim-sonnet", tc.n))
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
