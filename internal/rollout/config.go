package rollout

import "fmt"

// Config is resilience.rollout in Keel's configuration file, decoded
// straight from YAML (docs/config.md): Percent of the rollout keys run in
// Stage, the rest in the monitor stage. The zero value is full for 100 %.
// Its rules are Rollout.Validate's, its defaults those of Rollout.
type Config struct {
	// Stage is monitor, hedging or full (the default).
	Stage Stage `yaml:"stage"`
	// Percent of keys that get Stage, 0 to 100; default 100.
	Percent *int `yaml:"percent"`
}

// Stage is a rollout stage as the config file names it.
type Stage string

// UnmarshalText accepts the stages Rollout.Validate accepts ("" is full).
func (s *Stage) UnmarshalText(b []byte) error {
	if err := (Rollout{Stage: string(b)}).Validate(); err != nil {
		return fmt.Errorf("expected %s, %s or %s, got %q", StageMonitor, StageHedging, StageFull, string(b))
	}
	*s = Stage(b)
	return nil
}

// Rollout is the rollout c configures: Stage (full when unset) for
// Percent (100 when unset) of the keys.
func (c Config) Rollout() Rollout {
	r := Rollout{Stage: string(c.Stage), Percent: 100}
	if r.Stage == "" {
		r.Stage = StageFull
	}
	if c.Percent != nil {
		r.Percent = *c.Percent
	}
	return r
}

// Validate reports what Rollout.Validate finds wrong with c's rollout.
func (c Config) Validate() error { return c.Rollout().Validate() }
