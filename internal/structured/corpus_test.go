package structured

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

const corpusFile = "testdata/repair_corpus.golden.jsonl"

// corpusCase is one broken (or, for control, valid) answer of the corpus.
type corpusCase struct {
	name   string
	schema string // "risk", "invoice" or "items"
	input  string
	base   string // the uncorrupted answer the input came from: the no-invention oracle
	derive bool   // repair with riskDerive
}

var corpusSchemas = map[string]string{"risk": riskSchema, "invoice": invoiceSchema, "items": itemsSchema}
var corpusBases = map[string]string{"risk": riskAnswer, "invoice": invoiceAnswer, "items": itemsAnswer}

// genCorpus generates the corpus deterministically from the three
// real-shaped answers: a truncation at every byte position of each, then
// fences, prose, trailing commas, single quotes, bare keys, wrong types,
// missing fields and combinations.
func genCorpus() []corpusCase {
	var cs []corpusCase
	add := func(name, schema, input, base string) {
		cs = append(cs, corpusCase{name: name, schema: schema, input: input, base: base, derive: schema == "risk"})
	}
	for _, sc := range []string{"risk", "invoice", "items"} {
		a := corpusBases[sc]
		for i := range len(a) {
			add(fmt.Sprintf("truncated/%s/%03d", sc, i), sc, a[:i], a)
		}
	}
	for _, sc := range []string{"risk", "invoice", "items"} {
		a := corpusBases[sc]
		add("valid/"+sc, sc, a, a)
		add("valid_whitespace/"+sc, sc, "\n  "+a+"\n", a)
		add("fence/json/"+sc, sc, "```json\n"+a+"\n```", a)
		add("fence/bare/"+sc, sc, "```\n"+a+"\n```", a)
		add("fence/inline/"+sc, sc, "```json "+a+"```", a)
		add("fence/prose/"+sc, sc, "Here is the result you asked for:\n\n```json\n"+a+"\n```\n\nLet me know if you need anything else.", a)
		add("fence/unclosed/"+sc, sc, "```json\n"+a+"\n", a)
		add("fence/cut/"+sc, sc, "```json\n"+a[:len(a)*2/3], a)
		add("fence/two/"+sc, sc, "```json\n"+a+"\n```\nor\n```json\n"+a+"\n```", a)
		add("prose/before/"+sc, sc, "Sure! "+a, a)
		add("prose/after/"+sc, sc, a+"\nThis reflects the data provided.", a)
		add("prose/both/"+sc, sc, "Result: "+a+" (generated)", a)
		add("prose/two_values/"+sc, sc, "First: "+a+" Second: "+a, a)
		add("prose/only/"+sc, sc, "I cannot produce that answer.", a)
		add("trailing_comma/end/"+sc, sc, trailingCommaEnd(a), a)
		add("trailing_comma/all/"+sc, sc, trailingCommaAll(a), a)
		add("single_quotes/"+sc, sc, strings.ReplaceAll(a, `"`, `'`), a)
		add("bare_keys/"+sc, sc, bareKeys(a), a)
		add("single_quotes_bare_keys/"+sc, sc, bareKeys(strings.ReplaceAll(a, `"`, `'`)), a)
		add("combo/fence_commas_quotes/"+sc, sc, "```json\n"+trailingCommaAll(bareKeys(strings.ReplaceAll(a, `"`, `'`)))+"\n```", a)
		add("combo/prose_cut/"+sc, sc, "Answer: "+a[:len(a)-1], a)
		add("empty/"+sc, sc, "", a)
	}
	// Wrong types: exact strings are coerced, anything else refused.
	for _, w := range []struct{ name, from, to string }{
		{"number_string", `0.82`, `"0.82"`},
		{"number_dollar", `0.82`, `"$0.82"`},
		{"number_units", `0.82`, `"0.82 points"`},
		{"number_space", `0.82`, `" 0.82"`},
		{"number_word", `0.82`, `"high"`},
		{"number_bool", `0.82`, `true`},
	} {
		in := strings.Replace(riskAnswer, w.from, w.to, 1)
		add("wrong_type/risk/"+w.name, "risk", in, in)
	}
	for _, w := range []struct{ name, from, to string }{
		{"price_string", `0.99`, `"0.99"`},
		{"price_dollar", `0.99`, `"$0.99"`},
		{"price_euro", `0.99`, `"€0.99"`},
		{"price_leading_zero", `1.25`, `"01.25"`},
		{"price_exponent", `1.25`, `"125e-2"`},
		{"stock_string", `true`, `"true"`},
		{"stock_yes", `true`, `"yes"`},
		{"stock_capital", `true`, `"True"`},
		{"name_number", `"Apple"`, `42`},
	} {
		in := strings.Replace(itemsAnswer, w.from, w.to, 1)
		add("wrong_type/items/"+w.name, "items", in, in)
	}
	for _, w := range []struct{ name, from, to string }{
		{"qty_string", `"qty": 2`, `"qty": "2"`},
		{"qty_units", `"qty": 2`, `"qty": "2 units"`},
		{"qty_float", `"qty": 2`, `"qty": "2.5"`},
		{"paid_string", `false`, `"false"`},
		{"paid_no", `false`, `"no"`},
		{"total_number", `"$152.37"`, `152.37`},
	} {
		in := strings.Replace(invoiceAnswer, w.from, w.to, 1)
		add("wrong_type/invoice/"+w.name, "invoice", in, in)
	}
	// Missing fields: only a declared rule fills one.
	for _, lvl := range []string{"low", "medium", "high", "critical"} {
		a := strings.Replace(riskAnswer, `"high"`, `"`+lvl+`"`, 1)
		add("missing/confidence_score/"+lvl, "risk", strings.Replace(a, `, "confidence_score": 0.82`, "", 1), a)
	}
	add("missing/mitigation_steps", "risk", strings.Replace(riskAnswer, `"mitigation_steps": ["Escalate to finance.", "Freeze new orders."], `, "", 1), riskAnswer)
	add("missing/risk_level_and_score", "risk", strings.Replace(strings.Replace(riskAnswer, `"risk_level": "high", `, "", 1), `, "confidence_score": 0.82`, "", 1), riskAnswer)
	add("missing/invoice_total", "invoice", strings.Replace(invoiceAnswer, "\"total\": \"$152.37\",\n ", "", 1), invoiceAnswer)
	add("missing/items_price", "items", strings.Replace(itemsAnswer, `, "price": 1.25`, "", 1), itemsAnswer)
	add("combo/missing_score_fenced_single_quotes", "risk", "```json\n"+strings.ReplaceAll(strings.Replace(riskAnswer, `, "confidence_score": 0.82`, "", 1), `"`, `'`)+"\n```", riskAnswer)
	add("combo/coerce_and_commas", "items", trailingCommaAll(strings.Replace(itemsAnswer, `1.25`, `"1.25"`, 1)), itemsAnswer)
	// The wrong-type answers are their own oracle: a coerced number must have
	// exactly the text of the string it came from.
	return cs
}

// trailingCommaEnd adds a comma before the final bracket.
func trailingCommaEnd(a string) string {
	i := strings.LastIndexAny(a, "}]")
	return a[:i] + "," + a[i:]
}

// trailingCommaAll adds a comma before every closing bracket outside strings.
func trailingCommaAll(a string) string {
	var sb strings.Builder
	prev := 0
	for _, t := range lex(a) {
		if t.kind == tkCloseObj || t.kind == tkCloseArr {
			sb.WriteString(a[prev:t.start])
			sb.WriteString(",")
			prev = t.start
		}
	}
	sb.WriteString(a[prev:])
	return sb.String()
}

// bareKeys unquotes every object key.
func bareKeys(a string) string {
	toks := lex(a)
	var sb strings.Builder
	prev := 0
	for i, t := range toks {
		if t.kind == tkString && i+1 < len(toks) && toks[i+1].kind == tkColon {
			sb.WriteString(a[prev:t.start])
			sb.WriteString(a[t.start+1 : t.end-1])
			prev = t.end
		}
	}
	sb.WriteString(a[prev:])
	return sb.String()
}

// goldenRecord is one line of the golden file.
type goldenRecord struct {
	Name       string   `json:"name"`
	Input      string   `json:"input"`
	Valid      bool     `json:"valid"`
	Output     string   `json:"output,omitempty"` // when Changed
	Steps      []Step   `json:"steps,omitempty"`
	Violations []string `json:"violations,omitempty"` // "pointer keyword"
}

func recordOf(c corpusCase, r Result) goldenRecord {
	// JSON cannot carry a cut UTF-8 sequence; the golden file shows U+FFFD.
	g := goldenRecord{Name: c.name, Input: strings.ToValidUTF8(c.input, "\uFFFD"), Valid: r.Valid, Steps: r.Steps}
	if r.Changed {
		g.Output = strings.ToValidUTF8(string(r.Output), "\uFFFD")
	}
	for _, v := range r.Violations {
		g.Violations = append(g.Violations, orRoot(v.Pointer)+" "+v.Keyword)
	}
	return g
}

func (c corpusCase) opts() Options {
	if c.derive {
		return Options{Derive: riskDerive}
	}
	return Options{}
}

// TestRepairCorpus runs every corpus case against the golden file
// (go test -run TestRepairCorpus -update rewrites it) and checks the
// invariants that hold whatever the golden file says.
func TestRepairCorpus(t *testing.T) {
	cases := genCorpus()
	schemas := map[string]*Schema{}
	for k, v := range corpusSchemas {
		schemas[k] = mustCompile(t, v)
	}
	var got []goldenRecord
	broken, repaired, refused := 0, 0, 0
	for _, c := range cases {
		s := schemas[c.schema]
		r := Repair(c.input, s, c.opts())
		got = append(got, recordOf(c, r))
		if len(s.Validate([]byte(c.input))) > 0 {
			broken++
			if r.Valid {
				repaired++
			} else {
				refused++
			}
		}
		checkInvariants(t, c, s, r)
	}
	if broken < 200 {
		t.Errorf("corpus has %d broken answers, want at least 200", broken)
	}
	t.Logf("corpus: %d cases, %d broken: %d repaired, %d refused", len(cases), broken, repaired, refused)

	if *update {
		var buf bytes.Buffer
		for _, g := range got {
			b, err := json.Marshal(g)
			if err != nil {
				t.Fatal(err)
			}
			buf.Write(b)
			buf.WriteByte('\n')
		}
		if err := os.MkdirAll(filepath.Dir(corpusFile), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(corpusFile, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want := readGolden(t)
	if len(want) != len(got) {
		t.Errorf("golden file has %d cases, generator %d (run with -update after reviewing)", len(want), len(got))
	}
	for i, g := range got {
		t.Run(g.Name, func(t *testing.T) {
			if i >= len(want) {
				t.Fatal("missing from golden file")
			}
			if d := diffJSON(g, want[i]); d != "" {
				t.Errorf("Repair(%q) %s", g.Input, d)
			}
		})
	}
}

func readGolden(t *testing.T) []goldenRecord {
	t.Helper()
	f, err := os.Open(corpusFile)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	defer f.Close()
	var out []goldenRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var g goldenRecord
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("golden line %d: %v", len(out)+1, err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkInvariants asserts what every Repair result must satisfy.
func checkInvariants(t *testing.T, c corpusCase, s *Schema, r Result) {
	t.Helper()
	switch {
	case !r.Valid:
		if !bytes.Equal(r.Output, []byte(c.input)) || r.Changed {
			t.Errorf("%s: refused repair must return the answer unchanged", c.name)
		}
		if len(r.Violations) == 0 {
			t.Errorf("%s: refused repair without violations", c.name)
		}
	case !r.Changed:
		if string(r.Output) != c.input || len(r.Steps) != 0 {
			t.Errorf("%s: valid answer not returned byte for byte without steps", c.name)
		}
	default:
		if vs := s.Validate(r.Output); len(vs) > 0 {
			t.Errorf("%s: Valid output fails the schema: %v", c.name, vs)
		}
		if len(r.Steps) == 0 {
			t.Errorf("%s: changed output without a recorded step", c.name)
		}
		closed := slices.ContainsFunc(r.Steps, func(s Step) bool {
			return s.Name == StepCloseTruncated && strings.Contains(s.Detail, "inside the string")
		})
		checkNoInvention(t, decode(t, r.Output), decode(t, []byte(c.base)), c.opts().Derive, closed, "")
		// Every guarded span of the answer's JSON value survives.
		value := c.input
		if i := strings.IndexAny(value, "{["); i >= 0 {
			value = value[i:]
		}
		for _, sp := range GuardedSpans(value) {
			if !strings.Contains(string(r.Output), sp.Text) && strings.Contains(c.base, sp.Text) && inValue(c.input, sp.Text) {
				t.Errorf("%s: guarded span %q lost", c.name, sp.Text)
			}
		}
	}
}

// inValue reports that span occurs inside the JSON part of input (not only in
// the prose extraction drops).
func inValue(input, span string) bool {
	i := strings.IndexAny(input, "{[")
	j := strings.LastIndexAny(input, "}]")
	if i < 0 {
		return false
	}
	if j < i {
		j = len(input) - 1
	}
	return strings.Contains(input[i:j+1], span)
}
