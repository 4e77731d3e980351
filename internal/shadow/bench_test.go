package shadow

import "testing"

// BenchmarkCompare: one comparison of two small JSON answers with a
// decision rule, as a shadow worker runs it per shadowed call.
func BenchmarkCompare(b *testing.B) {
	r, _ := ParseRule("confidence_score >= 0.8 && risk_level != \"low\"")
	p := `{"risk_level":"high","confidence_score":0.81,"mitigation_steps":["isolate the host","rotate its keys","review access logs"]}`
	s := `{"risk_level":"high","confidence_score":0.79,"mitigation_steps":["isolate the host","rotate its keys","review the access logs"]}`
	b.ReportAllocs()
	for b.Loop() {
		Compare(p, s, r)
	}
}

// BenchmarkSimilarity: text similarity of two 200-word answers.
func BenchmarkSimilarity(b *testing.B) {
	var x, y []byte
	for i := range 200 {
		w := []string{"the", "model", "answers", "with", "a", "score"}[i%6]
		x = append(x, w+" "...)
		if i%17 == 0 {
			w = "changed"
		}
		y = append(y, w+" "...)
	}
	b.ReportAllocs()
	for b.Loop() {
		Similarity(string(x), string(y))
	}
}
