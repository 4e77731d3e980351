package translate

import (
	"testing"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire/anthropic"
	"github.com/keelmesh/keel/internal/wire/openai"
)

// BenchmarkPrepare measures Prepare alone on a multi-turn tool conversation,
// in both directions (issue 7: translation adds ≤ 20 µs p50).
func BenchmarkPrepare(b *testing.B) {
	for _, c := range requestCases {
		if c.name != "a2o_tool_history" && c.name != "o2a_tool_history" {
			continue
		}
		var req *llm.Request
		var err error
		target := llm.FormatOpenAI
		if c.from == llm.FormatAnthropic {
			req, err = anthropic.ParseRequest([]byte(c.body))
		} else {
			req, err = openai.ParseRequest([]byte(c.body))
			target = llm.FormatAnthropic
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Prepare(req, target, Policy{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
