package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse checks that Parse never panics, that a config it accepts
// validates again, and that its errors never contain an api_key value.
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
		for _, p := range c.Providers {
			if k := p.APIKey.Value(); len(k) >= 8 && strings.Contains(err2string(Parse(append(data, "\nbogus: 1\n"...), "fuzz.yaml")), k) {
				t.Fatalf("error message contains the api_key")
			}
		}
	})
}

func err2string(_ *Config, err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
