package sim

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultConfig(t *testing.T) {
	for _, cfg := range []Config{DefaultConfig(), ZeroLatency()} {
		f, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// 3 models × 3 regions, plus the single-format sim-llama and sim-claude in 2 regions each.
		if got := len(f.Stats().Endpoints); got != 13 {
			t.Errorf("%d endpoints, want 13", got)
		}
		if got := f.Regions(); !reflect.DeepEqual(got, []string{"us-east", "eu-west", "ap-south"}) {
			t.Errorf("regions %v", got)
		}
		caps := map[string]int{}
		for _, m := range f.Models() {
			caps[m.Name] = m.Capability
		}
		if !reflect.DeepEqual(caps, map[string]int{"sim-opus": 5, "sim-sonnet": 3, "sim-haiku": 1, "sim-llama": 2, "sim-claude": 4}) {
			t.Errorf("capabilities %v", caps)
		}
	}
	if l := ZeroLatency().Regions[0].Latency; l != (LatencySpec{}) {
		t.Errorf("ZeroLatency has latency %+v", l)
	}
}

const yamlConfig = `
seed: 42
models:
  - name: big
    capability: 5
    context_window: 100000
    price: {input_per_mtok: 15, output_per_mtok: 75}
    regions: [a, b]
    latency: {ttft: 80ms}
  - name: small
    capability: 1
    regions: [b]
    formats: [openai]
regions:
  - name: a
    latency: {concurrency: 4, ttft: 30ms, ttft_sigma: 0.3, per_token: 2ms, tail_prob: 0.05, tail_factor: 20}
  - name: b
faults:
  - {kind: rate_limit, rate: 0.1, retry_after: 2s, region: a}
`

func TestParseConfig(t *testing.T) {
	cfg, err := ParseConfig([]byte(yamlConfig))
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := LatencySpec{Concurrency: 4, TTFT: Duration(30 * time.Millisecond), TTFTSigma: 0.3, PerToken: Duration(2 * time.Millisecond), TailProb: 0.05, TailFactor: 20}
	if cfg.Seed != 42 || cfg.Regions[0].Latency != want || cfg.Models[0].Price.OutputPerMTok != 75 ||
		cfg.Faults[0].RetryAfter != Duration(2*time.Second) || cfg.Models[1].Formats[0] != "openai" {
		t.Errorf("parsed %+v", cfg)
	}
	f := mustNew(t, cfg)
	// The model's override wins over its region's latency, field by field.
	if l := f.eps[epKey{"big", "a"}].lat; l.TTFT != Duration(80*time.Millisecond) || l.Concurrency != 4 {
		t.Errorf("merged latency %+v", l)
	}
	// JSON round trip.
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfigJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, cfg) {
		t.Errorf("JSON round trip (-got +want):\n-%+v\n+%+v", back, cfg)
	}
}

func TestParseConfigStrict(t *testing.T) {
	_, err := ParseConfig([]byte("seed: 1\nmodels:\n  - name: x\n    capabilty: 3\n"))
	if err == nil || !strings.Contains(err.Error(), "capabilty") || !strings.Contains(err.Error(), "4") {
		t.Errorf("unknown key: %v, want an error naming the key and line 4", err)
	}
	if _, err := ParseConfig([]byte("regions:\n  - name: a\n    latency: {ttft: fast}\n")); err == nil {
		t.Error("bad duration accepted")
	}
	if _, err := ParseConfigJSON([]byte(`{"seed":1,"extra":true}`)); err == nil {
		t.Error("unknown JSON key accepted")
	}
}

func TestValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"no models", func(c *Config) { c.Models = nil }, "models: at least one"},
		{"no regions", func(c *Config) { c.Regions = nil }, "regions: at least one"},
		{"duplicate region", func(c *Config) { c.Regions[1].Name = "us-east" }, `regions[1].name: duplicate region "us-east"`},
		{"bad region name", func(c *Config) { c.Regions[0].Name = "us east" }, "regions[0].name"},
		{"capability", func(c *Config) { c.Models[0].Capability = 6 }, "models[0].capability: 6 is outside [1, 5]"},
		{"duplicate model", func(c *Config) { c.Models[1].Name = "sim-opus" }, `models[1].name: duplicate model "sim-opus"`},
		{"unknown region", func(c *Config) { c.Models[2].Regions = []string{"mars"} }, `models[2].regions[0]: unknown region "mars"`},
		{"no model regions", func(c *Config) { c.Models[0].Regions = nil }, "models[0].regions: at least one"},
		{"format", func(c *Config) { c.Models[0].Formats = []string{"grpc"} }, `models[0].formats[0]: unknown format "grpc"`},
		{"negative ttft", func(c *Config) { c.Regions[2].Latency.TTFT = -1 }, "regions[2].latency.ttft"},
		{"tail factor", func(c *Config) { c.Regions[0].Latency.TailProb = 0.1 }, "tail_factor"},
		{"model latency", func(c *Config) { c.Models[0].Latency.Concurrency = -1 }, "models[0].latency.concurrency"},
		{"fault kind", func(c *Config) { c.Faults = []Fault{{Kind: "meteor"}} }, `faults[0]: kind: unknown fault kind "meteor"`},
		{"fault status", func(c *Config) { c.Faults = []Fault{{Kind: KindServerError, Status: 404}} }, "faults[0]: status: 404"},
		{"fault rate", func(c *Config) { c.Faults = []Fault{{Kind: KindReset, Rate: 1.5}} }, "faults[0]: rate"},
		{"prompt cache minimum", func(c *Config) { c.Models[1].PromptCache = &PromptCache{MinTokens: -1} }, "models[1].prompt_cache.min_tokens: -1 is negative"},
		{"negative prefill", func(c *Config) { c.Regions[1].Latency.PrefillPerKTok = -1 }, "regions[1].latency.prefill_per_ktok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mutate(&cfg)
			_, err := New(cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("New: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestFleetControl(t *testing.T) {
	f := mustNew(t, DefaultConfig())
	if err := f.SetRegionDown("mars", true); err == nil {
		t.Error("unknown region accepted")
	}
	if err := f.SetRegionDown("eu-west", true); err != nil || !f.RegionDown("eu-west") {
		t.Errorf("region down: %v", err)
	}
	if err := f.SetFaults([]Fault{{Kind: KindReset}, {Kind: "nope"}}); err == nil {
		t.Error("invalid fault list accepted")
	}
	if err := f.AddFault(Fault{Kind: KindStall, Count: 2}); err != nil {
		t.Fatal(err)
	}
	if got := f.Faults(); len(got) != 1 || got[0].Count != 2 {
		t.Errorf("faults %+v", got)
	}
	if got, want := f.BaseURL("eu-west", FormatOpenAI), "http://sim.invalid/r/eu-west/v1"; got != want {
		t.Errorf("BaseURL = %q, want %q", got, want)
	}
	if got, want := f.BaseURL("", FormatAnthropic), "http://sim.invalid"; got != want {
		t.Errorf("BaseURL = %q, want %q", got, want)
	}
	// Models returns a copy.
	f.Models()[0].Regions[0] = "changed"
	if f.Models()[0].Regions[0] != "us-east" {
		t.Error("Models exposes the fleet's config")
	}
}

func TestStatsTokensAndCost(t *testing.T) {
	cfg := ZeroLatency()
	h := memHarness(mustNew(t, cfg))
	resp, err := h.post(t.Context(), FormatOpenAI, "eu-west", chatBody(FormatOpenAI, "sim-opus", "price me", false, ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := Answer(cfg, userReq("sim-opus", "price me")).Usage
	st, ok := h.f.Endpoint("sim-opus", "eu-west")
	if !ok || st.InputTokens != int64(want.InputTokens) || st.OutputTokens != int64(want.OutputTokens) {
		t.Fatalf("stats %+v, want usage %+v", st, want)
	}
	if cost := (float64(want.InputTokens)*15 + float64(want.OutputTokens)*75) / 1e6; st.CostUSD != cost {
		t.Errorf("cost %v, want %v", st.CostUSD, cost)
	}
	if got := h.f.Stats().Total; got.Requests != 1 || got.ByStatus[200] != 1 || got.InFlight != 0 {
		t.Errorf("total %+v", got)
	}
}
