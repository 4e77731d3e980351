package structured

import (
	"bytes"
	"testing"
)

// FuzzRepair: Repair never panics; its output is either valid against the
// schema or an explicit failure that returns the answer unchanged with
// violations; and a valid answer comes back byte for byte.
func FuzzRepair(f *testing.F) {
	for _, c := range genCorpus() {
		f.Add(c.input, c.schema)
	}
	schemas := map[string]*Schema{}
	for k, v := range corpusSchemas {
		schemas[k] = mustCompile(f, v)
	}
	f.Fuzz(func(t *testing.T, answer, which string) {
		s := schemas[which] // nil for unknown names: any well-formed JSON
		r := Repair(answer, s, Options{Derive: riskDerive})
		switch {
		case !r.Valid:
			if !bytes.Equal(r.Output, []byte(answer)) || r.Changed || len(r.Violations) == 0 {
				t.Fatalf("failure not explicit: %+v", r)
			}
		case !r.Changed:
			if string(r.Output) != answer || len(r.Steps) != 0 {
				t.Fatalf("valid answer changed: %+v", r)
			}
			if vs := s.Validate(r.Output); vs != nil {
				t.Fatalf("unchanged output invalid: %v", vs)
			}
		default:
			if vs := s.Validate(r.Output); vs != nil {
				t.Fatalf("Repair(%q) = %q, invalid: %v", answer, r.Output, vs)
			}
			if len(r.Steps) == 0 {
				t.Fatalf("changed without steps: %q", r.Output)
			}
		}
	})
}

func FuzzGuardedSpans(f *testing.F) {
	for _, s := range []string{"$152.37", "¥1,234.50", "-15%", "INV-2024-0001", "2024-03-01", "1 Mar 2024"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		end := 0
		for _, sp := range GuardedSpans(text) {
			if sp.Start < end || sp.End > len(text) || text[sp.Start:sp.End] != sp.Text {
				t.Fatalf("bad span %+v in %q", sp, text)
			}
			end = sp.End
		}
	})
}

func FuzzExtractConstraints(f *testing.F) {
	for _, s := range []string{"Respond in JSON with keys [a, b]", "以JSON格式返回，包含字段：风险等级、缓解措施", "Output JSON: {\"a\": 1}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		if im, ok := ExtractConstraints(prompt); ok {
			if _, err := Compile(im.Schema); err != nil {
				t.Fatalf("implied schema %s does not compile: %v", im.Schema, err)
			}
		}
	})
}
