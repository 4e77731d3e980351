package bench

import (
	"fmt"
	"html"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// Plot colours: direct, mesh.
var plotColors = []string{"#c0392b", "#1f6fb2"}

// line is one series of a plot, in data coordinates.
type line struct {
	name   string
	color  string
	dashed bool
	xs, ys []float64
}

// tick is an axis tick at a data coordinate.
type tick struct {
	at    float64
	label string
}

// plot is an SVG line chart.
type plot struct {
	title          string
	xlabel, ylabel string
	x0, x1, y0, y1 float64
	xticks, yticks []tick
	lines          []line
	// marks are vertical markers (timeline steps) at x coordinates.
	marks []tick
}

const plotW, plotH, padL, padR, padT, padB = 560.0, 260.0, 56.0, 12.0, 28.0, 40.0

func (p *plot) px(x float64) float64 {
	return padL + (x-p.x0)/(p.x1-p.x0)*(plotW-padL-padR)
}

func (p *plot) py(y float64) float64 {
	return plotH - padB - (y-p.y0)/(p.y1-p.y0)*(plotH-padT-padB)
}

// svg renders the plot as an inline <svg> element.
func (p *plot) svg() string {
	if p.x1 <= p.x0 {
		p.x1 = p.x0 + 1
	}
	if p.y1 <= p.y0 {
		p.y1 = p.y0 + 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %.0f %.0f" width="%.0f" height="%.0f" role="img" aria-label="%s">`,
		plotW, plotH, plotW, plotH, html.EscapeString(p.title))
	fmt.Fprintf(&b, `<text x="%.0f" y="16" class="t">%s</text>`, padL, html.EscapeString(p.title))
	fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" class="frame"/>`, padL, padT, plotW-padL-padR, plotH-padT-padB)
	for _, t := range p.xticks {
		x := p.px(t.at)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, x, padT, x, plotH-padB)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="xt">%s</text>`, x, plotH-padB+14, html.EscapeString(t.label))
	}
	for _, t := range p.yticks {
		y := p.py(t.at)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="grid"/>`, padL, y, plotW-padR, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="yt">%s</text>`, padL-4, y+4, html.EscapeString(t.label))
	}
	for _, m := range p.marks {
		x := p.px(m.at)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" class="mark"/><text x="%.1f" y="%.1f" class="mt">%s</text>`,
			x, padT, x, plotH-padB, x+3, padT+10, html.EscapeString(m.label))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="xl">%s</text>`, padL+(plotW-padL-padR)/2, plotH-6, html.EscapeString(p.xlabel))
	fmt.Fprintf(&b, `<text x="12" y="%.1f" class="yl" transform="rotate(-90 12 %.1f)">%s</text>`, padT+(plotH-padT-padB)/2, padT+(plotH-padT-padB)/2, html.EscapeString(p.ylabel))
	for i, l := range p.lines {
		var pts []string
		for j := range l.xs {
			y := min(max(l.ys[j], p.y0), p.y1)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", p.px(l.xs[j]), p.py(y)))
		}
		dash := ""
		if l.dashed {
			dash = ` stroke-dasharray="4 3"`
		}
		if len(pts) > 0 {
			fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.6"%s points="%s"/>`, l.color, dash, strings.Join(pts, " "))
		}
		lx := plotW - padR - 150
		ly := padT + 14 + float64(i)*14
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"%s/><text x="%.1f" y="%.1f" class="lg">%s</text>`,
			lx, ly-4, lx+18, ly-4, l.color, dash, lx+22, ly, html.EscapeString(l.name))
	}
	b.WriteString(`</svg>`)
	return b.String()
}

// niceTicks returns about n round ticks over [0, hi], with the axis top.
func niceTicks(hi float64, n int, format func(float64) string) ([]tick, float64) {
	if hi <= 0 {
		hi = 1
	}
	raw := hi / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	top := math.Ceil(hi/step) * step
	var ts []tick
	for v := 0.0; v <= top+step/2; v += step {
		ts = append(ts, tick{v, format(v)})
	}
	return ts, top
}

func fmtMs(v float64) string {
	if v >= 10 || v == 0 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f", v)
}

// overTimePlot plots p50 (dashed) and p99 per time window of each target.
func overTimePlot(title string, ts []*TargetResult, dur time.Duration, actions []string) *plot {
	p := &plot{title: title, xlabel: "time since start (s)", ylabel: "latency (ms)", x1: dur.Seconds()}
	hi := 0.0
	for i, t := range ts {
		var x, y50, y99 []float64
		for _, w := range t.Series {
			if w.P99 == 0 {
				continue
			}
			x = append(x, w.Start.Seconds())
			y50 = append(y50, ms(w.P50))
			y99 = append(y99, ms(w.P99))
			hi = max(hi, ms(w.P99))
		}
		c := plotColors[i%len(plotColors)]
		p.lines = append(p.lines, line{name: t.Name + " p99", color: c, xs: x, ys: y99},
			line{name: t.Name + " p50", color: c, dashed: true, xs: x, ys: y50})
	}
	p.yticks, p.y1 = niceTicks(hi*1.05, 5, fmtMs)
	p.xticks, _ = niceTicks(p.x1, 6, func(v float64) string { return fmt.Sprintf("%g", v) })
	for _, a := range actions {
		at, what, _ := strings.Cut(strings.TrimPrefix(a, "t="), " ")
		if d, err := time.ParseDuration(at); err == nil {
			p.marks = append(p.marks, tick{d.Seconds(), what})
		}
	}
	return p
}

// percentilePlot is an HDR-style percentile distribution: latency against
// the percentile, on a log scale of 1/(1-q) so the tail is readable.
func percentilePlot(title string, ts []*TargetResult) *plot {
	p := &plot{title: title, xlabel: "percentile", ylabel: "latency (ms)", x0: 0, x1: 4}
	hi := 0.0
	for i, t := range ts {
		if t.Latency == nil || t.Latency.Count() == 0 {
			continue
		}
		var x, y []float64
		prev := 0.0
		for _, c := range t.Latency.CDF() {
			q := min(c.Fraction, 0.99999)
			xv := math.Log10(1 / (1 - q))
			x = append(x, prev, xv)
			v := ms(c.Value)
			y = append(y, v, v)
			prev = xv
			hi = max(hi, v)
		}
		p.lines = append(p.lines, line{name: t.Name, color: plotColors[i%len(plotColors)], xs: x, ys: y})
	}
	p.xticks = []tick{{0, "0%"}, {1, "90%"}, {2, "99%"}, {3, "99.9%"}, {4, "99.99%"}}
	p.yticks, p.y1 = niceTicks(hi*1.05, 5, fmtMs)
	return p
}

const htmlHead = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Keel demo: direct vs through the mesh</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1180px;color:#222;padding:0 12px}
h1{font-size:22px}h2{font-size:17px;margin-top:32px;border-top:1px solid #ddd;padding-top:16px}
table{border-collapse:collapse;margin:8px 0}td,th{padding:3px 8px;text-align:right;border-bottom:1px solid #eee}
th:first-child,td:first-child{text-align:left}.muted{color:#777}
.plots{display:flex;flex-wrap:wrap;gap:12px}
svg{background:#fff}svg .frame{fill:none;stroke:#999}svg .grid{stroke:#eee}svg .mark{stroke:#888;stroke-dasharray:2 3}
svg text{font:11px system-ui,sans-serif;fill:#444}svg .t{font-weight:600;font-size:12px}svg .xt{text-anchor:middle}
svg .yt{text-anchor:end}svg .xl,svg .yl{text-anchor:middle}svg .mt{fill:#666;font-size:10px}
</style></head><body>
`

// WriteDemoHTML writes a self-contained HTML report of a demo: the summary
// table, then per scenario its figures, latency over time and percentile
// distribution as inline SVG. No scripts, fonts or other external assets.
func WriteDemoHTML(w io.Writer, d *Demo, generated time.Time) error {
	var b strings.Builder
	b.WriteString(htmlHead)
	b.WriteString("<h1>Keel demo: the same load direct at the simulator and through the mesh</h1>\n")
	mode := "full"
	if d.Quick {
		mode = "quick"
	}
	fmt.Fprintf(&b, `<p class="muted">%s run, generated %s. Latencies in ms over successful calls, measured from each call's due time (open loop). Amplification = upstream calls ÷ client calls; cost = the mesh's upstream cost per successful call ÷ direct's.</p>`+"\n",
		mode, html.EscapeString(generated.Format(time.RFC3339)))
	b.WriteString("<table><tr><th>scenario</th><th>p50 direct</th><th>p50 mesh</th><th>p99 direct</th><th>p99 mesh</th><th>p99.9 direct</th><th>p99.9 mesh</th><th>errors direct</th><th>errors mesh</th><th>ampl. mesh</th><th>cost mesh/direct</th></tr>\n")
	for _, s := range d.Scenarios {
		cost := "-"
		if s.CostOverhead > 0 {
			cost = fmt.Sprintf("%.3f", s.CostOverhead)
		}
		fmt.Fprintf(&b, `<tr><td><a href="#%s">%s</a></td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td></tr>`+"\n",
			html.EscapeString(s.Name), html.EscapeString(s.Name), s.Direct.P50Ms, s.Mesh.P50Ms, s.Direct.P99Ms, s.Mesh.P99Ms,
			s.Direct.P999Ms, s.Mesh.P999Ms, s.Direct.Errors, s.Mesh.Errors, amplText(s.Mesh), cost)
	}
	b.WriteString("</table>\n")
	for _, s := range d.Scenarios {
		ts := []*TargetResult{s.Direct, s.Mesh}
		fmt.Fprintf(&b, `<h2 id="%s">%s</h2><p>%s</p>`, html.EscapeString(s.Name), html.EscapeString(s.Name), html.EscapeString(s.Description))
		if len(s.Actions) > 0 {
			fmt.Fprintf(&b, `<p class="muted">timeline: %s</p>`, html.EscapeString(strings.Join(s.Actions, "; ")))
		}
		b.WriteString("<table><tr><th>target</th><th>requests</th><th>errors</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>ttft p50</th><th>ttft p99</th><th>req/s</th><th>ampl.</th><th>errors by kind</th></tr>\n")
		for _, t := range ts {
			var kinds []string
			for _, k := range slices.Sorted(maps.Keys(t.ErrorsByKind)) {
				kinds = append(kinds, fmt.Sprintf("%s %d", k, t.ErrorsByKind[k]))
			}
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%d</td><td>%d</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%.1f</td><td>%s</td><td>%s</td></tr>\n",
				html.EscapeString(t.Name), t.Requests, t.Errors, t.P50Ms, t.P90Ms, t.P99Ms, t.P999Ms, t.MaxMs, t.TTFTP50Ms, t.TTFTP99Ms,
				t.ThroughputRPS, amplText(t), html.EscapeString(strings.Join(kinds, ", ")))
		}
		b.WriteString("</table>\n<div class=\"plots\">")
		b.WriteString(overTimePlot(s.Name+": latency over time", ts, time.Duration(s.DurationS*float64(time.Second)), s.Actions).svg())
		b.WriteString(percentilePlot(s.Name+": latency by percentile", ts).svg())
		b.WriteString("</div>\n")
	}
	b.WriteString("</body></html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
