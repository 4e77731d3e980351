package assemble

import (
	"errors"
	"net/http"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/normalize"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/structured"
)

func parse(t *testing.T, src string) *config.Config {
	t.Helper()
	cfg, err := config.Parse([]byte(src), "keel.yaml")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return cfg
}

const providers = `
providers:
  - name: a
    type: anthropic
    base_url: http://a.test
    api_key: ka
    anthropic_version: "2023-06-01"
    continuation: prefix
    headers: {X-Team: blue}
    timeouts: {response_header: 7s, stream_idle: 8s, request: 9s}
  - name: o
    type: openai
    api: responses
    base_url: http://o.test/v1
`

// A provider maps onto an endpoint in one place: a model's endpoint and a
// passthrough endpoint of the same provider carry the same provider part.
func TestProviderMapsOnceForModelsAndPassthrough(t *testing.T) {
	routed, err := resolveUpstreams(parse(t, providers+`
models:
  - name: m
    structured_outputs: tool
    endpoints: [{provider: a, region: eu, upstream_model: up}, {provider: o, base_url: "http://o2.test/v1"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	pass, err := resolveUpstreams(parse(t, providers))
	if err != nil {
		t.Fatal(err)
	}
	if len(routed.passthrough) != 0 || len(routed.routed) != 2 || len(pass.routed) != 0 || len(pass.passthrough) != 2 {
		t.Fatalf("routed %d+%d, passthrough %d+%d; want 2+0 and 0+2", len(routed.routed), len(routed.passthrough), len(pass.routed), len(pass.passthrough))
	}
	providerPart := func(e *provider.Endpoint) provider.Endpoint {
		return provider.Endpoint{Provider: e.Provider, Format: e.Format, APIKey: e.APIKey, Continuation: e.Continuation, AnthropicVersion: e.AnthropicVersion,
			ResponseHeaderTimeout: e.ResponseHeaderTimeout, StreamIdleTimeout: e.StreamIdleTimeout, RequestTimeout: e.RequestTimeout}
	}
	for i := range 2 {
		r, p := routed.routed[i], pass.passthrough[i]
		if !reflect.DeepEqual(providerPart(r), providerPart(p)) || !reflect.DeepEqual(r.Header, p.Header) {
			t.Errorf("provider %s: model endpoint %+v, passthrough %+v: the provider's part differs", r.Provider, providerPart(r), providerPart(p))
		}
		if p.Region != config.DefaultRegion {
			t.Errorf("passthrough region %q, want %q", p.Region, config.DefaultRegion)
		}
	}
	checkModelEndpoints(t, routed.routed)
}

func checkModelEndpoints(t *testing.T, eps []*provider.Endpoint) {
	t.Helper()
	a := eps[0]
	got := []any{a.ID, a.UpstreamModel, a.BaseURL, a.Continuation, a.ResponseHeaderTimeout, a.Header.Get("X-Team"), a.StructuredOutputs}
	want := []any{"m/eu/a", "up", "http://a.test", provider.ContinuePrefix, 7 * time.Second, "blue", provider.SchemaTool}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("model endpoint on a: %v, want %v", got, want)
	}
	o := eps[1]
	got = []any{o.BaseURL, o.UpstreamModel, o.Format}
	want = []any{"http://o2.test/v1", "m", llm.ParseFormat(config.APIResponses)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("model endpoint on o: %v, want %v", got, want)
	}
}

// A key the environment does not hold fails the build, naming the
// provider and the variable.
func TestMissingKeyFailsBuild(t *testing.T) {
	t.Setenv("KEEL_ASSEMBLE_TEST_KEY", "")
	cfg := parse(t, "providers: [{name: a, type: openai, api_key_env: KEEL_ASSEMBLE_TEST_KEY}]\n")
	_, err := Build(cfg, Options{Upstream: http.DefaultTransport})
	if !errors.Is(err, config.ErrKeyEnvUnset) || !strings.Contains(err.Error(), "provider a") {
		t.Fatalf("Build = %v, want ErrKeyEnvUnset naming provider a", err)
	}
}

// The typed modes of structured_output reach the engine's options, and
// the limits pass straight through (no copy field by field).
func TestStructuredOptionsFromConfig(t *testing.T) {
	cfg := parse(t, `
structured_output:
  stream_mode: relaxed
  on_violation: pass
  implied: strict
  reask: false
  max_schema_depth: 7
  max_concurrent_schema_compiles: 3
normalization: {parameter_policy: reject}
`)
	o := structuredOptions(cfg.StructuredOutput)
	if !o.RelaxedStreams || !o.PassViolations || !o.StrictImplied || o.DisableImplied || !o.DisableReask {
		t.Errorf("structured options %+v", o)
	}
	if o.Limits != (structured.Limits{MaxDepth: 7, MaxConcurrentCompiles: 3}) {
		t.Errorf("limits %+v", o.Limits)
	}
	if cfg.Normalization.ParameterPolicy != normalize.PolicyReject {
		t.Errorf("parameter_policy %q", cfg.Normalization.ParameterPolicy)
	}
	if d := structuredOptions(parse(t, "structured_output: {implied: off}\n").StructuredOutput); !d.DisableImplied || d.StrictImplied || d.RelaxedStreams {
		t.Errorf("implied: off gives %+v", d)
	}
}

// Build opens what the config names and Close closes it: a second mesh on
// the same request-log file can be built once the first is closed, and
// Close may be called twice.
func TestBuildAndClose(t *testing.T) {
	dir := t.TempDir()
	cfg := parse(t, providers+"request_log: {path: "+filepath.Join(dir, "req.db")+"}\nresponses: {store: sqlite}\n")
	m, err := Build(cfg, Options{Upstream: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	if m.Engine() == nil || m.Server() == nil || m.reqlog == nil || m.convDB == nil {
		t.Fatalf("built mesh misses a part: engine %v server %v request log %v conversations %v", m.Engine() != nil, m.Server() != nil, m.reqlog != nil, m.convDB != nil)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	m2, err := Build(cfg, Options{Upstream: http.DefaultTransport})
	if err != nil {
		t.Fatalf("rebuild on the same files: %v", err)
	}
	m2.Close()
}

// The personal-data hash key comes from the audit log the observe step
// opened when the config sets none: the order is in the types (piiOptions
// takes the audit log), not in the order of two calls.
func TestPIIHashKeyFromAuditLog(t *testing.T) {
	cfg := parse(t, providers+"pii: {enabled: true, audit: {path: "+filepath.Join(t.TempDir(), "audit.db")+"}}\n")
	m, err := Build(cfg, Options{Upstream: http.DefaultTransport})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	o, err := piiOptions(cfg, m.audit)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.HashKey) == 0 || string(o.HashKey) != string(m.audit.HashKey()) {
		t.Errorf("hash key %x, want the audit log's %x", o.HashKey, m.audit.HashKey())
	}
	if o, _ := piiOptions(cfg, nil); len(o.HashKey) != 0 {
		t.Errorf("without an audit log or a configured key, hash key %x, want none", o.HashKey)
	}
}

// http_client: standard puts the provider's hosts on net/http's client,
// whether its endpoints are a model's or, with no models declared, the
// passthrough ones.
func TestStandardClientForModelAndPassthroughEndpoints(t *testing.T) {
	const prov = "providers: [{name: s, type: openai, base_url: \"http://s.test:8000/v1\", http_client: standard}, {name: l, type: openai, base_url: \"http://l.test/v1\"}]\n"
	for _, tt := range []struct{ name, yaml string }{
		{name: "models", yaml: prov + "models: [{name: m, endpoints: [{provider: s}, {provider: l}]}]\n"},
		{name: "passthrough", yaml: prov},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := parse(t, tt.yaml)
			ups, err := resolveUpstreams(cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := transportOptions(cfg, ups).Standard
			if want := map[string]bool{"s.test:8000": true}; !reflect.DeepEqual(got, want) {
				t.Errorf("standard hosts %v, want %v", got, want)
			}
		})
	}
}
