package pii

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pipeline"
)

// BenchmarkPIIStage is the stage's cost per call with the real detector:
// a 2 KB prompt holding five values, found, redacted with placeholders,
// and the answer's placeholders restored (moved from the engine).
func BenchmarkPIIStage(b *testing.B) {
	d, err := New(Config{})
	if err != nil {
		b.Fatal(err)
	}
	var part *Part
	stage, err := NewStage(Options{Detector: FinderFunc(func(_ context.Context, s string) ([]Match, error) { return d.Find(s), nil }),
		TimeBudget: time.Minute}, // a loaded machine must not turn the benchmark into 503s
		Hooks{Record: func(_ *pipeline.Call, p Part) { part = &p }})
	if err != nil {
		b.Fatal(err)
	}
	filler := strings.Repeat("The quarterly numbers look fine and the team agreed on the plan. ", 24)
	text := filler + "Reach Alice at alice.smith@example.com or +1 415 555 0134; card 4111 1111 1111 1111, IBAN DE89 3704 0044 0532 0130 00, SSN 078-05-1120."
	req := &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: text}}}}}
	h := stage(pipeline.HandlerFunc(func(_ context.Context, c *pipeline.Call) (*pipeline.Answer, error) {
		if c.Request == req {
			b.Fatal("the request went on unredacted")
		}
		return &pipeline.Answer{Response: &llm.Response{Content: []llm.Block{{Type: llm.BlockText, Text: "I will write to [EMAIL_1] and call [PHONE_1]."}}}}, nil
	}))
	b.ReportAllocs()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		ans, err := h.Serve(context.Background(), &pipeline.Call{Request: req})
		if err != nil || len(part.Report.Findings) != 5 {
			b.Fatalf("stage: %v, findings %d", err, len(part.Report.Findings))
		}
		if !strings.Contains(ans.Response.Text(), "alice.smith@example.com") {
			b.Fatalf("restore: %q", ans.Response.Text())
		}
	}
}

// BenchmarkRestorerStream is the streaming restorer's cost per 3-byte delta.
func BenchmarkRestorerStream(b *testing.B) {
	red := NewRedaction()
	red.Placeholder(Email, "alice.smith@example.com")
	red.Placeholder(Phone, "+1 415 555 0134")
	answer := pieces(strings.Repeat("Sure, I wrote to [EMAIL_1] and then called [PHONE_1] twice. ", 8), 3)
	b.ReportAllocs()
	for b.Loop() {
		r := red.NewRestorer(RestoreText)
		for _, d := range answer {
			r.Write(d)
		}
		r.Flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(answer)), "ns/delta")
}

// pieces cuts s into pieces of n bytes (the last shorter).
func pieces(s string, n int) []string {
	var out []string
	for len(s) > n {
		out = append(out, s[:n])
		s = s[n:]
	}
	return append(out, s)
}
