package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/pii"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/shadow"
)

func TestLoadFull(t *testing.T) {
	t.Setenv("VLLM_API_KEY", "sk-vllm-test")
	t.Setenv("VLLM_BASE_URL", "") // empty: the default after :- applies
	t.Setenv("VLLM_GATEWAY_TOKEN", "tok-123")
	t.Setenv("REDIS_HOST", "")
	t.Setenv("REDIS_PASSWORD", "")
	got, err := Load("testdata/full.yaml")
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := &Config{
		Server: Server{
			Listen:          "0.0.0.0:7878",
			MaxBodyBytes:    20 << 20,
			ShutdownTimeout: Duration(45 * time.Second),
			LogFormat:       "json",
			LogLevel:        "debug",

			AllowedHosts:           []string{"keel.internal.example.com", "localhost"},
			AllowedOrigins:         []string{"https://console.example.com"},
			BodyReadTimeout:        Duration(20 * time.Second),
			MinBodyRateBytesPerSec: 1024,
			MaxMessages:            2000,
			MaxHeaderBytes:         64 << 10,
		},
		Providers: []Provider{
			{
				Name:             "anthropic",
				Type:             "anthropic",
				BaseURL:          "https://api.anthropic.com",
				APIKeyEnv:        "ANTHROPIC_API_KEY",
				AnthropicVersion: "2023-06-01",
				Timeouts: Timeouts{
					Connect:        Duration(3 * time.Second),
					ResponseHeader: Duration(90 * time.Second),
					StreamIdle:     Duration(20 * time.Second),
					Request:        Duration(5 * time.Minute),
				},
				MaxConnsPerHost:     256,
				MaxIdleConnsPerHost: 1024,
			},
			{
				Name:    "vllm-local",
				Type:    "openai",
				BaseURL: "http://127.0.0.1:8000/v1",
				APIKey:  "sk-vllm-test",
				Headers: map[string]Secret{
					"X-Tenant":            "keel-prod",
					"Authorization-Extra": "Bearer tok-123",
				},
				Timeouts: Timeouts{
					Connect:        Duration(500 * time.Millisecond),
					ResponseHeader: Duration(60 * time.Second),
					StreamIdle:     Duration(30 * time.Second),
					Request:        Duration(10 * time.Minute),
				},
				MaxIdleConnsPerHost: 64,
				Continuation:        "continue_final_message",
			},
		},
		Models: []Model{
			{
				Name: "claude-sonnet-4-5", Capability: 5, ContextWindow: 200000,
				Price:     Price{InputPerMTok: 3, OutputPerMTok: 15},
				Endpoints: []Endpoint{{Provider: "anthropic", Region: "us", UpstreamModel: "claude-sonnet-4-5"}},
			},
			{
				Name: "claude-haiku-4-5", Capability: 3, ContextWindow: 200000,
				Price:     Price{InputPerMTok: 1, OutputPerMTok: 5},
				Endpoints: []Endpoint{{Provider: "anthropic", Region: "us", UpstreamModel: "claude-haiku-4-5-20251001"}},
			},
			{
				Name: "qwen2.5-72b", Capability: 2, ContextWindow: 32768,
				Endpoints: []Endpoint{
					{Provider: "vllm-local", Region: "onprem", UpstreamModel: "Qwen/Qwen2.5-72B-Instruct"},
					{Provider: "vllm-local", Region: "onprem-b", UpstreamModel: "Qwen/Qwen2.5-72B-Instruct", BaseURL: "http://10.0.0.12:8000/v1"},
				},
			},
		},
		Aliases: []Alias{
			{Name: "smart", Models: []string{"claude-sonnet-4-5", "claude-haiku-4-5", "qwen2.5-72b"}, Strategy: "ordered",
				Shadow: &shadow.Config{Percent: 5, Target: shadow.Target{Legacy: true}, DecisionRule: "confidence_score >= 0.8"}},
			{Name: "fast", Models: []string{"claude-haiku-4-5", "qwen2.5-72b"}, Strategy: "latency"},
		},
		Resilience: Resilience{
			MaxAttempts: 3,
			Timeout:     Duration(2 * time.Minute),
			RetryBudget: resilience.BudgetConfig{Ratio: 0.1, Burst: 5},
			Hedge:       resilience.HedgePolicy{Floor: 50 * time.Millisecond, Ceiling: time.Second},
			Breaker:     resilience.BreakerConfig{ConsecutiveFailures: 3, OpenFor: 10 * time.Second},
		},
		RequestLog: RequestLog{Path: "keel-requests.db"},
		Shadow:     Shadow{Store: "keel-shadow.db"},
		Redis:      Redis{URL: "redis://127.0.0.1:6379/0", KeyPrefix: "keel-prod:", Timeout: DefaultRedisTimeout},
		PII: PII{Enabled: true, TimeBudget: Duration(50 * time.Millisecond), Audit: PIIAudit{Path: "keel-audit.db", RetentionDays: 30},
			Config: pii.Config{Patterns: []pii.Pattern{{Name: "EMPLOYEE_ID", Regex: `E-\d{6}`}}}},
	}
	if d := diff(got, want); d != "" {
		t.Errorf("Load(full.yaml) mismatch (-got +want):\n%s", d)
	}

	if p := got.Provider("vllm-local"); p == nil || p.Type != TypeOpenAI {
		t.Errorf("Provider(vllm-local) = %v", p)
	}
	if m := got.Model("qwen2.5-72b"); m == nil || m.Endpoints[1].ID(m.Name) != "qwen2.5-72b/onprem-b/vllm-local" {
		t.Errorf("Model(qwen2.5-72b) = %v", m)
	}
	if a := got.Alias("fast"); a == nil || a.Strategy != StrategyLatency {
		t.Errorf("Alias(fast) = %v", a)
	}
	if got.Provider("nope") != nil || got.Model("smart") != nil || got.Alias("qwen2.5-72b") != nil {
		t.Error("lookup of a missing name returned non-nil")
	}
}

// TestLoadSafetyValve decodes every resilience.safety_valve key: the policy
// keys into the embedded resilience.ValveConfig, webhook beside it.
func TestLoadSafetyValve(t *testing.T) {
	t.Setenv("KEEL_TEST_VALVE_HOOK", "https://hooks.example.com/keel")
	src := `resilience:
  safety_valve:
    disabled: true
    threshold: 0.1
    window: 2m
    min_requests: 20
    hold: 45s
    webhook: ${KEEL_TEST_VALVE_HOOK}
`
	c, err := Parse([]byte(src), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	want := Valve{
		ValveConfig: resilience.ValveConfig{Disabled: true, Threshold: 0.1, Window: 2 * time.Minute, MinRequests: 20, Hold: 45 * time.Second},
		Webhook:     "https://hooks.example.com/keel",
	}
	if d := diff(c.Resilience.SafetyValve, want); d != "" {
		t.Errorf("resilience.safety_valve mismatch (-got +want):\n%s", d)
	}
}

// TestServerTokensFromEnv: both server tokens take ${VAR}, as
// docs/config.md says (read_token was read as the literal text, so a
// Prometheus scraping with the token got 401: deploy/keel.yaml).
func TestServerTokensFromEnv(t *testing.T) {
	t.Setenv("KEEL_TEST_ADMIN_TOKEN", "admin-secret-1")
	t.Setenv("KEEL_TEST_READ_TOKEN", "read-secret-2")
	c, err := Parse([]byte("server:\n  admin_token: ${KEEL_TEST_ADMIN_TOKEN}\n  read_token: ${KEEL_TEST_READ_TOKEN}\n"), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got := [2]string{string(c.Server.AdminToken), string(c.Server.ReadToken)}; got != [2]string{"admin-secret-1", "read-secret-2"} {
		t.Errorf("tokens %q, want the variables' values", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load("testdata/does-not-exist.yaml")
	if err == nil || !strings.HasPrefix(err.Error(), "reading config: ") {
		t.Fatalf("Load(missing) error = %v, want a reading config error", err)
	}
}

func TestDefaults(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want *Config
	}{
		{
			name: "empty file",
			yaml: "",
			want: &Config{Server: defaultServer()},
		},
		{
			name: "comments only and null sections",
			yaml: "# nothing\nserver:\nproviders:\n",
			want: &Config{Server: defaultServer()},
		},
		{
			name: "minimal providers models aliases",
			yaml: `
providers:
  - {name: a, type: anthropic}
  - {name: o, type: openai}
models:
  - name: m
    endpoints: [{provider: a}, {provider: o, region: eu}]
aliases:
  - {name: x, models: [m]}
`,
			want: &Config{
				Server: defaultServer(),
				Providers: []Provider{
					{Name: "a", Type: "anthropic", BaseURL: DefaultAnthropicBaseURL, Timeouts: defaultTimeouts(), MaxIdleConnsPerHost: 1024},
					{Name: "o", Type: "openai", BaseURL: DefaultOpenAIBaseURL, Timeouts: defaultTimeouts(), MaxIdleConnsPerHost: 1024},
				},
				Models: []Model{{
					Name: "m", Capability: 3, ContextWindow: 200000,
					Endpoints: []Endpoint{
						{Provider: "a", Region: "default", UpstreamModel: "m"},
						{Provider: "o", Region: "eu", UpstreamModel: "m"},
					},
				}},
				Aliases: []Alias{{Name: "x", Models: []string{"m"}, Strategy: "ordered"}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml), "keel.yaml")
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if d := diff(got, tt.want); d != "" {
				t.Errorf("Parse mismatch (-got +want):\n%s", d)
			}
			again := *got
			again.ApplyDefaults()
			if d := diff(&again, got); d != "" {
				t.Errorf("ApplyDefaults not idempotent (-got +want):\n%s", d)
			}
		})
	}
}

func defaultServer() Server {
	return Server{
		Listen:          "127.0.0.1:7878",
		MaxBodyBytes:    10 << 20,
		ShutdownTimeout: Duration(30 * time.Second),
		LogFormat:       "text",
		LogLevel:        "info",

		BodyReadTimeout:        Duration(30 * time.Second),
		MinBodyRateBytesPerSec: 1024,
		MaxMessages:            10000,
		MaxHeaderBytes:         64 << 10,
	}
}

func defaultTimeouts() Timeouts {
	return Timeouts{
		Connect:        Duration(5 * time.Second),
		ResponseHeader: Duration(60 * time.Second),
		StreamIdle:     Duration(30 * time.Second),
		Request:        Duration(10 * time.Minute),
	}
}

func TestAnchorsAndMergeKeys(t *testing.T) {
	const src = `
providers:
  - &base
    name: a
    type: openai
    base_url: http://127.0.0.1:8000/v1
    timeouts: &fast {connect: 1s, request: 30s}
  - <<: *base
    name: b
    timeouts: *fast
models:
  - name: m
    endpoints: [{provider: a}, {provider: b}]
`
	c, err := Parse([]byte(src), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	b := c.Provider("b")
	if b == nil {
		t.Fatal("provider b missing")
	}
	want := Provider{
		Name: "b", Type: "openai", BaseURL: "http://127.0.0.1:8000/v1",
		Timeouts:            Timeouts{Connect: Duration(time.Second), ResponseHeader: DefaultResponseHeader, StreamIdle: DefaultStreamIdle, Request: Duration(30 * time.Second)},
		MaxIdleConnsPerHost: 1024,
	}
	if d := diff(*b, want); d != "" {
		t.Errorf("merged provider mismatch (-got +want):\n%s", d)
	}
}

// parseErrors runs Parse with env as the only environment variables that
// matter and returns the error lines.
func parseErrors(t *testing.T, src string, env map[string]string) []string {
	t.Helper()
	for k, v := range env {
		t.Setenv(k, v)
	}
	c, err := Parse([]byte(src), "keel.yaml")
	if err == nil {
		t.Fatalf("Parse succeeded, want errors; config: %+v", c)
	}
	if c != nil {
		t.Errorf("Parse returned a config with an error")
	}
	return strings.Split(err.Error(), "\n")
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		want []string // every error line, in order
	}{
		{
			name: "unknown key nested with suggestion",
			yaml: "providers:\n  - name: a\n    type: openai\n    timeout: {connect: 1s}\n",
			want: []string{`keel.yaml:4:5: providers[0].timeout: unknown key (did you mean "timeouts"?)`},
		},
		{
			name: "structured_output.implied takes off, guess, send or strict",
			yaml: "structured_output:\n  implied: always\n",
			want: []string{`keel.yaml:2:3: structured_output.implied: expected off, guess, send or strict, got "always"`},
		},
		{
			name: "each typed mode names its key and allowed values, reported with the other problems",
			yaml: "structured_output:\n  stream_mode: buffered\n  on_violation: ignore\n  max_schema_depth: -1\nnormalization:\n  parameter_policy: clamp\n",
			want: []string{
				`keel.yaml:2:3: structured_output.stream_mode: expected strict or relaxed, got "buffered"`,
				`keel.yaml:3:3: structured_output.on_violation: expected error or pass, got "ignore"`,
				`keel.yaml:4:3: structured_output.max_schema_depth: expected a positive number (0 = the default), got -1`,
				`keel.yaml:6:3: normalization.parameter_policy: expected drop, map or reject, got "clamp"`,
			},
		},
		{
			name: "resilience.rollout: the stage and the percent by the rollout package's rules",
			yaml: "resilience:\n  rollout:\n    stage: half\n    percent: 101\n",
			want: []string{
				`keel.yaml:3:5: resilience.rollout.stage: expected monitor, hedging or full, got "half"`,
				`keel.yaml:4:5: resilience.rollout.percent: rollout percent 101: want 0-100`,
			},
		},
		{
			name: "a typed mode given a list",
			yaml: "structured_output:\n  stream_mode: [strict]\n",
			want: []string{`keel.yaml:2:16: structured_output.stream_mode: expected a string, got a list`},
		},
		{
			name: "an unknown key hides the modes' problems, as it hides Validate's",
			yaml: "structured_output:\n  stream_mode: buffered\n  stream: strict\n",
			want: []string{`keel.yaml:3:3: structured_output.stream: unknown key (did you mean "stream_mode"?)`},
		},
		{
			name: "structured_output.implied contradicting implied_schemas: false",
			yaml: "structured_output:\n  implied_schemas: false\n  implied: strict\n",
			want: []string{`keel.yaml:3:3: structured_output.implied: implied_schemas: false turns implied schemas off; implied: strict contradicts it (set one of them)`},
		},
		{
			name: "unknown key in an alias's shadow",
			yaml: "aliases:\n  - name: a\n    shadow:\n      percentage: 10\n",
			want: []string{`keel.yaml:4:7: aliases[0].shadow.percentage: unknown key (did you mean "percent"?)`},
		},
		{
			name: "unknown top-level key with suggestion",
			yaml: "server: {}\nprovider: []\n",
			want: []string{`keel.yaml:2:1: provider: unknown key (did you mean "providers"?)`},
		},
		{
			name: "unknown key case and dash folded in suggestion",
			yaml: "server:\n  Listen: ':1'\n  max-body-bytes: 1\n",
			want: []string{
				`keel.yaml:2:3: server.Listen: unknown key (did you mean "listen"?)`,
				`keel.yaml:3:3: server.max-body-bytes: unknown key (did you mean "max_body_bytes"?)`,
			},
		},
		{
			name: "unknown key without suggestion",
			yaml: "server:\n  colour: blue\n",
			want: []string{`keel.yaml:2:3: server.colour: unknown key`},
		},
		{
			name: "every unknown key reported",
			yaml: "models:\n  - name: m\n    capabilty: 2\n    endpoints:\n      - provider: a\n        regoin: eu\n",
			want: []string{
				`keel.yaml:3:5: models[0].capabilty: unknown key (did you mean "capability"?)`,
				`keel.yaml:6:9: models[0].endpoints[0].regoin: unknown key (did you mean "region"?)`,
			},
		},
		{
			name: "reserved section",
			yaml: "server: {}\nrouting:\n  strategy: latency\n",
			want: []string{`keel.yaml:2:1: routing: section reserved for a later Keel version, not supported yet`},
		},
		{
			name: "reserved name only at top level",
			yaml: "server:\n  routing: x\n",
			want: []string{`keel.yaml:2:3: server.routing: unknown key`},
		},
		{
			name: "redis unknown key",
			yaml: "redis:\n  url: redis://127.0.0.1:6379\n  prefix: k\n",
			want: []string{`keel.yaml:3:3: redis.prefix: unknown key (did you mean "key_prefix"?)`},
		},
		{
			name: "duration as integer",
			yaml: "server:\n  shutdown_timeout: 30\n",
			want: []string{`keel.yaml:2:21: server.shutdown_timeout: expected a duration with a unit such as "30s" or "300ms", got an integer 30`},
		},
		{
			name: "duration as quoted number",
			yaml: "providers:\n  - name: a\n    type: openai\n    timeouts:\n      connect: \"5\"\n",
			want: []string{`keel.yaml:5:16: providers[0].timeouts.connect: expected a duration with a unit such as "30s" or "300ms", got "5" (add a unit: ns, us, ms, s, m, h)`},
		},
		{
			name: "duration garbage",
			yaml: "server:\n  shutdown_timeout: soon\n",
			want: []string{`keel.yaml:2:21: server.shutdown_timeout: expected a duration such as "30s" or "300ms", got "soon"`},
		},
		{
			name: "duration empty string",
			yaml: "server:\n  shutdown_timeout: \"\"\n",
			want: []string{`keel.yaml:2:21: server.shutdown_timeout: expected a duration such as "30s" or "300ms", got an empty string`},
		},
		{
			name: "policy durations are strings with a unit",
			yaml: "resilience:\n  hedge_floor: 30\n  breaker:\n    window: \"10\"\n    open_for: soon\n",
			want: []string{
				`keel.yaml:2:16: resilience.hedge_floor: expected a duration with a unit such as "30s" or "300ms", got an integer 30`,
				`keel.yaml:4:13: resilience.breaker.window: expected a duration with a unit such as "30s" or "300ms", got "10" (add a unit: ns, us, ms, s, m, h)`,
				`keel.yaml:5:15: resilience.breaker.open_for: expected a duration such as "30s" or "300ms", got "soon"`,
			},
		},
		{
			name: "safety valve durations are strings with a unit",
			yaml: "resilience:\n  safety_valve:\n    window: 60\n    hold: soon\n",
			want: []string{
				`keel.yaml:3:13: resilience.safety_valve.window: expected a duration with a unit such as "30s" or "300ms", got an integer 60`,
				`keel.yaml:4:11: resilience.safety_valve.hold: expected a duration such as "30s" or "300ms", got "soon"`,
			},
		},
		{
			name: "safety valve unknown key",
			yaml: "resilience:\n  safety_valve:\n    treshold: 0.1\n",
			want: []string{`keel.yaml:3:5: resilience.safety_valve.treshold: unknown key (did you mean "threshold"?)`},
		},
		{
			name: "policy keys not settable from a file",
			yaml: "resilience:\n  floor: 1s\n  breaker:\n    buckets: 5\n    now: x\n  retry_budget: {ratio: 0.2, brust: 3}\n",
			want: []string{
				`keel.yaml:2:3: resilience.floor: unknown key (did you mean "hedge_floor"?)`,
				`keel.yaml:4:5: resilience.breaker.buckets: unknown key`,
				`keel.yaml:5:5: resilience.breaker.now: unknown key`,
				`keel.yaml:6:30: resilience.retry_budget.brust: unknown key (did you mean "burst"?)`,
			},
		},
		{
			name: "integer field given a string",
			yaml: "models:\n  - name: m\n    capability: high\n",
			want: []string{`keel.yaml:3:17: models[0].capability: expected an integer, got the string "high"`},
		},
		{
			name: "integer field given a float",
			yaml: "server:\n  max_body_bytes: 1.5\n",
			want: []string{`keel.yaml:2:19: server.max_body_bytes: expected an integer, got a number 1.5`},
		},
		{
			name: "integer overflow",
			yaml: "providers:\n  - name: a\n    type: openai\n    max_conns_per_host: 99999999999999999999\n",
			want: []string{`keel.yaml:4:25: providers[0].max_conns_per_host: integer out of range`},
		},
		{
			name: "float field given a string",
			yaml: "models:\n  - name: m\n    price: {input_per_mtok: cheap}\n",
			want: []string{`keel.yaml:3:29: models[0].price.input_per_mtok: expected a number, got the string "cheap"`},
		},
		{
			name: "float field given infinity",
			yaml: "models:\n  - name: m\n    price: {output_per_mtok: .inf}\n",
			want: []string{`keel.yaml:3:30: models[0].price.output_per_mtok: expected a finite number, got .inf`},
		},
		{
			name: "section of the wrong kind",
			yaml: "server: [a]\nproviders: {name: a}\n",
			want: []string{
				`keel.yaml:1:9: server: expected a mapping, got a list`,
				`keel.yaml:2:13: providers: expected a list, got a mapping`,
			},
		},
		{
			name: "string field given a mapping",
			yaml: "providers:\n  - name: {first: a}\n",
			want: []string{`keel.yaml:2:12: providers[0].name: expected a string, got a mapping`},
		},
		{
			name: "top level not a mapping",
			yaml: "- a\n- b\n",
			want: []string{`keel.yaml:1:1: expected a mapping, got a list`},
		},
		{
			name: "syntax error",
			yaml: "server:\n  listen: [\n",
			want: []string{`keel.yaml:2:11: invalid YAML: sequence end token ']' not found`},
		},
		{
			name: "duplicate key",
			yaml: "server:\n  listen: ':1'\n  listen: ':2'\n",
			want: []string{`keel.yaml:3:3: invalid YAML: mapping key "listen" already defined at [2:3]`},
		},
		{
			name: "several documents",
			yaml: "server: {}\n---\nserver: {}\n",
			want: []string{`keel.yaml:2:1: a config file holds one YAML document, found several`},
		},
		{
			name: "alias to unknown anchor",
			yaml: "server: *nope\n",
			want: []string{`keel.yaml:1:9: server: alias *nope names no anchor defined before it`},
		},
		{
			name: "merge of a scalar",
			yaml: "server:\n  <<: 5\n",
			want: []string{`keel.yaml:2:7: server: merge key (<<) expects a mapping or a list of mappings, got an integer`},
		},
		{
			name: "merge loop",
			yaml: "server: &s\n  <<: *s\n",
			want: []string{`keel.yaml:2:3: server: merge keys (<<) nested more than 16 deep`},
		},
		{
			name: "env unset",
			yaml: "providers:\n  - name: a\n    type: openai\n    api_key: ${KEEL_TEST_UNSET_VAR}\n",
			want: []string{`keel.yaml:4:5: providers[0].api_key: environment variable KEEL_TEST_UNSET_VAR is not set (write ${KEEL_TEST_UNSET_VAR:-default} to give a default)`},
		},
		{
			name: "env unset in header and base urls",
			yaml: "providers:\n  - name: a\n    type: openai\n    base_url: ${KEEL_TEST_UNSET_URL}\n    headers:\n      X-Key: \"k ${KEEL_TEST_UNSET_H}\"\nmodels:\n  - name: m\n    endpoints:\n      - provider: a\n        base_url: http://${KEEL_TEST_UNSET_HOST}/v1\n",
			want: []string{
				`keel.yaml:4:5: providers[0].base_url: environment variable KEEL_TEST_UNSET_URL is not set (write ${KEEL_TEST_UNSET_URL:-default} to give a default)`,
				`keel.yaml:6:7: providers[0].headers.X-Key: environment variable KEEL_TEST_UNSET_H is not set (write ${KEEL_TEST_UNSET_H:-default} to give a default)`,
				`keel.yaml:11:9: models[0].endpoints[0].base_url: environment variable KEEL_TEST_UNSET_HOST is not set (write ${KEEL_TEST_UNSET_HOST:-default} to give a default)`,
			},
		},
		{
			name: "env bad reference",
			yaml: "providers:\n  - name: a\n    type: openai\n    api_key: ${1BAD}\n",
			want: []string{`keel.yaml:4:5: providers[0].api_key: invalid variable reference: expected ${NAME} or ${NAME:-default} with NAME made of letters, digits and '_'`},
		},
		{
			name: "env unterminated",
			yaml: "providers:\n  - name: a\n    type: openai\n    api_key: \"${OPEN\"\n",
			want: []string{`keel.yaml:4:5: providers[0].api_key: unterminated ${ (write $${ for a literal ${)`},
		},
		{
			name: "env value fails validation",
			yaml: "providers:\n  - name: a\n    type: openai\n    base_url: ${KEEL_TEST_URL}\n",
			env:  map[string]string{"KEEL_TEST_URL": "localhost:8000"},
			want: []string{`keel.yaml:4:5: providers[0].base_url: expected an absolute http or https URL such as "https://api.anthropic.com", got scheme "localhost"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parseErrors(t, tt.yaml, tt.env)
			if d := diffLines(got, tt.want); d != "" {
				t.Errorf("Parse errors mismatch (-got +want):\n%s", d)
			}
		})
	}
}

// TestAliasBomb checks that aliases and merge keys cannot expand a small
// file into an enormous amount of work.
func TestAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x:\n  - &a0 {listen: ':1'}\n")
	for i := 1; i <= 12; i++ {
		fmt.Fprintf(&b, "  - &a%d {<<: [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]}\n", i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	b.WriteString("server: *a12\n")
	_, err := Parse([]byte(b.String()), "keel.yaml")
	if err != nil && strings.Count(err.Error(), "\n") > 3 {
		t.Errorf("Parse(alias bomb) reported %d errors, want a few", strings.Count(err.Error(), "\n")+1)
	}
	if err == nil || !strings.Contains(err.Error(), "server: file expands to more than 262144 values through aliases and merge keys") {
		t.Fatalf("Parse(alias bomb) error = %v, want the expansion limit", err)
	}
}

func diffLines(got, want []string) string {
	var b strings.Builder
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			if g != "" {
				b.WriteString("-" + g + "\n")
			}
			if w != "" {
				b.WriteString("+" + w + "\n")
			}
		}
	}
	return b.String()
}

func TestErrorType(t *testing.T) {
	_, err := Parse([]byte("server:\n  log_level: loud\n"), "keel.yaml")
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("error %v is not an *Error", err)
	}
	want := &Error{File: "keel.yaml", Line: 2, Column: 3, Path: "server.log_level", Msg: `expected debug, info, warn or error, got "loud"`}
	if d := diff(e, want); d != "" {
		t.Errorf("*Error mismatch (-got +want):\n%s", d)
	}
	_, err = Parse([]byte("server: {log_level: loud}"), "")
	if got, want := err.Error(), `<config>:1:10: server.log_level: expected debug, info, warn or error, got "loud"`; got != want {
		t.Errorf("unnamed input: got %q, want %q", got, want)
	}
}
