package fragment

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
)

func frs(n int) []Fragment {
	out := make([]Fragment, n)
	for i := range out {
		out[i] = Fragment{Index: i, Start: 100 * i, End: 100 * (i + 1), OverlapStart: 100 * i}
	}
	return out
}

func ok(text string, conf float64) FragmentAnswer {
	return FragmentAnswer{Text: text, Confidence: conf}
}

var errReplica = errors.New("upstream 529")

func TestFuseStructured(t *testing.T) {
	tests := []struct {
		name      string
		answers   [][]FragmentAnswer
		opt       FuseOptions
		want      string
		conflicts []string // "fragment:path"
	}{
		{
			name: "majority vote",
			answers: [][]FragmentAnswer{{
				ok(`{"risk":"high"}`, 0.6), ok(`{"risk":"low"}`, 0.9), ok(`{"risk":"high"}`, 0.5),
			}},
			want:      `{"risk":"high"}`,
			conflicts: []string{"0:risk"},
		},
		{
			name: "vote tie broken by confidence",
			answers: [][]FragmentAnswer{{
				ok(`{"risk":"low"}`, 0.5), ok(`{"risk":"high"}`, 0.6), ok(`{"risk":"low"}`, 0.5), ok(`{"risk":"high"}`, 0.4),
			}},
			// 1.0 each; high's best single confidence 0.6 beats low's 0.5
			// although low came first.
			want:      `{"risk":"high"}`,
			conflicts: []string{"0:risk"},
		},
		{
			name: "vote tie broken by order",
			answers: [][]FragmentAnswer{{
				ok(`{"risk":"low"}`, 0.7), ok(`{"risk":"high"}`, 0.7),
			}},
			want:      `{"risk":"low"}`,
			conflicts: []string{"0:risk"},
		},
		{
			name: "weighted median keeps the exact text",
			answers: [][]FragmentAnswer{{
				ok(`{"total":152.37}`, 1), ok(`{"total":9999}`, 1), ok(`{"total":152.370}`, 1),
			}},
			want:      `{"total":152.37}`,
			conflicts: []string{"0:total"},
		},
		{
			name: "weighted median follows weight",
			answers: [][]FragmentAnswer{{
				ok(`{"n":1}`, 0.1), ok(`{"n":2}`, 0.1), ok(`{"n":3}`, 0.9),
			}},
			want:      `{"n":3}`,
			conflicts: []string{"0:n"},
		},
		{
			name: "median tie broken by confidence then order",
			answers: [][]FragmentAnswer{{
				ok(`{"a":10,"b":10}`, 0.5), ok(`{"a":20,"b":20}`, 0.5), ok(`{"a":10,"b":20}`, 0.5), ok(`{"a":20,"b":10}`, 0.5),
			}},
			// a: 10 (w 1.0) vs 20 (w 1.0), equal max confidence → earlier replica: 10.
			want:      `{"a":10,"b":10}`,
			conflicts: []string{"0:a", "0:b"},
		},
		{
			name: "numbers within tolerance",
			answers: [][]FragmentAnswer{{
				ok(`{"n":100}`, 1), ok(`{"n":100.4}`, 1), ok(`{"n":99.8}`, 1),
			}},
			opt:  FuseOptions{RelTolerance: 0.01},
			want: `{"n":100}`,
		},
		{
			name: "list union keeps order and drops duplicates",
			answers: [][]FragmentAnswer{{
				ok(`{"steps":["hedge","audit"]}`, 1), ok(`{"steps":["Audit","insure"]}`, 1), ok(`{"steps":["hedge"]}`, 1),
			}},
			want: `{"steps":["hedge","audit","insure"]}`,
		},
		{
			name: "list quorum",
			answers: [][]FragmentAnswer{{
				ok(`{"steps":["hedge","audit"]}`, 1), ok(`{"steps":["audit","insure"]}`, 1), ok(`{"steps":["hedge","audit"]}`, 1),
			}},
			opt:  FuseOptions{ListQuorum: 0.5},
			want: `{"steps":["hedge","audit"]}`,
		},
		{
			name: "nested objects and a missing field",
			answers: [][]FragmentAnswer{{
				ok("```json\n{\"auditor\":{\"name\":\"KPMG\",\"opinion\":\"clean\"}}\n```", 1),
				ok(`{"auditor":{"name":"KPMG","opinion":"qualified"}}`, 0.4),
				ok(`{"auditor":{"name":"KPMG"}}`, 1),
			}},
			want:      `{"auditor":{"name":"KPMG","opinion":"clean"}}`,
			conflicts: []string{"0:auditor.opinion", "0:auditor.opinion"},
		},
		{
			name: "field dropped without majority",
			answers: [][]FragmentAnswer{{
				ok(`{"a":1,"ghost":"x"}`, 0.5), ok(`{"a":1}`, 1), ok(`{"a":1}`, 1),
			}},
			want:      `{"a":1}`,
			conflicts: []string{"0:ghost"},
		},
		{
			name: "across fragments",
			answers: [][]FragmentAnswer{
				{ok(`{"company":"Acme","total_assets":4210,"risks":["fx"],"net_income":null}`, 1), ok(`{"company":"Acme","total_assets":4210,"risks":["fx"]}`, 1)},
				{ok(`{"company":"Acme","net_income":312,"risks":["rates","fx"]}`, 1)},
				{ok(`{"company":"ACME Corp","cash_flow":{"operating":540}}`, 0.5)},
			},
			want:      `{"company":"Acme","total_assets":4210,"net_income":312,"risks":["fx","rates"],"cash_flow":{"operating":540}}`,
			conflicts: []string{"0:net_income", "-1:company"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Fuse(frs(len(tt.answers)), tt.answers, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Structured {
				t.Fatal("not fused as structured")
			}
			if !sameJSON(res.Text, tt.want) {
				t.Errorf("fused (-got +want):\n- %s\n+ %s", res.Text, tt.want)
			}
			var got []string
			for _, c := range res.Conflicts {
				got = append(got, fmt.Sprintf("%d:%s", c.Fragment, c.Path))
			}
			if !reflect.DeepEqual(got, tt.conflicts) {
				t.Errorf("conflicts (-got +want):\n- %v\n+ %v", got, tt.conflicts)
			}
		})
	}
}

func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return a == b
	}
	return reflect.DeepEqual(x, y)
}

func TestFuseLostFragment(t *testing.T) {
	frags := frs(3)
	answers := [][]FragmentAnswer{
		{ok(`{"a":1}`, 1), {Err: errReplica}},
		{{Err: errReplica}, {Err: errReplica}},
		{ok(`{"b":2}`, 1)},
	}
	res, err := Fuse(frags, answers, FuseOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []Range{{100, 200}}; !reflect.DeepEqual(res.Lost, want) || !reflect.DeepEqual(res.LostFragments, []int{1}) {
		t.Errorf("Lost (-got +want):\n- %v %v\n+ %v [1]", res.Lost, res.LostFragments, want)
	}
	if !sameJSON(res.Text, `{"a":1,"b":2}`) {
		t.Errorf("fused %s", res.Text)
	}
	// Free text: the gap is reported, the rest joined.
	res, err = Fuse(frags, [][]FragmentAnswer{{ok("one.", 1)}, {}, {ok("three.", 1)}}, FuseOptions{Mode: ModeText})
	if err != nil || res.Text != "one.\n\nthree." || !reflect.DeepEqual(res.Lost, []Range{{100, 200}}) {
		t.Errorf("text fuse = %q %v, %v", res.Text, res.Lost, err)
	}
	// Everything lost.
	res, err = Fuse(frags[:1], [][]FragmentAnswer{{{Err: errReplica}}}, FuseOptions{})
	if !errors.Is(err, ErrAllLost) || res == nil || !reflect.DeepEqual(res.Lost, []Range{{0, 100}}) {
		t.Errorf("all lost: %v %v", res, err)
	}
	// Invalid JSON under ModeStructured counts as failed.
	res, err = Fuse(frags[:2], [][]FragmentAnswer{{ok(`{"a":1}`, 1)}, {ok("not json", 1)}}, FuseOptions{Mode: ModeStructured})
	if err != nil || res.Invalid != 1 || !reflect.DeepEqual(res.LostFragments, []int{1}) {
		t.Errorf("structured with invalid replica: %+v %v", res, err)
	}
}

func TestFuseText(t *testing.T) {
	tests := []struct {
		name    string
		answers [][]FragmentAnswer
		want    string
	}{
		{
			name: "vote among replicas",
			answers: [][]FragmentAnswer{{
				ok("The balance sheet is strong.", 0.4), ok("The  balance sheet is strong.", 0.4), ok("It is weak.", 0.7),
			}},
			want: "The balance sheet is strong.",
		},
		{
			name: "repeated sentence from overlap dropped",
			answers: [][]FragmentAnswer{
				{ok("Revenue grew 12%. Costs fell 3%.", 1)},
				{ok("Costs fell 3%. Cash rose to 1.2M.", 1)},
			},
			want: "Revenue grew 12%. Costs fell 3%.\n\nCash rose to 1.2M.",
		},
		{
			name: "suffix-prefix overlap dropped",
			answers: [][]FragmentAnswer{
				{ok("the agreement terminates on 31 December 2026 unless renewed", 1)},
				{ok("on 31 December 2026 unless renewed by either party", 1)},
			},
			want: "the agreement terminates on 31 December 2026 unless renewed\n\nby either party",
		},
		{
			name: "chinese sentences",
			answers: [][]FragmentAnswer{
				{ok("营业收入增长百分之十二。毛利率下降。", 1)},
				{ok("毛利率下降。现金流改善。", 1)},
			},
			want: "营业收入增长百分之十二。毛利率下降。\n\n现金流改善。",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := Fuse(frs(len(tt.answers)), tt.answers, FuseOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Structured || res.Text != tt.want {
				t.Errorf("fused (-got +want):\n- %q\n+ %q", res.Text, tt.want)
			}
		})
	}
}

func TestFuseErrors(t *testing.T) {
	if _, err := Fuse(frs(2), make([][]FragmentAnswer, 1), FuseOptions{}); err == nil {
		t.Error("mismatched lengths accepted")
	}
	if _, err := Fuse(frs(1), make([][]FragmentAnswer, 1), FuseOptions{ListQuorum: 2}); !errors.Is(err, ErrInvalidOptions) {
		t.Errorf("ListQuorum 2: %v", err)
	}
}

// simTruth is the extraction every replica should return.
var simTruth = map[string]any{
	"risk_level":   "medium",
	"currency":     "USD",
	"total_assets": 4210.5,
	"net_income":   312.25,
	"mitigations":  []any{"hedge fx", "refinance debt", "cut capex"},
	"auditor":      map[string]any{"name": "Baker & Lowe", "opinion": "unqualified"},
	"ratios":       map[string]any{"current": 1.42},
}

var simChoices = map[string][]string{
	"risk_level": {"low", "medium", "high", "critical"},
	"currency":   {"USD", "EUR", "GBP", "CNY"},
	"name":       {"Baker & Lowe", "Baker Lowe LLP", "Harlow & Co", "Stein Audit"},
	"opinion":    {"unqualified", "qualified", "adverse", "disclaimer"},
}

// simReplica returns the truth with each leaf field wrong with probability p,
// and how many fields it got wrong. Wrong numbers are off by 5–50 %, wrong
// categories another label, wrong lists miss an item or gain an invented one.
func simReplica(rng *rand.Rand, p float64) (map[string]any, int) {
	wrong := 0
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch x := v.(type) {
		case map[string]any:
			out := map[string]any{}
			for k, e := range x {
				out[k] = walk(k, e)
			}
			return out
		}
		if rng.Float64() >= p {
			return v
		}
		wrong++
		switch x := v.(type) {
		case float64:
			f := 1 + 0.05 + 0.45*rng.Float64()
			if rng.IntN(2) == 0 {
				f = 1 / f
			}
			return x * f
		case string:
			c := simChoices[key]
			for {
				if s := c[rng.IntN(len(c))]; s != x {
					return s
				}
			}
		case []any:
			out := append([]any(nil), x...)
			if rng.IntN(2) == 0 {
				i := rng.IntN(len(out))
				return append(out[:i], out[i+1:]...)
			}
			return append(out, fmt.Sprintf("invented step %d", rng.IntN(1000)))
		}
		return v
	}
	return walk("", simTruth).(map[string]any), wrong
}

// fieldErrors counts leaf fields of got that differ from want.
func fieldErrors(got, want map[string]any) (errs, fields int) {
	for k, w := range want {
		g := got[k]
		if wm, ok := w.(map[string]any); ok {
			gm, _ := g.(map[string]any)
			e, f := fieldErrors(gm, wm)
			errs, fields = errs+e, fields+f
			continue
		}
		fields++
		if !reflect.DeepEqual(normNumbers(g), w) {
			errs++
		}
	}
	return errs, fields
}

func normNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normNumbers(e)
		}
		return out
	}
	return v
}

// TestFusionSimulation: each of 3 replicas errs on each field with
// probability 10 %; fusion must bring the field error rate to ≤ 3 %.
func TestFusionSimulation(t *testing.T) {
	const (
		trials   = 2000
		replicas = 3
		p        = 0.10
	)
	rng := rand.New(rand.NewPCG(8, 2026))
	frags := frs(1)
	var single, fields, fusedErr, unionErr, conflicts, fusedFields int
	for trial := 0; trial < trials; trial++ {
		reps := make([]FragmentAnswer, replicas)
		for r := range reps {
			v, wrong := simReplica(rng, p)
			if r == 0 {
				single += wrong
			}
			b, _ := json.Marshal(v)
			reps[r] = FragmentAnswer{Text: string(b), Confidence: 0.5 + 0.5*rng.Float64()}
		}
		res, err := Fuse(frags, [][]FragmentAnswer{reps}, FuseOptions{ListQuorum: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		e, f := fieldErrors(res.Value, simTruth)
		fusedErr += e
		fields += f
		conflicts += len(res.Conflicts)
		fusedFields += res.Fields
		union, err := Fuse(frags, [][]FragmentAnswer{reps}, FuseOptions{})
		if err != nil {
			t.Fatal(err)
		}
		e, _ = fieldErrors(union.Value, simTruth)
		unionErr += e
	}
	singleRate := float64(single) / float64(fields)
	fusedRate := float64(fusedErr) / float64(fields)
	t.Logf("%d trials × %d fields, %d replicas, p = %.2f", trials, fields/trials, replicas, p)
	t.Logf("single replica field error %.2f%%", 100*singleRate)
	t.Logf("fused field error %.2f%% (ListQuorum 0.5); %.2f%% with a plain list union", 100*fusedRate, 100*float64(unionErr)/float64(fields))
	t.Logf("conflicts %d over %d fused fields (%.1f%%)", conflicts, fusedFields, 100*float64(conflicts)/float64(fusedFields))
	if singleRate < 0.085 || singleRate > 0.115 {
		t.Errorf("single replica error %.2f%%, want ≈ 10%%", 100*singleRate)
	}
	if fusedRate > 0.03 {
		t.Errorf("fused error %.2f%%, want ≤ 3%%", 100*fusedRate)
	}
	// Every trial with a wrong replica field disagrees somewhere.
	if conflicts == 0 {
		t.Error("no conflicts counted")
	}
}

func BenchmarkFuse(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	frags := frs(8)
	answers := make([][]FragmentAnswer, len(frags))
	for i := range answers {
		for r := 0; r < 3; r++ {
			v, _ := simReplica(rng, 0.1)
			v["fragment_note"] = strings.Repeat("x", 40)
			bs, _ := json.Marshal(v)
			answers[i] = append(answers[i], FragmentAnswer{Text: string(bs), Confidence: 0.8})
		}
	}
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := Fuse(frags, answers, FuseOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
