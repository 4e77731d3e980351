package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/bench"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

// exitError carries the process exit code of a failed command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// badInput marks err as the user's input being wrong: exit code 2.
func badInput(err error) error { return &exitError{code: 2, err: err} }

// exitCode is the process exit code for an error a command returned: the
// code of an *exitError, 1 for anything else.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// benchFlags are the flags of keel bench.
type benchFlags struct {
	targets          []string
	format           string
	rate             float64
	duration         time.Duration
	concurrency      int
	concurrencyLimit int
	stream           bool
	scenario         string
	jsonOut          string
	simURL           string
	model            string
	maxTokens        int
	quick            bool
	timeout          time.Duration
	cpuProfile       string
}

func benchCmd() *cobra.Command {
	var f benchFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Load-test one or more targets (open or closed loop) and report latency percentiles, errors and amplification",
		Long: `Load-test LLM API targets.

Open loop (--rate N): calls are due at a constant rate per target and their
latency counts from the moment they were due, so a slow server cannot hide
its latency by slowing the generator down. Closed loop (--concurrency N
without --rate): N clients per target, back to back, for throughput.
Several --target flags run interleaved in the same run (round-robin per
tick), so their figures are comparable. A target is URL or NAME=URL.

--scenario NAME|FILE loads a load shape and a timeline of simulator faults
(embedded: ` + strings.Join(bench.ScenarioNames(), ", ") + `); flags given
explicitly override the scenario. The timeline and the amplification figure
need the simulator: --sim URL, or a target that is the simulator (detected
by GET /sim/stats). With no --target, an in-process simulator is started and
measured directly.

Exit code 2 means bad input: unknown scenario, malformed scenario file,
unreachable target, bad flag value. Unless GOGC is set, the garbage
collector runs at GOGC=400, so that the generator takes less of the CPU it
shares with the targets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lightGC()
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, os.Interrupt)
			defer stop()
			return runBench(ctx, cmd, &f, cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&f.targets, "target", nil, "URL or NAME=URL of an API base to load (repeatable; targets run interleaved)")
	fl.StringVar(&f.format, "format", "anthropic", "wire format: anthropic, openai (Chat Completions) or responses (the Responses API)")
	fl.Float64Var(&f.rate, "rate", 100, "calls per second per target (open loop)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "how long calls are sent")
	fl.IntVar(&f.concurrency, "concurrency", 0, "clients per target in the closed loop (used when --rate is not given)")
	fl.IntVar(&f.concurrencyLimit, "concurrency-limit", 0, "open loop: cap on calls outstanding per target; calls due over the cap are dropped and counted (0: no cap)")
	fl.BoolVar(&f.stream, "stream", false, "stream the answers (TTFT is reported)")
	fl.StringVar(&f.scenario, "scenario", "", "scenario name (embedded) or YAML file")
	fl.StringVar(&f.jsonOut, "json", "", "write the results as JSON to this file")
	fl.StringVar(&f.simURL, "sim", "", "simulator control URL for the timeline and amplification (default: a target that is a simulator)")
	fl.StringVar(&f.model, "model", bench.DefaultModel, "model to ask for")
	fl.IntVar(&f.maxTokens, "max-tokens", bench.DefaultMaxTokens, "max_tokens of each call")
	fl.BoolVar(&f.quick, "quick", false, "run the scenario for its quick_duration (timeline scaled)")
	fl.DurationVar(&f.timeout, "timeout", 60*time.Second, "bound on one call")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of the generator (the run only) to this file")
	return cmd
}

// parseTarget reads URL or NAME=URL.
func parseTarget(s string) (bench.Target, error) {
	name, raw, ok := strings.Cut(s, "=")
	if !ok || strings.Contains(name, "/") {
		name, raw = "", s
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bench.Target{}, fmt.Errorf("--target %q: want an http:// or https:// URL", s)
	}
	if name == "" {
		name = u.Host
	}
	return bench.Target{Name: name, URL: raw}, nil
}

func runBench(ctx context.Context, cmd *cobra.Command, f *benchFlags, out io.Writer) error {
	changed := cmd.Flags().Changed
	opt := bench.Options{
		Rate:             f.rate,
		Duration:         f.duration,
		ConcurrencyLimit: f.concurrencyLimit,
		Timeout:          f.timeout,
		Request:          bench.Request{Format: f.format, Model: f.model, MaxTokens: f.maxTokens, Stream: f.stream},
	}
	var scen *bench.Scenario
	if f.scenario != "" {
		s, err := bench.LoadScenario(f.scenario)
		if err != nil {
			return badInput(err)
		}
		if f.quick {
			s = s.Quick()
		}
		if changed("duration") {
			s = s.Scaled(f.duration)
		}
		scen = s
		opt.Duration, opt.Timeline = s.Load.Duration.D(), s.Timeline
		r := s.Load.Request
		if changed("format") {
			r.Format = f.format
		}
		if changed("model") {
			r.Model, r.DirectModel = f.model, "" // one model named on the command line serves both sides
		}
		if changed("max-tokens") {
			r.MaxTokens = f.maxTokens
		}
		if changed("stream") {
			r.Stream = f.stream
		}
		opt.Request = r
		if !changed("rate") && s.Load.Rate > 0 {
			opt.Rate = s.Load.Rate
		}
	}
	if llm.ParseFormat(opt.Request.Format) == llm.FormatUnknown {
		return badInput(fmt.Errorf("--format %q: want anthropic, openai or responses", opt.Request.Format))
	}
	if f.concurrency > 0 && !changed("rate") {
		opt.Rate, opt.Concurrency = 0, f.concurrency
	}
	if opt.Rate <= 0 && opt.Concurrency <= 0 {
		return badInput(errors.New("--rate or --concurrency must be positive"))
	}
	if opt.Duration <= 0 {
		return badInput(errors.New("--duration must be positive"))
	}

	for _, s := range f.targets {
		t, err := parseTarget(s)
		if err != nil {
			return badInput(err)
		}
		opt.Targets = append(opt.Targets, t)
	}
	if len(opt.Targets) == 0 {
		fleet, err := sim.New(sim.DefaultConfig())
		if err != nil {
			return err
		}
		srv, err := fleet.Start("127.0.0.1:0")
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(out, "keel bench: no --target; measuring an in-process simulator at %s directly\n", srv.URL())
		fs := bench.FleetSim{Fleet: fleet}
		opt.Sim, opt.Prices = fs, fs.Prices()
		opt.Targets = []bench.Target{{Name: "sim", URL: srv.URL(), Direct: true}}
	} else if err := findSim(ctx, f.simURL, &opt); err != nil {
		return err
	}

	opt.Progress, opt.TTY = out, isTTY(out)
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return badInput(fmt.Errorf("--cpuprofile: %w", err))
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	res, err := bench.Run(ctx, opt)
	if err != nil {
		if errors.Is(err, bench.ErrUnreachable) || errors.Is(err, bench.ErrBadOptions) {
			return badInput(err)
		}
		return err
	}
	if scen != nil {
		res.Scenario = scen.Name
	}
	mode := fmt.Sprintf("open loop, %g req/s per target", opt.Rate)
	if opt.Concurrency > 0 {
		mode = fmt.Sprintf("closed loop, %d clients per target", opt.Concurrency)
	}
	name := "custom"
	if scen != nil {
		name = scen.Name
	}
	fmt.Fprintf(out, "keel bench: scenario %s, %s, %s, %s%s\n", name, mode, opt.Duration, opt.Request.Format, map[bool]string{true: ", streaming"}[opt.Request.Stream])
	for _, a := range res.Actions {
		fmt.Fprintf(out, "  %s\n", a)
	}
	if err := bench.WriteText(out, res); err != nil {
		return err
	}
	if f.jsonOut != "" {
		if err := bench.WriteJSON(f.jsonOut, res); err != nil {
			return err
		}
		fmt.Fprintf(out, "results: %s\n", f.jsonOut)
	}
	return nil
}

// findSim sets opt.Sim from --sim or from the first target that answers
// GET /sim/stats, and marks the targets that are that simulator as direct.
func findSim(ctx context.Context, simURL string, opt *bench.Options) error {
	root := ""
	if simURL != "" {
		if !bench.DetectSim(ctx, simURL) {
			return badInput(fmt.Errorf("--sim %s: no simulator answers GET /sim/stats there", simURL))
		}
		root = simURL
	} else {
		for _, t := range opt.Targets {
			if bench.DetectSim(ctx, t.URL) {
				root = t.URL
				break
			}
		}
	}
	if root == "" {
		return nil
	}
	opt.Sim = bench.HTTPSim{Base: bench.SimRoot(root)}
	for i, t := range opt.Targets {
		opt.Targets[i].Direct = sameHost(t.URL, root)
	}
	return nil
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

// isTTY reports whether w is a terminal.
func isTTY(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && bench.IsTerminal(f)
}
