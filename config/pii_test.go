package config

import (
	"strings"
	"testing"
	"time"
)

const piiBase = `
providers:
  - {name: a, type: anthropic, api_key: k}
models:
  - name: m
    endpoints: [{provider: a}]
    pii: {action: block, fail_open: true}
aliases:
  - name: fast
    models: [m]
    pii: {action: "off"}
`

func TestPIISection(t *testing.T) {
	t.Setenv("KEEL_TEST_AUDIT_KEY", "s3cret")
	c, err := Parse([]byte(piiBase+`
pii:
  enabled: true
  action: mask
  fail_open: false
  time_budget: 30ms
  audit:
    path: audit.db
    retention_days: 7
    hash_key: ${KEEL_TEST_AUDIT_KEY}
  patterns:
    - {name: EMPLOYEE_ID, regex: 'E-\d{6}'}
  dictionaries:
    - {name: PROJECT, words: [Bluebird, Nightjar]}
`), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	p := c.PII
	if !p.Enabled || p.Action != "mask" || time.Duration(p.TimeBudget) != 30*time.Millisecond || p.Audit.Path != "audit.db" ||
		p.Audit.RetentionDays != 7 || string(p.Audit.HashKey) != "s3cret" || len(p.Patterns) != 1 || p.Patterns[0].Name != "EMPLOYEE_ID" ||
		len(p.Dictionaries) != 1 || len(p.Dictionaries[0].Words) != 2 {
		t.Errorf("pii section %+v", p)
	}
	if r := c.Models[0].PII; r == nil || r.Action != "block" || r.FailOpen == nil || !*r.FailOpen {
		t.Errorf("models[0].pii %+v", r)
	}
	if r := c.Aliases[0].PII; r == nil || r.Action != "off" {
		t.Errorf("aliases[0].pii %+v", r)
	}
}

func TestPIISectionErrors(t *testing.T) {
	if got := parseErrors(t, piiBase, nil); len(got) != 2 || got[0] != "keel.yaml:7:5: models[0].pii: has no effect while pii.enabled is false" {
		t.Errorf("route override without pii.enabled: %q", got)
	}
	if got := parseErrors(t, piiBase+"pii:\n  audit: {retention: 3}\n", nil); len(got) != 1 ||
		got[0] != `keel.yaml:13:11: pii.audit.retention: unknown key (did you mean "retention_days"?)` {
		t.Errorf("unknown key: %q", got)
	}
	got := parseErrors(t, piiBase+`pii:
  enabled: true
  action: hide
  patterns:
    - {name: lower, regex: '(('}
`, nil)
	want := []string{
		`keel.yaml:14:3: pii.action: expected redact, mask, block or log, got "hide"`,
		`keel.yaml:16:8: pii.patterns[0].name: expected an upper-case name such as EMPLOYEE_ID, got "lower"`,
		`keel.yaml:16:21: pii.patterns[0].regex: expected a Go regular expression`,
	}
	joined := strings.Join(got, "\n")
	for _, w := range want {
		if !strings.Contains(joined, w) {
			t.Errorf("errors lack %q:\n%s", w, joined)
		}
	}
}
