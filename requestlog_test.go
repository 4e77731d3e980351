package keel_test

import (
	"os"
	"slices"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// keel.New writes a request log only when the config asks for one: a library
// user never finds a database file in the working directory by surprise.
func TestNewCreatesNoRequestLogUnlessAsked(t *testing.T) {
	const provider = "providers: [{name: a, type: openai, base_url: 'http://127.0.0.1:9/v1'}]\n"
	tests := []struct {
		name string
		yaml string
		want []string // files in the working directory after New and Close
	}{
		{name: "minimal config", yaml: provider},
		{name: "empty config", yaml: ""},
		{name: "path named", yaml: provider + "request_log: {path: mine.db}\n", want: []string{"mine.db"}},
		{name: "enabled", yaml: provider + "request_log: {enabled: true}\n", want: []string{"keel-requests.db"}},
		{name: "disabled with a path", yaml: provider + "request_log: {enabled: false, path: mine.db}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			cfg, err := config.Parse([]byte(tt.yaml), "keel.yaml")
			if err != nil {
				t.Fatal(err)
			}
			m, err := keel.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("files in the working directory: %q, want %q", got, tt.want)
			}
		})
	}
}
