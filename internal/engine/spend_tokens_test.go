package engine

import (
	"math"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// Issue 28, item 5: a call's cost counts every token at its price — cache
// reads, 5-minute and 1-hour cache writes, and reasoning inside output —
// from the usage the upstream reported (Anthropic's cache_creation split).
func TestCallCostCountsEveryTokenKind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		body := reply{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"ok"}],` +
			`"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":2000,"cache_creation_input_tokens":30000,` +
			`"cache_read_input_tokens":100000,"cache_creation":{"ephemeral_5m_input_tokens":10000,"ephemeral_1h_input_tokens":20000},` +
			`"output_tokens":4000,"output_tokens_details":{"thinking_tokens":3000}}}`}
		a := &scripted{id: "a", format: llm.FormatAnthropic, script: always(body)}
		h := newHarness(t, a)
		eps := h.endpoints("m", "a")
		eps[0].Price, _ = pricing.New(nil).Lookup("claude-sonnet-4-5") // $3 in, $15 out, $0.30 read, $3.75 5m write, $6 1h write
		e := h.engine(Options{}, eps...)
		r := call(t, e, ask(llm.FormatAnthropic, "m", false))
		if r.err != nil {
			t.Fatal(r.err)
		}
		// 2,000×3 + 100,000×0.3 + 10,000×3.75 + 20,000×6 + 4,000×15 (3,000 of them thinking) per million
		const want = 0.2535
		if math.Abs(r.rec.Cost-want) > 1e-9 || len(r.rec.Attempts) != 1 || math.Abs(r.rec.Attempts[0].Cost-want) > 1e-9 {
			t.Errorf("call cost $%v (attempts %+v), want $%v", r.rec.Cost, r.rec.Attempts, want)
		}
		if u := r.rec.Usage; u.CacheWrite1hTokens != 20000 || u.CacheWrite5mTokens != 10000 || u.ReasoningTokens != 3000 {
			t.Errorf("usage %+v: the TTL split or the reasoning count was lost", u)
		}
	})
}
