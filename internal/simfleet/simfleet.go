// Package simfleet builds a Keel config that serves a simulator fleet, for
// `keel serve` without a config, `keel demo`, and tests. Only cmd and tests
// import it (it imports sim).
package simfleet

import (
	"slices"
	"strings"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// Provider names used for the fleet's two wire formats.
const (
	AnthropicProvider = "sim-anthropic"
	OpenAIProvider    = "sim-openai"
)

// DefaultAlias is the alias Config adds over sim-sonnet, then the stronger
// sim-opus, then sim-haiku (strategy ordered), so that a fallback across
// models shows (X-Mesh-Model, X-Mesh-Fallback).
const DefaultAlias = "sim-default"

// defaultAliasModels is DefaultAlias's fallback chain.
var defaultAliasModels = []string{"sim-sonnet", "sim-opus", "sim-haiku"}

// Config returns a validated config whose models are the fleet's, each with
// one endpoint per region, reached at baseURL (the fleet's HTTP address, or
// any base when the mesh is given the fleet's in-memory transport). A model
// the fleet serves in the Anthropic format is reached in that format,
// otherwise in the OpenAI format. When the fleet has sim-sonnet, sim-opus
// and sim-haiku (sim.DefaultConfig's three tiers) and no model named
// DefaultAlias, the config also has the alias DefaultAlias over them. The
// request log is off.
func Config(f *sim.Fleet, baseURL string) *config.Config {
	base := strings.TrimRight(baseURL, "/")
	cfg := &config.Config{
		Providers: []config.Provider{
			// The simulator stands for Anthropic's API, which speaks every
			// anthropic-version: the client's is passed on.
			{Name: AnthropicProvider, Type: "anthropic", BaseURL: base, AnthropicVersion: config.AnthropicVersionClient},
			{Name: OpenAIProvider, Type: "openai", BaseURL: base + "/v1"},
		},
	}
	for _, m := range f.Models() {
		mc := config.Model{Name: m.Name, Capability: m.Capability, ContextWindow: m.ContextWindow,
			// the fleet's prices, its prompt-cache tokens included
			Price: config.Price{InputPerMTok: m.Price.InputPerMTok, OutputPerMTok: m.Price.OutputPerMTok,
				CacheReadPerMTok: m.Price.CacheReadPerMTok(), CacheWritePerMTok: m.Price.CacheWrite5mPerMTok(),
				CacheWrite1hPerMTok: m.Price.CacheWrite1hPerMTok()}}
		anth := len(m.Formats) == 0
		for _, fm := range m.Formats {
			if fm == "anthropic" {
				anth = true
			}
		}
		for _, r := range m.Regions {
			ep := config.Endpoint{Region: r}
			if anth {
				ep.Provider, ep.BaseURL = AnthropicProvider, base+"/r/"+r
			} else {
				ep.Provider, ep.BaseURL = OpenAIProvider, base+"/r/"+r+"/v1"
			}
			mc.Endpoints = append(mc.Endpoints, ep)
		}
		cfg.Models = append(cfg.Models, mc)
	}
	if hasModels(cfg, defaultAliasModels) && !hasModels(cfg, []string{DefaultAlias}) {
		cfg.Aliases = append(cfg.Aliases, config.Alias{Name: DefaultAlias, Models: slices.Clone(defaultAliasModels), Strategy: config.StrategyOrdered})
	}
	// No request log unless the caller asks for one: tests and tools
	// built on a fleet must not leave database files behind.
	off := false
	cfg.RequestLog.Enabled = &off
	cfg.ApplyDefaults()
	return cfg
}

// hasModels reports whether cfg has a model of each name.
func hasModels(cfg *config.Config, names []string) bool {
	for _, n := range names {
		if !slices.ContainsFunc(cfg.Models, func(m config.Model) bool { return m.Name == n }) {
			return false
		}
	}
	return true
}

// EmbeddingModel is the embedding model AddEmbeddings declares.
const EmbeddingModel = "text-embedding-3-small"

// AddEmbeddings declares EmbeddingModel (kind embedding, priced as OpenAI
// lists it) on the fleet's OpenAI Embeddings API in every region of f,
// reached at baseURL as Config reaches the fleet, so that `keel serve`
// on the simulator serves POST /v1/embeddings and can show a region's
// failover. It does nothing when cfg has a model of that name already.
func AddEmbeddings(cfg *config.Config, f *sim.Fleet, baseURL string) {
	if hasModels(cfg, []string{EmbeddingModel}) {
		return
	}
	base := strings.TrimRight(baseURL, "/")
	m := config.Model{Name: EmbeddingModel, Kind: config.KindEmbedding, Capability: config.DefaultCapability, Price: config.Price{InputPerMTok: 0.02}}
	for _, r := range f.Regions() {
		m.Endpoints = append(m.Endpoints, config.Endpoint{Provider: OpenAIProvider, Region: r, BaseURL: base + "/r/" + r + "/v1"})
	}
	cfg.Models = append(cfg.Models, m)
}
