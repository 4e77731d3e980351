package simfleet

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// Provider names of the fleet's cloud fronts, and their regions.
const (
	BedrockProvider = "sim-bedrock"
	VertexProvider  = "sim-vertex"
	BedrockRegion   = "bedrock"
	VertexRegion    = "vertex"
)

// Clouds is what AddClouds set up: the credentials CloudConfig gives the
// mesh.
type Clouds struct {
	dir        string
	bedrockKey string
	google     *rsa.PrivateKey
	email      string
}

// AddClouds makes model (an Anthropic-format model of c) also served by
// the fleet's Amazon Bedrock and Google Vertex AI fronts, as the same
// Claude model is served by Anthropic's API, Bedrock and Vertex: regions
// bedrock and vertex (with the model's first region's latency), a Bedrock
// API key and a Google service account the fronts accept. dir receives
// the service account's key file (CloudConfig writes it).
func AddClouds(c *sim.Config, model, dir string) (*Clouds, error) {
	i := slices.IndexFunc(c.Models, func(m sim.ModelSpec) bool { return m.Name == model })
	if i < 0 {
		return nil, fmt.Errorf("simfleet: no model %q", model)
	}
	m := &c.Models[i]
	var lat sim.LatencySpec
	for _, r := range c.Regions {
		if len(m.Regions) > 0 && r.Name == m.Regions[0] {
			lat = r.Latency
		}
	}
	c.Regions = append(slices.Clone(c.Regions), sim.RegionSpec{Name: BedrockRegion, Latency: lat}, sim.RegionSpec{Name: VertexRegion, Latency: lat})
	m.Regions = append(slices.Clone(m.Regions), BedrockRegion, VertexRegion)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	cl := &Clouds{dir: dir, bedrockKey: "ABSK" + hex.EncodeToString(b[:]), google: key, email: "keel-demo@sim-project.iam.gserviceaccount.com"}
	acct, _, err := sim.GoogleServiceAccount(key, "http://unused/token", "sim-project", cl.email)
	if err != nil {
		return nil, err
	}
	c.Auth.BedrockAPIKeys = append(slices.Clone(c.Auth.BedrockAPIKeys), cl.bedrockKey)
	c.Auth.Google = append(slices.Clone(c.Auth.Google), acct)
	return cl, nil
}

// BedrockAPIKey is the Bedrock API key the fleet's Bedrock front accepts.
func (cl *Clouds) BedrockAPIKey() string { return cl.bedrockKey }

// WriteServiceAccount writes the service account's key file, its
// token_uri the token endpoint of the fleet at baseURL, and returns its
// path.
func (cl *Clouds) WriteServiceAccount(baseURL string) (string, error) {
	_, file, err := sim.GoogleServiceAccount(cl.google, strings.TrimRight(baseURL, "/")+"/token", "sim-project", cl.email)
	if err != nil {
		return "", err
	}
	sa := filepath.Join(cl.dir, "sim-service-account.json")
	return sa, os.WriteFile(sa, file, 0o600)
}

// CloudConfig is Config with the endpoints in the bedrock and vertex
// regions reached through Bedrock and Vertex providers (the Bedrock API
// key; the service account, whose key file it writes with baseURL's
// token endpoint), each naming the model as its provider does.
func CloudConfig(f *sim.Fleet, baseURL string, cl *Clouds) (*config.Config, error) {
	base := strings.TrimRight(baseURL, "/")
	sa, err := cl.WriteServiceAccount(baseURL)
	if err != nil {
		return nil, err
	}
	cfg := Config(f, baseURL)
	cfg.Providers = append(cfg.Providers,
		config.Provider{Name: BedrockProvider, Type: config.TypeAnthropic, BaseURL: base + "/r/" + BedrockRegion, APIKey: config.Secret(cl.bedrockKey),
			Bedrock: &config.Bedrock{Region: "us-east-1"}},
		config.Provider{Name: VertexProvider, Type: config.TypeAnthropic, BaseURL: base + "/r/" + VertexRegion,
			Vertex: &config.Vertex{Project: "sim-project", Region: "us-east5", CredentialsFile: sa}})
	for i := range cfg.Models {
		m := &cfg.Models[i]
		for j := range m.Endpoints {
			ep := &m.Endpoints[j]
			switch ep.Region {
			case BedrockRegion:
				ep.Provider, ep.BaseURL, ep.UpstreamModel = BedrockProvider, "", "us.anthropic."+m.Name+"-v1:0"
			case VertexRegion:
				ep.Provider, ep.BaseURL, ep.UpstreamModel = VertexProvider, "", m.Name+"@20250929"
			}
		}
	}
	cfg.ApplyDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}
