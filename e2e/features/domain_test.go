package features_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/sim"
)

// Issue 8: the domain signature feeds the router's domain-compatibility
// constraint: a model scoring below 0.8 for the request's domain is never
// chosen, even when it is the fastest.
func TestDomainCompatibilityRouting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		simCfg := sim.DefaultConfig()
		for i := range simCfg.Regions {
			simCfg.Regions[i].Latency = steadyLatency()
		}
		simCfg.Models[2].Latency = sim.LatencySpec{TTFT: sim.Duration(2 * time.Millisecond)} // sim-haiku: fastest
		s := newSimMesh(t, simCfg, func(c *config.Config) {
			for i := range c.Models {
				if c.Models[i].Name == "sim-haiku" {
					c.Models[i].Domains = map[string]float64{"code": 0.2}
				}
			}
			c.Aliases = []config.Alias{{Name: "any", Models: []string{"sim-opus", "sim-haiku"}, Strategy: "latency"}}
		})
		defer s.mesh.Close()
		code := "panic: runtime error: index out of range [3] with length 3\n\ngoroutine 1 [running]:\nmain.main()\n\t/app/main.go:12 +0x1d\nexit status 2. Why does this Go code crash? func main() { s := []int{1,2,3}; fmt.Println(s[3]) }"
		general := "What is a nice name for a golden retriever puppy? Something cheerful for a family pet."
		served := func(prompt string) map[string]int {
			got := map[string]int{}
			for i := range 30 {
				body, _ := json.Marshal(map[string]any{"model": "any", "max_tokens": 20,
					"messages": []map[string]any{{"role": "user", "content": fmt.Sprintf("%s (%d)", prompt, i)}}})
				r := s.call(t, "/v1/messages", string(body))
				if r.status != 200 {
					t.Fatalf("status %d %s", r.status, r.body)
				}
				got[r.header.Get("X-Mesh-Model")]++
			}
			return got
		}
		if g := served(general); g["sim-haiku"] < 15 {
			t.Fatalf("general prompts: %v; the fastest model should serve most", g)
		}
		if c := served(code); c["sim-haiku"] != 0 {
			t.Errorf("code prompts reached sim-haiku (code score 0.2): %v", c)
		}
		s.mu.Lock()
		last := s.records[len(s.records)-1]
		s.mu.Unlock()
		if last.Domain != "code" {
			t.Errorf("the code prompt was classified %q", last.Domain)
		}
	})
}

// Issue 8: the classifier is extensible from config.
func TestClassifierLexiconFromConfig(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newSimMesh(t, sim.ZeroLatency(), func(c *config.Config) {
			c.Classifier.Lexicons = map[string]map[string]float64{"insurance": {"premium": 3, "deductible": 3, "policyholder": 3, "保费": 3}}
		})
		defer s.mesh.Close()
		r := s.call(t, "/v1/messages", msgBody("sim-haiku", "The policyholder asks whether the deductible applies before the premium refund.", ""))
		if r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		s.mu.Lock()
		got := s.records[len(s.records)-1].Domain
		s.mu.Unlock()
		if got != "insurance" {
			t.Errorf("domain %q, want insurance from the configured lexicon", got)
		}
	})
}
