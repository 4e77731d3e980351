package report

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// markup is HTML that is already escaped: a chart, or a fixed fragment.
type markup string

// esc escapes text for SVG markup built outside the page (the escaping of
// text/template's HTMLEscapeString).
var esc = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "'", "&#39;", "&", "&amp;", "<", "&lt;", ">", "&gt;").Replace

// escText escapes a value written into the page's text, as html/template
// escaped it there (its text-node escaper also writes '+' as &#43;), so the
// page is the one the template wrote before. The page is written by hand:
// executing a template reaches reflect.Value.MethodByName, which makes the
// linker keep every exported method of every type in the binary
// (BENCHMARKS.md, session 5).
var escText = strings.NewReplacer("\x00", "\uFFFD", `"`, "&#34;", "&", "&amp;", "'", "&#39;", "+", "&#43;", "<", "&lt;", ">", "&gt;").Replace

const (
	chartW   = 720
	labelW   = 220
	valueW   = 110
	barH     = 22
	barGap   = 6
	chartPad = 10
)

// barChart draws one horizontal bar per label, scaled to the largest value.
func barChart(title string, labels []string, values []float64, format func(float64) string) markup {
	if len(values) == 0 {
		return markup(`<p class="none">None.</p>`)
	}
	top := 0.0
	for _, v := range values {
		top = math.Max(top, v)
	}
	h := 2*chartPad + len(values)*(barH+barGap)
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>%s</title>`, chartW, h, chartW, h, esc(title))
	span := float64(chartW - labelW - valueW)
	for i, v := range values {
		y := chartPad + i*(barH+barGap)
		w := 0.0
		if top > 0 {
			w = span * v / top
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" class="l">%s</text>`, labelW-8, y+barH-6, esc(labels[i]))
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" class="bar"/>`, labelW, y, w, barH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="v">%s</text>`, float64(labelW)+w+6, y+barH-6, esc(format(v)))
	}
	b.WriteString(`</svg>`)
	return markup(b.String())
}

// latencyChart draws p50, p95 and p99 per hour as three lines.
func latencyChart(hours []HourLatency) markup {
	if len(hours) == 0 {
		return markup(`<p class="none">None.</p>`)
	}
	const w, h, left, bottom, top, right = chartW, 280, 70, 40, 20, 90
	maxY := 0.0
	for _, x := range hours {
		maxY = math.Max(maxY, x.P99)
	}
	if maxY == 0 {
		maxY = 1
	}
	px := func(i int) float64 {
		if len(hours) == 1 {
			return left + float64(w-left-right)/2
		}
		return left + float64(i)*float64(w-left-right)/float64(len(hours)-1)
	}
	py := func(v float64) float64 { return top + float64(h-top-bottom)*(1-v/maxY) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img"><title>Latency percentiles per hour</title>`, w, h, w, h)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/><line x1="%d" y1="%d" x2="%d" y2="%d" class="axis"/>`,
		left, top, left, h-bottom, left, h-bottom, w-right, h-bottom)
	for _, f := range []float64{0, 0.5, 1} {
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" class="l">%s</text>`, left-6, py(maxY*f)+4, esc(fmt.Sprintf("%.0f ms", maxY*f)))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" class="l">%s</text>`, left, h-bottom+18, esc(hour(hours[0].Hour)))
	if len(hours) > 1 {
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" class="l">%s</text>`, w-right, h-bottom+18, esc(hour(hours[len(hours)-1].Hour)))
	}
	series := []struct {
		name, class string
		v           func(HourLatency) float64
	}{
		{"p50", "s50", func(x HourLatency) float64 { return x.P50 }},
		{"p95", "s95", func(x HourLatency) float64 { return x.P95 }},
		{"p99", "s99", func(x HourLatency) float64 { return x.P99 }},
	}
	for k, s := range series {
		var pts []string
		for i, x := range hours {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(i), py(s.v(x))))
		}
		fmt.Fprintf(&b, `<polyline points="%s" class="line %s"/>`, strings.Join(pts, " "), s.class)
		for i, x := range hours {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" class="%s"><title>%s %s: %s</title></circle>`, px(i), py(s.v(x)), s.class, esc(hour(x.Hour)), s.name, esc(msf(s.v(x))))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" class="l %s">%s</text>`, w-right+10, top+14+18*k, s.class, s.name)
	}
	b.WriteString(`</svg>`)
	return markup(b.String())
}

func charts(r *Report) map[string]markup {
	var l []string
	var v []float64
	reset := func() { l, v = nil, nil }
	out := map[string]markup{}

	for _, c := range r.Fallbacks.ByReason {
		l, v = append(l, c.Key), append(v, float64(c.N))
	}
	out["fallbacks"] = barChart("Fallbacks by reason", l, v, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	reset()
	for _, c := range r.Fallbacks.ByModelRegion {
		l, v = append(l, c.Model+" / "+c.Region), append(v, float64(c.N))
	}
	out["fallbackModels"] = barChart("Fallbacks by first choice's model and region", l, v, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	reset()
	for _, b := range r.Normalization.Histogram {
		l, v = append(l, binLabel(b)), append(v, float64(b.N))
	}
	out["normalization"] = barChart("Normaliser offsets", l, v, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	reset()
	out["latency"] = latencyChart(r.Latency.Hourly)
	for _, k := range r.Amplification.ByKind {
		l, v = append(l, k.Kind), append(v, k.PerRequest)
	}
	out["amplification"] = barChart("Upstream attempts per request by kind", l, v, f3)
	reset()
	for _, m := range r.Cost.ByModel {
		l, v = append(l, m.Model), append(v, m.TotalUSD)
	}
	out["cost"] = barChart("Cost by model", l, v, usd)
	reset()
	for _, e := range r.Errors {
		l, v = append(l, codeLabel(e.Code)+" / "+statusLabel(e.Status)), append(v, float64(e.N))
	}
	out["errors"] = barChart("Errors by mesh_error_code and HTTP status", l, v, func(x float64) string { return fmt.Sprintf("%.0f", x) })
	return out
}

// writeHTML writes the HTML report: a self-contained page (inline CSS and
// SVG charts, no script, no external reference).
func writeHTML(w io.Writer, r *Report) error {
	c := charts(r)
	var b strings.Builder
	raw := func(s ...string) {
		for _, x := range s {
			b.WriteString(x)
		}
	}
	text := func(format string, a ...any) { b.WriteString(escText(fmt.Sprintf(format, a...))) }
	// row writes one table row of escaped cells.
	row := func(cells ...string) {
		raw("<tr>")
		for _, x := range cells {
			raw("<td>", escText(x), "</td>")
		}
		raw("</tr>\n")
	}
	n := func(i int) string { return fmt.Sprint(i) }

	raw(pageHead)
	raw(`<p class="sub">Generated `)
	text("%s", r.GeneratedAt.Format("2006-01-02 15:04:05 MST"))
	raw("; ")
	text("%s", window(r))
	raw(".</p>\n\n")

	raw("<div class=\"tiles\">\n")
	raw(`<div class="tile" id="total-requests"><b>`, escText(n(r.Requests)), "</b>requests</div>\n")
	raw(`<div class="tile"><b>`, escText(pct(r.Fragmentation.Share)), "</b>fragmented</div>\n")
	raw(`<div class="tile"><b>`, escText(pct(r.Fallbacks.Rate)), "</b>fell back</div>\n")
	raw(`<div class="tile"><b>`, escText(f3(r.Amplification.PerRequest)), "</b>upstream attempts / request</div>\n")
	raw(`<div class="tile"><b>`, escText(n(r.ErrorsTotal)), "</b>errors</div>\n")
	raw(`<div class="tile"><b>`, escText(usd(r.Cost.TotalUSD)), "</b>cost</div>\n")
	raw("</div>\n\n")

	f := r.Fragmentation
	raw("<h2>Fragmentation</h2>\n<p>")
	text("%d of %d requests fragmented (%s); %d fragments sent, %d answered; %d fused fields, %d conflicts.",
		f.Requests, r.Requests, pct(f.Share), f.FragmentsSent, f.FragmentsOK, f.Fusions, f.FusionConflicts)
	raw("</p>\n\n")

	raw("<h2>Rollout and safety valve</h2>\n", `<p id="plain-path">`, escText(plainPath(r)), "</p>\n")
	raw("<table>\n<tr><th>rollout stage</th><th>requests</th></tr>\n")
	for _, s := range r.Stages {
		row(stageLabel(s.Key), n(s.N))
	}
	raw("</table>\n\n")

	raw("<h2>Fallbacks</h2>\n<p>")
	text("%d requests (%s) were not served by their first choice.", r.Fallbacks.Total, pct(r.Fallbacks.Rate))
	raw("</p>\n\n")
	raw("<h3>By reason</h3>\n", string(c["fallbacks"]), "\n")
	raw("<h3>By first choice (model / region)</h3>\n", string(c["fallbackModels"]), "\n\n")

	nz := r.Normalization
	raw("<h2>Normaliser compensation</h2>\n<p>")
	text("%d requests (%s) had their temperature offset", nz.Compensated, pct(nz.Share))
	if nz.Compensated != 0 {
		text(": min %+.3f, max %+.3f, mean %+.3f", nz.Min, nz.Max, nz.Mean)
	}
	raw(".</p>\n\n", string(c["normalization"]), "\n\n")

	l := r.Latency
	raw("<h2>Latency per hour</h2>\n<p>")
	text("Overall: p50 %s, p95 %s, p99 %s.", msf(l.Overall.P50), msf(l.Overall.P95), msf(l.Overall.P99))
	raw("</p>\n\n", string(c["latency"]), "\n\n")
	raw("<table>\n<tr><th>hour (UTC)</th><th>requests</th><th>p50</th><th>p95</th><th>p99</th></tr>\n")
	for _, h := range l.Hourly {
		row(hour(h.Hour), n(h.Requests), msf(h.P50), msf(h.P95), msf(h.P99))
	}
	raw("</table>\n\n")

	a := r.Amplification
	raw("<h2>Hedging and retry amplification</h2>\n<p>")
	text("%d upstream attempts for %d requests: %s per request. %d retries; %d hedges on %d requests, %d won; %d mid-stream recoveries.",
		a.Attempts, r.Requests, f3(a.PerRequest), a.Retries, a.Hedges, a.Hedged, a.HedgesWon, a.Recovered)
	raw("</p>\n\n", string(c["amplification"]), "\n\n")

	raw("<h2>Cost by model</h2>\n", `<p id="cost-line">`, escText(costLine(r.Cost)), "</p>\n\n")
	if l := fallbackCacheLine(r.Cost); l != "" {
		raw(`<p id="fallback-cache-line">`, escText(l), "</p>\n\n")
	}
	raw(string(c["cost"]), "\n\n")
	raw("<table>\n<tr><th>model</th><th>requests</th><th>answers</th><th>hedging overhead</th><th>redundancy overhead</th><th>total</th><th>overhead share</th></tr>\n")
	for _, m := range r.Cost.ByModel {
		row(m.Model, n(m.Requests), usd(m.RecordedUSD), usd(m.HedgeOverheadUSD), usd(m.RedundancyOverheadUSD), usd(m.TotalUSD), pct(m.OverheadShare))
	}
	raw("</table>\n", `<p class="note">`, escText(r.Cost.Note), escText(unpriced(r.Cost)), "</p>\n\n")
	if sp := r.Spend; sp.Keyed() {
		raw("<h2>Spend by virtual key and team</h2>\n", `<p id="spend-line">`, escText(spendLine(sp)), "</p>\n")
		raw(`<table id="spend-keys">`, "\n<tr><th>key</th><th>team</th><th>requests</th><th>spend</th></tr>\n")
		for _, k := range sp.ByKey {
			row(keyLabel(k.Key), teamLabel(k.Team), n(k.Requests), usd(k.USD))
		}
		raw("</table>\n", `<table id="spend-teams">`, "\n<tr><th>team</th><th>keys</th><th>requests</th><th>spend</th></tr>\n")
		for _, t := range sp.ByTeam {
			row(teamLabel(t.Team), n(t.Keys), n(t.Requests), usd(t.USD))
		}
		raw("</table>\n\n")
	}

	if a := r.Audit; a != nil {
		raw("<h2>Personal data (audit log)</h2>\n", `<p id="audit-line">`, escText(auditLine(a)), "</p>\n")
		if len(a.Counts) > 0 {
			raw(`<table id="audit">`, "\n<tr><th>kind</th><th>action</th><th>outcome</th><th>values</th><th>requests</th></tr>\n")
			for _, c := range a.Counts {
				row(kindLabel(c.Kind), c.Action, c.Outcome, n(c.Values), n(c.Requests))
			}
			raw("</table>\n")
		}
		raw("\n")
	}
	raw("<h2>Errors by mesh_error_code</h2>\n<p>")
	text("%d requests failed.", r.ErrorsTotal)
	raw("</p>\n\n", string(c["errors"]), "\n\n")
	if len(r.Errors) > 0 {
		raw(`<table id="errors">`, "\n<tr><th>mesh_error_code</th><th>HTTP status</th><th>requests</th><th>share of requests</th></tr>\n")
		for _, e := range r.Errors {
			row(codeLabel(e.Code), statusLabel(e.Status), n(e.N), pct(e.Share))
		}
		raw("</table>")
	}
	raw("\n")
	if len(r.AttemptErrors) > 0 {
		raw("<h3>Failed upstream attempts</h3>\n", `<table id="attempt-errors">`, "\n<tr><th>outcome</th><th>upstream status</th><th>attempts</th></tr>\n")
		for _, e := range r.AttemptErrors {
			row(e.Outcome, statusLabel(e.Status), n(e.N))
		}
		raw("</table>")
	}
	raw("\n\n</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// pageHead is the page up to its first line of content.
const pageHead = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8"/>
<meta name="viewport" content="width=device-width, initial-scale=1"/>
<title>Keel transparency report</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2rem auto; max-width: 960px; color: #1d2330; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #d8dde6; padding-bottom: 0.2rem; }
table { border-collapse: collapse; margin: 0.6rem 0; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #e5e8ee; text-align: right; }
th:first-child, td:first-child { text-align: left; }
.tiles { display: flex; flex-wrap: wrap; gap: 0.8rem; margin: 1rem 0; }
.tile { border: 1px solid #d8dde6; border-radius: 6px; padding: 0.6rem 0.9rem; min-width: 120px; }
.tile b { display: block; font-size: 1.3rem; }
.note, .none, .sub { color: #5b6475; }
svg { display: block; margin: 0.6rem 0; max-width: 100%; height: auto; }
svg .bar { fill: #3b6fd8; }
svg .l, svg .v { font-size: 12px; fill: #1d2330; }
svg .axis { stroke: #8a93a5; stroke-width: 1; }
svg .line { fill: none; stroke-width: 2; }
svg .s50 { stroke: #3b6fd8; fill: #3b6fd8; }
svg .s95 { stroke: #e09a1a; fill: #e09a1a; }
svg .s99 { stroke: #c8372d; fill: #c8372d; }
svg polyline.s50, svg polyline.s95, svg polyline.s99 { fill: none; }
</style>
</head>
<body>
<h1>Keel transparency report</h1>
`
