package keel_test

import (
	"net/http"
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// TestCacheHitNamesTheReaskedEndpoint: a cached answer is served with the
// model that gave it. A cheap tier that ignores the schema (as llama.cpp's
// server has done, see TestTieringEscalatesOnSchemaViolation) is re-asked
// on the middle tier, whose answer the client gets and the cache stores:
// a hit says X-Mesh-Model: sim-sonnet, as the first call did, not the
// model whose prose was thrown away (the stored entry named the first
// attempt's endpoint for answers that were not streamed; streams already
// named the re-asked one).
func TestCacheHitNamesTheReaskedEndpoint(t *testing.T) {
	ignoring := func(c *sim.Config) {
		for i := range c.Models {
			if c.Models[i].Name == "sim-haiku" {
				c.Models[i].StructuredOutputs = sim.StructuredIgnored
			}
		}
	}
	m := tieredMesh(t, ignoring, func(c *config.Config) { c.Cache.Enabled = true })
	body := userBody("auto", "total: 42", `,"temperature":0`+schemaExtra)
	for i, want := range []string{"miss", "hit"} {
		status, h, b := postMessages(t, m, body)
		if status != http.StatusOK {
			t.Fatalf("call %d: status %d: %s", i+1, status, b)
		}
		if got := h.Get("X-Mesh-Cache"); got != want {
			t.Fatalf("call %d: X-Mesh-Cache = %q, want %q", i+1, got, want)
		}
		if got := h.Get("X-Mesh-Model"); got != "sim-sonnet" {
			t.Errorf("call %d (%s): X-Mesh-Model = %q, want sim-sonnet (the re-asked model whose answer was stored)", i+1, want, got)
		}
	}
}
