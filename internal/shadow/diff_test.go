package shadow

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func TestCompare(t *testing.T) {
	tests := []struct {
		name    string
		primary string
		shadow  string
		want    []FieldDiff // Delta compared within 1e-9
		json    bool
	}{
		{name: "equal", primary: `{"a":1,"b":"x"}`, shadow: `{"b":"x","a":1}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: Equal}, {Path: "b", Kind: Equal}}},
		{name: "numeric delta", primary: `{"confidence_score":0.81}`, shadow: `{"confidence_score":0.79}`, json: true,
			want: []FieldDiff{{Path: "confidence_score", Kind: NumericDelta, Delta: -0.02}}},
		{name: "same number spelled twice", primary: `{"a":1.0}`, shadow: `{"a":1}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: Equal}}},
		{name: "missing and extra", primary: `{"a":1,"b":2}`, shadow: `{"a":1,"c":{"d":3}}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: Equal}, {Path: "b", Kind: Missing}, {Path: "c.d", Kind: Extra}}},
		{name: "type change", primary: `{"a":1,"b":null,"c":{"x":1}}`, shadow: `{"a":"1","b":false,"c":[1]}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: TypeChange}, {Path: "b", Kind: TypeChange}, {Path: "c", Kind: TypeChange}}},
		{name: "value change", primary: `{"risk":"high","ok":true}`, shadow: `{"risk":"medium","ok":false}`, json: true,
			want: []FieldDiff{{Path: "ok", Kind: ValueChange}, {Path: "risk", Kind: ValueChange}}},
		{name: "nested arrays", primary: `{"a":{"b":[{"c":1},{"c":2},{"c":3}]}}`, shadow: `{"a":{"b":[{"c":1},{"c":2},{"c":3.5}]}}`, json: true,
			want: []FieldDiff{{Path: "a.b[0].c", Kind: Equal}, {Path: "a.b[1].c", Kind: Equal}, {Path: "a.b[2].c", Kind: NumericDelta, Delta: 0.5}}},
		{name: "shorter array", primary: `[1,2,3]`, shadow: `[1,2]`, json: true,
			want: []FieldDiff{{Path: "[0]", Kind: Equal}, {Path: "[1]", Kind: Equal}, {Path: "[2]", Kind: Missing}}},
		{name: "odd key quoted", primary: `{"a b":1}`, shadow: `{"a b":1}`, json: true,
			want: []FieldDiff{{Path: `["a b"]`, Kind: Equal}}},
		{name: "code fence ignored", primary: "```json\n{\"a\":1}\n```", shadow: `{"a":1}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: Equal}}},
		{name: "empty containers", primary: `{"a":{},"b":[]}`, shadow: `{"a":{},"b":[]}`, json: true,
			want: []FieldDiff{{Path: "a", Kind: Equal}, {Path: "b", Kind: Equal}}},
		{name: "text when one side is not JSON", primary: `{"a":1}`, shadow: `a is 1`, json: false},
		{name: "text", primary: "the cat sat", shadow: "the cat sat", json: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Compare(tt.primary, tt.shadow, nil)
			if c.JSON != tt.json {
				t.Fatalf("JSON = %v, want %v", c.JSON, tt.json)
			}
			if !tt.json {
				return
			}
			got := c.Fields
			for i := range got {
				got[i].Similarity = 0
			}
			if len(got) != len(tt.want) {
				t.Fatalf("fields (-got +want):\n-%+v\n+%+v", got, tt.want)
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Path != w.Path || g.Kind != w.Kind || math.Abs(g.Delta-w.Delta) > 1e-9 {
					t.Errorf("field %d (-got +want):\n-%+v\n+%+v", i, g, w)
				}
			}
		})
	}
}

func TestSimilarity(t *testing.T) {
	tests := []struct {
		name   string
		a, b   string
		lo, hi float64
	}{
		{name: "identical", a: "The cat sat on the mat.", b: "The cat sat on the mat.", lo: 1, hi: 1},
		{name: "both empty", a: "", b: " ", lo: 1, hi: 1},
		{name: "one word of six", a: "the cat sat on the mat", b: "the dog sat on the mat", lo: 5.0 / 6, hi: 5.0 / 6},
		{name: "nothing shared", a: "alpha beta", b: "gamma delta", lo: 0, hi: 0},
		{name: "chinese one character of four", a: "风险很高", b: "风险较高", lo: 0.75, hi: 0.75},
		{name: "one side empty", a: "x y", b: "", lo: 0, hi: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Similarity(tt.a, tt.b); got < tt.lo-1e-9 || got > tt.hi+1e-9 {
				t.Errorf("Similarity(%q, %q) = %g, want in [%g, %g]", tt.a, tt.b, got, tt.lo, tt.hi)
			}
		})
	}
}

func TestCompareRule(t *testing.T) {
	r, err := ParseRule("confidence_score >= 0.8")
	if err != nil {
		t.Fatal(err)
	}
	c := Compare(`{"confidence_score":0.81}`, `{"confidence_score":0.79}`, r)
	if c.RulePrimary != True || c.RuleShadow != False {
		t.Errorf("verdicts = %v, %v; want true, false", c.RulePrimary, c.RuleShadow)
	}
	c = Compare(`{"confidence_score":0.81}`, `not json`, r)
	if c.RulePrimary != True || c.RuleShadow != Undefined {
		t.Errorf("verdicts = %v, %v; want true, undefined", c.RulePrimary, c.RuleShadow)
	}
}

func TestBuild(t *testing.T) {
	r, _ := ParseRule("s >= 0.8")
	var res []Result
	for i := range 10 {
		p, s := `{"s":0.85,"k":"a"}`, `{"s":0.85,"k":"a"}`
		if i < 2 {
			s = `{"s":0.75,"k":"a"}`
		}
		res = append(res, Result{Outcome: OutcomeCompared, Rule: r.Source(), ShadowCost: 0.001, Comparison: Compare(p, s, r)})
	}
	res = append(res, Result{Outcome: OutcomeDropped}, Result{Outcome: OutcomeCompared, Comparison: Compare("one two", "one three", nil)})
	rep := Build(res)
	if rep.Calls != 12 || rep.Compared != 11 || rep.Outcomes[OutcomeDropped] != 1 || rep.Differ != 3 {
		t.Errorf("counts: %+v", rep)
	}
	var s *FieldStats
	for i := range rep.Fields {
		if rep.Fields[i].Path == "s" {
			s = &rep.Fields[i]
		}
	}
	if s == nil || s.Compared != 10 || s.Differ != 2 || s.DifferShare != 0.2 || s.AbsDelta == nil || math.Abs(s.AbsDelta.Max-0.1) > 1e-9 {
		b, _ := json.Marshal(rep.Fields)
		t.Fatalf("field s: %s", b)
	}
	if len(rep.Decisions) != 1 || rep.Decisions[0].Agree != 8 || rep.Decisions[0].Evaluated != 10 {
		t.Errorf("decisions: %+v", rep.Decisions)
	}
	if rep.TextSimilarity == nil || rep.TextSimilarity.N != 1 || rep.TextSimilarity.P50 != 0.5 {
		t.Errorf("text similarity: %+v", rep.TextSimilarity)
	}
	if !reflect.DeepEqual(Build(nil).Fields, []FieldStats{}) {
		t.Error("empty report must list no fields")
	}
}

func TestCompareJSONSimilarityIsEqualShare(t *testing.T) {
	c := Compare(`{"a":1,"b":2,"c":3,"d":4}`, `{"a":1,"b":2,"c":3,"d":5}`, nil)
	if c.Similarity != 0.75 {
		t.Errorf("Similarity = %g, want 0.75 (3 of 4 fields equal)", c.Similarity)
	}
}
