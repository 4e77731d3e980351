package fragment

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// report builds a structured financial report: three statements, each a
// heading, prose and a table, with a context-boundary hint.
func report(rows int) string {
	var b strings.Builder
	b.WriteString("# Annual Report 2025\n\nAcme Industrial Holdings presents its consolidated statements. All amounts are in thousands of USD unless stated otherwise.\n\n")
	b.WriteString("<mesh-hint> context_boundary: [\"Income Statement\", \"Cash Flow Statement\"] </mesh-hint>\n\n")
	for _, sec := range []string{"Balance Sheet", "Income Statement", "Cash Flow Statement"} {
		fmt.Fprintf(&b, "## %s\n\n", sec)
		for p := 0; p < 3; p++ {
			fmt.Fprintf(&b, "The %s for the year shows movements explained in note %d. Management reviewed each line item with the audit committee. Figures were reconciled to the general ledger on 31 December.\n\n", strings.ToLower(sec), p+4)
		}
		b.WriteString("| Line item | 2025 | 2024 |\n| --- | ---: | ---: |\n")
		for r := 0; r < rows; r++ {
			fmt.Fprintf(&b, "| %s item %d | %d,%03d | %d,%03d |\n", sec, r, 10+r, r*7%1000, 9+r, r*13%1000)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// checkInvariants asserts what every Split result must satisfy.
func checkInvariants(t *testing.T, text string, opt Options, frags []Fragment) {
	t.Helper()
	if text == "" {
		if len(frags) != 0 {
			t.Fatalf("empty text gave %d fragments", len(frags))
		}
		return
	}
	if len(frags) == 0 {
		t.Fatal("non-empty text gave no fragments")
	}
	hints, _ := parseHints(text)
	budget := opt.OverlapBudget
	if budget == 0 {
		budget = DefaultOverlapBudget
	}
	budget = max(budget, 0)
	total := EstimateTokens(stripHints(text, hints, 0, len(text)))
	overlap := 0
	for i, f := range frags {
		if f.Index != i {
			t.Errorf("fragment %d has Index %d", i, f.Index)
		}
		wantStart := 0
		if i > 0 {
			wantStart = frags[i-1].End
			if f.OverlapStart < frags[i-1].Start {
				t.Errorf("fragment %d overlap starts at %d, before the previous fragment's start %d", i, f.OverlapStart, frags[i-1].Start)
			}
		}
		if f.Start != wantStart || f.End <= f.Start || f.OverlapStart > f.Start {
			t.Fatalf("fragment %d range [%d(%d), %d) does not continue at %d", i, f.OverlapStart, f.Start, f.End, wantStart)
		}
		if want := stripHints(text, hints, f.OverlapStart, f.End); f.Text != want {
			t.Errorf("fragment %d Text (-got +want):\n- %q\n+ %q", i, f.Text, want)
		}
		// Hints are markup: a span's bytes inside a hint guard nothing, so
		// a span holding a hint guards its two sides (outsideHints).
		for _, g := range outsideHints(opt.GuardedSpans, hints) {
			if f.Start > g.Start && f.Start < g.End {
				t.Errorf("fragment %d starts at %d inside guarded span %v", i, f.Start, g)
			}
			if f.OverlapStart > g.Start && f.OverlapStart < g.End {
				t.Errorf("fragment %d overlap starts at %d inside guarded span %v", i, f.OverlapStart, g)
			}
		}
		if i > 0 {
			// Never inside a table row: a cut falls at a line start unless it
			// falls in prose.
			// A cut a context-boundary hint asks for falls where the hint
			// stands, even mid-line.
			line := text[strings.LastIndexByte(text[:f.Start], '\n')+1:]
			if strings.HasPrefix(strings.TrimSpace(line), "|") && text[f.Start-1] != '\n' && !atHint(hints, f.Start) {
				t.Errorf("fragment %d starts at %d inside a table row", i, f.Start)
			}
		}
		overlap += f.OverlapTokens
	}
	if frags[len(frags)-1].End != len(text) {
		t.Errorf("fragments end at %d, text at %d", frags[len(frags)-1].End, len(text))
	}
	if limit := int(budget * float64(total)); overlap > limit {
		t.Errorf("overlap %d tokens > budget %d (%.0f%% of %d)", overlap, limit, 100*budget, total)
	}
}

// atHint reports whether off is where a hint starts or ends.
func atHint(hs []hint, off int) bool {
	for _, h := range hs {
		if off == h.span.Start || off == h.span.End {
			return true
		}
	}
	return false
}

func TestSplitFinancialReport(t *testing.T) {
	text := report(40)
	frags, err := Split(text, Options{TargetTokens: 1200})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, text, Options{TargetTokens: 1200}, frags)
	sections := []string{"## Balance Sheet", "## Income Statement", "## Cash Flow Statement"}
	// Every section lies within one fragment's own range.
	for _, sec := range sections {
		start := strings.Index(text, sec)
		end := len(text)
		for _, other := range sections {
			if o := strings.Index(text, other); o > start && o < end {
				end = o
			}
		}
		inOne := false
		for _, f := range frags {
			if f.Start <= start && end <= f.End {
				inOne = true
			}
		}
		if !inOne {
			t.Errorf("section %q [%d, %d) is cut: fragments %v", sec, start, end, ranges(frags))
		}
	}
	// The hinted titles start fragments, carry no overlap, and the hint is gone.
	for _, title := range sections[1:] {
		off := strings.Index(text, title)
		found := false
		for _, f := range frags {
			if f.Start == off {
				found = true
				if f.OverlapTokens != 0 || !strings.HasPrefix(f.Text, title) {
					t.Errorf("fragment at hinted %q carries overlap %d: %.40q", title, f.OverlapTokens, f.Text)
				}
			}
		}
		if !found {
			t.Errorf("no fragment starts at hinted title %q; fragments %v", title, ranges(frags))
		}
	}
	for _, f := range frags {
		if strings.Contains(f.Text, "mesh-hint") || strings.Contains(f.Text, "context_boundary") {
			t.Errorf("fragment %d keeps the hint: %.80q", f.Index, f.Text)
		}
	}
	t.Logf("%d fragments of %d input tokens: %v", len(frags), EstimateTokens(text), ranges(frags))
}

func ranges(fs []Fragment) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("[%d(%d),%d)~%dt+%d", f.OverlapStart, f.Start, f.End, EstimateTokens(f.Text)-f.OverlapTokens, f.OverlapTokens))
	}
	return out
}

func TestSplitOverlap(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 200; i++ {
		fmt.Fprintf(&b, "Sentence number %d explains one more detail of the contract. ", i)
		if i%10 == 9 {
			b.WriteString("\n\n")
		}
	}
	text := b.String()
	for _, budget := range []float64{0, 0.05, 0.3, -1} {
		t.Run(fmt.Sprint(budget), func(t *testing.T) {
			opt := Options{TargetTokens: 200, OverlapBudget: budget}
			frags, err := Split(text, opt)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, text, opt, frags)
			sum := 0
			for i, f := range frags {
				sum += f.OverlapTokens
				if i > 0 && f.OverlapTokens > 0 && !strings.HasPrefix(f.Text, "Sentence number") {
					t.Errorf("fragment %d overlap does not start at a sentence: %.30q", i, f.Text)
				}
			}
			if budget >= 0 && sum == 0 {
				t.Errorf("budget %v carried no overlap at all", budget)
			}
			if budget < 0 && sum != 0 {
				t.Errorf("overlap disabled but %d tokens carried", sum)
			}
		})
	}
}

func TestSplitBoundaries(t *testing.T) {
	long := strings.Repeat("Revenue rose in every region. ", 12)
	tests := []struct {
		name      string
		text      string
		opt       Options
		wantCuts  []string // each fragment but the first starts with one of these, in order
		noCutsIn  []string // substrings no fragment start may fall inside
		wantFrags int
	}{
		{
			name:      "headings before paragraphs",
			text:      "# A\n\n" + long + "\n\n" + long + "\n\n# B\n\n" + long,
			opt:       Options{TargetTokens: 200, OverlapBudget: -1},
			wantCuts:  []string{"# B"},
			wantFrags: 2,
		},
		{
			name:     "table rows stay whole",
			text:     "Intro.\n\n| a | b |\n|---|---|\n" + strings.Repeat("| Revenue rose in every region this year | 1,234.56 |\n", 30),
			opt:      Options{TargetTokens: 100, OverlapBudget: -1},
			noCutsIn: []string{"Revenue rose in every region this year | 1,234.56"},
		},
		{
			name: "sentence never cut",
			text: strings.Repeat("This sentence is long enough to matter for the splitter. ", 40),
			opt:  Options{TargetTokens: 50},
			noCutsIn: []string{
				"This sentence is long enough to matter for the splitter.",
			},
		},
		{
			name:      "anthropic tag and CJK",
			text:      strings.Repeat("资产负债表显示公司资产增长。", 30) + "\n<anthropic-mesh-hint>context_boundary: [利润表]</anthropic-mesh-hint>\n## 利润表：\n" + strings.Repeat("营业收入同比增长百分之十二。", 30),
			opt:       Options{TargetTokens: 1000},
			wantCuts:  []string{"## 利润表"},
			wantFrags: 2,
		},
		{
			name:      "code fence kept as a block",
			text:      "Look:\n\n```go\nfunc main() {\n\tfmt.Println(1)\n}\n```\n\n" + long,
			opt:       Options{TargetTokens: 60, OverlapBudget: -1},
			noCutsIn:  []string{"func main() {\n\tfmt.Println(1)\n}"},
			wantFrags: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frags, err := Split(tt.text, tt.opt)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, tt.text, tt.opt, frags)
			if tt.wantFrags > 0 && len(frags) != tt.wantFrags {
				t.Errorf("fragments (-got +want):\n- %d %v\n+ %d", len(frags), ranges(frags), tt.wantFrags)
			}
			for i, want := range tt.wantCuts {
				if i+1 >= len(frags) || !strings.HasPrefix(tt.text[frags[i+1].Start:], want) {
					t.Errorf("cut %d should start with %q; fragments %v", i+1, want, ranges(frags))
				}
			}
			for _, unit := range tt.noCutsIn {
				for off := 0; ; {
					j := strings.Index(tt.text[off:], unit)
					if j < 0 {
						break
					}
					a, z := off+j, off+j+len(unit)
					for _, f := range frags {
						if (f.Start > a && f.Start < z) || (f.OverlapStart > a && f.OverlapStart < z) {
							t.Errorf("fragment %d starts inside %q at %d", f.Index, unit, f.Start)
						}
					}
					off = z
				}
			}
		})
	}
}

func TestSplitGuardedSpans(t *testing.T) {
	text := strings.Repeat("Net income was $152.37 million. Margins held. ", 60)
	var guards []Range
	for off := 0; ; {
		j := strings.Index(text[off:], "was $152.37 million. Margins held.")
		if j < 0 {
			break
		}
		guards = append(guards, Range{off + j, off + j + len("was $152.37 million. Margins held.")})
		off += j + 1
	}
	opt := Options{TargetTokens: 40, GuardedSpans: guards}
	frags, err := Split(text, opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(frags) < 5 {
		t.Fatalf("want several fragments, got %v", ranges(frags))
	}
	checkInvariants(t, text, opt, frags)
}

func TestSplitErrors(t *testing.T) {
	tests := []struct {
		name string
		text string
		opt  Options
		want error
	}{
		{"negative target", "x", Options{TargetTokens: -1}, ErrInvalidOptions},
		{"budget above 1", "x", Options{OverlapBudget: 1.5}, ErrInvalidOptions},
		{"guard outside", "abc", Options{GuardedSpans: []Range{{2, 9}}}, ErrInvalidOptions},
		{"unclosed hint", "a <mesh-hint> context_boundary: [x] b", Options{}, ErrMalformedHint},
		{"stray close", "a </mesh-hint> b", Options{}, ErrMalformedHint},
		{"mismatched tags", "<mesh-hint> context_boundary: [] </anthropic-mesh-hint>", Options{}, ErrMalformedHint},
		{"bad body", "<mesh-hint> split here </mesh-hint>", Options{}, ErrMalformedHint},
		{"no list", "<mesh-hint> context_boundary: x </mesh-hint>", Options{}, ErrMalformedHint},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Split(tt.text, tt.opt)
			if !errors.Is(err, tt.want) {
				t.Errorf("Split error (-got +want):\n- %v\n+ %v", err, tt.want)
			}
		})
	}
}

// Issue 13: a hint is markup, not content. Guarded spans found by scanning
// the raw input (every number, here) also fall inside the hint's titles;
// they must not reject the request, and the titles still start fragments.
func TestSplitGuardedSpansNeverApplyInsideHints(t *testing.T) {
	var b strings.Builder
	b.WriteString("Regional results for 2025.\n\n")
	b.WriteString(`<mesh-hint> context_boundary: ["Section 4: Region report 4", "Section 5: Region report 5"] </mesh-hint>` + "\n\n")
	for _, sec := range []int{3, 4, 5} {
		fmt.Fprintf(&b, "## Section %d: Region report %d\n\n", sec, sec)
		for p := range 4 {
			fmt.Fprintf(&b, "Region %d grew %d.5%% in quarter %d, with 1,2%02d new accounts and 3%d branches reporting.\n\n", sec, p+2, p+1, p, p)
		}
	}
	// A span crossing into a hint tag, and one holding a whole hint, are
	// clipped to the bytes outside the hint.
	b.WriteString("Totals 77<anthropic-mesh-hint>context_boundary: [\"Total 9\"]</anthropic-mesh-hint>88 end.\n")
	text := b.String()
	var guarded []Range
	for _, m := range regexp.MustCompile(`\d+`).FindAllStringIndex(text, -1) {
		guarded = append(guarded, Range{m[0], m[1]})
	}
	cross := strings.Index(text, "77<")
	guarded = append(guarded, Range{cross, cross + 10})
	whole := strings.Index(text, "Totals")
	guarded = append(guarded, Range{whole, len(text) - 1})
	opt := Options{TargetTokens: 40, GuardedSpans: guarded}
	frags, err := Split(text, opt)
	if err != nil {
		t.Fatalf("Split: %v", err)
	}
	for _, title := range []string{"## Section 4: Region report 4", "## Section 5: Region report 5"} {
		off := strings.Index(text, title)
		if !slices.ContainsFunc(frags, func(f Fragment) bool { return f.Start == off }) {
			t.Errorf("no fragment starts at hinted %q; fragments %v", title, ranges(frags))
		}
	}
	for _, f := range frags {
		if strings.Contains(f.Text, "mesh-hint") {
			t.Errorf("fragment %d keeps the hint: %.80q", f.Index, f.Text)
		}
	}
	// Every number outside the hints is still whole in one fragment.
	for _, g := range guarded[:len(guarded)-2] {
		if inHint(mustHints(t, text), g.Start) {
			continue
		}
		if !slices.ContainsFunc(frags, func(f Fragment) bool { return f.Start <= g.Start && g.End <= f.End }) {
			t.Errorf("guarded %q [%d, %d) is cut: fragments %v", text[g.Start:g.End], g.Start, g.End, ranges(frags))
		}
	}
}

func mustHints(t *testing.T, text string) []hint {
	t.Helper()
	hs, err := parseHints(text)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func TestSplitHintOnly(t *testing.T) {
	text := "<mesh-hint> context_boundary: [] </mesh-hint>\n"
	frags, err := Split(text, Options{})
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, text, Options{}, frags)
	if len(frags) != 1 || frags[0].Text != "" {
		t.Errorf("hint-only text (-got +want):\n- %v\n+ one empty fragment", frags)
	}
}

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want int
	}{
		{"empty", "", 0},
		{"latin", "abcdefgh", 2},
		{"rounds up", "abcde", 2},
		{"cjk", "资产负债表", 5},
		{"mixed", "EBITDA 利润", 2 + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EstimateTokens(tt.in); got != tt.want {
				t.Errorf("EstimateTokens(%q) (-got +want):\n- %d\n+ %d", tt.in, got, tt.want)
			}
		})
	}
}

func FuzzSplit(f *testing.F) {
	f.Add(report(3), 100, 0.15, 10, 20)
	f.Add("# A\n\ntext. More text!\n\n| a | b |\n| 1 | 2 |\n- item\n- item two", 5, 0.5, 0, 3)
	f.Add("资产。负债！<mesh-hint>context_boundary: [\"x\"]</mesh-hint>\nx\n内容", 2, 0.0, 1, 2)
	f.Add("```\ncode\n```\nEnd.", 1, -1.0, 0, 0)
	f.Fuzz(func(t *testing.T, text string, target int, budget float64, gs, ge int) {
		opt := Options{TargetTokens: target%2000 + 1, OverlapBudget: budget}
		if gs >= 0 && ge >= gs && ge <= len(text) {
			opt.GuardedSpans = []Range{{gs, ge}}
		}
		frags, err := Split(text, opt)
		if err != nil {
			return
		}
		checkInvariants(t, text, opt, frags)
	})
}

func BenchmarkSplit(b *testing.B) {
	var sb strings.Builder
	for sb.Len() < 100<<10 {
		sb.WriteString(report(30))
	}
	text := sb.String()
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	start := cpuTime()
	for b.Loop() {
		if _, err := Split(text, Options{TargetTokens: 1000}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}
