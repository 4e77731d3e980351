package assemble

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/config"
)

const platformProviders = `
providers:
  - name: a
    type: anthropic
    base_url: http://a.test
    api_key: ka
  - name: br
    type: anthropic
    api_key: bedrock-api-key
    bedrock: {region: us-east-1}
`

// Every endpoint of a Bedrock provider, a model's or a passthrough one,
// gets the provider's one platform; an endpoint of another provider gets
// none; CheckCredentials sees each platform once.
func TestPlatformsAttachedToModelAndPassthroughEndpoints(t *testing.T) {
	cfg := parse(t, platformProviders+`
models:
  - name: claude
    endpoints:
      - {provider: a, region: anthropic}
      - {provider: br, region: us, upstream_model: us.anthropic.claude-sonnet-4-5-20250929-v1:0}
      - {provider: br, region: eu, upstream_model: eu.anthropic.claude-sonnet-4-5-20250929-v1:0}
`)
	routed, err := resolveUpstreams(cfg)
	if err != nil {
		t.Fatal(err)
	}
	named, err := routed.attachPlatforms(cfg, http.DefaultTransport)
	if err != nil {
		t.Fatal(err)
	}
	eps := routed.routed
	if eps[0].Platform != nil {
		t.Errorf("endpoint of provider a has platform %s, want none", eps[0].Platform.Name())
	}
	if eps[1].Platform == nil || eps[1].Platform.Name() != "bedrock" || eps[2].Platform != eps[1].Platform {
		t.Fatalf("Bedrock endpoints' platforms %v and %v: want the provider's one bedrock platform", eps[1].Platform, eps[2].Platform)
	}
	if len(named) != 1 || named[0].provider != "br" || named[0].pf != eps[1].Platform {
		t.Errorf("platforms %+v, want br's one", named)
	}
	if got := eps[1].Platform.CallURL(eps[1].UpstreamModel, false); !strings.HasPrefix(got, "https://bedrock-runtime.us-east-1.amazonaws.com/model/") {
		t.Errorf("call URL %q, want the region's Bedrock host", got)
	}

	cfg = parse(t, platformProviders)
	pass, err := resolveUpstreams(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if named, err = pass.attachPlatforms(cfg, http.DefaultTransport); err != nil {
		t.Fatal(err)
	}
	if len(pass.passthrough) != 2 || pass.passthrough[0].Platform != nil || pass.passthrough[1].Platform == nil || len(named) != 1 {
		t.Fatalf("passthrough platforms: %v, %v (%d named); want none for a, bedrock for br", pass.passthrough[0].Platform, pass.passthrough[1].Platform, len(named))
	}
}

// A platform that cannot be set up fails Build with the provider's name.
func TestBuildNamesTheProviderWhosePlatformFails(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.json")
	cfg, err := config.Parse([]byte(`
providers:
  - name: vx
    type: anthropic
    vertex: {region: us-east5, project: p, credentials_file: `+missing+`}
request_log: {enabled: false}
`), "keel.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(cfg, Options{Upstream: http.DefaultTransport})
	if err == nil || !strings.HasPrefix(err.Error(), "provider vx: reading Google credentials") {
		t.Fatalf("Build: %v; want the error naming provider vx and its credentials file", err)
	}
}
