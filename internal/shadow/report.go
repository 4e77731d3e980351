package shadow

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

// Dist summarises a sample: its size and quantiles (nearest rank).
type Dist struct {
	N   int     `json:"n"`
	Min float64 `json:"min"`
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	Max float64 `json:"max"`
}

func dist(xs []float64) *Dist {
	if len(xs) == 0 {
		return nil
	}
	slices.Sort(xs)
	q := func(p float64) float64 {
		i := int(math.Ceil(p*float64(len(xs)))) - 1
		return xs[min(max(i, 0), len(xs)-1)]
	}
	return &Dist{N: len(xs), Min: xs[0], P50: q(0.5), P90: q(0.9), Max: xs[len(xs)-1]}
}

// FieldStats is one JSON field across the compared calls.
type FieldStats struct {
	Path string `json:"path"`
	// Compared counts the comparisons where either answer has the field.
	Compared int `json:"compared"`
	// Differ counts those where it was not Equal; DifferShare is
	// Differ / Compared.
	Differ      int     `json:"differ"`
	DifferShare float64 `json:"differ_share"`
	// Kinds counts the comparisons by kind.
	Kinds map[Kind]int `json:"kinds"`
	// AbsDelta is the distribution of |shadow − primary| over the
	// numeric_delta comparisons; Delta the signed one.
	AbsDelta *Dist `json:"abs_delta,omitempty"`
	Delta    *Dist `json:"delta,omitempty"`
}

// DecisionStats is a decision rule's agreement between the two paths.
type DecisionStats struct {
	Rule string `json:"rule"`
	// Evaluated counts comparisons that carried the rule; Agree those
	// where rule(primary) == rule(shadow) (undefined included as a
	// value); AgreeShare is Agree / Evaluated.
	Evaluated  int     `json:"evaluated"`
	Agree      int     `json:"agree"`
	AgreeShare float64 `json:"agree_share"`
	// PrimaryTrue and ShadowTrue count true verdicts on each side;
	// Undefined counts comparisons where either side was undefined.
	PrimaryTrue int `json:"primary_true"`
	ShadowTrue  int `json:"shadow_true"`
	Undefined   int `json:"undefined"`
}

// Report summarises shadow results.
type Report struct {
	// Calls counts results; Outcomes counts them by outcome.
	Calls    int            `json:"calls"`
	Outcomes map[string]int `json:"outcomes"`
	// Compared counts compared results; JSON those compared as JSON;
	// Differ those where anything differed.
	Compared int `json:"compared"`
	JSON     int `json:"json"`
	Differ   int `json:"differ"`
	// ShadowCostUSD is the shadow paths' spend (never in the client's).
	ShadowCostUSD float64 `json:"shadow_cost_usd"`
	// Fields is every JSON field seen, by path.
	Fields []FieldStats `json:"fields"`
	// TextSimilarity is the distribution of the similarity of answers
	// compared as text.
	TextSimilarity *Dist `json:"text_similarity,omitempty"`
	// Decisions is one entry per decision rule seen.
	Decisions []DecisionStats `json:"decisions,omitempty"`
}

// Build summarises results.
func Build(results []Result) Report {
	r := Report{Outcomes: map[string]int{}, Fields: []FieldStats{}}
	type acc struct {
		st     FieldStats
		deltas []float64
		abs    []float64
	}
	fields := map[string]*acc{}
	rules := map[string]*DecisionStats{}
	var sims []float64
	for i := range results {
		res := &results[i]
		r.Calls++
		r.Outcomes[res.Outcome]++
		r.ShadowCostUSD += res.ShadowCost
		c := res.Comparison
		if res.Outcome != OutcomeCompared || c == nil {
			continue
		}
		r.Compared++
		if c.Differ() {
			r.Differ++
		}
		if c.JSON {
			r.JSON++
			for _, f := range c.Fields {
				a := fields[f.Path]
				if a == nil {
					a = &acc{st: FieldStats{Path: f.Path, Kinds: map[Kind]int{}}}
					fields[f.Path] = a
				}
				a.st.Compared++
				a.st.Kinds[f.Kind]++
				if f.Kind != Equal {
					a.st.Differ++
				}
				if f.Kind == NumericDelta {
					a.deltas = append(a.deltas, f.Delta)
					a.abs = append(a.abs, math.Abs(f.Delta))
				}
			}
		} else {
			sims = append(sims, c.Similarity)
		}
		if res.Rule != "" {
			d := rules[res.Rule]
			if d == nil {
				d = &DecisionStats{Rule: res.Rule}
				rules[res.Rule] = d
			}
			d.Evaluated++
			if c.RulePrimary == c.RuleShadow {
				d.Agree++
			}
			if c.RulePrimary == True {
				d.PrimaryTrue++
			}
			if c.RuleShadow == True {
				d.ShadowTrue++
			}
			if c.RulePrimary == Undefined || c.RuleShadow == Undefined {
				d.Undefined++
			}
		}
	}
	for _, a := range fields {
		a.st.DifferShare = float64(a.st.Differ) / float64(a.st.Compared)
		a.st.Delta, a.st.AbsDelta = dist(a.deltas), dist(a.abs)
		r.Fields = append(r.Fields, a.st)
	}
	sort.Slice(r.Fields, func(i, j int) bool { return r.Fields[i].Path < r.Fields[j].Path })
	r.TextSimilarity = dist(sims)
	for _, d := range rules {
		d.AgreeShare = float64(d.Agree) / float64(d.Evaluated)
		r.Decisions = append(r.Decisions, *d)
	}
	sort.Slice(r.Decisions, func(i, j int) bool { return r.Decisions[i].Rule < r.Decisions[j].Rule })
	return r
}

// WriteText writes rep as keel shadow report prints it: the outcomes, the
// share of answers that differ, the shadow spend, a table of the fields
// (compared, differ, share, |delta| min / p50 / p90 / max, kinds), the
// decision rules' agreement and the text similarity.
func (rep Report) WriteText(w io.Writer) {
	var outcomes []string
	for _, o := range []string{OutcomeCompared, OutcomeError, OutcomeDropped, OutcomeShed} {
		outcomes = append(outcomes, fmt.Sprintf("%s %d", o, rep.Outcomes[o]))
	}
	fmt.Fprintf(w, "shadowed calls %d: %s\n", rep.Calls, strings.Join(outcomes, ", "))
	fmt.Fprintf(w, "answers that differ: %d of %d compared (%s); compared as JSON %d\n", rep.Differ, rep.Compared, pct(rep.Differ, rep.Compared), rep.JSON)
	fmt.Fprintf(w, "shadow spend: $%.6f (not in the client's spend)\n\n", rep.ShadowCostUSD)
	if len(rep.Fields) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "field\tcompared\tdiffer\tshare\t|delta| min\tp50\tp90\tmax\tkinds\t")
		for _, fs := range rep.Fields {
			var kinds []string
			for k, n := range fs.Kinds {
				if k != Equal {
					kinds = append(kinds, fmt.Sprintf("%s %d", k, n))
				}
			}
			slices.Sort(kinds)
			d := []string{"-", "-", "-", "-"}
			if a := fs.AbsDelta; a != nil {
				d = []string{num(a.Min), num(a.P50), num(a.P90), num(a.Max)}
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", fs.Path, fs.Compared, fs.Differ, pct(fs.Differ, fs.Compared), d[0], d[1], d[2], d[3], strings.Join(kinds, ", "))
		}
		tw.Flush()
		fmt.Fprintln(w)
	}
	for _, d := range rep.Decisions {
		fmt.Fprintf(w, "decision rule %q: agrees in %d of %d (%s); true on primary %d, on shadow %d; undefined on either %d\n",
			d.Rule, d.Agree, d.Evaluated, pct(d.Agree, d.Evaluated), d.PrimaryTrue, d.ShadowTrue, d.Undefined)
	}
	if s := rep.TextSimilarity; s != nil {
		fmt.Fprintf(w, "text similarity (%d answers compared as text): min %s, p50 %s, p90 %s, max %s\n", s.N, num(s.Min), num(s.P50), num(s.P90), num(s.Max))
	}
}

func pct(n, of int) string {
	if of == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f %%", 100*float64(n)/float64(of))
}

func num(x float64) string { return fmt.Sprintf("%.4g", x) }
