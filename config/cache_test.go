package config

import (
	"strings"
	"testing"
	"time"
)

// TestCacheSection: the cache section decodes into cache.Config and
// cache.Policy, and a bad value or an unknown key names its line.
func TestCacheSection(t *testing.T) {
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "every key", yaml: "cache:\n  enabled: true\n  ttl: 90s\n  max_entries: 7\n  max_bytes: 4096\n  any_temperature: true\n  allow_tools: true\n  shared_across_keys: true\n",
			check: func(t *testing.T, c *Config) {
				k := c.Cache
				if !k.Enabled || k.TTL != 90*time.Second || k.MaxEntries != 7 || k.MaxBytes != 4096 || !k.AnyTemperature || !k.AllowTools || !k.SharedAcrossKeys {
					t.Errorf("cache = %+v", k)
				}
			}},
		{name: "absent is off", yaml: "server:\n  listen: 127.0.0.1:1\n",
			check: func(t *testing.T, c *Config) {
				if c.Cache.Enabled {
					t.Error("cache enabled without a cache section")
				}
			}},
		{name: "negative max_entries", yaml: "cache:\n  enabled: true\n  max_entries: -1\n", wantErr: "keel.yaml:3:3: cache.max_entries: -1 is negative"},
		{name: "unknown key", yaml: "cache:\n  enabled: true\n  size: 3\n", wantErr: "keel.yaml:3:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml), "keel.yaml")
			if err == nil {
				err = c.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}

// TestSemanticCacheSection: cache.embeddings, cache.semantic_max_entries and
// aliases[].semantic_cache decode, default and fail with their line.
func TestSemanticCacheSection(t *testing.T) {
	const models = "providers: [{name: a, type: openai}]\nmodels:\n  - {name: m, endpoints: [{provider: a}]}\n"
	const emb = "  embeddings:\n    base_url: http://127.0.0.1:9/v1\n    api_key: ${EMB_KEY}\n    model: text-embedding-3-small\n    dimensions: 256\n    timeout: 200ms\n"
	for _, tc := range []struct {
		name    string
		yaml    string
		wantErr string
		check   func(t *testing.T, c *Config)
	}{
		{name: "every key", yaml: models + "cache:\n  enabled: true\n  semantic_max_entries: 50\n" + emb + "aliases:\n  - name: support\n    models: [m]\n    semantic_cache: {enabled: true, threshold: 0.9}\n",
			check: func(t *testing.T, c *Config) {
				e := c.Cache.Embeddings
				if e == nil || e.BaseURL != "http://127.0.0.1:9/v1" || e.APIKey.Value() != "k-from-env" || e.Model != "text-embedding-3-small" || e.Dimensions != 256 || e.Timeout != Duration(200*time.Millisecond) || c.Cache.SemanticMaxEntries != 50 {
					t.Errorf("cache = %+v, embeddings %+v", c.Cache, e)
				}
				sc := c.Aliases[0].SemanticCache
				if sc == nil || !sc.Enabled || sc.ThresholdOrDefault() != 0.9 {
					t.Errorf("semantic_cache = %+v", sc)
				}
			}},
		{name: "default threshold", yaml: models + "cache:\n  enabled: true\n" + emb + "aliases:\n  - name: support\n    models: [m]\n    semantic_cache: {enabled: true}\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Aliases[0].SemanticCache.ThresholdOrDefault(); got != DefaultSemanticThreshold {
					t.Errorf("threshold %v, want %v", got, DefaultSemanticThreshold)
				}
			}},
		{name: "needs the exact cache", yaml: models + "cache:\n" + emb + "aliases:\n  - name: support\n    models: [m]\n    semantic_cache: {enabled: true}\n",
			wantErr: "aliases[0].semantic_cache.enabled: needs cache.enabled: true"},
		{name: "needs embeddings", yaml: models + "cache:\n  enabled: true\naliases:\n  - name: support\n    models: [m]\n    semantic_cache:\n      enabled: true\n",
			wantErr: "keel.yaml:10:7: aliases[0].semantic_cache.enabled: needs cache.embeddings"},
		{name: "threshold out of range", yaml: models + "cache:\n  enabled: true\n" + emb + "aliases:\n  - name: support\n    models: [m]\n    semantic_cache: {enabled: true, threshold: 1.5}\n",
			wantErr: "aliases[0].semantic_cache.threshold: expected a cosine similarity in (0, 1], got 1.5"},
		{name: "embeddings without model", yaml: "cache:\n  embeddings:\n    base_url: http://x/v1\n", wantErr: "keel.yaml:2:3: cache.embeddings.model: required"},
		{name: "embeddings bad url", yaml: "cache:\n  embeddings:\n    base_url: x\n    model: m\n", wantErr: "keel.yaml:3:5: cache.embeddings.base_url: required"},
		{name: "unknown key", yaml: "cache:\n  embeddings:\n    url: x\n", wantErr: "keel.yaml:3:5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("EMB_KEY", "k-from-env")
			c, err := Parse([]byte(tc.yaml), "keel.yaml")
			if err == nil {
				err = c.Validate()
			}
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, c)
		})
	}
}
