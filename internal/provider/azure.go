package provider

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/wire"
	"github.com/keelmesh/keel/internal/wire/azure"
)

// AzureScope is the scope of a Microsoft Entra ID token for Azure OpenAI
// (learn.microsoft.com/azure/ai-foundry/openai/how-to/managed-identity).
const AzureScope = "https://cognitiveservices.azure.com/.default"

// AzureConfig describes an Azure OpenAI endpoint's host.
type AzureConfig struct {
	// BaseURL is the resource endpoint (https://{resource}.openai.azure.com:
	// deployment URLs, APIVersion required) or the v1 surface
	// (…/openai/v1, no APIVersion).
	BaseURL    string
	APIVersion string
	// Format is llm.FormatOpenAI (Chat Completions) or
	// llm.FormatResponses.
	Format llm.Format
	// APIKey is sent in the api-key header; Tokens, when set, gives
	// Microsoft Entra ID bearer tokens instead.
	APIKey string
	Tokens *EntraTokens
}

// Azure is the host of an Azure OpenAI endpoint: OpenAI's bodies at
// Azure's URLs with Azure's authentication.
type Azure struct {
	base, version string
	// tail is the format's call path: /chat/completions or /responses.
	tail   string
	key    string
	tokens *EntraTokens
}

// NewAzure returns the host of c.
func NewAzure(c AzureConfig) (*Azure, error) {
	base := strings.TrimRight(c.BaseURL, "/")
	v1 := strings.HasSuffix(base, "/openai/v1")
	switch {
	case !v1 && c.APIVersion == "":
		return nil, errors.New("azure: api_version is required with deployment URLs")
	case v1 && c.APIVersion != "":
		return nil, errors.New("azure: the v1 surface takes no api_version")
	case tail(c.Format) != chatTail && tail(c.Format) != responsesTail:
		return nil, errors.New("azure: serves Chat Completions and the Responses API only")
	case c.Tokens == nil && c.APIKey == "":
		return nil, errors.New("azure: no api key and no Entra ID token source")
	}
	return &Azure{base: base, version: c.APIVersion, tail: tail(c.Format), key: c.APIKey, tokens: c.Tokens}, nil
}

// The call paths of the two OpenAI APIs Azure serves.
const (
	chatTail      = "/chat/completions"
	responsesTail = "/responses"
)

// tail is format's call path under an OpenAI base URL.
func tail(f llm.Format) string { return wire.For(f).RequestURL("") }

// Name is "azure".
func (*Azure) Name() string { return "azure" }

// CallURL: on the v1 surface {base}/chat/completions or {base}/responses,
// the deployment in the body's model; with deployment URLs
// {base}/openai/deployments/{deployment}/chat/completions?api-version=…
// (learn.microsoft.com/azure/ai-foundry/openai/reference), and for the
// Responses API {base}/openai/responses?api-version=…, which names the
// deployment in the body (learn.microsoft.com/azure/ai-foundry/openai/how-to/responses).
func (a *Azure) CallURL(model string, _ bool) string {
	if a.version == "" {
		return a.base + a.tail
	}
	q := "?api-version=" + url.QueryEscape(a.version)
	if a.tail == responsesTail {
		return a.base + "/openai" + responsesTail + q
	}
	return a.base + "/openai/deployments/" + url.PathEscape(model) + chatTail + q
}

// Authorize sets api-key, or Authorization: Bearer with an Entra ID token.
func (a *Azure) Authorize(ctx context.Context, set func(k, v string)) error {
	if a.tokens == nil {
		set("Api-Key", a.key)
		return nil
	}
	tok, err := a.tokens.Token(ctx)
	if err != nil {
		return err
	}
	set("Authorization", "Bearer "+tok)
	return nil
}

// ParseError reads Azure's errors (internal/wire/azure).
func (*Azure) ParseError(status int, h http.Header, body []byte) *llm.APIError {
	return azure.ParseError(status, h, body)
}

// Check gets an Entra ID token (a key needs no check: it is set).
func (a *Azure) Check(ctx context.Context) error {
	if a.tokens == nil {
		return nil
	}
	_, err := a.tokens.Token(ctx)
	return err
}

// EntraRefresh is how long before its expiry a token is replaced, as the
// Azure SDK's bearer token policy does (azcore runtime.BearerTokenPolicy).
const EntraRefresh = 5 * time.Minute

// EntraTokens caches Microsoft Entra ID access tokens of one credential
// for AzureScope, getting a new one EntraRefresh before the current one
// expires. Safe for concurrent use; a refresh blocks the calls that need
// it, one credential request at a time.
type EntraTokens struct {
	cred azcore.TokenCredential

	mu  sync.Mutex // guards following
	tok azcore.AccessToken
}

// NewEntraTokens returns a cache over cred (azidentity's
// DefaultAzureCredential in production).
func NewEntraTokens(cred azcore.TokenCredential) *EntraTokens {
	return &EntraTokens{cred: cred}
}

// Token returns a token valid for at least EntraRefresh more.
func (t *EntraTokens) Token(ctx context.Context) (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok.Token != "" && time.Until(t.tok.ExpiresOn) > EntraRefresh {
		return t.tok.Token, nil
	}
	tok, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{AzureScope}})
	if err != nil {
		return "", err
	}
	t.tok = tok
	return tok.Token, nil
}
