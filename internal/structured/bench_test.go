package structured

import (
	"encoding/json"
	"testing"
)

func BenchmarkCompileCached(b *testing.B) {
	raw := json.RawMessage(riskSchema)
	mustCompile(b, riskSchema)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compile(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	s := mustCompile(b, invoiceSchema)
	doc := []byte(invoiceAnswer)
	b.ReportAllocs()
	for b.Loop() {
		if vs := s.Validate(doc); vs != nil {
			b.Fatal(vs)
		}
	}
}

func BenchmarkRepairValid(b *testing.B) {
	s := mustCompile(b, invoiceSchema)
	b.ReportAllocs()
	for b.Loop() {
		if r := Repair(invoiceAnswer, s, Options{}); !r.Valid || r.Changed {
			b.Fatal(r)
		}
	}
}

func BenchmarkRepairTruncated(b *testing.B) {
	s := mustCompile(b, invoiceSchema)
	cut := "```json\n" + invoiceAnswer[:162]
	b.ReportAllocs()
	for b.Loop() {
		if r := Repair(cut, s, Options{Input: "Invoice INV-2024-0001 total $152.37"}); !r.Valid {
			b.Fatal(r.Violations)
		}
	}
}

func BenchmarkExtractConstraints(b *testing.B) {
	prompt := "You are a careful risk analyst for a payments company. Read the incident report and assess it. " +
		"Respond in JSON with keys [risk_level, mitigation_steps, confidence_score]; risk_level must be one of low, medium, high. " +
		"Keep mitigation steps short and actionable."
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ExtractConstraints(prompt); !ok {
			b.Fatal("no constraints")
		}
	}
}

func BenchmarkExtractConstraintsNoJSON(b *testing.B) {
	prompt := "You are a helpful assistant. Answer the user's questions about their invoices politely and briefly."
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ExtractConstraints(prompt); ok {
			b.Fatal("constraints found")
		}
	}
}

func BenchmarkGuardedSpans(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		GuardedSpans(invoiceAnswer)
	}
}
