// Package bench measures LLM API targets under load: an open-loop generator
// (constant arrival rate; latency counted from each request's intended send
// time, so a slow server cannot hide its own latency by slowing the
// generator — no coordinated omission) and a closed-loop mode (N clients
// back to back, for throughput), several targets interleaved in one run so
// their figures are comparable, scenarios (a load shape plus a timeline of
// simulator faults) and the reports: text, JSON and a self-contained HTML
// page with SVG plots.
//
// Run blocks until the run ends and every request it sent has finished; it
// is safe to call from several goroutines with different Options. A
// Histogram is not safe for concurrent use; Run guards its own.
package bench
