package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/bench"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// demoScenarios is the order of the demo's table; embedded scenarios not
// listed here follow in name order.
var demoScenarios = []string{"steady", "heavy-tail", "heavy-tail-two-regions", "region-outage", "rate-limit-storm", "provider-throttle", "overload", "malformed-json", "stream-cuts"}

type demoFlags struct {
	quick      bool
	scenarios  []string
	rate       float64
	jsonOut    string
	htmlOut    string
	requestLog string
}

func demoCmd() *cobra.Command {
	var f demoFlags
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run every scenario direct at a simulated fleet and through the mesh, side by side",
		Long: `Start a simulated fleet and the mesh (keel serve's handler on a loopback
listener, so the extra hop is counted), then run every scenario with the
same load sent both straight at the simulator ("direct") and through the
mesh, interleaved in the same run. Print one side-by-side table (latency
percentiles in ms, errors, upstream amplification, the mesh's upstream cost
relative to direct) and write a self-contained HTML report.

--quick runs each scenario for its quick_duration (under a minute in all).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runDemo(ctx, &f, cmd.OutOrStdout())
		},
	}
	cmd.Flags().BoolVar(&f.quick, "quick", false, "short runs (each scenario's quick_duration; under 60 s in all)")
	cmd.Flags().StringSliceVar(&f.scenarios, "scenario", nil, "run only these scenarios (repeatable or comma-separated; default: all, in the table's order)")
	cmd.Flags().Float64Var(&f.rate, "rate", 0, "calls per second per target in every scenario (default: each scenario's own rate)")
	cmd.Flags().StringVar(&f.jsonOut, "json", "", "write the results as JSON to this file")
	cmd.Flags().StringVar(&f.htmlOut, "html", "", "HTML report path (default: keel-demo.html in the temporary directory)")
	cmd.Flags().StringVar(&f.requestLog, "request-log", "", "also write the mesh's request log (SQLite) to this file, for keel report")
	return cmd
}

// warmup is how long both paths are warmed before the first scenario.
const warmup = time.Second

// demoOrder lists the scenarios to run, in table order.
func demoOrder() []string {
	order := append([]string(nil), demoScenarios...)
	known := map[string]bool{}
	for _, n := range order {
		known[n] = true
	}
	for _, n := range bench.ScenarioNames() {
		if !known[n] {
			order = append(order, n)
		}
	}
	return order
}

func runDemo(ctx context.Context, f *demoFlags, out io.Writer) error {
	started := time.Now()
	// sim-claude is also served by the fleet's Bedrock and Vertex fronts
	// (scenario provider-throttle).
	simCfg := sim.DefaultConfig()
	dir, err := os.MkdirTemp("", "keel-demo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	clouds, err := simfleet.AddClouds(&simCfg, "sim-claude", dir)
	if err != nil {
		return err
	}
	fleet, err := sim.New(simCfg)
	if err != nil {
		return err
	}
	simSrv, err := fleet.Start("127.0.0.1:0")
	if err != nil {
		return err
	}
	defer simSrv.Close()
	cfg, err := simfleet.CloudConfig(fleet, simSrv.URL(), clouds)
	if err != nil {
		return err
	}
	if f.requestLog != "" {
		on := true
		cfg.RequestLog.Enabled, cfg.RequestLog.Path = &on, f.requestLog
	}
	m, err := keel.New(cfg)
	if err != nil {
		return err
	}
	defer m.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: m.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	meshURL := "http://" + ln.Addr().String()
	fmt.Fprintf(out, "keel demo: simulator %s, mesh %s (keel serve's handler)\n", simSrv.URL(), meshURL)

	fs := bench.FleetSim{Fleet: fleet}
	prices := fs.Prices()
	tty := isTTY(out)
	var scens []*bench.Scenario
	order := demoOrder()
	if len(f.scenarios) > 0 {
		order = f.scenarios
	}
	for _, name := range order {
		s, err := bench.LoadScenario(name)
		if err != nil {
			return err
		}
		scens = append(scens, s)
	}
	if err := warmUp(ctx, simSrv.URL(), meshURL, scens); err != nil {
		return err
	}
	demo := &bench.Demo{Quick: f.quick}
	for _, s := range scens {
		if f.quick {
			s = s.Quick()
		}
		if f.rate > 0 {
			s.Load.Rate = f.rate
		}
		fmt.Fprintf(out, "scenario %s (%s, %g req/s per target): %s\n", s.Name, s.Load.Duration, s.Load.Rate, demoHeadline(s, f.quick))
		res, err := bench.Run(ctx, bench.Options{
			Targets: []bench.Target{
				{Name: "direct", URL: simSrv.URL(), Direct: true},
				{Name: "mesh", URL: meshURL},
			},
			Request:  s.Load.Request,
			Rate:     s.Load.Rate,
			Duration: s.Load.Duration.D(),
			Timeline: s.Timeline,
			Sim:      fs,
			Prices:   prices,
			Timeout:  30 * time.Second,
			Progress: out,
			TTY:      tty,
		})
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		demo.Scenarios = append(demo.Scenarios, bench.NewDemoScenario(s, res))
	}

	fmt.Fprintln(out)
	fmt.Fprintln(out, "latency in ms over successful calls; ampl. = upstream calls per client call; cost = mesh upstream cost per successful call / direct's")
	if err := bench.WriteDemoTable(out, demo); err != nil {
		return err
	}
	if err := bench.WriteDemoErrors(out, demo); err != nil {
		return err
	}
	if f.jsonOut != "" {
		if err := bench.WriteJSON(f.jsonOut, demo); err != nil {
			return err
		}
		fmt.Fprintf(out, "results: %s\n", f.jsonOut)
	}
	path := f.htmlOut
	if path == "" {
		path = filepath.Join(os.TempDir(), "keel-demo.html")
	}
	hf, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := errors.Join(bench.WriteDemoHTML(hf, demo, time.Now()), hf.Close()); err != nil {
		return err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	fmt.Fprintf(out, "report: %s\n", path)
	fmt.Fprintf(out, "done in %s\n", time.Since(started).Round(100*time.Millisecond))
	return nil
}

// warmUp warms both paths (connections, the mesh's health figures, the
// runtime) so that no scenario's tail is the process starting: the default
// request, and at the same time each other request a scenario sends (its
// model's endpoints learn their latency, which the hedge delay needs:
// before any, it is the ceiling).
func warmUp(ctx context.Context, simURL, meshURL string, scens []*bench.Scenario) error {
	targets := []bench.Target{{Name: "direct", URL: simURL, Direct: true}, {Name: "mesh", URL: meshURL}}
	runs := []bench.Options{{Targets: targets, Rate: 50, Duration: warmup}}
	seen := map[bench.Request]bool{}
	for _, s := range scens {
		if r := s.Load.Request; !seen[r] {
			seen[r] = true
			runs = append(runs, bench.Options{Targets: targets, Request: r, Rate: 20, Duration: warmup})
		}
	}
	errs := make([]error, len(runs))
	var wg sync.WaitGroup
	for i, o := range runs {
		wg.Go(func() { _, errs[i] = bench.Run(ctx, o) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("warming up: %w", err)
	}
	return nil
}

// demoHeadline describes a scenario's run. A description's times are the
// full run's; under --quick the scaled timeline actually played is printed
// in their place (region-outage's "killed at t=10s" is t=1s in 6 s).
func demoHeadline(s *bench.Scenario, quick bool) string {
	if !quick || len(s.Timeline) == 0 {
		return s.Description
	}
	steps := make([]string, len(s.Timeline))
	for i, a := range s.Timeline {
		steps[i] = a.String()
	}
	return "quick timeline " + strings.Join(steps, ", ")
}
