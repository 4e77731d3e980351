package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Formats are the names Render accepts.
var Formats = []string{"html", "md", "json"}

// ErrFormat is returned by Render for a format not in Formats.
var ErrFormat = errors.New("unknown report format")

// Render writes r to w as "html" (self-contained: inline CSS and SVG, no
// external assets), "md" (Markdown tables) or "json" (the Report's fields).
func Render(w io.Writer, r *Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "md":
		return writeMarkdown(w, r)
	case "html":
		return page.Execute(w, htmlData{R: r, Charts: charts(r)})
	}
	return fmt.Errorf("%w %q: want one of %s", ErrFormat, format, strings.Join(Formats, ", "))
}

func pct(x float64) string    { return fmt.Sprintf("%.1f%%", 100*x) }
func usd(x float64) string    { return fmt.Sprintf("$%.4f", x) }
func msf(x float64) string    { return fmt.Sprintf("%.1f ms", x) }
func f2(x float64) string     { return fmt.Sprintf("%.2f", x) }
func f3(x float64) string     { return fmt.Sprintf("%.3f", x) }
func hour(t time.Time) string { return t.UTC().Format("2006-01-02 15:00") }

// codeLabel names the error bucket of a missing mesh code.
func codeLabel(code string) string {
	if code == "" {
		return "(no mesh code)"
	}
	return code
}

func binLabel(b Bin) string { return fmt.Sprintf("[%+.2f, %+.2f)", b.Lo, b.Hi) }

func window(r *Report) string {
	if r.First == nil {
		return fmt.Sprintf("since %s: no requests", r.Since.Format(time.RFC3339))
	}
	return fmt.Sprintf("since %s; requests from %s to %s", r.Since.Format(time.RFC3339), r.First.Format(time.RFC3339), r.Last.Format(time.RFC3339))
}

func writeMarkdown(w io.Writer, r *Report) error {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# Keel transparency report\n\nGenerated %s, %s.\n\n", r.GeneratedAt.Format(time.RFC3339), window(r))
	p("| requests | streamed | fragmented | fell back | errors | upstream attempts / request | cost (estimate) |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	p("| %d | %d | %d (%s) | %d (%s) | %d | %s | %s |\n\n", r.Requests, r.Streamed, r.Fragmentation.Requests, pct(r.Fragmentation.Share),
		r.Fallbacks.Total, pct(r.Fallbacks.Rate), r.ErrorsTotal, f3(r.Amplification.PerRequest), usd(r.Cost.TotalUSD))

	f := r.Fragmentation
	p("## Fragmentation\n\n%d of %d requests fragmented (%s); %d fragments sent, %d answered; %d fused fields, %d conflicts.\n\n",
		f.Requests, r.Requests, pct(f.Share), f.FragmentsSent, f.FragmentsOK, f.Fusions, f.FusionConflicts)

	p("## Fallbacks\n\n%d requests (%s) were not served by their first choice. %d were sent straight to the primary endpoint by the safety valve.\n\n",
		r.Fallbacks.Total, pct(r.Fallbacks.Rate), r.Legacy)
	if len(r.Fallbacks.ByReason) > 0 {
		p("| reason | requests |\n|---|---:|\n")
		for _, c := range r.Fallbacks.ByReason {
			p("| %s | %d |\n", md(c.Key), c.N)
		}
		p("\n| first choice: model | region | fallbacks |\n|---|---|---:|\n")
		for _, c := range r.Fallbacks.ByModelRegion {
			p("| %s | %s | %d |\n", md(c.Model), md(c.Region), c.N)
		}
		p("\n")
	}

	n := r.Normalization
	p("## Normaliser compensation\n\n%d requests (%s) had their temperature offset", n.Compensated, pct(n.Share))
	if n.Compensated > 0 {
		p(": min %+.3f, max %+.3f, mean %+.3f.\n\n| offset | requests |\n|---|---:|\n", n.Min, n.Max, n.Mean)
		for _, bin := range n.Histogram {
			p("| %s | %d |\n", binLabel(bin), bin.N)
		}
	} else {
		p(".\n")
	}
	p("\n")

	p("## Latency\n\nOverall: p50 %s, p95 %s, p99 %s.\n\n| hour (UTC) | requests | p50 | p95 | p99 |\n|---|---:|---:|---:|---:|\n",
		msf(r.Latency.Overall.P50), msf(r.Latency.Overall.P95), msf(r.Latency.Overall.P99))
	for _, h := range r.Latency.Hourly {
		p("| %s | %d | %s | %s | %s |\n", hour(h.Hour), h.Requests, msf(h.P50), msf(h.P95), msf(h.P99))
	}
	p("\n")

	a := r.Amplification
	p("## Hedging and retry amplification\n\n%d upstream attempts for %d requests: %s per request. %d retries; %d hedges on %d requests, %d won; %d mid-stream recoveries.\n\n",
		a.Attempts, r.Requests, f3(a.PerRequest), a.Retries, a.Hedges, a.Hedged, a.HedgesWon, a.Recovered)
	p("| kind | attempts | per request |\n|---|---:|---:|\n")
	for _, k := range a.ByKind {
		p("| %s | %d | %s |\n", md(k.Kind), k.Attempts, f3(k.PerRequest))
	}
	p("\n")

	c := r.Cost
	p("## Cost\n\nRecorded %s + hedging overhead %s + redundancy overhead %s = %s.\n\n", usd(c.RecordedUSD), usd(c.HedgeOverheadUSD), usd(c.RedundancyOverheadUSD), usd(c.TotalUSD))
	p("| model | requests | recorded | hedging overhead (est.) | redundancy overhead (est.) | total (est.) | overhead share |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range c.ByModel {
		p("| %s | %d | %s | %s | %s | %s | %s |\n", md(m.Model), m.Requests, usd(m.RecordedUSD), usd(m.HedgeOverheadUSD), usd(m.RedundancyOverheadUSD), usd(m.TotalUSD), pct(m.OverheadShare))
	}
	p("\n%s", c.Note)
	if c.UnpricedAttempts > 0 {
		p(" %d attempts of failed requests have no price and are not included.", c.UnpricedAttempts)
	}
	p("\n\n## Errors\n\n%d requests failed.\n\n", r.ErrorsTotal)
	if len(r.Errors) > 0 {
		p("| mesh_error_code | requests |\n|---|---:|\n")
		for _, e := range r.Errors {
			p("| %s | %d |\n", md(codeLabel(e.Key)), e.N)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// md escapes a table cell.
func md(s string) string {
	if s == "" {
		return "—"
	}
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
