package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// progress reports the run's advance until stop closes: a bar redrawn in
// place on a terminal, a plain line every few seconds otherwise.
func progress(opt Options, recs []*recorder, start time.Time, stop <-chan struct{}) {
	if opt.Progress == nil {
		return
	}
	every := min(max(opt.Duration/5, time.Second), 10*time.Second)
	if opt.TTY {
		every = 200 * time.Millisecond
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			if opt.TTY {
				fmt.Fprintf(opt.Progress, "\r%s\r", strings.Repeat(" ", 100))
			}
			return
		case <-t.C:
		}
		el := time.Since(start)
		var b strings.Builder
		if opt.TTY {
			const width = 24
			frac := min(float64(el)/float64(opt.Duration), 1)
			n := int(frac * width)
			fmt.Fprintf(&b, "\r[%s%s] %3.0f%% ", strings.Repeat("=", n), strings.Repeat(" ", width-n), frac*100)
		} else {
			b.WriteString("bench: ")
		}
		fmt.Fprintf(&b, "%5.1fs/%s", min(el, opt.Duration).Seconds(), opt.Duration)
		for _, r := range recs {
			fmt.Fprintf(&b, "  %s: %d sent, %d err", r.t.Name, r.sent.Load(), r.failed.Load())
			if d := r.dropped.Load(); d > 0 {
				fmt.Fprintf(&b, ", %d dropped", d)
			}
		}
		if !opt.TTY {
			b.WriteByte('\n')
		}
		io.WriteString(opt.Progress, b.String())
	}
}

// IsTerminal reports whether f is a character device (a terminal).
func IsTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// WriteText prints a run's figures as one table, a row per target.
func WriteText(w io.Writer, res *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	stream := false
	for _, t := range res.Targets {
		if t.TTFT != nil && t.TTFT.Count() > 0 {
			stream = true
		}
	}
	hdr := "target\trequests\terrors\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t"
	if stream {
		hdr += "ttft p50\tttft p99\t"
	}
	hdr += "req/s\tampl.\t"
	fmt.Fprintln(tw, hdr)
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t", t.Name, t.Requests, t.Errors, t.P50Ms, t.P90Ms, t.P99Ms, t.P999Ms, t.MaxMs)
		if stream {
			fmt.Fprintf(tw, "%.2f\t%.2f\t", t.TTFTP50Ms, t.TTFTP99Ms)
		}
		fmt.Fprintf(tw, "%.1f\t%s\t\n", t.ThroughputRPS, amplText(t))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range res.Targets {
		if t.Errors == 0 && t.Dropped == 0 {
			continue
		}
		fmt.Fprintf(w, "%s errors: %s\n", t.Name, errorBreakdown(t))
	}
	return nil
}

// errorBreakdown is a target's errors by kind ("status_503 3, transport 1"),
// then the calls dropped by the client's concurrency limit.
func errorBreakdown(t *TargetResult) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(t.ErrorsByKind)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, t.ErrorsByKind[k]))
	}
	if t.Dropped > 0 {
		parts = append(parts, fmt.Sprintf("dropped (over --concurrency-limit, not sent) %d", t.Dropped))
	}
	return strings.Join(parts, ", ")
}

// WriteDemoErrors prints, below the demo table, one line per scenario and
// target that had errors: their breakdown by kind (status, MESH_* code,
// transport, timeout …), so the table's error counts can be read.
func WriteDemoErrors(w io.Writer, d *Demo) error {
	for _, s := range d.Scenarios {
		for _, t := range []*TargetResult{s.Direct, s.Mesh} {
			if t == nil || t.Errors == 0 && t.Dropped == 0 {
				continue
			}
			if _, err := fmt.Fprintf(w, "%s %s errors: %s\n", s.Name, t.Name, errorBreakdown(t)); err != nil {
				return err
			}
		}
	}
	return nil
}

func amplText(t *TargetResult) string {
	if t.Amplification == 0 {
		return "-"
	}
	s := fmt.Sprintf("%.3f", t.Amplification)
	if t.AmplificationShared {
		s += "*"
	}
	return s
}

// WriteJSON writes v as indented JSON to path.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// DemoScenario is one scenario of a demo: the same load direct at the
// simulator and through the mesh, in the same run.
type DemoScenario struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// DurationS is the planned length of the run, in seconds.
	DurationS float64       `json:"duration_s"`
	Actions   []string      `json:"actions,omitempty"`
	Direct    *TargetResult `json:"direct"`
	Mesh      *TargetResult `json:"mesh"`
	// CostOverhead is the mesh's upstream cost per successful call ÷ the
	// direct one (0 when either is unknown): what the mesh's retries,
	// hedges and fallbacks cost for each answer delivered.
	CostOverhead float64 `json:"cost_overhead"`
}

// Demo is the outcome of a demo: every scenario, in order.
type Demo struct {
	Quick     bool            `json:"quick"`
	Scenarios []*DemoScenario `json:"scenarios"`
}

// NewDemoScenario pairs the two targets of a run (direct first).
func NewDemoScenario(s *Scenario, res *Result) *DemoScenario {
	d := &DemoScenario{Name: s.Name, Description: s.Description, DurationS: s.Load.Duration.D().Seconds(),
		Actions: res.Actions, Direct: res.Targets[0], Mesh: res.Targets[1]}
	dc, mc := d.Direct, d.Mesh
	if dc.UpstreamCostUSD > 0 && mc.UpstreamCostUSD > 0 && dc.Successes > 0 && mc.Successes > 0 {
		r := (mc.UpstreamCostUSD / float64(mc.Successes)) / (dc.UpstreamCostUSD / float64(dc.Successes))
		d.CostOverhead = math.Round(r*1000) / 1000
	}
	return d
}

// DemoColumns are the columns of the demo table, after the scenario name.
var DemoColumns = []string{
	"p50 direct", "p50 mesh", "p99 direct", "p99 mesh", "p99.9 direct", "p99.9 mesh",
	"errors direct", "errors mesh", "ampl. mesh", "cost mesh/direct",
}

// WriteDemoTable prints the side-by-side table: a header row, then one row
// per scenario with exactly len(DemoColumns)+1 whitespace-separated fields
// (latencies in ms).
func WriteDemoTable(w io.Writer, d *Demo) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := make([]string, len(DemoColumns))
	for i, c := range DemoColumns {
		cols[i] = strings.ReplaceAll(c, " ", "_")
	}
	fmt.Fprintf(tw, "scenario\t%s\t\n", strings.Join(cols, "\t"))
	for _, s := range d.Scenarios {
		cost := "-"
		if s.CostOverhead > 0 {
			cost = fmt.Sprintf("%.3f", s.CostOverhead)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%s\t%s\t\n", s.Name,
			s.Direct.P50Ms, s.Mesh.P50Ms, s.Direct.P99Ms, s.Mesh.P99Ms, s.Direct.P999Ms, s.Mesh.P999Ms,
			s.Direct.Errors, s.Mesh.Errors, amplText(s.Mesh), cost)
	}
	return tw.Flush()
}
