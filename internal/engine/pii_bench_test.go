package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pii"
)

// BenchmarkPIIStage is the preprocess stage's cost per call with the real
// detector: a 2 KB prompt holding five values, found, redacted with
// placeholders, and the answer's placeholders restored.
func BenchmarkPIIStage(b *testing.B) {
	d, err := pii.New(pii.Config{})
	if err != nil {
		b.Fatal(err)
	}
	e := &Engine{}
	e.pii, _ = newPII(PIIOptions{Detector: PIIDetectorFunc(func(_ context.Context, s string) ([]pii.Match, error) { return d.Find(s), nil }),
		TimeBudget: time.Minute}) // a loaded machine must not turn the benchmark into 503s
	filler := strings.Repeat("The quarterly numbers look fine and the team agreed on the plan. ", 24)
	text := filler + "Reach Alice at alice.smith@example.com or +1 415 555 0134; card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, SSN 078-05-1120."
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
	resp := &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "I will write to [EMAIL_1] and call [PHONE_1]."}}}
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		rec := &Record{}
		out, red, ae := e.piiStage(context.Background(), req, Call{}, rec)
		if ae != nil || red == nil || len(rec.PII.Findings) != 5 || out == req {
			b.Fatalf("stage: %v, findings %d", ae, len(rec.PII.Findings))
		}
		if r := restoreResponse(resp, red, false); !strings.Contains(r.Text(), "alice.smith@example.com") {
			b.Fatalf("restore: %q", r.Text())
		}
	}
}

// BenchmarkRestorerStream is the streaming restorer's cost per 3-byte delta.
func BenchmarkRestorerStream(b *testing.B) {
	red := pii.NewRedaction()
	red.Placeholder(pii.Email, "alice.smith@example.com")
	red.Placeholder(pii.Phone, "+1 415 555 0134")
	answer := pieces(strings.Repeat("Sure, I wrote to [EMAIL_1] and then called [PHONE_1] twice. ", 8), 3)
	b.ReportAllocs()
	for b.Loop() {
		r := red.NewRestorer(pii.RestoreText)
		for _, d := range answer {
			r.Write(d)
		}
		r.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(answer)), "ns/delta")
}
