package bench

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/scenarios"
	"github.com/keelmesh/keel/sim"
)

// Scenario is a load shape plus a timeline of simulator actions. It is
// plain data, read from YAML by LoadScenario; see the README's "Scenarios"
// section for the format.
type Scenario struct {
	Name        string   `yaml:"name"`
	Description string   `yaml:"description"`
	Load        Load     `yaml:"load"`
	Timeline    []Action `yaml:"timeline"`
}

// Load is the shape of a scenario's traffic.
type Load struct {
	// Rate is requests per second sent to each target (open loop).
	Rate float64 `yaml:"rate"`
	// Duration is how long requests are sent; QuickDuration replaces it
	// under --quick, and the timeline is scaled by the same factor.
	Duration      Duration `yaml:"duration"`
	QuickDuration Duration `yaml:"quick_duration"`
	Request       `yaml:",inline"`
}

// Request is what every call of a run asks for.
type Request struct {
	// Format is "anthropic" (default), "openai" (Chat Completions) or
	// "responses" (the Responses API).
	Format string `yaml:"format"`
	// Model defaults to sim-sonnet.
	Model string `yaml:"model"`
	// DirectModel is the model a direct target (Target.Direct: the bare
	// simulator, which has no aliases) calls instead of Model, when Model is
	// a name only a gateway knows, such as the alias sim-default; empty
	// means Model.
	DirectModel string `yaml:"direct_model"`
	// Prompt is the user message; each call appends its sequence number so
	// no two calls are identical (no cache can serve them).
	Prompt string `yaml:"prompt"`
	// MaxTokens defaults to 16.
	MaxTokens int  `yaml:"max_tokens"`
	Stream    bool `yaml:"stream"`
	// JSON asks for a JSON answer matching a risk-report schema in the
	// format's structured outputs (Anthropic output_config.format in its
	// schema subset, OpenAI response_format json_schema); an answer that
	// does not parse
	// counts as invalid_json.
	JSON bool `yaml:"json"`
}

// Defaults of Request.
const (
	DefaultModel     = "sim-sonnet"
	DefaultPrompt    = "Summarise the operational risks of this deployment plan."
	DefaultMaxTokens = 16
)

func (r *Request) applyDefaults() {
	if r.Format == "" {
		r.Format = "anthropic"
	}
	if r.Model == "" {
		r.Model = DefaultModel
	}
	if r.Prompt == "" {
		r.Prompt = DefaultPrompt
	}
	if r.MaxTokens == 0 {
		r.MaxTokens = DefaultMaxTokens
	}
}

// forTarget returns what the calls to t ask for: r, with DirectModel as
// the model when t is direct.
func (r *Request) forTarget(t Target) *Request {
	if !t.Direct || r.DirectModel == "" {
		return r
	}
	c := *r
	c.Model = r.DirectModel
	return &c
}

func (r *Request) validate() error {
	if llm.ParseFormat(r.Format) == llm.FormatUnknown {
		return fmt.Errorf("format: unknown format %q (want anthropic, openai or responses)", r.Format)
	}
	if r.MaxTokens < 0 {
		return fmt.Errorf("max_tokens: %d is negative", r.MaxTokens)
	}
	return nil
}

// Action is one timeline step: at time At (from the start of the run), do
// exactly one of: take a region down, bring it up, or replace the
// simulator's fault list (an empty list clears it).
type Action struct {
	At         Duration     `yaml:"at"`
	RegionDown string       `yaml:"region_down"`
	RegionUp   string       `yaml:"region_up"`
	Faults     *[]sim.Fault `yaml:"faults"`
}

// String describes the action in one line ("t=10s region_down us-east").
func (a Action) String() string {
	switch {
	case a.RegionDown != "":
		return fmt.Sprintf("t=%s region_down %s", a.At, a.RegionDown)
	case a.RegionUp != "":
		return fmt.Sprintf("t=%s region_up %s", a.At, a.RegionUp)
	case a.Faults != nil && len(*a.Faults) == 0:
		return fmt.Sprintf("t=%s faults cleared", a.At)
	case a.Faults != nil:
		kinds := make([]string, len(*a.Faults))
		for i, f := range *a.Faults {
			kinds[i] = f.Kind
		}
		return fmt.Sprintf("t=%s faults %s", a.At, strings.Join(kinds, ","))
	}
	return fmt.Sprintf("t=%s (nothing)", a.At)
}

// Duration is a time.Duration written as "300ms" or "10s" in YAML.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String returns the Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q (want e.g. \"10s\")", b)
	}
	*d = Duration(v)
	return nil
}

// ScenarioNames lists the embedded scenarios, sorted.
func ScenarioNames() []string {
	ents, _ := fs.ReadDir(scenarios.FS, ".")
	var names []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

// ErrUnknownScenario is returned (wrapped) by LoadScenario for a name that
// is neither an embedded scenario nor a file.
var ErrUnknownScenario = errors.New("unknown scenario")

// LoadScenario reads a scenario: an embedded one by name ("region-outage"),
// or a file when ref names one (it contains a path separator, ends in .yaml
// or .yml, or exists). Errors are one line and name the scenario.
func LoadScenario(ref string) (*Scenario, error) {
	isFile := strings.ContainsRune(ref, '/') || strings.ContainsRune(ref, os.PathSeparator) ||
		strings.HasSuffix(ref, ".yaml") || strings.HasSuffix(ref, ".yml")
	if !isFile {
		if _, err := os.Stat(ref); err == nil {
			isFile = true
		}
	}
	var data []byte
	var err error
	if isFile {
		data, err = os.ReadFile(ref)
		if err != nil {
			return nil, fmt.Errorf("scenario %s: %w", ref, unwrapPath(err))
		}
	} else {
		data, err = fs.ReadFile(scenarios.FS, path.Clean(ref)+".yaml")
		if err != nil {
			return nil, fmt.Errorf("%w %q (known: %s)", ErrUnknownScenario, ref, strings.Join(ScenarioNames(), ", "))
		}
	}
	s, err := ParseScenario(data)
	if err != nil {
		return nil, fmt.Errorf("scenario %s: %w", ref, err)
	}
	if s.Name == "" {
		s.Name = strings.TrimSuffix(strings.TrimSuffix(path.Base(ref), ".yaml"), ".yml")
	}
	return s, nil
}

// unwrapPath drops the *fs.PathError wrapper, whose path the caller names.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// ParseScenario reads and validates a scenario from YAML, applying the
// defaults. Unknown keys are errors; errors are one line with the line
// number when the YAML parser knows it.
func ParseScenario(data []byte) (*Scenario, error) {
	var s Scenario
	if err := yaml.UnmarshalWithOptions(data, &s, yaml.Strict()); err != nil {
		return nil, oneLine(yaml.FormatError(err, false, false))
	}
	s.Load.applyDefaults()
	if err := s.validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// oneLine collapses a multi-line parser message to its first line.
func oneLine(msg string) error {
	msg = strings.TrimSpace(msg)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = strings.TrimSpace(msg[:i])
	}
	return errors.New(msg)
}

func (s *Scenario) validate() error {
	l := &s.Load
	switch {
	case l.Rate < 0:
		return fmt.Errorf("load.rate: %g is negative", l.Rate)
	case l.Duration <= 0:
		return errors.New("load.duration: required and positive (e.g. 30s)")
	case l.QuickDuration < 0:
		return fmt.Errorf("load.quick_duration: %s is negative", l.QuickDuration)
	}
	if err := l.Request.validate(); err != nil {
		return fmt.Errorf("load.%w", err)
	}
	for i, a := range s.Timeline {
		n := 0
		for _, set := range []bool{a.RegionDown != "", a.RegionUp != "", a.Faults != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("timeline[%d]: want exactly one of region_down, region_up, faults", i)
		}
		if a.At < 0 {
			return fmt.Errorf("timeline[%d].at: %s is negative", i, a.At)
		}
		if a.At.D() > l.Duration.D() {
			return fmt.Errorf("timeline[%d].at: %s is after the end of the run (%s)", i, a.At, l.Duration)
		}
		if i > 0 && a.At < s.Timeline[i-1].At {
			return fmt.Errorf("timeline[%d].at: %s is before the previous step", i, a.At)
		}
		if a.Faults != nil {
			// The simulator validates faults; a throwaway fleet does so
			// without duplicating its rules here.
			if err := checkFaults(*a.Faults); err != nil {
				return fmt.Errorf("timeline[%d].faults: %w", i, err)
			}
		}
	}
	return nil
}

// checkFaults validates faults with the simulator's own rules.
func checkFaults(fs []sim.Fault) error {
	cfg := sim.ZeroLatency()
	cfg.Faults = fs
	if err := cfg.Validate(); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "sim config: "))
	}
	return nil
}

// Scaled returns a copy of s run for d instead of its duration, every
// timeline step moved by the same factor (a region killed at 10s of 60s is
// killed at 1s of 6s).
func (s *Scenario) Scaled(d time.Duration) *Scenario {
	c := *s
	f := float64(d) / float64(s.Load.Duration)
	c.Load.Duration = Duration(d)
	c.Timeline = slices.Clone(s.Timeline)
	for i := range c.Timeline {
		c.Timeline[i].At = Duration(float64(c.Timeline[i].At) * f)
	}
	return &c
}

// Quick returns s scaled to its quick_duration (or itself when it has none).
func (s *Scenario) Quick() *Scenario {
	if s.Load.QuickDuration <= 0 || s.Load.QuickDuration == s.Load.Duration {
		return s
	}
	return s.Scaled(s.Load.QuickDuration.D())
}
