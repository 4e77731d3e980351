package features_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// TestCheckCredentialsNamesProvider: an azure provider with auth: entra
// and no Azure identity anywhere (no environment credentials, no managed
// identity, no Azure CLI login) is named by the start-up check.
func TestCheckCredentialsNamesProvider(t *testing.T) {
	for _, k := range []string{"AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_CERTIFICATE_PATH", "IDENTITY_ENDPOINT", "MSI_ENDPOINT"} {
		t.Setenv(k, "")
	}
	t.Setenv("PATH", t.TempDir()) // no az, no azd
	cfg := &config.Config{
		Providers: []config.Provider{{Name: "azure-west", Type: config.TypeAzure, BaseURL: "https://contoso.openai.azure.com/openai/v1", Auth: config.AuthEntra}},
		Models:    []config.Model{{Name: "gpt-4o", Endpoints: []config.Endpoint{{Provider: "azure-west", UpstreamModel: "gpt4o-prod"}}}},
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := keel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	err = m.CheckCredentials(ctx)
	if err == nil || !strings.HasPrefix(err.Error(), "provider azure-west (azure) cannot authenticate: ") {
		t.Fatalf("CheckCredentials = %v, want the provider named", err)
	}
}
