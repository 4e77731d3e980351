// Package shadow compares two answers to one request — the client's, from
// its alias, and a shadow path's (another model, another alias, or the
// plain legacy path) — and summarises many comparisons into a report.
//
// It holds the per-alias shadow policy the config decodes into (Config),
// the differ (Compare: JSON field by field, text by a similarity score),
// the decision-rule language (ParseRule: "confidence_score >= 0.8") and the
// report (Build). It imports only the standard library, does no I/O and
// starts no goroutines; every function is safe for concurrent use, and a
// parsed *Rule is immutable.
package shadow

import (
	"errors"
	"fmt"
	"time"
)

// Target is the path a shadowed call is also sent on: exactly one of
// Model, Alias or Legacy.
type Target struct {
	// Model is a configured model name: the call is sent to it as if the
	// client had named it (routing, retries are off, see Config).
	Model string `yaml:"model" json:"model,omitempty"`
	// Alias is another configured alias (another chain, strategy or
	// tiering): "another config" for the same request.
	Alias string `yaml:"alias" json:"alias,omitempty"`
	// Legacy sends the call on the plain path: the alias's primary model,
	// no hedging, no continuation, no answer repair (the rollout's monitor
	// stage).
	Legacy bool `yaml:"legacy" json:"legacy,omitempty"`
}

// String names the target in results and metrics: "model:<name>",
// "alias:<name>" or "legacy".
func (t Target) String() string {
	switch {
	case t.Legacy:
		return "legacy"
	case t.Alias != "":
		return "alias:" + t.Alias
	case t.Model != "":
		return "model:" + t.Model
	}
	return ""
}

// Config is one alias's shadow policy (aliases[].shadow). The zero value
// shadows nothing.
type Config struct {
	// Percent of the alias's keys (0–100, fractions allowed) whose calls
	// are also sent on Target. Sticky by key: the virtual key's id, else
	// the client's credential, else the end user id; a call with none of
	// them is drawn by its request id.
	Percent float64 `yaml:"percent" json:"percent"`
	// Target is the shadow path.
	Target Target `yaml:"target" json:"target"`
	// DecisionRule, when set, is evaluated on both JSON answers and the
	// report says how often the two agree (see ParseRule).
	DecisionRule string `yaml:"decision_rule" json:"decision_rule,omitempty"`
}

// ErrConfig is wrapped by every error Validate returns.
var ErrConfig = errors.New("shadow config")

// Validate checks c: percent in [0, 100], exactly one target, a decision
// rule that parses.
func (c Config) Validate() error {
	if !(c.Percent >= 0 && c.Percent <= 100) {
		return fmt.Errorf("%w: percent %g is outside [0, 100]", ErrConfig, c.Percent)
	}
	n := 0
	if c.Target.Model != "" {
		n++
	}
	if c.Target.Alias != "" {
		n++
	}
	if c.Target.Legacy {
		n++
	}
	if n != 1 {
		return fmt.Errorf("%w: target must set exactly one of model, alias or legacy: true", ErrConfig)
	}
	if c.DecisionRule != "" {
		if _, err := ParseRule(c.DecisionRule); err != nil {
			return fmt.Errorf("%w: decision_rule: %w", ErrConfig, err)
		}
	}
	return nil
}

// Outcomes of a shadowed call (Result.Outcome, the result label of
// mesh_shadow_calls_total).
const (
	// OutcomeCompared: both answers arrived and were diffed.
	OutcomeCompared = "compared"
	// OutcomeError: the shadow path failed (its error is in Result.Error).
	OutcomeError = "error"
	// OutcomeDropped: the shadow queue was full; the shadow was not sent.
	OutcomeDropped = "dropped"
	// OutcomeShed: the mesh was under load (client calls in flight above
	// the threshold); the shadow was cancelled or never started.
	OutcomeShed = "shed"
)

// Observer is told about every shadowed call: compared, failed, dropped
// or shed. It runs on a shadow worker (or, for a drop, the client's
// goroutine) and must not block.
type Observer interface {
	OnShadow(Result)
}

// Result is one shadowed call.
type Result struct {
	Time      time.Time `json:"time"`
	RequestID string    `json:"request_id"`
	Alias     string    `json:"alias"`
	// Target is Target.String().
	Target       string `json:"target"`
	PrimaryModel string `json:"primary_model"`
	ShadowModel  string `json:"shadow_model,omitempty"`
	// Outcome is one of the Outcome constants.
	Outcome string `json:"outcome"`
	Error   string `json:"error,omitempty"`
	// PrimaryCost is the client call's cost, ShadowCost the shadow's, in
	// USD; the shadow's is never part of the client's spend.
	PrimaryCost float64       `json:"primary_cost_usd"`
	ShadowCost  float64       `json:"shadow_cost_usd"`
	ShadowTime  time.Duration `json:"shadow_duration_ns"`
	// Rule is the decision rule the comparison evaluated ("" for none).
	Rule       string      `json:"rule,omitempty"`
	Comparison *Comparison `json:"comparison,omitempty"`
}
