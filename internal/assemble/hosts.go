package assemble

import (
	"fmt"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// hosts builds the provider.Host of endpoints whose provider addresses
// or authenticates calls its own way (azure, gemini), sharing one token
// cache per provider.
type hosts struct {
	entra map[string]*provider.EntraTokens
}

// of returns the host of an endpoint of p at base with key; nil for a
// provider called in its format's way.
func (h *hosts) of(p *config.Provider, base, key string) (provider.Host, error) {
	switch p.Type {
	case config.TypeAzure:
		c := provider.AzureConfig{BaseURL: base, APIVersion: p.APIVersion, Format: llm.ParseFormat(p.WireFormat()), APIKey: key}
		if p.Auth == config.AuthEntra {
			t, err := h.entraTokens(p.Name)
			if err != nil {
				return nil, err
			}
			c.Tokens = t
		}
		return provider.NewAzure(c)
	case config.TypeGemini:
		if p.Vertex != nil {
			return nil, nil // Gemini on Vertex AI: attachPlatforms builds its host
		}
		return provider.NewGeminiAPI(base, key)
	}
	return nil, nil
}

// entraTokens is provider name's token cache over the Azure credential
// chain (azidentity.DefaultAzureCredential: environment, workload
// identity, managed identity, Azure CLI).
func (h *hosts) entraTokens(name string) (*provider.EntraTokens, error) {
	if t := h.entra[name]; t != nil {
		return t, nil
	}
	cred, err := azidentity.NewDefaultAzureCredential(nil)
	if err != nil {
		return nil, fmt.Errorf("provider %s (azure, entra) cannot authenticate: %w", name, err)
	}
	if h.entra == nil {
		h.entra = map[string]*provider.EntraTokens{}
	}
	t := provider.NewEntraTokens(cred)
	h.entra[name] = t
	return t, nil
}
