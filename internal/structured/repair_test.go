package structured

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

func TestCompile(t *testing.T) {
	tests := []struct {
		name    string
		schema  string
		wantErr bool
	}{
		{name: "object", schema: riskSchema},
		{name: "empty schema", schema: `{}`},
		{name: "boolean schema", schema: `true`},
		{name: "not json", schema: `{"type":`, wantErr: true},
		{name: "bad keyword value", schema: `{"type": 12}`, wantErr: true},
		{name: "external ref refused", schema: `{"$ref": "https://example.com/s.json"}`, wantErr: true},
		{name: "internal ref", schema: `{"$defs": {"n": {"type": "number"}}, "$ref": "#/$defs/n"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(json.RawMessage(tt.schema))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Compile error = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}

func TestCompileCaches(t *testing.T) {
	a := mustCompile(t, riskSchema)
	b := mustCompile(t, riskSchema)
	if a != b {
		t.Error("compiling the same schema twice gave two *Schema; want the cached one")
	}
	if string(a.Raw()) != riskSchema {
		t.Errorf("Raw %s", diff(string(a.Raw()), riskSchema))
	}
}

func TestValidate(t *testing.T) {
	s := mustCompile(t, invoiceSchema)
	tests := []struct {
		name string
		doc  string
		want []string // "pointer keyword"
	}{
		{name: "valid", doc: invoiceAnswer},
		{name: "syntax", doc: `{"invoice_id": `, want: []string{"(root) syntax"}},
		{name: "empty", doc: ``, want: []string{"(root) syntax"}},
		{name: "two values", doc: `{} {}`, want: []string{"(root) syntax"}},
		{name: "missing", doc: `{"invoice_id": "INV-2024-0001", "date": "2024-03-01", "lines": [{"sku": "A", "qty": 1, "unit_price": "$1"}]}`, want: []string{"(root) required"}},
		{name: "nested type and pattern", doc: `{"invoice_id": "X-1", "date": "2024-03-01", "total": "$1", "lines": [{"sku": "A", "qty": "1", "unit_price": "$1"}]}`, want: []string{"/invoice_id pattern", "/lines/0/qty type"}},
		{name: "min items", doc: `{"invoice_id": "INV-2024-0001", "date": "2024-03-01", "total": "$1", "lines": []}`, want: []string{"/lines minItems"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, v := range s.Validate([]byte(tt.doc)) {
				got = append(got, orRoot(v.Pointer)+" "+v.Keyword)
				if v.Message == "" {
					t.Errorf("violation %v has no message", v)
				}
			}
			if d := diffJSON(got, tt.want); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestValidatePointerEscaping(t *testing.T) {
	s := mustCompile(t, `{"properties": {"a/b": {"properties": {"c~d": {"type": "number"}}}}}`)
	vs := s.Validate([]byte(`{"a/b": {"c~d": "x"}}`))
	if len(vs) != 1 || vs[0].Pointer != "/a~1b/c~0d" {
		t.Fatalf("Validate = %v, want one violation at /a~1b/c~0d", vs)
	}
}

func TestConcurrentCompileValidateRepair(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			s, err := Compile(json.RawMessage(riskSchema))
			if err != nil {
				t.Error(err)
				return
			}
			for range 50 {
				if vs := s.Validate([]byte(riskAnswer)); vs != nil {
					t.Errorf("goroutine %d: %v", i, vs)
				}
				r := Repair("```json\n"+riskAnswer[:152], s, Options{Derive: riskDerive})
				if !r.Valid {
					t.Errorf("goroutine %d: %v", i, r.Violations)
				}
			}
		})
	}
	wg.Wait()
}

func TestRepair(t *testing.T) {
	risk := mustCompile(t, riskSchema)
	items := mustCompile(t, itemsSchema)
	notes := mustCompile(t, `{"type": "object", "properties": {"note": {"type": "string"}, "code": {"type": "string", "pattern": "^[A-Z]+$"}, "n": {"type": "integer"}}, "required": ["note"]}`)
	derive := Options{Derive: riskDerive}
	tests := []struct {
		name      string
		s         *Schema
		opt       Options
		answer    string
		want      string   // Output when valid
		wantSteps []string // step names
		wantViol  []string // "pointer keyword" when invalid
	}{
		{name: "valid unchanged", s: risk, answer: riskAnswer, want: riskAnswer},
		{name: "valid with whitespace unchanged", s: items, answer: " \n" + itemsAnswer + "\n\n", want: " \n" + itemsAnswer + "\n\n"},
		{name: "nil schema accepts any json", s: nil, answer: `[1, 2]`, want: `[1, 2]`},
		{name: "nil schema strips fence", s: nil, answer: "```json\n{\"a\": 1,}\n```", want: `{"a": 1}`, wantSteps: []string{StepExtract, StepTrailingCommas}},
		{name: "fence", s: items, answer: "```json\n" + itemsAnswer + "\n```", want: itemsAnswer, wantSteps: []string{StepExtract}},
		{name: "prose both sides", s: items, answer: "The list: " + itemsAnswer + " Done.", want: itemsAnswer, wantSteps: []string{StepExtract}},
		{name: "root kind picks the object", s: risk, answer: "Result [final]: " + riskAnswer, want: riskAnswer, wantSteps: []string{StepExtract}},
		{name: "two candidate values refused", s: items, answer: itemsAnswer + " or " + itemsAnswer, wantViol: []string{"(root) extract", "(root) syntax"}},
		{name: "close after comma", s: items, answer: `[{"name": "A", "price": 1},`, want: `[{"name": "A", "price": 1}]`, wantSteps: []string{StepCloseTruncated, StepTrailingCommas}},
		{name: "close after number and space", s: items, answer: `[{"name": "A", "price": 1 `, want: `[{"name": "A", "price": 1 }]`, wantSteps: []string{StepCloseTruncated}},
		{name: "number at cut refused", s: items, answer: `[{"name": "A", "price": 15`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "literal at cut refused", s: items, answer: `[{"name": "A", "price": 1, "in_stock": tru`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "key at cut refused", s: items, answer: `[{"name": "A", "price": 1, "in_st`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "after key refused", s: items, answer: `[{"name": "A", "price": 1, "in_stock"`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "after colon refused", s: items, answer: `[{"name": "A", "price": 1, "in_stock": `, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string at sentence end closed", s: notes, answer: `{"note": "Paid in full. `, want: `{"note": "Paid in full. "}`, wantSteps: []string{StepCloseTruncated}},
		{name: "string mid word refused", s: notes, answer: `{"note": "Paid in fu`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string between words refused", s: notes, answer: `{"note": "Paid in `, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string after amount refused", s: notes, answer: `{"note": "Total $152.`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "patterned string refused", s: notes, answer: `{"note": "x", "code": "AB.`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string without schema refused", s: nil, answer: `{"note": "Paid in full.`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string cut in escape refused", s: notes, answer: `{"note": "Paid.\`, wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "string cut in utf8 refused", s: notes, answer: "{\"note\": \"已付。" + "\xe3\x80", wantViol: []string{"(root) truncated", "(root) syntax"}},
		{name: "cjk sentence closed", s: notes, answer: `{"note": "已付清。`, want: `{"note": "已付清。"}`, wantSteps: []string{StepCloseTruncated}},
		{name: "single quotes with apostrophe and double quote", s: notes, answer: `{'note': 'it\'s "done"'}`, want: `{"note": "it's \"done\""}`, wantSteps: []string{StepQuotes}},
		{name: "bare keys", s: notes, answer: `{note: "x", n: 2}`, want: `{"note": "x", "n": 2}`, wantSteps: []string{StepQuotes}},
		{name: "quotes inside strings untouched", s: notes, answer: `{"note": "it's {a: 'b'}",}`, want: `{"note": "it's {a: 'b'}"}`, wantSteps: []string{StepTrailingCommas}},
		{name: "coerce integer", s: notes, answer: `{"note": "x", "n": "42"}`, want: `{"note": "x", "n": 42}`, wantSteps: []string{StepCoerce}},
		{name: "coerce refuses escaped digits", s: notes, answer: `{"note": "x", "n": "\u0034\u0032"}`, wantViol: []string{"/n type"}},
		{name: "coerce refuses dollar amount", s: risk, answer: strings.Replace(riskAnswer, "0.82", `"$152.37"`, 1), wantViol: []string{"/confidence_score type"}},
		{name: "derive missing field", s: risk, opt: derive, answer: `{"risk_level": "low", "mitigation_steps": ["Monitor."]}`, want: `{"risk_level": "low", "mitigation_steps": ["Monitor."],"confidence_score":0.9}`, wantSteps: []string{StepDerive}},
		{name: "derive into empty object", s: mustCompile(t, `{"type": "object", "required": ["a", "b"]}`), opt: Options{Derive: []Derivation{{Field: "a", From: "x", Table: map[string]any{"": 1}}, {Field: "b", From: "x", Table: map[string]any{"": 2}}}}, answer: `{"x": ""}`, want: `{"x": "","a":1,"b":2}`, wantSteps: []string{StepDerive}},
		{name: "derive in array items", s: mustCompile(t, `{"type": "array", "items": {"required": ["score"]}}`), opt: Options{Derive: []Derivation{{At: "/*", Field: "score", From: "level", Table: map[string]any{"1": "low"}}}}, answer: `[{"level": 1}, {"level": 1, "score": "x"}]`, want: `[{"level": 1,"score":"low"}, {"level": 1, "score": "x"}]`, wantSteps: []string{StepDerive}},
		{name: "no rule no derivation", s: risk, answer: `{"risk_level": "low", "mitigation_steps": ["Monitor."]}`, wantViol: []string{"(root) required"}},
		{name: "unknown table value no derivation", s: risk, opt: derive, answer: `{"risk_level": "severe", "mitigation_steps": ["Monitor."]}`, wantViol: []string{"(root) required", "/risk_level enum"}},
		{name: "everything at once", s: risk, opt: derive, answer: "Here you go:\n```json\n{risk_level: 'medium', 'mitigation_steps': ['Patch.', 'Audit.',], 'confidence_score': '0.5'", want: `{"risk_level": "medium", "mitigation_steps": ["Patch.", "Audit."], "confidence_score": 0.5}`, wantSteps: []string{StepExtract, StepCloseTruncated, StepTrailingCommas, StepQuotes, StepCoerce}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Repair(tt.answer, tt.s, tt.opt)
			var steps []string
			for _, s := range r.Steps {
				steps = append(steps, s.Name)
				if s.Detail == "" {
					t.Errorf("step %s has no detail", s.Name)
				}
			}
			var viol []string
			for _, v := range r.Violations {
				viol = append(viol, orRoot(v.Pointer)+" "+v.Keyword)
			}
			if tt.wantViol != nil {
				if r.Valid {
					t.Fatalf("Repair(%q) valid %q, want refusal", tt.answer, r.Output)
				}
				if d := diffJSON(viol, tt.wantViol); d != "" {
					t.Errorf("violations %s", d)
				}
				if string(r.Output) != tt.answer || r.Changed {
					t.Errorf("refused repair changed the output to %q", r.Output)
				}
				return
			}
			if !r.Valid {
				t.Fatalf("Repair(%q) invalid: %v (steps %v)", tt.answer, r.Violations, r.Steps)
			}
			if d := diff(string(r.Output), tt.want); d != "" {
				t.Errorf("output %s", d)
			}
			if d := diffJSON(steps, tt.wantSteps); d != "" {
				t.Errorf("steps %s", d)
			}
			if r.Changed != (tt.want != tt.answer) {
				t.Errorf("Changed = %v", r.Changed)
			}
		})
	}
}

func TestRepairDeriveDetail(t *testing.T) {
	r := Repair(`{"risk_level": "high", "mitigation_steps": ["Stop."]}`, mustCompile(t, riskSchema), Options{Derive: riskDerive})
	want := []Step{{Name: StepDerive, Detail: `/confidence_score = 0.3, derived from risk_level "high" by the declared rule`}}
	if d := diffJSON(r.Steps, want); d != "" {
		t.Error(d)
	}
}

// TestGuardRejectsNormaliser shows that a step rewriting "$152.37" as
// "152.37 USD" — a normaliser that would break every downstream parser —
// cannot get its output through Repair: the mechanical guard rejects it.
func TestGuardRejectsNormaliser(t *testing.T) {
	s := mustCompile(t, `{"type": "object", "properties": {"total": {"type": "string"}}, "required": ["total"]}`)
	normalise := func(r *repairer) {
		r.text = strings.ReplaceAll(r.text, `"$152.37"`, `"152.37 USD"`)
		r.record("normalise_currency", "rewrote $152.37")
	}
	steps := append(append([]stepFunc(nil), repairSteps...), normalise)
	tests := []struct {
		name   string
		answer string
		opt    Options
	}{
		{name: "span in answer", answer: "```json\n{\"total\": \"$152.37\",}\n```"},
		{name: "span from input", answer: `{'total': '$152.37'}`, opt: Options{Input: "Invoice total: $152.37"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := repairWith(tt.answer, s, tt.opt, steps)
			if r.Valid {
				t.Fatalf("normalised output %q accepted", r.Output)
			}
			last := r.Steps[len(r.Steps)-1]
			if last.Name != StepGuardViolation || !strings.Contains(last.Detail, "$152.37") {
				t.Errorf("last step = %+v, want guard_violation naming $152.37", last)
			}
			if string(r.Output) != tt.answer {
				t.Errorf("output %s", diff(string(r.Output), tt.answer))
			}
		})
	}
}

func TestGuardCheck(t *testing.T) {
	tests := []struct {
		name, orig, out, input string
		wantOK                 bool
	}{
		{name: "identical", orig: `{"a": "$152.37"}`, out: `{"a": "$152.37"}`, wantOK: true},
		{name: "quotes changed only", orig: `{'a': '¥1,234.50'}`, out: `{"a": "¥1,234.50"}`, wantOK: true},
		{name: "symbol to code", orig: `{"a": "$152.37"}`, out: `{"a": "152.37 USD"}`},
		{name: "grouping removed", orig: `{"a": "¥1,234.50"}`, out: `{"a": "¥1234.50"}`},
		{name: "percent sign dropped", orig: `{"a": "-15%"}`, out: `{"a": -15}`},
		{name: "date reformatted", orig: `{"d": "2024-03-01"}`, out: `{"d": "03/01/2024"}`},
		{name: "id changed", orig: `{"id": "INV-2024-0001"}`, out: `{"id": "INV-2024-1"}`},
		{name: "one of two copies lost", orig: `["$1.00", "$1.00"]`, out: `["$1.00"]`},
		{name: "input span kept", orig: `{"n": "PO_7731"}`, out: `{"n": "PO_7731"}`, input: "order PO_7731", wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, ok := guardCheck(tt.orig, tt.out, tt.input); ok != tt.wantOK {
				t.Errorf("guardCheck(%q, %q) = %v, want %v", tt.orig, tt.out, ok, tt.wantOK)
			}
		})
	}
}

func TestGuardedSpans(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []string // "kind:text"
	}{
		{name: "currency symbols", text: "Pay $152.37, ¥1,234.50 or €0.99 now", want: []string{"currency:$152.37", "currency:¥1,234.50", "currency:€0.99"}},
		{name: "currency codes", text: "152.37 USD and EUR 10", want: []string{"currency:152.37 USD", "currency:EUR 10"}},
		{name: "negative amount", text: "refund -$5.00", want: []string{"currency:-$5.00"}},
		{name: "percentages", text: "down -15% then up 3.5 %", want: []string{"percent:-15%", "percent:3.5 %"}},
		{name: "dates", text: "2024-03-01, 2024-03-01T10:00:00Z, 03/01/2024, March 1, 2024, 1 Mar 2024, 2024年3月1日", want: []string{"date:2024-03-01", "date:2024-03-01T10:00:00Z", "date:03/01/2024", "date:March 1, 2024", "date:1 Mar 2024", "date:2024年3月1日"}},
		{name: "identifiers", text: "INV-2024-0001 PO_7731 AB12345 123e4567-e89b-12d3-a456-426614174000", want: []string{"identifier:INV-2024-0001", "identifier:PO_7731", "identifier:AB12345", "identifier:123e4567-e89b-12d3-a456-426614174000"}},
		{name: "hyphenated words are not ids", text: "a follow-up call", want: nil},
		{name: "plain numbers", text: "3 items, 1,000 units, 6.02e23 atoms", want: []string{"number:3", "number:1,000", "number:6.02e23"}},
		{name: "none", text: "no numbers here", want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, s := range GuardedSpans(tt.text) {
				got = append(got, s.Kind.String()+":"+s.Text)
				if tt.text[s.Start:s.End] != s.Text {
					t.Errorf("span %+v does not match its offsets", s)
				}
			}
			if d := diffJSON(got, tt.want); d != "" {
				t.Error(d)
			}
		})
	}
}
