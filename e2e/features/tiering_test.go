package features_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/sim"
)

// tieredMesh is an embedded mesh over the zero-latency simulator; edit
// changes the simulator's config (nil: the default fleet) and cfgEdit Keel's.
func tieredMesh(t *testing.T, edit func(*sim.Config), cfgEdit func(*config.Config)) *keel.Mesh {
	t.Helper()
	sc := sim.ZeroLatency()
	if edit != nil {
		edit(&sc)
	}
	fleet, err := sim.New(sc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := simfleet.Config(fleet, "http://sim.invalid")
	if cfgEdit != nil {
		cfgEdit(cfg)
	}
	m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// postMessages sends an Anthropic Messages call with body to m and returns
// the status, the header and the body read.
func postMessages(t *testing.T, m *keel.Mesh, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Set("x-api-key", "client-key")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := m.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, b
}

func userBody(model, prompt, extra string) string {
	p, _ := json.Marshal(prompt)
	return `{"model":"` + model + `","max_tokens":200,"messages":[{"role":"user","content":` + string(p) + `}]` + extra + `}`
}

// TestAutoAliasRoutesByComplexity: the built-in alias auto sends a simple
// prompt to the cheap tier (sim-haiku, capability 1), a medium one to the
// middle tier (sim-sonnet, 3) and a complex one to the strong tier
// (sim-opus, 5), and says so in X-Mesh-Tier.
func TestAutoAliasRoutesByComplexity(t *testing.T) {
	m := tieredMesh(t, nil, nil)
	for _, tc := range []struct {
		name, prompt, model, tier string
	}{
		{"simple", "what's the capital of australia", "sim-haiku", "simple/cheap"},
		{"medium", "Can you explain how a B-tree index speeds up lookups, with a small example?", "sim-sonnet", "medium/middle"},
		{"complex", "Design a billing system for a multi-tenant SaaS: walk me through the data model, proration on upgrades, idempotent webhooks and month-end reconciliation, and justify the trade-offs.", "sim-opus", "complex/strong"},
		{"complex zh", "请设计一个支持每秒十万请求的秒杀系统，说明限流、库存扣减和订单异步处理的方案，并分析各自的优缺点。", "sim-opus", "complex/strong"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := postMessages(t, m, userBody("auto", tc.prompt, ""))
			if status != http.StatusOK {
				t.Fatalf("status %d: %s", status, body)
			}
			if got := h.Get("X-Mesh-Model"); got != tc.model {
				t.Errorf("X-Mesh-Model = %q, want %q", got, tc.model)
			}
			if got := h.Get("X-Mesh-Tier"); got != tc.tier {
				t.Errorf("X-Mesh-Tier = %q, want %q", got, tc.tier)
			}
		})
	}
	// A call to a plain model carries no tier.
	_, h, _ := postMessages(t, m, userBody("sim-sonnet", "hi", ""))
	if got := h.Get("X-Mesh-Tier"); got != "" {
		t.Errorf("X-Mesh-Tier on a plain model = %q, want none", got)
	}
}

// schemaExtra asks for an object with a required integer through
// mesh_behavior.output_schema.
const schemaExtra = `,"mesh_behavior":{"output_schema":{"type":"object","properties":{"total":{"type":"integer"}},"required":["total"]}}`

// TestTieringEscalatesOnSchemaViolation: the cheap tier is a model that
// ignores a JSON schema (as llama.cpp's server has done: ModelSpec
// StructuredOutputs "ignored") and answers prose that fails validation.
// With escalate the re-ask goes to the middle tier, which answers a valid
// object; without it the re-ask goes to the same model, fails again, and
// the call is a 502 MESH_SCHEMA_VIOLATION.
func TestTieringEscalatesOnSchemaViolation(t *testing.T) {
	ignoring := func(c *sim.Config) {
		for i := range c.Models {
			if c.Models[i].Name == "sim-haiku" {
				c.Models[i].StructuredOutputs = sim.StructuredIgnored
			}
		}
	}
	tiers := config.Tiers{Cheap: "sim-haiku", Middle: "sim-sonnet", Strong: "sim-opus"}
	m := tieredMesh(t, ignoring, func(c *config.Config) {
		c.Aliases = append(c.Aliases, config.Alias{Name: "fixed", Tiering: &config.Tiering{Tiers: tiers}})
	})
	const prompt = "total: 42"
	t.Run("auto escalates", func(t *testing.T) {
		status, h, body := postMessages(t, m, userBody("auto", prompt, schemaExtra))
		if status != http.StatusOK {
			t.Fatalf("status %d: %s", status, body)
		}
		if got, want := h.Get("X-Mesh-Tier"), "simple/middle; escalated"; got != want {
			t.Errorf("X-Mesh-Tier = %q, want %q", got, want)
		}
		if got := h.Get("X-Mesh-Model"); got != "sim-sonnet" {
			t.Errorf("X-Mesh-Model = %q, want sim-sonnet", got)
		}
	})
	t.Run("auto escalates a stream", func(t *testing.T) {
		status, h, body := postMessages(t, m, userBody("auto", prompt, schemaExtra+`,"stream":true`))
		if status != http.StatusOK || !strings.Contains(string(body), "message_stop") {
			t.Fatalf("status %d: %s", status, body)
		}
		if got, want := h.Get("X-Mesh-Tier"), "simple/middle; escalated"; got != want {
			t.Errorf("X-Mesh-Tier = %q, want %q", got, want)
		}
		if got := h.Get("X-Mesh-Model"); got != "sim-sonnet" {
			t.Errorf("X-Mesh-Model = %q, want sim-sonnet", got)
		}
	})
	t.Run("no escalation", func(t *testing.T) {
		status, h, body := postMessages(t, m, userBody("fixed", prompt, schemaExtra))
		if status != http.StatusBadGateway || !strings.Contains(string(body), "MESH_SCHEMA_VIOLATION") {
			t.Fatalf("status %d: %s; want 502 MESH_SCHEMA_VIOLATION", status, body)
		}
		if got := h.Get("X-Mesh-Tier"); got != "" {
			t.Logf("X-Mesh-Tier on the error = %q", got)
		}
	})
}
