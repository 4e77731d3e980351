package features_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// TestOffStagesCostNothing: a feature whose section is written but
// disabled adds no allocation to a call (issue 26: a stage that is off
// costs nothing per call). Each mesh is the plain one plus one disabled
// section; a call through each allocates as many objects as through the
// plain one. Each figure is the least of three averages over 1,000 calls
// (the meshes' background work, probes and tickers, allocates too).
func TestOffStagesCostNothing(t *testing.T) {
	off := false
	cases := []struct {
		name  string
		tweak func(*config.Config)
	}{
		{"plain", func(*config.Config) {}},
		{"request log off, path set", func(c *config.Config) {
			c.RequestLog = config.RequestLog{Enabled: &off, Path: t.TempDir() + "/never.db", LogBodies: true}
		}},
		{"cache off", func(c *config.Config) { c.Cache = config.Cache{Enabled: false, Store: "memory"} }},
		{"personal data off", func(c *config.Config) { c.PII = config.PII{Enabled: false, Action: "redact"} }},
	}
	const body = `{"model":"sim-sonnet","max_tokens":64,"messages":[{"role":"user","content":"Tell me about keels."}]}`
	allocs := make([]float64, len(cases))
	calls := make([]func(), len(cases))
	for i, tc := range cases {
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		cfg := simfleet.Config(fleet, "http://sim.invalid")
		cfg.RequestLog.Enabled = &off
		tc.tweak(cfg)
		m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		rt := m.Transport()
		call := func() {
			req, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.com/v1/messages", strings.NewReader(body))
			req.Header.Set("anthropic-version", "2023-06-01")
			req.Header.Set("Content-Type", "application/json")
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s: status %d", tc.name, resp.StatusCode)
			}
		}
		call() // warm the first-call caches
		calls[i] = call
		t.Cleanup(func() { m.Close() })
	}
	for round := range 3 {
		for i, call := range calls {
			if a := testing.AllocsPerRun(1000, call); round == 0 || a < allocs[i] {
				allocs[i] = a
			}
		}
	}
	for i, tc := range cases[1:] {
		if allocs[i+1] > allocs[0] {
			t.Errorf("%s: %.0f allocations per call, the plain mesh %.0f: a disabled section costs a call", tc.name, allocs[i+1], allocs[0])
		}
	}
	t.Logf("allocations per call: %v", allocs)
}
