package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/normalize/calstore"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/sim"
)

// calibrateFlags are the flags of keel calibrate.
type calibrateFlags struct {
	reference, target string
	prompts           string
	grid              string
	samples           int
	db                string
	id                string
	useSim            bool
	simConfig         string
	simScales         []string
	baseURL           string
	format            string
	apiKeyEnv         string
	maxTokens         int
	concurrency       int
	timeout           time.Duration
}

func calibrateCmd() *cobra.Command {
	var f calibrateFlags
	cmd := &cobra.Command{
		Use:   "calibrate --reference MODEL --target MODEL --prompts FILE",
		Short: "Learn the temperature mapping that makes a target model sample as diversely as a reference model",
		Long: `Learn a temperature calibration between two models.

Both models answer every prompt of --prompts (one prompt per line; blank
lines and lines starting with # are skipped) --samples times at every
temperature of --grid. The diversity of a model at a temperature is the
mean pairwise word-level edit distance between its samples, averaged over
the prompts. For each reference temperature the calibration finds the target
temperature of equal diversity (isotonic smoothing, then monotone
interpolation; a reference diversity the target never reaches is clamped and
marked), stores the map in SQLite (--db) under --id, and prints the offsets.
Requests name it with mesh_behavior.calibration_id; the mesh also applies the
newest calibration of a (requested, serving) pair on fallback.

By default (or with --sim) the models are sampled from an in-process
simulator: the built-in fleet, or --sim-config FILE, with temperature scales
overridden by --sim-scale MODEL=SCALE. With --base-url URL --format
anthropic|openai they are sampled from a real endpoint (a provider or a Keel
proxy; normalisation is disabled on those calls with X-Mesh-Behavior); the
API key is read from --api-key-env.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runCalibrate(cmd, &f) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.reference, "reference", "", "the model the caller tuned for (required)")
	fl.StringVar(&f.target, "target", "", "the model that may serve instead (required)")
	fl.StringVar(&f.prompts, "prompts", "", "file of prompts, one per line (required)")
	fl.StringVar(&f.grid, "grid", "0:1:0.1", `reference temperatures: "0,0.3,0.7", "0,0.1,...,1" or START:STOP:STEP`)
	fl.IntVar(&f.samples, "samples", 6, "answers per prompt and temperature (at least 2)")
	fl.StringVar(&f.db, "db", calstore.DefaultPath, "SQLite database the calibration is stored in")
	fl.StringVar(&f.id, "id", "", "calibration_id to store it under (default REFERENCE-to-TARGET)")
	fl.BoolVar(&f.useSim, "sim", false, "sample an in-process simulator (the default when --base-url is not given)")
	fl.StringVar(&f.simConfig, "sim-config", "", "simulator YAML config (default: the built-in fleet)")
	fl.StringArrayVar(&f.simScales, "sim-scale", nil, "MODEL=SCALE: override a simulated model's temperature_scale (repeatable)")
	fl.StringVar(&f.baseURL, "base-url", "", "sample a real endpoint: the API base URL (e.g. https://api.anthropic.com or http://localhost:8080/v1)")
	fl.StringVar(&f.format, "format", "", "wire format of --base-url: anthropic or openai (the simulator is called in openai format unless set)")
	fl.StringVar(&f.apiKeyEnv, "api-key-env", "", "environment variable holding the API key (default ANTHROPIC_API_KEY or OPENAI_API_KEY by format)")
	fl.IntVar(&f.maxTokens, "max-tokens", 256, "max_tokens of each sampled answer")
	fl.IntVar(&f.concurrency, "concurrency", 8, "calls in flight at once")
	fl.DurationVar(&f.timeout, "timeout", 60*time.Second, "timeout of each call")
	return cmd
}

// sampler answers one prompt from one model at one temperature.
type sampler struct {
	client  *http.Client
	url     string
	format  llm.Format
	header  http.Header
	maxTok  int
	timeout time.Duration
}

func runCalibrate(cmd *cobra.Command, f *calibrateFlags) error {
	switch {
	case f.reference == "" || f.target == "":
		return badInput(errors.New("--reference and --target are required"))
	case f.reference == f.target:
		return badInput(fmt.Errorf("--reference and --target are both %q", f.reference))
	case f.prompts == "":
		return badInput(errors.New("--prompts FILE is required"))
	case f.samples < 2:
		return badInput(fmt.Errorf("--samples %d: at least 2 are needed to measure diversity", f.samples))
	case f.concurrency < 1:
		return badInput(fmt.Errorf("--concurrency %d: must be at least 1", f.concurrency))
	case f.maxTokens < 1:
		return badInput(fmt.Errorf("--max-tokens %d: must be at least 1", f.maxTokens))
	case f.useSim && f.baseURL != "":
		return badInput(errors.New("--sim and --base-url exclude each other"))
	case f.baseURL == "" && f.apiKeyEnv != "":
		return badInput(errors.New("--api-key-env needs --base-url"))
	case f.baseURL != "" && (f.simConfig != "" || len(f.simScales) > 0):
		return badInput(errors.New("--sim-config and --sim-scale need the simulator, not --base-url"))
	}
	grid, err := normalize.ParseGrid(f.grid)
	if err != nil {
		return badInput(fmt.Errorf("--grid: %w", err))
	}
	prompts, err := readPrompts(f.prompts)
	if err != nil {
		return badInput(err)
	}
	format := llm.FormatOpenAI
	if f.format != "" {
		if format = llm.ParseFormat(f.format); format == llm.FormatUnknown {
			return badInput(fmt.Errorf("--format %q: want anthropic or openai", f.format))
		}
	} else if f.baseURL != "" {
		return badInput(errors.New("--base-url needs --format anthropic|openai"))
	}
	codec := wire.For(format)
	if top := codec.MaxTemperature(); grid[len(grid)-1] > top {
		return badInput(fmt.Errorf("--grid: %s temperatures stop at %g, the grid reaches %g", format, top, grid[len(grid)-1]))
	}
	if f.id == "" {
		f.id = f.reference + "-to-" + f.target
	}

	s := &sampler{format: format, maxTok: f.maxTokens, timeout: f.timeout, header: http.Header{}}
	// Calls through a Keel proxy must not be normalised themselves; other
	// endpoints ignore the header.
	s.header.Set("X-Mesh-Behavior", `{"disable_normalization":true}`)
	source := f.baseURL
	if f.baseURL == "" {
		fleet, err := calibrationFleet(f)
		if err != nil {
			return err
		}
		s.client = &http.Client{Transport: fleet.Transport()}
		s.url = endpointURL(fleet.BaseURL("", format), format) // each model's first region
		source = "the in-process simulator"
	} else {
		s.client = &http.Client{}
		s.url = endpointURL(f.baseURL, format)
		env := f.apiKeyEnv
		if env == "" {
			env = codec.KeyEnv()
		}
		// The default API version: 2026-10-21 takes no temperature.
		codec.SetAuth(s.header.Set, os.Getenv(env), codec.APIVersion("", nil))
	}

	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	// One probe call per model turns a wrong name into bad input before
	// the sweep starts.
	for _, m := range []string{f.reference, f.target} {
		if _, err := s.sample(ctx, m, prompts[0], 0); err != nil {
			var ae *llm.APIError
			if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusBadRequest) {
				return badInput(fmt.Errorf("model %q: %s", m, ae.Message))
			}
			return fmt.Errorf("sampling %s: %w", m, err)
		}
	}
	start := time.Now()
	div, err := s.sweep(ctx, []string{f.reference, f.target}, grid, prompts, f.samples, f.concurrency)
	if err != nil {
		return err
	}
	c, err := normalize.Fit(grid, div[0], div[1])
	if err != nil {
		return fmt.Errorf("fitting the calibration: %w", err)
	}
	c.ID, c.Reference, c.Target = f.id, f.reference, f.target
	c.Samples, c.Prompts, c.CreatedAt = f.samples, len(prompts), time.Now().UTC()
	store, err := calstore.Open(f.db)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Save(ctx, c); err != nil {
		return err
	}

	out := cmd.OutOrStdout()
	calls := 2 * len(grid) * len(prompts) * f.samples
	fmt.Fprintf(out, "calibration %s: %s -> %s from %s\n", c.ID, c.Reference, c.Target, source)
	fmt.Fprintf(out, "%d temperatures x %d prompts x %d samples x 2 models = %d calls in %s; stored in %s\n\n",
		len(grid), len(prompts), f.samples, calls, time.Since(start).Round(time.Millisecond), f.db)
	fmt.Fprintf(out, "%8s %10s %10s %8s %10s\n", "ref T", "ref div", "target T", "offset", "target div")
	for i, t := range grid {
		note := ""
		if c.Clamped[i] {
			note = "  clamped: the target never got this diverse (or this uniform)"
		}
		td := "-"
		if j, ok := slices.BinarySearch(c.TargetGrid, t); ok {
			td = strconv.FormatFloat(c.TargetDiversity[j], 'f', 3, 64)
		}
		fmt.Fprintf(out, "%8.2f %10.3f %10.3f %8s %10s%s\n", t, c.RefDiversity[i], c.Mapped[i], normalize.FormatOffset(c.Mapped[i]-t), td, note)
	}
	return nil
}

// calibrationFleet builds the in-process simulator: --sim-config or the
// default fleet, with --sim-scale overrides; both models must be in it.
func calibrationFleet(f *calibrateFlags) (*sim.Fleet, error) {
	cfg := sim.ZeroLatency()
	if f.simConfig != "" {
		data, err := os.ReadFile(f.simConfig)
		if err != nil {
			return nil, badInput(fmt.Errorf("--sim-config: %w", err))
		}
		if cfg, err = sim.ParseConfig(data); err != nil {
			// The YAML error quotes the source over several lines; its first
			// line names the position and the problem.
			msg, _, _ := strings.Cut(err.Error(), "\n")
			return nil, badInput(fmt.Errorf("--sim-config %s: %s", f.simConfig, msg))
		}
	}
	// Sampling is a measurement: faults and latency would only slow it.
	cfg.Faults = nil
	for _, kv := range f.simScales {
		name, v, ok := strings.Cut(kv, "=")
		scale, err := strconv.ParseFloat(v, 64)
		if !ok || err != nil {
			return nil, badInput(fmt.Errorf("--sim-scale %q: want MODEL=SCALE", kv))
		}
		i := slices.IndexFunc(cfg.Models, func(m sim.ModelSpec) bool { return m.Name == name })
		if i < 0 {
			return nil, badInput(fmt.Errorf("--sim-scale %q: unknown model %q", kv, name))
		}
		cfg.Models[i].TemperatureScale = scale
	}
	for _, m := range []string{f.reference, f.target} {
		if !slices.ContainsFunc(cfg.Models, func(s sim.ModelSpec) bool { return s.Name == m }) {
			names := make([]string, len(cfg.Models))
			for i := range cfg.Models {
				names[i] = cfg.Models[i].Name
			}
			return nil, badInput(fmt.Errorf("unknown model %q: the simulator serves %s", m, strings.Join(names, ", ")))
		}
	}
	fleet, err := sim.New(cfg)
	if err != nil {
		return nil, badInput(err)
	}
	return fleet, nil
}

// readPrompts reads one prompt per line, skipping blank and # lines.
func readPrompts(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--prompts: %w", err)
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--prompts %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--prompts %s: no prompts in the file", path)
	}
	return out, nil
}

// endpointURL appends the API path to a base URL the way the SDKs do:
// Anthropic bases end before /v1, OpenAI bases include it.
func endpointURL(base string, format llm.Format) string { return wire.For(format).RequestURL(base) }

// sweep samples every model over grid × prompts × n with up to conc calls in
// flight, and returns per model the mean diversity at each temperature. The
// first failure cancels the rest; every goroutine has returned when sweep
// does.
func (s *sampler) sweep(ctx context.Context, models []string, grid []float64, prompts []string, n, conc int) ([]map[float64]float64, error) {
	type job struct{ m, t, p, k int }
	// answers[m][t][p][k] are the tokens of one sample.
	answers := make([][][][][]string, len(models))
	for m := range answers {
		answers[m] = make([][][][]string, len(grid))
		for t := range grid {
			answers[m][t] = make([][][]string, len(prompts))
			for p := range prompts {
				answers[m][t][p] = make([][]string, n)
			}
		}
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	jobs := make(chan job)
	var wg sync.WaitGroup
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				text, err := s.sample(ctx, models[j.m], prompts[j.p], grid[j.t])
				if err != nil {
					cancel(fmt.Errorf("sampling %s at temperature %g: %w", models[j.m], grid[j.t], err))
					continue
				}
				answers[j.m][j.t][j.p][j.k] = normalize.Tokens(text) // each job owns its cell
			}
		}()
	}
feed:
	for m := range models {
		for t := range grid {
			for p := range prompts {
				for k := range n {
					select {
					case jobs <- job{m, t, p, k}:
					case <-ctx.Done():
						break feed
					}
				}
			}
		}
	}
	close(jobs)
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	out := make([]map[float64]float64, len(models))
	for m := range models {
		out[m] = map[float64]float64{}
		for t, temp := range grid {
			out[m][temp] = normalize.MeanDiversity(answers[m][t])
		}
	}
	return out, nil
}

// sample asks model for one answer to prompt at temperature t and returns
// its text. An error answer is returned as *llm.APIError.
func (s *sampler) sample(ctx context.Context, model, prompt string, t float64) (string, error) {
	req := &llm.Request{
		Model:        model,
		Messages:     []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: prompt}}, ContentIsString: true}},
		MaxTokens:    s.maxTok,
		HasMaxTokens: true,
		Temperature:  &t,
	}
	codec := wire.For(s.format)
	body, err := codec.EncodeRequest(req)
	if err != nil {
		return "", fmt.Errorf("encoding request: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	hreq.Header = s.header.Clone()
	hreq.Header.Set("Content-Type", "application/json")
	resp, err := s.client.Do(hreq)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", fmt.Errorf("reading answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", codec.ParseError(resp.StatusCode, resp.Header, b)
	}
	r, err := codec.ParseResponse(b)
	if err != nil {
		return "", fmt.Errorf("parsing answer: %w", err)
	}
	return r.Text(), nil
}
