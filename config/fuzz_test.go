package config

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse checks that Parse never panics and that a config it accepts
// validates again.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.yaml")
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"server: {listen: ':1', shutdown_timeout: 5s}",
		"providers:\n  - &p {name: a, type: openai, api_key: k}\n  - <<: *p\n    name: b\n",
		"models: [{name: m, endpoints: [{provider: a}]}]\naliases: [{name: x, models: [m, y]}]",
		"routing: {}\n",
		"server: &s\n  <<: *s\n",
		"providers: [{name: a, type: openai, api_key: '${A:-x}$${B}'}]",
		"a: [\n",
		// The typed values decoded by their own UnmarshalText, good and bad.
		"structured_output: {stream_mode: relaxed, on_violation: pass, implied: strict, max_schema_depth: 3}\nnormalization: {parameter_policy: MAP}\nresilience: {rollout: {stage: hedging, percent: 5}}\n",
		"structured_output: {stream_mode: buffered, implied: [x]}\nnormalization: {parameter_policy: 1}\nresilience: {rollout: {stage: ''}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data, "fuzz.yaml")
		if err != nil {
			if c != nil {
				t.Fatal("Parse returned both a config and an error")
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("accepted config does not validate: %v", err)
		}
	})
}
