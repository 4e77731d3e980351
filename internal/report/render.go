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
		return writeHTML(w, r)
	}
	return fmt.Errorf("%w %q: want one of %s", ErrFormat, format, strings.Join(Formats, ", "))
}

func pct(x float64) string    { return fmt.Sprintf("%.1f%%", 100*x) }
func usd(x float64) string    { return fmt.Sprintf("$%.4f", x) }
func msf(x float64) string    { return fmt.Sprintf("%.1f ms", x) }
func f3(x float64) string     { return fmt.Sprintf("%.3f", x) }
func hour(t time.Time) string { return t.UTC().Format("2006-01-02 15:00") }

// codeLabel names the error bucket of a missing mesh code.
func codeLabel(code string) string {
	if code == "" {
		return "(no mesh code)"
	}
	return code
}

// stageLabel names a rollout stage; "" is a log without the stage.
func stageLabel(stage string) string {
	if stage == "" {
		return "(not recorded)"
	}
	return stage
}

// statusLabel is an HTTP status, "—" for none.
func statusLabel(status int) string {
	if status == 0 {
		return "—"
	}
	return fmt.Sprint(status)
}

// plainPath is the sentence that says which calls took the plain path and
// why: the rollout's monitor stage is not the safety valve.
func plainPath(r *Report) string {
	p := r.PlainPath
	if p.Total == 0 {
		return "No call took the plain path to the primary model (neither the rollout's monitor stage nor the safety valve)."
	}
	s := fmt.Sprintf("%d calls took the plain path to the primary model: %d in the rollout's monitor stage, %d because the safety valve was open", p.Total, p.Monitor, p.ValveOpen)
	if p.Unattributed > 0 {
		s += fmt.Sprintf(", %d logged before the stage was recorded (monitor stage or open valve: the log cannot tell)", p.Unattributed)
	}
	return s + "."
}

// costLine is the cost section's sum.
func costLine(c Cost) string {
	return fmt.Sprintf("Answers %s + hedging overhead %s (%d race losers) + redundancy overhead %s (%d extra attempts) = %s.",
		usd(c.RecordedUSD), usd(c.HedgeOverheadUSD), c.HedgeLosers, usd(c.RedundancyOverheadUSD), c.RedundantAttempts, usd(c.TotalUSD))
}

// fallbackCacheLine says what fallbacks cost and what the providers'
// prompt caches saved; "" when there was neither.
func fallbackCacheLine(c Cost) string {
	var parts []string
	if c.FallbackAttempts > 0 {
		parts = append(parts, fmt.Sprintf("Fallbacks re-sent %d prompts to another endpoint, costing %s (in the sums above).", c.FallbackAttempts, usd(c.FallbackUSD)))
	}
	if c.CacheReadTokens != 0 || c.CacheWriteTokens != 0 {
		s := fmt.Sprintf("The providers' prompt caches read %d prompt tokens and wrote %d (%d with the 1-hour TTL), saving %s against sending them uncached (each TTL's writes at their price).",
			c.CacheReadTokens, c.CacheWriteTokens, c.CacheWrite1hTokens, usd(c.CacheSavedUSD))
		if c.CacheUnpriced > 0 {
			s += fmt.Sprintf(" %d requests with cache tokens were served by models without a price: not included.", c.CacheUnpriced)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// unpriced is the cost section's sentence on attempts without usage.
func unpriced(c Cost) string {
	if c.UnpricedAttempts == 0 {
		return ""
	}
	return fmt.Sprintf(" %d extra attempts were logged before per-attempt usage was recorded: their cost is unknown and not included.", c.UnpricedAttempts)
}

// spendLine sums the spend section up.
func spendLine(s Spend) string {
	keyed, n := 0.0, 0
	for _, k := range s.ByKey {
		if k.Key != "" {
			keyed += k.USD
			n++
		}
	}
	return fmt.Sprintf("%s spent by %d virtual keys, %s by calls without one; each call's full cost (every attempt), as its key's budget was charged.",
		usd(keyed), n, usd(s.TotalUSD-keyed))
}

// auditLine sums the audit section up.
func auditLine(a *Audit) string {
	return fmt.Sprintf("%d personal-data values found in %d requests; %d requests whose detection failed. The audit log keeps each value's keyed hash, never the value (keel audit lists the rows).",
		a.Values, a.Requests, a.Failures)
}

// kindLabel names an audit row's kind; "" is a failed detection's row.
func kindLabel(k string) string {
	if k == "" {
		return "(detection failed)"
	}
	return k
}

func keyLabel(k string) string {
	if k == "" {
		return "(no key)"
	}
	return k
}

func teamLabel(t string) string {
	if t == "" {
		return "(no team)"
	}
	return t
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
	p("| requests | streamed | fragmented | fell back | errors | upstream attempts / request | cost |\n|---:|---:|---:|---:|---:|---:|---:|\n")
	p("| %d | %d | %d (%s) | %d (%s) | %d | %s | %s |\n\n", r.Requests, r.Streamed, r.Fragmentation.Requests, pct(r.Fragmentation.Share),
		r.Fallbacks.Total, pct(r.Fallbacks.Rate), r.ErrorsTotal, f3(r.Amplification.PerRequest), usd(r.Cost.TotalUSD))

	f := r.Fragmentation
	p("## Fragmentation\n\n%d of %d requests fragmented (%s); %d fragments sent, %d answered; %d fused fields, %d conflicts.\n\n",
		f.Requests, r.Requests, pct(f.Share), f.FragmentsSent, f.FragmentsOK, f.Fusions, f.FusionConflicts)

	p("## Rollout and safety valve\n\n%s\n\n| rollout stage | requests |\n|---|---:|\n", plainPath(r))
	for _, c := range r.Stages {
		p("| %s | %d |\n", stageLabel(c.Key), c.N)
	}
	p("\n## Fallbacks\n\n%d requests (%s) were not served by their first choice.\n\n", r.Fallbacks.Total, pct(r.Fallbacks.Rate))
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
	p("## Cost\n\n%s\n\n", costLine(c))
	if l := fallbackCacheLine(c); l != "" {
		p("%s\n\n", l)
	}
	p("| model | requests | answers | hedging overhead | redundancy overhead | total | overhead share |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, m := range c.ByModel {
		p("| %s | %d | %s | %s | %s | %s | %s |\n", md(m.Model), m.Requests, usd(m.RecordedUSD), usd(m.HedgeOverheadUSD), usd(m.RedundancyOverheadUSD), usd(m.TotalUSD), pct(m.OverheadShare))
	}
	p("\n%s%s\n\n", c.Note, unpriced(c))
	if sp := r.Spend; sp.Keyed() {
		p("## Spend by virtual key and team\n\n%s\n\n| key | team | requests | spend |\n|---|---|---:|---:|\n", spendLine(sp))
		for _, k := range sp.ByKey {
			p("| %s | %s | %d | %s |\n", md(keyLabel(k.Key)), md(teamLabel(k.Team)), k.Requests, usd(k.USD))
		}
		p("\n| team | keys | requests | spend |\n|---|---:|---:|---:|\n")
		for _, t := range sp.ByTeam {
			p("| %s | %d | %d | %s |\n", md(teamLabel(t.Team)), t.Keys, t.Requests, usd(t.USD))
		}
		p("\n")
	}
	if a := r.Audit; a != nil {
		p("## Personal data (audit log)\n\n%s\n\n", auditLine(a))
		if len(a.Counts) > 0 {
			p("| kind | action | outcome | values | requests |\n|---|---|---|---:|---:|\n")
			for _, c := range a.Counts {
				p("| %s | %s | %s | %d | %d |\n", md(kindLabel(c.Kind)), md(c.Action), md(c.Outcome), c.Values, c.Requests)
			}
			p("\n")
		}
	}
	p("## Errors\n\n%d requests failed.\n\n", r.ErrorsTotal)
	if len(r.Errors) > 0 {
		p("| mesh_error_code | HTTP status | requests | share of requests |\n|---|---:|---:|---:|\n")
		for _, e := range r.Errors {
			p("| %s | %s | %d | %s |\n", md(codeLabel(e.Code)), statusLabel(e.Status), e.N, pct(e.Share))
		}
		p("\n")
	}
	if len(r.AttemptErrors) > 0 {
		p("Failed upstream attempts:\n\n| outcome | upstream status | attempts |\n|---|---:|---:|\n")
		for _, e := range r.AttemptErrors {
			p("| %s | %s | %d |\n", md(e.Outcome), statusLabel(e.Status), e.N)
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
