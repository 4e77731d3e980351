package config

import (
	"fmt"
	"regexp"

	"github.com/keelmesh/keel/internal/pii"
)

// PII configures personal-data detection before routing (issue 18): what
// is looked for, what is done with it, and the audit log. The zero value
// is off.
type PII struct {
	// Enabled runs detection over every text the model sees (system,
	// messages, tool results, tool-call arguments); default false.
	Enabled bool `yaml:"enabled"`
	// Action is the default action: redact (default; reversible
	// placeholders such as [EMAIL_1], restored in the answer), mask
	// ([EMAIL], irreversible), block (400 MESH_PII_BLOCKED) or log
	// (detect and audit only).
	Action string `yaml:"action"`
	// FailOpen sends a request upstream unscanned when detection fails or
	// runs past TimeBudget; default false: 503 MESH_PII_UNAVAILABLE.
	FailOpen bool `yaml:"fail_open"`
	// TimeBudget bounds detection over one request; default 100ms.
	TimeBudget Duration `yaml:"time_budget"`
	// Audit is the audit log of findings.
	Audit PIIAudit `yaml:"audit"`
	// Config adds custom kinds: patterns (name, regex) and dictionaries
	// (name, words), written inline in this section.
	pii.Config `yaml:",inline"`
}

// PIIAudit is the SQLite audit log: one row per value found, with a keyed
// hash of the value, never the value.
type PIIAudit struct {
	// Path is the database file; empty writes no audit log (keel serve
	// defaults it to keel-audit.db when pii.enabled).
	Path string `yaml:"path"`
	// RetentionDays is how long rows are kept before they are deleted;
	// default 90.
	RetentionDays int `yaml:"retention_days"`
	// HashKey keys the HMAC-SHA256 of each value (${VAR} expands). Unset,
	// a random key is generated once and stored in the audit database, so
	// hashes stay comparable across restarts.
	HashKey Secret `yaml:"hash_key"`
}

// RoutePII overrides pii.action and pii.fail_open for one model or alias.
type RoutePII struct {
	// Action is redact, mask, block, log, or off (no detection on this route).
	Action string `yaml:"action"`
	// FailOpen overrides pii.fail_open.
	FailOpen *bool `yaml:"fail_open"`
}

// piiKindName is the shape of a custom kind's name: it appears in
// placeholders ([EMPLOYEE_ID_1]), errors and metrics.
var piiKindName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// pii checks the pii section and the routes' pii overrides.
func (v *validator) pii() {
	p := v.c.PII
	switch p.Action {
	case "", "redact", "mask", "block", "log":
	default:
		v.add("pii.action", "expected redact, mask, block or log, got %q", p.Action)
	}
	v.duration("pii.time_budget", p.TimeBudget)
	v.nonNegative("pii.audit.retention_days", int64(p.Audit.RetentionDays))
	for i, pt := range p.Patterns {
		if !piiKindName.MatchString(pt.Name) {
			v.add(fmt.Sprintf("pii.patterns[%d].name", i), "expected an upper-case name such as EMPLOYEE_ID, got %q", pt.Name)
		}
		if _, err := regexp.Compile(pt.Regex); err != nil || pt.Regex == "" {
			v.add(fmt.Sprintf("pii.patterns[%d].regex", i), "expected a Go regular expression: %v", err)
		}
	}
	for i, d := range p.Dictionaries {
		if !piiKindName.MatchString(d.Name) {
			v.add(fmt.Sprintf("pii.dictionaries[%d].name", i), "expected an upper-case name such as PROJECT, got %q", d.Name)
		}
		if len(d.Words) == 0 {
			v.add(fmt.Sprintf("pii.dictionaries[%d].words", i), "expected at least one word")
		}
	}
	route := func(path string, r *RoutePII) {
		if r == nil {
			return
		}
		if !p.Enabled {
			v.add(path, "has no effect while pii.enabled is false")
		}
		switch r.Action {
		case "", "redact", "mask", "block", "log", "off":
		default:
			v.add(path+".action", "expected redact, mask, block, log or off, got %q", r.Action)
		}
	}
	for i := range v.c.Models {
		route(fmt.Sprintf("models[%d].pii", i), v.c.Models[i].PII)
	}
	for i := range v.c.Aliases {
		route(fmt.Sprintf("aliases[%d].pii", i), v.c.Aliases[i].PII)
	}
}
