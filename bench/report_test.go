package bench

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"
)

func sampleTarget(name string, base time.Duration, errs int64) *TargetResult {
	var h Histogram
	for i := range 100 {
		h.Record(base + time.Duration(i)*time.Millisecond)
	}
	tr := &TargetResult{Name: name, Requests: 100 + errs, Successes: 100, Errors: errs, ErrorsByKind: map[string]int64{},
		P50Ms: ms(h.Quantile(0.5)), P99Ms: ms(h.Quantile(0.99)), P999Ms: ms(h.Quantile(0.999)), Latency: &h,
		Amplification: 1, UpstreamCostUSD: 0.01}
	if errs > 0 {
		tr.ErrorsByKind["transport"] = errs
	}
	for i := range 10 {
		tr.Series = append(tr.Series, Window{Start: time.Duration(i) * 100 * time.Millisecond, P50: base, P99: base * 2, Calls: 10})
	}
	return tr
}

func sampleDemo() *Demo {
	s := &Scenario{Name: "region-outage", Description: "a <region> dies", Load: Load{Duration: Duration(time.Second)}}
	res := &Result{Targets: []*TargetResult{sampleTarget("direct", 60*time.Millisecond, 40), sampleTarget("mesh", 61*time.Millisecond, 0)},
		Actions: []string{"t=100ms region_down us-east", "t=400ms region_up us-east"}}
	return &Demo{Quick: true, Scenarios: []*DemoScenario{NewDemoScenario(s, res)}}
}

// TestJSONNames checks the result field names other tools read.
func TestJSONNames(t *testing.T) {
	b, err := json.Marshal(Result{Targets: []*TargetResult{sampleTarget("x", time.Millisecond, 1)}})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Targets []map[string]json.RawMessage `json:"targets"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"name", "requests", "errors", "errors_by_kind", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms",
		"ttft_p50_ms", "ttft_p99_ms", "throughput_rps", "amplification", "invalid_json"} {
		if _, ok := got.Targets[0][k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, b)
		}
	}
	d, _ := json.Marshal(sampleDemo())
	for _, k := range []string{`"scenarios":[{"name":"region-outage"`, `"direct":{"name":"direct"`, `"mesh":{"name":"mesh"`} {
		if !bytes.Contains(d, []byte(k)) {
			t.Errorf("demo JSON lacks %s: %s", k, d)
		}
	}
}

// TestDemoTable checks the table's structure: a header and one row per
// scenario, each with a field per column.
func TestDemoTable(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDemoTable(&b, sampleDemo()); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want a header and one row:\n%s", len(lines), b.String())
	}
	for i, l := range lines {
		if n := len(strings.Fields(l)); n != len(DemoColumns)+1 {
			t.Errorf("line %d has %d fields, want %d: %q", i, n, len(DemoColumns)+1, l)
		}
	}
	if f := strings.Fields(lines[1]); f[0] != "region-outage" || f[7] != "40" || f[8] != "0" {
		t.Errorf("row = %q, want region-outage with 40 direct and 0 mesh errors", f)
	}
}

// TestDemoHTML checks the report is one self-contained page with its plots.
func TestDemoHTML(t *testing.T) {
	var b bytes.Buffer
	if err := WriteDemoHTML(&b, sampleDemo(), time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(page, "<svg"); n != 2 {
		t.Errorf("%d SVG plots, want 2 (latency over time, percentiles)", n)
	}
	for _, bad := range []string{"<script", "<link", "src=", "url(", "@import"} {
		if strings.Contains(page, bad) {
			t.Errorf("page has %q: not self-contained", bad)
		}
	}
	// The only URL allowed is the SVG namespace.
	for _, u := range regexp.MustCompile(`https?://[^"'\s<]+`).FindAllString(page, -1) {
		if u != "http://www.w3.org/2000/svg" {
			t.Errorf("page references %s", u)
		}
	}
	for _, want := range []string{"a &lt;region&gt; dies", "region_down us-east", "<polyline", "99.9%"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
