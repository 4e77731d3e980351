package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeNamesTheProviderThatCannotAuthenticate: keel serve gets every
// Bedrock and Vertex provider's credentials at start; a provider whose
// credential chain yields nothing stops it with an error naming the
// provider, before it listens.
func TestServeNamesTheProviderThatCannotAuthenticate(t *testing.T) {
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"} {
		t.Setenv(k, "")
	}
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	cfg := `
providers:
  - name: bedrock-eu
    type: anthropic
    bedrock:
      region: eu-central-1
models:
  - name: claude
    endpoints:
      - {provider: bedrock-eu, region: eu-central-1, upstream_model: eu.anthropic.claude-sonnet-4-5-20250929-v1:0}
request_log:
  enabled: false
`
	path := filepath.Join(dir, "keel.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	err := runServe(context.Background(), path, "127.0.0.1:0", true, io.Discard, nil)
	if err == nil || !strings.Contains(err.Error(), "provider bedrock-eu (bedrock) cannot authenticate") {
		t.Fatalf("runServe: %v; want the error naming provider bedrock-eu", err)
	}
}
