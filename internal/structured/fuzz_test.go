package structured

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
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

// FuzzExtractConstraints: ExtractConstraints never panics; a schema it
// returns compiles, lists exactly Required as its required keys, and its
// Sentence is text of the prompt; a sure schema's keys are identifiers the
// prompt writes. ExtractJSONDemand answers exactly when ExtractConstraints
// does not but the prompt demands JSON, never sure, never with keys. Seeded
// from the phrasing corpora.
func FuzzExtractConstraints(f *testing.F) {
	for _, path := range []string{positivePhrasings, negativePhrasings, freshPositives, freshNegatives, heldOutPositives, heldOutNegatives, heldOut2Positives, heldOut2Negatives, tuning3Positives, tuning3Negatives, heldOut3Positives, heldOut3Negatives, tuning4Positives, tuning4Negatives} {
		for _, p := range readPhrasings(f, path) {
			f.Add(p.prompt)
		}
	}
	for _, c := range completenessCases {
		f.Add(c.prompt)
	}
	for _, p := range keptKeysNegatives {
		f.Add(p)
	}
	for _, c := range scorerCases {
		f.Add(c.prompt)
	}
	for _, p := range scorerNegatives {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, prompt string) {
		im, ok := ExtractConstraints(prompt)
		if dm, dok := ExtractJSONDemand(prompt); dok {
			if ok {
				t.Fatalf("both a key schema %s and a keyless demand %s for %q", im.Schema, dm.Schema, prompt)
			}
			if dm.Sure || len(dm.Required) > 0 {
				t.Fatalf("keyless demand %s sure %v keys %q for %q", dm.Schema, dm.Sure, dm.Required, prompt)
			}
		}
		if !ok {
			return
		}
		if len(im.Required) == 0 && !im.Sure {
			t.Fatalf("key schema %s without keys for %q", im.Schema, prompt)
		}
		if im.Sure {
			// A sure schema is sent upstream: every key an identifier the
			// prompt writes as a word of its own.
			for _, k := range im.Required {
				if !identKeyRe.MatchString(k) || !namedInPrompt(prompt, k) {
					t.Fatalf("sure schema with key %q not written in the prompt %q", k, prompt)
				}
			}
		}
		if _, err := Compile(im.Schema); err != nil {
			t.Fatalf("implied schema %s does not compile: %v", im.Schema, err)
		}
		var s struct {
			Required []string `json:"required"`
		}
		if err := json.Unmarshal(im.Schema, &s); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(s.Required, im.Required) {
			t.Fatalf("schema requires %q, Required is %q", s.Required, im.Required)
		}
		for part := range strings.SplitSeq(im.Sentence, "\n") {
			if !strings.Contains(prompt, part) {
				t.Fatalf("sentence part %q is not in the prompt %q", part, prompt)
			}
		}
	})
}
