package shadow

import (
	"encoding/json"
	"strings"
	"testing"
)

var ruleCases = []struct {
	name string
	rule string
	doc  string
	want Verdict
	err  bool
}{
	{name: "threshold true", rule: "confidence_score >= 0.8", doc: `{"confidence_score":0.8}`, want: True},
	{name: "threshold false", rule: "confidence_score >= 0.8", doc: `{"confidence_score":0.79}`, want: False},
	{name: "missing field", rule: "confidence_score >= 0.8", doc: `{"score":0.9}`, want: Undefined},
	{name: "string order undefined vs number", rule: "a < 1", doc: `{"a":"x"}`, want: Undefined},
	{name: "string equality", rule: `risk_level == "high"`, doc: `{"risk_level":"high"}`, want: True},
	{name: "string inequality vs number", rule: `a != "x"`, doc: `{"a":1}`, want: True},
	{name: "bare bool", rule: "flags.manual", doc: `{"flags":{"manual":true}}`, want: True},
	{name: "negation", rule: "!flags.manual", doc: `{"flags":{"manual":true}}`, want: False},
	{name: "index", rule: "steps[1].score > 2", doc: `{"steps":[{"score":1},{"score":3}]}`, want: True},
	{name: "and or precedence", rule: "a == 1 || b == 2 && c == 3", doc: `{"a":1,"b":0,"c":0}`, want: True},
	{name: "parentheses", rule: "(a == 1 || b == 2) && c == 3", doc: `{"a":1,"b":0,"c":0}`, want: False},
	{name: "kleene false and undefined", rule: "a == 2 && missing > 1", doc: `{"a":1}`, want: False},
	{name: "kleene true or undefined", rule: "a == 1 || missing > 1", doc: `{"a":1}`, want: True},
	{name: "null literal", rule: "a == null", doc: `{"a":null}`, want: True},
	{name: "bool literal", rule: "a != false", doc: `{"a":true}`, want: True},
	{name: "negative number", rule: "a > -1.5e0", doc: `{"a":-1}`, want: True},
	{name: "escaped string", rule: `a == "say \"hi\""`, doc: `{"a":"say \"hi\""}`, want: True},
	{name: "no spaces", rule: "confidence_score>=0.8", doc: `{"confidence_score":0.9}`, want: True},
	{name: "single quotes", rule: "risk_level == 'high'", doc: `{"risk_level":"high"}`, want: True},
	{name: "single quotes escaped", rule: `a == 'it\'s'`, doc: `{"a":"it's"}`, want: True},
	{name: "words", rule: `confidence_score >= 0.8 and not (risk_level == "low" or flags.manual)`, doc: `{"confidence_score":0.9,"risk_level":"high","flags":{"manual":false}}`, want: True},
	{name: "word is not a field", rule: "and > 1", err: true},
	{name: "unclosed single quote", rule: "a == 'x", err: true},
	{name: "not UTF-8", rule: "a == '\xe5'", err: true},
	{name: "empty", rule: "", err: true},
	{name: "no literal", rule: "a >=", err: true},
	{name: "bad literal", rule: "a >= b", err: true},
	{name: "unclosed paren", rule: "(a > 1", err: true},
	{name: "unclosed string", rule: `a == "x`, err: true},
	{name: "trailing", rule: "a > 1 b", err: true},
	{name: "single equals", rule: "a = 1", err: true},
	{name: "negative index", rule: "a[-1] > 1", err: true},
	{name: "too deep", rule: strings.Repeat("(", 100) + "a" + strings.Repeat(")", 100), err: true},
}

func TestDecisionRule(t *testing.T) {
	for _, tt := range ruleCases {
		t.Run(tt.name, func(t *testing.T) {
			r, err := ParseRule(tt.rule)
			if tt.err {
				if err == nil {
					t.Fatalf("ParseRule(%q) = %s, want an error", tt.rule, r)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			v, _ := decodeJSON(tt.doc)
			if got := r.Eval(v); got != tt.want {
				t.Errorf("Eval(%s) on %s = %v, want %v", r, tt.doc, got, tt.want)
			}
			r2, err := parseRule(r.String(), 8*maxRuleLen)
			if err != nil || r2.String() != r.String() {
				t.Errorf("canonical form %q does not parse back to itself: %v", r, err)
			}
		})
	}
}

// FuzzDecisionRule: ParseRule never panics; a rule that parses has a
// canonical form that parses to the same form and evaluates the same.
func FuzzDecisionRule(f *testing.F) {
	for _, tt := range ruleCases {
		f.Add(tt.rule, tt.doc)
	}
	f.Fuzz(func(t *testing.T, rule, doc string) {
		r, err := ParseRule(rule)
		if err != nil {
			return
		}
		r2, err := parseRule(r.String(), 8*maxRuleLen) // a canonical string may be longer (escapes)
		if err != nil {
			t.Fatalf("canonical %q of %q does not parse: %v", r, rule, err)
		}
		if r2.String() != r.String() {
			t.Fatalf("canonical form not stable: %q → %q", r, r2)
		}
		var v any
		if json.Unmarshal([]byte(doc), &v) == nil && r.Eval(v) != r2.Eval(v) {
			t.Fatalf("%q and its canonical form disagree on %s", rule, doc)
		}
	})
}

func TestDecisionRuleLongChainCanonical(t *testing.T) {
	rule := "a > 1" + strings.Repeat(" && a > 1", 300)
	r, err := ParseRule(rule)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseRule(r.String()); err != nil {
		t.Fatalf("canonical form of a long chain does not parse: %v", err)
	}
}
