package assemble

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/provider"
)

// attachPlatforms is the last part of the upstreams step, once the
// upstream RoundTripper rt is chosen: it gives every endpoint of a Bedrock
// or Vertex provider (config providers[].bedrock, .vertex), routed or
// passthrough, its platform: one per provider and base URL, so the
// provider's endpoints share its credentials and their cache (a gemini
// provider's vertex section gives its endpoints a Vertex Gemini host
// instead). Google tokens are fetched through rt, as model calls go. It
// returns the platforms and hosts built, for CheckCredentials.
func (u upstreams) attachPlatforms(cfg *config.Config, rt http.RoundTripper) ([]namedPlatform, error) {
	var named []namedPlatform
	built := map[[2]string]provider.Platform{}
	hosts := map[provider.Host]bool{}
	for _, ep := range u.all() {
		if h := ep.Host; h != nil && !hosts[h] {
			// an azure (Entra ID) or gemini provider's host: checked too
			hosts[h] = true
			named = append(named, namedPlatform{ep.Provider, h})
		}
		p := cfg.Provider(ep.Provider)
		if p == nil || p.Bedrock == nil && p.Vertex == nil {
			continue
		}
		if p.Type == config.TypeGemini {
			// Gemini on Vertex AI: the Gemini API's bodies behind the
			// Vertex platform's URL and OAuth2 tokens.
			h, err := vertexGemini(p, ep, rt, hosts)
			if err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			if !hosts[h] {
				hosts[h] = true
				named = append(named, namedPlatform{p.Name, h})
			}
			ep.Host = h
			continue
		}
		k := [2]string{p.Name, ep.BaseURL}
		pf := built[k]
		if pf == nil {
			var err error
			if pf, err = newPlatform(p, ep, rt); err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			built[k] = pf
			named = append(named, namedPlatform{p.Name, pf})
		}
		ep.Platform = pf
	}
	return named, nil
}

// vertexGemini is the Vertex Gemini host of p at ep's base URL, one per
// provider and base (built holds them).
func vertexGemini(p *config.Provider, ep *provider.Endpoint, rt http.RoundTripper, built map[provider.Host]bool) (provider.Host, error) {
	for h := range built {
		if vg, ok := h.(*vertexGeminiHost); ok && vg.provider == p.Name && vg.base == ep.BaseURL {
			return vg, nil
		}
	}
	v := p.Vertex
	g, err := provider.NewVertexGemini(context.Background(), provider.VertexConfig{Project: v.Project, Region: v.Region, CredentialsFile: v.CredentialsFile,
		BaseURL: ep.BaseURL, HTTPClient: &http.Client{Transport: rt}})
	if err != nil {
		return nil, err
	}
	return &vertexGeminiHost{VertexGemini: g, provider: p.Name, base: ep.BaseURL}, nil
}

// vertexGeminiHost is a Vertex Gemini host with what it was built for.
type vertexGeminiHost struct {
	*provider.VertexGemini
	provider, base string
}

func newPlatform(p *config.Provider, ep *provider.Endpoint, rt http.RoundTripper) (provider.Platform, error) {
	ctx := context.Background()
	if b := p.Bedrock; b != nil {
		return provider.NewBedrock(ctx, provider.BedrockConfig{Region: b.Region, Profile: b.Profile, APIKey: ep.APIKey, BaseURL: ep.BaseURL})
	}
	v := p.Vertex
	return provider.NewVertex(ctx, provider.VertexConfig{Project: v.Project, Region: v.Region, CredentialsFile: v.CredentialsFile, BaseURL: ep.BaseURL,
		HTTPClient: &http.Client{Transport: rt}})
}

// CheckCredentials gets the credentials of every Bedrock and Vertex
// provider, and of every azure provider with auth entra and gemini
// provider on Vertex, once (a credential fetch, no model call); the error
// names each provider that cannot authenticate.
func (m *Mesh) CheckCredentials(ctx context.Context) error {
	var errs []error
	for _, p := range m.platforms {
		if err := p.pf.Check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("provider %s (%s) cannot authenticate: %w", p.provider, p.pf.Name(), err))
		}
	}
	return errors.Join(errs...)
}

// namedPlatform is a provider's platform or host.
type namedPlatform struct {
	provider string
	pf       interface {
		Name() string
		Check(ctx context.Context) error
	}
}
