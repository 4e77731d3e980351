package classify

import (
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		name, text, want string
	}{
		{"finance en", "Compute free cash flow from the cash flow statement: operating cash flow 12M, capex 4M.", Finance},
		{"finance zh", "请根据利润表计算净利润率：营业收入一亿元，净利润八百万元。", Finance},
		{"medical en", "What dose of amoxicillin is appropriate for a 25 kg child with strep throat?", Medical},
		{"medical zh", "高血压病人服用氨氯地平后脚踝水肿，需要换药吗？", Medical},
		{"legal en", "Is the indemnification clause in this contract mutual, and does it survive termination?", Legal},
		{"legal zh", "劳动合同没有约定试用期工资，公司可以按最低工资发放吗？", Legal},
		{"code stack trace", "panic: runtime error: invalid memory address or nil pointer dereference\n[signal SIGSEGV]\n\ngoroutine 7 [running]:\nmain.(*Cache).Get(0x0)\n\t/src/cache.go:31 +0x1c", Code},
		{"code zh", "Go程序里channel关闭后再发送数据会panic吗？怎么避免？", Code},
		{"general en", "Any tips for a picnic in the park with my kids this Sunday?", General},
		{"general zh", "周末带孩子去公园野餐要准备什么？", General},
		{"empty", "", ""},
	}
	c := Default()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig := c.Classify(tt.text)
			if tt.want != "" && sig.Domain != tt.want {
				t.Errorf("Classify domain (-got +want):\n- %s (%.2f)\n+ %s\nscores %v", sig.Domain, sig.Confidence, tt.want, sig.Scores)
			}
			var sum float64
			for _, p := range sig.Scores {
				sum += p
			}
			if len(sig.Scores) != 5 || math.Abs(sum-1) > 1e-9 {
				t.Errorf("scores %v: want 5 probabilities summing to 1 (sum %v)", sig.Scores, sum)
			}
			if sig.Confidence != sig.Scores[sig.Domain] {
				t.Errorf("confidence %v != score of %s %v", sig.Confidence, sig.Domain, sig.Scores[sig.Domain])
			}
		})
	}
}

func TestMaxBytes(t *testing.T) {
	c := Default()
	head := strings.Repeat("Please review the balance sheet, the income statement and the cash flow statement. ", 60)
	if len(head) < MaxBytes {
		t.Fatalf("head is %d bytes; test needs ≥ %d", len(head), MaxBytes)
	}
	a := c.Classify(head)
	b := c.Classify(head + strings.Repeat("func main() { panic(err) } ", 500))
	if a.Domain != b.Domain || a.Confidence != b.Confidence {
		t.Errorf("text past MaxBytes changed the answer: %v vs %v", a, b)
	}
	// A cut inside a multi-byte rune must not panic or mis-hash.
	c.Classify(strings.Repeat("资", MaxBytes))
}

func TestWithLexicon(t *testing.T) {
	insurance := map[string]float64{"premium": 4, "deductible": 4, "policyholder": 4, "underwriting": 3, "保单": 4, "免赔额": 4}
	c, err := New(WithLexicon("insurance", insurance), WithLexicon(Legal, map[string]float64{"gdpr": 3}))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, text, want string
	}{
		{"new domain en", "The policyholder asks whether the deductible applies before the premium refund.", "insurance"},
		{"new domain zh", "这份保单的免赔额是多少？", "insurance"},
		{"other domains unchanged", "How do I reverse a linked list in Go?", Code},
		{"general stays general", "Suggest a name for my new kitten.", General},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sig := c.Classify(tt.text)
			if sig.Domain != tt.want {
				t.Errorf("domain (-got +want):\n- %s %v\n+ %s", sig.Domain, sig.Scores, tt.want)
			}
		})
	}
	if got := c.Domains(); len(got) != 6 || got[5] != "insurance" {
		t.Errorf("Domains() = %v, want the 5 trained domains then insurance", got)
	}
	// The boost moves probability towards legal.
	text := "We store customer emails in a CRM and GDPR applies to us."
	before, after := Default().Classify(text).Scores[Legal], c.Classify(text).Scores[Legal]
	if after <= before {
		t.Errorf("legal score with a gdpr boost %.3f, want > %.3f without", after, before)
	}
	// Default is never modified by New.
	if len(Default().Domains()) != 5 {
		t.Errorf("Default() gained domains: %v", Default().Domains())
	}
}

func TestWithLexiconErrors(t *testing.T) {
	tests := []struct {
		name   string
		domain string
		terms  map[string]float64
	}{
		{"empty domain", " ", map[string]float64{"x": 1}},
		{"no words", "insurance", map[string]float64{"  ": 1}},
		{"NaN weight", "insurance", map[string]float64{"premium": math.NaN()}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(WithLexicon(tt.domain, tt.terms))
			if !errors.Is(err, ErrInvalidLexicon) {
				t.Errorf("New error = %v, want ErrInvalidLexicon", err)
			}
		})
	}
}

func TestTermFeatures(t *testing.T) {
	tests := []struct {
		name, term string
		want       int
	}{
		{"word", "Premium", 1},
		{"two words", "balance sheet", 1},
		{"three words", "limitation of liability", 2},
		{"cjk pair", "保单", 1},
		{"cjk four", "资产负债", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := len(termFeatures(tt.term)); got != tt.want {
				t.Errorf("len(termFeatures(%q)) (-got +want):\n- %d\n+ %d", tt.term, got, tt.want)
			}
		})
	}
	if termFeatures("Premium")[0] != termFeatures("premium")[0] {
		t.Error("terms are not case-folded")
	}
}

func TestConcurrentClassify(t *testing.T) {
	c := Default()
	want := c.Classify("What is the maximum daily dose of ibuprofen?")
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				if got := c.Classify("What is the maximum daily dose of ibuprofen?"); got.Domain != want.Domain || got.Confidence != want.Confidence {
					t.Errorf("concurrent Classify = %v, want %v", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestModelRoundTrip(t *testing.T) {
	m, err := parseModel(modelBin)
	if err != nil {
		t.Fatal(err)
	}
	again, err := parseModel(encodeModel(m))
	if err != nil {
		t.Fatal(err)
	}
	for i := range m.w {
		if math.Abs(float64(m.w[i]-again.w[i])) > 1e-6 {
			t.Fatalf("weight %d: (-got +want)\n- %v\n+ %v", i, again.w[i], m.w[i])
		}
	}
	if _, err := parseModel(modelBin[:100]); err == nil {
		t.Error("truncated model parsed without error")
	}
}

// benchPrompt is a ~2 KiB prompt, English and Chinese mixed.
var benchPrompt = func() string {
	s := "You are a financial analyst. Review the following balance sheet and income statement and list the three largest risks. " +
		"Total assets 4,210,000; total liabilities 2,930,000; revenue grew 12% while operating cash flow fell. " +
		"请同时用中文总结公司的偿债能力和盈利能力，并说明应收账款周转天数上升的原因。"
	for len(s) < 2048 {
		s += " The auditor noted inventory write-downs and a covenant waiver from the bank; 管理层预计明年毛利率将改善。"
	}
	return s[:2048]
}()

func BenchmarkClassify(b *testing.B) {
	c := Default()
	b.SetBytes(int64(len(benchPrompt)))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		c.Classify(benchPrompt)
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

func TestDomainMatchesClassify(t *testing.T) {
	c := Default()
	for _, text := range []string{"", "the quarterly revenue and EBITDA margin", "fix this goroutine leak in my Go code", "患者的血压和心率", "hello"} {
		if got, want := c.Domain(text), c.Classify(text).Domain; got != want {
			t.Errorf("Domain(%q) = %q, Classify says %q", text, got, want)
		}
	}
}

// Classify returns text's domain signature. It reads at most MaxBytes of
// text. An empty or feature-less text is General with the model's prior.
func (c *Classifier) Classify(text string) Signature {
	var logits [maxDomains]float64
	lg, best := c.logits(text, logits[:0])
	scores := make(map[string]float64, len(lg))
	for i, p := range lg {
		scores[c.domains[i]] = p
	}
	return Signature{Domain: c.domains[best], Confidence: lg[best], Scores: scores}
}

// Domains returns the domain names the classifier can answer, in a fixed
// order. The slice is a copy.
func (c *Classifier) Domains() []string { return append([]string(nil), c.domains...) }
