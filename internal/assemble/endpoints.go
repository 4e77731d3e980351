package assemble

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/provider"
)

// upstreams are the endpoints a mesh calls: the models' and, when no
// model is declared, one passthrough endpoint per provider.
type upstreams struct {
	routed      []*provider.Endpoint
	passthrough []*provider.Endpoint
}

// all is every endpoint, routed and passthrough.
func (u upstreams) all() []*provider.Endpoint {
	return append(append([]*provider.Endpoint(nil), u.routed...), u.passthrough...)
}

// resolveUpstreams is the first step of Build: it reads the API keys now.
func resolveUpstreams(cfg *config.Config) (upstreams, error) {
	eps, err := Endpoints(cfg)
	if err != nil {
		return upstreams{}, err
	}
	u := upstreams{routed: eps}
	if len(cfg.Models) > 0 {
		return u, nil
	}
	// No models declared: every provider serves whatever model name the
	// client asks for, in its own format.
	var hs hosts
	for i := range cfg.Providers {
		p := &cfg.Providers[i]
		ep, err := endpoint(p)
		if err != nil {
			return upstreams{}, err
		}
		ep.Region = config.DefaultRegion
		if ep.Host, err = hs.of(p, ep.BaseURL, ep.APIKey); err != nil {
			return upstreams{}, fmt.Errorf("provider %s: %w", p.Name, err)
		}
		u.passthrough = append(u.passthrough, ep)
	}
	return u, nil
}

// Endpoints resolves the config's models into upstream endpoints, reading
// API keys from the environment now. Each endpoint's price is its model's
// price, else the pricing section's or the built-in table's entry for its
// upstream model, else for the model's name (zero when none has one).
func Endpoints(cfg *config.Config) ([]*provider.Endpoint, error) {
	var eps []*provider.Endpoint
	var hs hosts
	prices := pricing.New(cfg.Pricing)
	for _, mdl := range cfg.Models {
		for _, e := range mdl.Endpoints {
			p := cfg.Provider(e.Provider)
			if p == nil {
				return nil, fmt.Errorf("model %s: unknown provider %q", mdl.Name, e.Provider)
			}
			ep, err := endpoint(p)
			if err != nil {
				return nil, err
			}
			if ep.StructuredOutputs, err = provider.ParseSchemaMode(mdl.StructuredOutputs); err != nil {
				return nil, fmt.Errorf("model %s: %w", mdl.Name, err)
			}
			ep.ID, ep.Model, ep.UpstreamModel, ep.Region = e.ID(mdl.Name), mdl.Name, e.UpstreamModel, e.Region
			ep.Translation, ep.Capability, ep.Domains, ep.ContextWindow = mdl.Translation, mdl.Capability, mdl.Domains, mdl.ContextWindow
			ep.Price, ep.Embedding = mdl.Price, mdl.Kind == config.KindEmbedding
			if ep.UpstreamModel == "" {
				ep.UpstreamModel = mdl.Name
			}
			if ep.Price.IsZero() {
				ep.Price, _ = prices.Lookup(ep.UpstreamModel)
			}
			if ep.Price.IsZero() {
				ep.Price, _ = prices.Lookup(mdl.Name)
			}
			if e.BaseURL != "" {
				ep.BaseURL = e.BaseURL
			}
			ep.ContentFilter = provider.ContentFilter(mdl.ContentFilter)
			if ep.Host, err = hs.of(p, ep.BaseURL, ep.APIKey); err != nil {
				return nil, fmt.Errorf("provider %s: %w", p.Name, err)
			}
			eps = append(eps, ep)
		}
	}
	return eps, nil
}

// endpoint is the one mapping from a provider's config to an endpoint:
// its wire format, base URL, key (read now), continuation, version,
// timeouts and headers. The caller adds the model's part.
func endpoint(p *config.Provider) (*provider.Endpoint, error) {
	key, err := p.Key()
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	cont, err := provider.ParseContinuation(p.Continuation)
	if err != nil {
		return nil, fmt.Errorf("provider %s: %w", p.Name, err)
	}
	return &provider.Endpoint{
		Provider:              p.Name,
		Format:                llm.ParseFormat(p.WireFormat()),
		BaseURL:               p.BaseURL,
		APIKey:                key,
		Continuation:          cont,
		AnthropicVersion:      p.AnthropicVersion,
		ResponseHeaderTimeout: time.Duration(p.Timeouts.ResponseHeader),
		StreamIdleTimeout:     time.Duration(p.Timeouts.StreamIdle),
		RequestTimeout:        time.Duration(p.Timeouts.Request),
		Header:                headerOf(p.Headers),
	}, nil
}

func headerOf(m map[string]config.Secret) http.Header {
	if len(m) == 0 {
		return nil
	}
	h := http.Header{}
	for k, v := range m {
		h.Set(k, v.Value())
	}
	return h
}

// upstreamTransport is Keel's own tuned transport, sized by the
// providers: the largest connect timeout and pool sizes any asks for, and
// net/http's client for the hosts of providers with http_client: standard.
func upstreamTransport(cfg *config.Config, u upstreams) interface {
	http.RoundTripper
	CloseIdleConnections()
} {
	return provider.NewUpstreamTransport(transportOptions(cfg, u))
}

// transportOptions sizes the upstream transport for the providers and
// their endpoints.
func transportOptions(cfg *config.Config, u upstreams) provider.TransportOptions {
	topt := provider.TransportOptions{}
	standard := map[string]bool{}
	for _, p := range cfg.Providers {
		topt.ConnectTimeout = max(topt.ConnectTimeout, time.Duration(p.Timeouts.Connect))
		topt.MaxIdleConnsPerHost = max(topt.MaxIdleConnsPerHost, p.MaxIdleConnsPerHost)
		topt.MaxConnsPerHost = max(topt.MaxConnsPerHost, p.MaxConnsPerHost)
		standard[p.Name] = p.HTTPClient == "standard"
	}
	for _, ep := range u.all() {
		if standard[ep.Provider] {
			if topt.Standard == nil {
				topt.Standard = map[string]bool{}
			}
			topt.Standard[hostPort(ep.BaseURL)] = true
		}
	}
	return topt
}

// hostPort is base's "host:port", the upstream transport's pool key.
func hostPort(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return ""
	}
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		return net.JoinHostPort(u.Hostname(), port)
	}
	return u.Host
}
