package report

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/store/sqlite"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// base is the report window's start, on an hour boundary.
var base = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// fixture returns 200 calls, one a minute from base, with these designed
// properties (i is the call's index):
//   - duration (i%60 + 1) ms;
//   - i%10 == 0 (20): fell back for "overloaded" from m-a/us to m-b/eu;
//   - i%25 == 1 (8): fell back for "rate_limited" from m-b/eu to m-a/us;
//   - i%20 == 5 (10): hedged; the hedge won when i%40 == 5 (5), else the primary;
//   - i ∈ {49, 99, 149} failed with mesh_fallback_exhausted after one attempt;
//     i == 199 is a 400 with no attempt and no mesh code;
//   - otherwise served by m-a when i is even, m-b when odd; one attempt;
//   - the answer cost 0.002 when served by m-a, 0.001 by m-b, also the
//     successful attempt's own cost; a hedge race's losing attempt cost
//     0.0005, failed attempts nothing; the call's cost is its attempts'
//     sum, as the engine's (a hedged call 0.0015);
//   - i%8 == 3 (25): 4 fragments, 3 answered, 2 fusions, 1 conflict when i%16 == 3 (13);
//   - offset -0.1 when i%10 == 0 (20), +0.05 when i%10 == 5 (20), +0.27 when i == 7;
//   - streamed when i%3 == 0 (67);
//   - stage full, but hedging for i == 6 and monitor for i == 4 (plain
//     path, legacy); i == 2 went through the open safety valve (legacy).
//
// and 5 calls before base, which the report must leave out.
func fixture() []*callrec.Record {
	var out []*callrec.Record
	att := func(s time.Time, ep, model, region, kind, outcome string, win bool) callrec.Attempt {
		return callrec.Attempt{Endpoint: ep, Model: model, Region: region, Kind: kind, Outcome: outcome,
			Start: s, End: s.Add(time.Millisecond), Winner: win}
	}
	for i := range 200 {
		s := base.Add(time.Duration(i) * time.Minute)
		r := &callrec.Record{
			Call: callrec.Call{RequestID: "r", Start: s, Duration: time.Duration(i%60+1) * time.Millisecond, Format: llm.FormatOpenAI,
				Model: "m-req", Stream: i%3 == 0},
			Result: callrec.Result{Status: 200},
		}
		serve := func(model, region string) {
			r.ServedBy, r.ServedModel, r.ServedRegion = model+"@"+region, model, region
			r.Cost = map[string]float64{"m-a": 0.002, "m-b": 0.001}[model]
		}
		switch {
		case i == 199:
			r.Status = 400
			r.Err = &llm.APIError{Status: 400}
		case i%50 == 49:
			r.Status = 503
			r.Err = &llm.APIError{Status: 503, MeshCode: "mesh_fallback_exhausted"}
			r.Attempts = []callrec.Attempt{att(s, "m-a@us", "m-a", "us", "primary", "server_error", false)}
		case i%10 == 0:
			r.Fallback, r.Retries = "overloaded", 1
			r.Attempts = []callrec.Attempt{att(s, "m-a@us", "m-a", "us", "primary", "overloaded", false), att(s, "m-b@eu", "m-b", "eu", "retry", "ok", true)}
			serve("m-b", "eu")
		case i%25 == 1:
			r.Fallback, r.Retries = "rate_limited", 1
			r.Attempts = []callrec.Attempt{att(s, "m-b@eu", "m-b", "eu", "primary", "rate_limited", false), att(s, "m-a@us", "m-a", "us", "retry", "ok", true)}
			serve("m-a", "us")
		case i%20 == 5:
			r.Hedges, r.HedgeWon = 1, i%40 == 5
			p, h := "ok", "cancelled_loser"
			if r.HedgeWon {
				p, h = h, p
			}
			r.Attempts = []callrec.Attempt{att(s, "m-b@eu", "m-b", "eu", "primary", p, !r.HedgeWon), att(s, "m-b@us", "m-b", "us", "hedge", h, r.HedgeWon)}
			serve("m-b", "eu")
		default:
			m := map[bool]string{true: "m-a", false: "m-b"}[i%2 == 0]
			r.Attempts = []callrec.Attempt{att(s, m+"@us", m, "us", "primary", "ok", true)}
			serve(m, "us")
		}
		for j := range r.Attempts {
			switch r.Attempts[j].Outcome {
			case "ok":
				r.Attempts[j].Cost = r.Cost
			case "cancelled_loser":
				r.Attempts[j].InputTokens, r.Attempts[j].OutputTokens, r.Attempts[j].Cost = 100, 10, 0.0005
			}
		}
		if r.Hedges > 0 {
			r.Cost += 0.0005 // the engine's figure: every attempt
		}
		r.Stage = map[int]string{4: "monitor", 6: "hedging"}[i]
		if r.Stage == "" {
			r.Stage = "full"
		}
		r.Legacy = i == 2 || i == 4
		if i%8 == 3 {
			r.Fragments = &callrec.Fragments{Count: 4, OK: 3, Fusions: 2}
			if i%16 == 3 {
				r.Fragments.FusionConflicts = 1
			}
		}
		switch {
		case i%10 == 0:
			r.Normalization = &callrec.Normalization{Offset: -0.1}
		case i%10 == 5:
			r.Normalization = &callrec.Normalization{Offset: 0.05}
		case i == 7:
			r.Normalization = &callrec.Normalization{Offset: 0.27}
		}
		out = append(out, r)
	}
	for i := range 5 {
		out = append(out, &callrec.Record{Call: callrec.Call{RequestID: "old", Start: base.Add(-time.Duration(i+1) * time.Hour)}, Route: callrec.Route{Fallback: "overloaded"}, Result: callrec.Result{Status: 200}})
	}
	return out
}

// writeLog writes recs to a new request log and returns its path.
func writeLog(t *testing.T, recs []*callrec.Record) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "requests.db")
	l, err := sqlite.Open(sqlite.Config{Path: path, Now: func() time.Time { return base.Add(4 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		l.RequestDone(r)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Written() != uint64(len(recs)) {
		t.Fatalf("wrote %d of %d records", l.Written(), len(recs))
	}
	return path
}

func build(t *testing.T, path string) *Report {
	t.Helper()
	rd, err := sqlite.OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	r, err := Build(rd.Query(context.Background(), base), Options{Since: base, Now: func() time.Time { return base.Add(5 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestReportNumbers(t *testing.T) {
	rep := build(t, writeLog(t, fixture()))
	var buf bytes.Buffer
	if err := Render(&buf, rep, "json"); err != nil {
		t.Fatal(err)
	}
	var got Report // the JSON a user reads, not the Go value
	if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
		t.Fatalf("decoding the JSON report: %v", err)
	}
	ms := func(p50, p95, p99 float64) Percentiles { return Percentiles{P50: p50, P95: p95, P99: p99} }
	hourAt := func(h int) time.Time { return base.Add(time.Duration(h) * time.Hour) }
	first, last := base, base.Add(199*time.Minute)

	checks := []struct {
		name      string
		got, want any
	}{
		{"window", []any{got.Since, *got.First, *got.Last}, []any{base, first, last}},
		{"requests", got.Requests, 200},
		{"streamed", got.Streamed, 67},
		{"stages", got.Stages, []Count{{"full", 198}, {"hedging", 1}, {"monitor", 1}}},
		{"plain path", got.PlainPath, PlainPath{Total: 2, Monitor: 1, ValveOpen: 1}},
		{"fragmentation", got.Fragmentation, Fragmentation{Requests: 25, Share: 0.125, FragmentsSent: 100, FragmentsOK: 75, Fusions: 50, FusionConflicts: 13}},
		{"fallbacks total", []any{got.Fallbacks.Total, got.Fallbacks.Rate}, []any{28, 0.14}},
		{"fallbacks by reason", got.Fallbacks.ByReason, []Count{{"overloaded", 20}, {"rate_limited", 8}}},
		{"fallbacks by model/region", got.Fallbacks.ByModelRegion, []ModelRegionCount{{"m-a", "us", 20}, {"m-b", "eu", 8}}},
		{"normalization counts", []any{got.Normalization.Compensated, got.Normalization.Share, got.Normalization.Min, got.Normalization.Max, got.Normalization.BinWidth},
			[]any{41, 0.205, -0.1, 0.27, 0.05}},
		{"normalization histogram", got.Normalization.Histogram, []Bin{
			{-0.1, -0.05, 20}, {-0.05, 0, 0}, {0, 0.05, 0}, {0.05, 0.1, 20}, {0.1, 0.15, 0}, {0.15, 0.2, 0}, {0.2, 0.25, 0}, {0.25, 0.3, 1}}},
		// Nearest rank: the 100th, 190th and 198th of 1..60 three times and 1..20.
		{"latency overall", got.Latency.Overall, ms(27, 57, 60)},
		{"latency hourly", got.Latency.Hourly, []HourLatency{
			{hourAt(0), 60, ms(30, 57, 60)}, {hourAt(1), 60, ms(30, 57, 60)}, {hourAt(2), 60, ms(30, 57, 60)}, {hourAt(3), 20, ms(10, 19, 20)}}},
		{"amplification", []any{got.Amplification.Attempts, got.Amplification.PerRequest, got.Amplification.Retries, got.Amplification.Hedges, got.Amplification.Hedged, got.Amplification.HedgesWon},
			[]any{237, 1.185, 28, 10, 10, 5}},
		{"amplification by kind", got.Amplification.ByKind, []KindCount{{"primary", 199, 0.995}, {"retry", 28, 0.14}, {"hedge", 10, 0.05}}},
		{"attempt outcomes", got.Amplification.Outcomes, []Count{{"ok", 196}, {"overloaded", 20}, {"cancelled_loser", 10}, {"rate_limited", 8}, {"server_error", 3}}},
		{"errors", []any{got.ErrorsTotal, got.Errors}, []any{4, []ErrorCount{{"mesh_fallback_exhausted", 503, 3, 0.015}, {"", 400, 1, 0.005}}}},
		{"attempt errors", got.AttemptErrors, []AttemptError{{"overloaded", 0, 20}, {"rate_limited", 0, 8}, {"server_error", 0, 3}}},
		{"priced attempts", []any{got.Cost.UnpricedAttempts, got.Cost.HedgeLosers, got.Cost.RedundantAttempts}, []any{0, 10, 31}},
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("(-got +want)\n-%+v\n+%+v", c.got, c.want)
			}
		})
	}

	t.Run("normalization mean", func(t *testing.T) {
		if want := (20*-0.1 + 20*0.05 + 0.27) / 41; !near(got.Normalization.Mean, want) {
			t.Errorf("mean %v, want %v", got.Normalization.Mean, want)
		}
	})
	// m-a serves 76 plain even calls and the 8 rate_limited fallbacks (each
	// with one failed attempt, billed nothing); m-b serves 82 plain odd
	// calls, the 20 overloaded fallbacks (one failed attempt each) and the
	// 10 hedged calls (one losing attempt each at its own 0.0005).
	t.Run("cost", func(t *testing.T) {
		want := []ModelCost{
			{Model: "m-a", Requests: 84, RecordedUSD: 0.168, TotalUSD: 0.168},
			{Model: "m-b", Requests: 112, RecordedUSD: 0.112, HedgeOverheadUSD: 0.005, TotalUSD: 0.117, OverheadShare: 0.005 / 0.117},
			{Model: "unserved: m-req", Requests: 4},
		}
		if len(got.Cost.ByModel) != len(want) {
			t.Fatalf("by model: %+v", got.Cost.ByModel)
		}
		for i, w := range want {
			g := got.Cost.ByModel[i]
			if g.Model != w.Model || g.Requests != w.Requests || !near(g.RecordedUSD, w.RecordedUSD) || !near(g.HedgeOverheadUSD, w.HedgeOverheadUSD) ||
				!near(g.RedundancyOverheadUSD, w.RedundancyOverheadUSD) || !near(g.TotalUSD, w.TotalUSD) || !near(g.OverheadShare, w.OverheadShare) {
				t.Errorf("model %d (-got +want)\n-%+v\n+%+v", i, g, w)
			}
		}
		c := got.Cost
		if !near(c.RecordedUSD, 0.280) || !near(c.HedgeOverheadUSD, 0.005) || c.RedundancyOverheadUSD != 0 || !near(c.TotalUSD, 0.285) {
			t.Errorf("totals %+v, want recorded 0.280 hedge 0.005 redundancy 0 total 0.285", c)
		}
		if !strings.Contains(c.Note, "own tokens") {
			t.Errorf("the cost note does not say how the overheads are priced: %q", c.Note)
		}
	})
}

// near compares money and ratios summed in floating point.
func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestRenderHTML(t *testing.T) {
	rep := build(t, writeLog(t, fixture()))
	var buf bytes.Buffer
	if err := Render(&buf, rep, "html"); err != nil {
		t.Fatal(err)
	}
	doc := buf.String()

	// Well-formed: every element closed, every attribute quoted, no stray '&'.
	d := xml.NewDecoder(strings.NewReader(doc))
	d.Entity = xml.HTMLEntity
	svgs, tile := 0, ""
	inTile := false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("HTML is not well-formed: %v", err)
		}
		switch tk := tok.(type) {
		case xml.StartElement:
			if tk.Name.Local == "svg" {
				svgs++
			}
			for _, a := range tk.Attr {
				if a.Name.Local == "id" && a.Value == "total-requests" {
					inTile = true
				}
				if a.Name.Local == "src" || a.Name.Local == "href" {
					t.Errorf("external reference %s=%q", a.Name.Local, a.Value)
				}
			}
		case xml.CharData:
			if inTile {
				tile += string(tk)
			}
		case xml.EndElement:
			if tk.Name.Local == "div" {
				inTile = false
			}
		}
	}
	if svgs != 7 {
		t.Errorf("%d <svg> charts, want 7", svgs)
	}
	if tile != "200requests" {
		t.Errorf("total tile %q, want 200requests", tile)
	}
	for _, want := range []string{
		"14.0%</b>fell back", "12.5%</b>fragmented", "1.185</b>upstream attempts", "$0.2850</b>cost",
		"<td>m-b</td><td>112</td><td>$0.1120</td><td>$0.0050</td><td>$0.0000</td><td>$0.1170</td>",
		"<tr><td>mesh_fallback_exhausted</td><td>503</td><td>3</td><td>1.5%</td></tr>",
		"<tr><td>(no mesh code)</td><td>400</td><td>1</td><td>0.5%</td></tr>",
		"<tr><td>overloaded</td><td>—</td><td>20</td></tr>",
		"2 calls took the plain path to the primary model: 1 in the rollout&#39;s monitor stage, 1 because the safety valve was open.",
		"<tr><td>monitor</td><td>1</td></tr>",
		"Answers $0.2800 &#43; hedging overhead $0.0050 (10 race losers) &#43; redundancy overhead $0.0000 (31 extra attempts) = $0.2850.",
		"own tokens at its endpoint&#39;s price",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("HTML lacks %q", want)
		}
	}
	for _, bad := range []string{"<script", "url(", "NaN", "Inf"} {
		if strings.Contains(doc, bad) {
			t.Errorf("HTML contains %q", bad)
		}
	}
}

func TestRenderMarkdown(t *testing.T) {
	rep := build(t, writeLog(t, fixture()))
	var buf bytes.Buffer
	if err := Render(&buf, rep, "md"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 200 | 67 | 25 (12.5%) | 28 (14.0%) | 4 | 1.185 | $0.2850 |",
		"| overloaded | 20 |", "2 calls took the plain path to the primary model: 1 in the rollout's monitor stage, 1 because the safety valve was open.",
		"| full | 198 |", "| monitor | 1 |", "| m-a | us | 20 |", "| [-0.10, -0.05) | 20 |",
		"| 2026-03-01 13:00 | 20 | 10.0 ms | 19.0 ms | 20.0 ms |", "| hedge | 10 | 0.050 |",
		"| m-b | 112 | $0.1120 | $0.0050 | $0.0000 | $0.1170 | 4.3% |",
		"Answers $0.2800 + hedging overhead $0.0050 (10 race losers) + redundancy overhead $0.0000 (31 extra attempts) = $0.2850.",
		"| mesh_fallback_exhausted | 503 | 3 | 1.5% |", "| (no mesh code) | 400 | 1 | 0.5% |", "| server_error | — | 3 |",
	} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("Markdown lacks %q\n%s", want, buf.String())
		}
	}
}

func TestEmptyLog(t *testing.T) {
	rep := build(t, writeLog(t, nil))
	for _, f := range Formats {
		t.Run(f, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Render(&buf, rep, f); err != nil {
				t.Fatal(err)
			}
			if s := buf.String(); strings.Contains(s, "NaN") || strings.Contains(s, "Inf") {
				t.Errorf("%s report of an empty log has NaN or Inf:\n%s", f, s)
			}
		})
	}
	if rep.Requests != 0 || rep.First != nil || len(rep.Latency.Hourly) != 0 {
		t.Errorf("empty report: %+v", rep)
	}
}

func TestRenderUnknownFormat(t *testing.T) {
	err := Render(io.Discard, &Report{}, "pdf")
	if err == nil || !strings.Contains(err.Error(), `unknown report format "pdf": want one of html, md, json`) {
		t.Errorf("Render(pdf) = %v", err)
	}
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		name string
		in   []float64
		p    float64
		want float64
	}{
		{"empty", nil, 50, 0},
		{"one", []float64{7}, 99, 7},
		{"p50 of 4", []float64{1, 2, 3, 4}, 50, 2},
		{"p99 of 100", seq(100), 99, 99},
		{"p100", []float64{1, 2, 3}, 100, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Percentile(tt.in, tt.p); got != tt.want {
				t.Errorf("Percentile = %v, want %v", got, tt.want)
			}
		})
	}
}

func seq(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = float64(i + 1)
	}
	return s
}

func TestNormalizationWideRange(t *testing.T) {
	n := normalization([]float64{-1, 1.2}, 0.2, 2)
	if n.BinWidth != 0.1 || len(n.Histogram) != 23 || n.Histogram[0].N != 1 || n.Histogram[22].N != 1 {
		t.Errorf("width %v, %d bins: %+v", n.BinWidth, len(n.Histogram), n.Histogram)
	}
}
