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
