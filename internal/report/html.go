package report

import (
	"fmt"
	"html/template"
	"math"
	"strings"
)

type htmlData struct {
	R      *Report
	Charts map[string]template.HTML
}

// esc escapes text for SVG markup built outside the template.
func esc(s string) string { return template.HTMLEscapeString(s) }

const (
	chartW   = 720
	labelW   = 220
	valueW   = 110
	barH     = 22
	barGap   = 6
	chartPad = 10
)

// barChart draws one horizontal bar per label, scaled to the largest value.
func barChart(title string, labels []string, values []float64, format func(float64) string) template.HTML {
	if len(values) == 0 {
		return template.HTML(`<p class="none">None.</p>`)
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
	return template.HTML(b.String())
}

// latencyChart draws p50, p95 and p99 per hour as three lines.
func latencyChart(hours []HourLatency) template.HTML {
	if len(hours) == 0 {
		return template.HTML(`<p class="none">None.</p>`)
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
	return template.HTML(b.String())
}

func charts(r *Report) map[string]template.HTML {
	var l []string
	var v []float64
	reset := func() { l, v = nil, nil }
	out := map[string]template.HTML{}

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

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct": pct, "usd": usd, "stage": stageLabel, "status": statusLabel, "plainPath": plainPath, "costLine": costLine, "unpriced": unpriced, "msf": msf, "f3": f3, "hour": hour, "code": codeLabel, "bin": binLabel, "window": window,
	"rfc": func(r *Report) string { return r.GeneratedAt.Format("2006-01-02 15:04:05 MST") },
}).Parse(`<!DOCTYPE html>
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
<p class="sub">Generated {{rfc .R}}; {{window .R}}.</p>
{{with .R}}
<div class="tiles">
<div class="tile" id="total-requests"><b>{{.Requests}}</b>requests</div>
<div class="tile"><b>{{pct .Fragmentation.Share}}</b>fragmented</div>
<div class="tile"><b>{{pct .Fallbacks.Rate}}</b>fell back</div>
<div class="tile"><b>{{f3 .Amplification.PerRequest}}</b>upstream attempts / request</div>
<div class="tile"><b>{{.ErrorsTotal}}</b>errors</div>
<div class="tile"><b>{{usd .Cost.TotalUSD}}</b>cost</div>
</div>

<h2>Fragmentation</h2>
<p>{{.Fragmentation.Requests}} of {{.Requests}} requests fragmented ({{pct .Fragmentation.Share}}); {{.Fragmentation.FragmentsSent}} fragments sent, {{.Fragmentation.FragmentsOK}} answered; {{.Fragmentation.Fusions}} fused fields, {{.Fragmentation.FusionConflicts}} conflicts.</p>

<h2>Rollout and safety valve</h2>
<p id="plain-path">{{plainPath .}}</p>
<table>
<tr><th>rollout stage</th><th>requests</th></tr>
{{range .Stages}}<tr><td>{{stage .Key}}</td><td>{{.N}}</td></tr>
{{end}}</table>

<h2>Fallbacks</h2>
<p>{{.Fallbacks.Total}} requests ({{pct .Fallbacks.Rate}}) were not served by their first choice.</p>
{{end}}
<h3>By reason</h3>
{{index .Charts "fallbacks"}}
<h3>By first choice (model / region)</h3>
{{index .Charts "fallbackModels"}}
{{with .R}}
<h2>Normaliser compensation</h2>
<p>{{.Normalization.Compensated}} requests ({{pct .Normalization.Share}}) had their temperature offset{{if .Normalization.Compensated}}: min {{printf "%+.3f" .Normalization.Min}}, max {{printf "%+.3f" .Normalization.Max}}, mean {{printf "%+.3f" .Normalization.Mean}}{{end}}.</p>
{{end}}
{{index .Charts "normalization"}}
{{with .R}}
<h2>Latency per hour</h2>
<p>Overall: p50 {{msf .Latency.Overall.P50}}, p95 {{msf .Latency.Overall.P95}}, p99 {{msf .Latency.Overall.P99}}.</p>
{{end}}
{{index .Charts "latency"}}
{{with .R}}
<table>
<tr><th>hour (UTC)</th><th>requests</th><th>p50</th><th>p95</th><th>p99</th></tr>
{{range .Latency.Hourly}}<tr><td>{{hour .Hour}}</td><td>{{.Requests}}</td><td>{{msf .P50}}</td><td>{{msf .P95}}</td><td>{{msf .P99}}</td></tr>
{{end}}</table>

<h2>Hedging and retry amplification</h2>
<p>{{.Amplification.Attempts}} upstream attempts for {{.Requests}} requests: {{f3 .Amplification.PerRequest}} per request. {{.Amplification.Retries}} retries; {{.Amplification.Hedges}} hedges on {{.Amplification.Hedged}} requests, {{.Amplification.HedgesWon}} won; {{.Amplification.Recovered}} mid-stream recoveries.</p>
{{end}}
{{index .Charts "amplification"}}
{{with .R}}
<h2>Cost by model</h2>
<p id="cost-line">{{costLine .Cost}}</p>
{{end}}
{{index .Charts "cost"}}
{{with .R}}
<table>
<tr><th>model</th><th>requests</th><th>answers</th><th>hedging overhead</th><th>redundancy overhead</th><th>total</th><th>overhead share</th></tr>
{{range .Cost.ByModel}}<tr><td>{{.Model}}</td><td>{{.Requests}}</td><td>{{usd .RecordedUSD}}</td><td>{{usd .HedgeOverheadUSD}}</td><td>{{usd .RedundancyOverheadUSD}}</td><td>{{usd .TotalUSD}}</td><td>{{pct .OverheadShare}}</td></tr>
{{end}}</table>
<p class="note">{{.Cost.Note}}{{unpriced .Cost}}</p>

<h2>Errors by mesh_error_code</h2>
<p>{{.ErrorsTotal}} requests failed.</p>
{{end}}
{{index .Charts "errors"}}
{{with .R}}
{{if .Errors}}<table id="errors">
<tr><th>mesh_error_code</th><th>HTTP status</th><th>requests</th><th>share of requests</th></tr>
{{range .Errors}}<tr><td>{{code .Code}}</td><td>{{status .Status}}</td><td>{{.N}}</td><td>{{pct .Share}}</td></tr>
{{end}}</table>{{end}}
{{if .AttemptErrors}}<h3>Failed upstream attempts</h3>
<table id="attempt-errors">
<tr><th>outcome</th><th>upstream status</th><th>attempts</th></tr>
{{range .AttemptErrors}}<tr><td>{{.Outcome}}</td><td>{{status .Status}}</td><td>{{.N}}</td></tr>
{{end}}</table>{{end}}
{{end}}
</body>
</html>
`))
