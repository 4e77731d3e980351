package config_test

import (
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/provider"
)

// TestContinuationNamesAgree keeps config's list of continuation names
// (config cannot import provider) equal to provider.ParseContinuation's.
func TestContinuationNamesAgree(t *testing.T) {
	for _, name := range []string{"", "prefill", "continue_final_message", "prefix", "none", "prefil", "Prefill", "continue", "auto"} {
		t.Run(name, func(t *testing.T) {
			cfg := &config.Config{Providers: []config.Provider{{Name: "a", Type: config.TypeOpenAI, Continuation: name}}}
			_, perr := provider.ParseContinuation(name)
			cerr := cfg.Validate()
			if (perr == nil) != (cerr == nil) {
				t.Errorf("continuation %q: provider.ParseContinuation error %v, config.Validate error %v", name, perr, cerr)
			}
		})
	}
}
