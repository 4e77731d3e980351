package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/sim"
)

func TestAzureCallURL(t *testing.T) {
	for _, tc := range []struct {
		name, base, version string
		format              llm.Format
		want                string
	}{
		{"deployment chat", "https://r.openai.azure.com/", "2024-10-21", llm.FormatOpenAI,
			"https://r.openai.azure.com/openai/deployments/gpt%2Fprod/chat/completions?api-version=2024-10-21"},
		{"deployment responses", "https://r.openai.azure.com", "2025-04-01-preview", llm.FormatResponses,
			"https://r.openai.azure.com/openai/responses?api-version=2025-04-01-preview"},
		{"v1 chat", "https://r.openai.azure.com/openai/v1/", "", llm.FormatOpenAI, "https://r.openai.azure.com/openai/v1/chat/completions"},
		{"v1 responses", "https://r.openai.azure.com/openai/v1", "", llm.FormatResponses, "https://r.openai.azure.com/openai/v1/responses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := NewAzure(AzureConfig{BaseURL: tc.base, APIVersion: tc.version, Format: tc.format, APIKey: "k"})
			if err != nil {
				t.Fatal(err)
			}
			if got := a.CallURL("gpt/prod", true); got != tc.want {
				t.Errorf("CallURL = %q, want %q", got, tc.want)
			}
		})
	}
	for _, bad := range []AzureConfig{
		{BaseURL: "https://r.openai.azure.com", Format: llm.FormatOpenAI, APIKey: "k"},
		{BaseURL: "https://r.openai.azure.com/openai/v1", APIVersion: "2024-10-21", Format: llm.FormatOpenAI, APIKey: "k"},
		{BaseURL: "https://r.openai.azure.com/openai/v1", Format: llm.FormatAnthropic, APIKey: "k"},
		{BaseURL: "https://r.openai.azure.com/openai/v1", Format: llm.FormatOpenAI},
	} {
		if _, err := NewAzure(bad); err == nil {
			t.Errorf("NewAzure(%+v) = nil error", bad)
		}
	}
}

// countingCredential issues token-N, valid for an hour, and counts.
type countingCredential struct {
	n    atomic.Int32
	fail error
}

func (c *countingCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if c.fail != nil {
		return azcore.AccessToken{}, c.fail
	}
	if len(o.Scopes) != 1 || o.Scopes[0] != AzureScope {
		return azcore.AccessToken{}, errors.New("wrong scope")
	}
	n := c.n.Add(1)
	return azcore.AccessToken{Token: "token-" + string(rune('0'+n)), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// TestEntraTokensRefresh: a token is reused until EntraRefresh before it
// expires, then replaced, in virtual time.
func TestEntraTokensRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cred := &countingCredential{}
		tokens := NewEntraTokens(cred)
		ctx := context.Background()
		get := func() string {
			tok, err := tokens.Token(ctx)
			if err != nil {
				t.Fatal(err)
			}
			return tok
		}
		if got := get(); got != "token-1" {
			t.Fatalf("first token %q", got)
		}
		time.Sleep(time.Hour - EntraRefresh - time.Second)
		if got := get(); got != "token-1" {
			t.Fatalf("token %q before the refresh point, want token-1 reused", got)
		}
		time.Sleep(2 * time.Second)
		if got := get(); got != "token-2" {
			t.Fatalf("token %q after the refresh point, want token-2", got)
		}
		if n := cred.n.Load(); n != 2 {
			t.Errorf("%d credential requests, want 2", n)
		}
	})
}

// TestAzureEntraAgainstSim: calls with Entra ID tokens reach the
// simulator's Azure routes; a token it does not know is its 401, read as
// an authentication error; a credential that fails names the provider.
func TestAzureEntraAgainstSim(t *testing.T) {
	cfg := sim.ZeroLatency()
	cfg.Azure = &sim.AzureSpec{EntraTokens: []string{"token-1"}}
	f, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := NewClient(f.Transport())
	ctx := context.Background()
	req := &llm.Request{Format: llm.FormatOpenAI, Model: "gpt", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
	call := func(cred azcore.TokenCredential) (*Result, error) {
		h, err := NewAzure(AzureConfig{BaseURL: "http://" + sim.TransportHost + "/openai/v1", Format: llm.FormatOpenAI, Tokens: NewEntraTokens(cred)})
		if err != nil {
			t.Fatal(err)
		}
		ep := &Endpoint{ID: "gpt/eastus/az", Provider: "az", Model: "gpt", UpstreamModel: "sim-llama", Format: llm.FormatOpenAI, Host: h}
		return c.Do(ctx, ep, req, Call{})
	}
	res, err := call(&countingCredential{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Response == nil || res.Response.Model != "sim-llama" {
		t.Fatalf("answer %+v", res.Response)
	}

	cred := &countingCredential{}
	cred.n.Store(1) // issues token-2, which the fleet does not know
	_, err = call(cred)
	var pe *Error
	if !errors.As(err, &pe) || pe.API == nil || pe.API.Status != http.StatusUnauthorized || pe.API.Type != llm.ErrAuthentication {
		t.Fatalf("unknown token: %v", err)
	}

	_, err = call(&countingCredential{fail: errors.New("no managed identity endpoint")})
	if !errors.As(err, &pe) || pe.API == nil || pe.API.Status != http.StatusUnauthorized || !pe.BeforeResponse ||
		!strings.Contains(pe.API.Message, "provider az (azure) cannot authenticate: no managed identity endpoint") {
		t.Fatalf("failing credential: %v", err)
	}
}
