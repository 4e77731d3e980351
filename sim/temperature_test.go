package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

func temp(t float64) *float64 { return &t }

// Answers at temperature 0 or without a temperature are exactly what the
// simulator produced before temperature sensitivity existed (texts recorded
// from that version), for every sample number.
func TestTemperatureZeroUnchanged(t *testing.T) {
	cases := []struct {
		name  string
		model string
		temp  *float64
		want  string
	}{
		{"opus absent", "sim-opus", nil, "Resolve mountain whole note twelve. Request many follow queue spring. Mountain dozen far path east table after evening fallback with. Follow far hundred then near during must token double fallback lantern bright hint. Partial simple edge without bridge. Guess node stream twelve across."},
		{"opus zero", "sim-opus", temp(0), "Resolve mountain whole note twelve. Request many follow queue spring. Mountain dozen far path east table after evening fallback with. Follow far hundred then near during must token double fallback lantern bright hint. Partial simple edge without bridge. Guess node stream twelve across."},
		{"haiku zero", "sim-haiku", temp(0), "Either claim twelve around without both. Router and near plan or hundred ledger steady copper deliver copper every late triple hundred should queue breaker signal lantern forty."},
	}
	cfg := DefaultConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := userReq(tc.model, "Hello there")
			r.Temperature = tc.temp
			if got := Answer(cfg, r).Text(); got != tc.want {
				t.Errorf("Answer:\n got %q\nwant %q", got, tc.want)
			}
			for _, n := range []uint64{1, 2, 99} {
				if got := AnswerSample(cfg, r, n).Text(); got != tc.want {
					t.Errorf("AnswerSample(%d) = %q, want the deterministic answer", n, got)
				}
			}
		})
	}
	// A schema answer whose input holds no field line is the generated value, as before.
	r := userReq("sim-sonnet", "invoice_total: 152.37\nstatus: paid")
	r.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Schema: json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)}
	if got := Answer(cfg, r).Text(); got != `{"n":82}` {
		t.Errorf("schema answer %q, want {\"n\":82}", got)
	}
}

// Through the fleet, calls at temperature 0 are identical and equal Answer;
// at temperature > 0 they differ from call to call and equal AnswerSample
// of their call number.
func TestSimTemperatureThroughFleet(t *testing.T) {
	cfg := ZeroLatency()
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	call := func(body string) string {
		t.Helper()
		resp, err := h.post(context.Background(), FormatOpenAI, "", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Choices []struct {
				Message struct{ Content string }
			}
		}
		if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return out.Choices[0].Message.Content
	}
	cold := `{"model":"sim-opus","temperature":0,"messages":[{"role":"user","content":"Tell me about rivers"}]}`
	want := Answer(cfg, userReq("sim-opus", "Tell me about rivers")).Text()
	for i := range 3 {
		if got := call(cold); got != want {
			t.Fatalf("call %d at T=0: %q, want %q", i, got, want)
		}
	}
	warm := `{"model":"sim-opus","temperature":0.8,"messages":[{"role":"user","content":"Tell me about rivers"}]}`
	seen := map[string]bool{}
	for i := range 4 {
		got := call(warm)
		r := userReq("sim-opus", "Tell me about rivers")
		r.Temperature = temp(0.8)
		// Calls 1–3 were the cold ones; this is call 4+i.
		if w := AnswerSample(cfg, r, uint64(4+i)).Text(); got != w {
			t.Errorf("call %d: %q, want AnswerSample %q", 4+i, got, w)
		}
		seen[got] = true
	}
	if len(seen) < 4 {
		t.Errorf("4 calls at T=0.8 gave %d distinct answers", len(seen))
	}
}

// wordDistance is the fraction of word positions at which a and b differ
// (they have the same length: sampling only changes word choices).
func wordDistance(a, b []string) float64 {
	d := 0
	for i := range a {
		if !strings.EqualFold(strings.Trim(a[i], " ."), strings.Trim(b[i], " .")) {
			d++
		}
	}
	return float64(d) / float64(len(a))
}

// simDiversity is the mean pairwise word distance of n samples per prompt.
func simDiversity(cfg Config, model string, temperature float64, prompts, n int) float64 {
	sum, pairs := 0.0, 0
	for p := range prompts {
		r := userReq(model, fmt.Sprintf("prompt number %d about queues", p))
		r.Temperature = temp(temperature)
		samples := make([][]string, n)
		for i := range samples {
			samples[i] = splitWords(AnswerSample(cfg, r, uint64(1000*p+i)).Text())
		}
		for i := range samples {
			for j := i + 1; j < n; j++ {
				if len(samples[i]) != len(samples[j]) {
					panic("sampling changed an answer's length")
				}
				sum += wordDistance(samples[i], samples[j])
				pairs++
			}
		}
	}
	return sum / float64(pairs)
}

// Diversity grows with temperature, and a model's TemperatureScale shifts
// its curve: B with scale 7/3 at 0.3 matches A with scale 1 at 0.7.
func TestTemperatureDiversityGrows(t *testing.T) {
	cfg := ZeroLatency()
	cfg.Models[0].TemperatureScale = 1
	cfg.Models[1].TemperatureScale = 7.0 / 3
	a, b := cfg.Models[0].Name, cfg.Models[1].Name
	prev := -1.0
	for _, temperature := range []float64{0, 0.1, 0.3, 0.5, 0.7, 1, 1.5} {
		d := simDiversity(cfg, a, temperature, 20, 6)
		// Two samples differ at a word when either changed it: 1-(1-p)², less
		// the chance both drew the same word.
		p := WordChangeProbability(temperature)
		if want := 1 - (1-p)*(1-p); math.Abs(d-want) > 0.04+0.05*want {
			t.Errorf("T=%g: diversity %.3f, expected about %.3f", temperature, d, want)
		}
		if d <= prev {
			t.Errorf("T=%g: diversity %.3f does not exceed %.3f at the previous temperature", temperature, d, prev)
		}
		prev = d
	}
	if d := simDiversity(cfg, a, 0, 5, 4); d != 0 {
		t.Errorf("diversity at T=0 is %g, want 0", d)
	}
	dA, dB := simDiversity(cfg, a, 0.7, 30, 6), simDiversity(cfg, b, 0.3, 30, 6)
	if math.Abs(dA-dB) > 0.03 {
		t.Errorf("A at 0.7 has diversity %.3f, B (scale 7/3) at 0.3 has %.3f; want equal", dA, dB)
	}
}

func TestTemperatureWordChangeProbability(t *testing.T) {
	cases := []struct {
		name string
		t    float64
		want float64
	}{
		{"zero", 0, 0}, {"negative", -1, 0}, {"NaN", math.NaN(), 0},
		{"half", 0.5, 0.25}, {"one", 1, 0.5}, {"saturated", 2, 1}, {"beyond", 3, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := WordChangeProbability(tc.t); got != tc.want {
				t.Errorf("WordChangeProbability(%g) = %g, want %g", tc.t, got, tc.want)
			}
		})
	}
	m := ModelSpec{}
	if got := m.EffectiveTemperature(0.4); got != 0.4 {
		t.Errorf("scale 0 (default 1): %g", got)
	}
	m.TemperatureScale = 2.5
	if got := m.EffectiveTemperature(0.4); got != 1 {
		t.Errorf("scale 2.5: %g", got)
	}
}

// A stream cut at temperature > 0 and continued by another call (another
// sample) with the sent text as prefill yields a whole answer of the same
// length: the continuation is word-aligned and completes a cut word.
func TestTemperaturePrefillContinuation(t *testing.T) {
	cfg := DefaultConfig()
	base := userReq("sim-sonnet", "Explain breakers")
	base.Temperature = temp(0.9)
	first := AnswerSample(cfg, base, 1).Text()
	words := splitWords(first)
	cases := []struct {
		name    string
		prefill string
	}{
		{"whole words", strings.Join(words[:5], "")},
		{"mid word", strings.Join(words[:5], "") + words[5][:2]},
		{"trailing space", strings.Join(words[:5], "") + " "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := *base
			r.Messages = append(append([]llm.Message(nil), base.Messages...), llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: tc.prefill}}})
			for n := uint64(2); n < 8; n++ {
				rest := AnswerSample(cfg, &r, n).Text()
				full := tc.prefill + rest
				if got, want := len(splitWords(strings.ReplaceAll(full, "  ", " "))), len(words); got != want && got != want+1 {
					t.Errorf("sample %d: %q has %d words, want %d", n, full, got, want)
				}
				if strings.Contains(full, "  ") {
					t.Errorf("sample %d: doubled space in %q", n, full)
				}
			}
		})
	}
	// The prefill that is a prefix of the sample continues exactly.
	r := *base
	r.Messages = append(append([]llm.Message(nil), base.Messages...), llm.Message{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockText, Text: first[:20]}}})
	if got := AnswerSample(cfg, &r, 1).Text(); first[:20]+got != first {
		t.Errorf("same sample: %q + %q != %q", first[:20], got, first)
	}
}

func TestTemperatureConfigValidation(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"negative scale", func(c *Config) { c.Models[0].TemperatureScale = -1 }, "models[0].temperature_scale"},
		{"infinite scale", func(c *Config) { c.Models[0].TemperatureScale = math.Inf(1) }, "models[0].temperature_scale"},
		{"error rate above 1", func(c *Config) { c.Models[1].ExtractionErrorRate = 1.5 }, "models[1].extraction_error_rate"},
		{"negative error rate", func(c *Config) { c.Models[1].ExtractionErrorRate = -0.1 }, "models[1].extraction_error_rate"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.mod(&c)
			if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Validate() = %v, want an error naming %s", err, tc.want)
			}
		})
	}
	c, err := ParseConfig([]byte(`
seed: 1
regions: [{name: r1}]
models:
  - {name: a, capability: 3, regions: [r1], temperature_scale: 2.3333, extraction_error_rate: 0.1}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.Models[0].TemperatureScale != 2.3333 || c.Models[0].ExtractionErrorRate != 0.1 {
		t.Errorf("parsed %+v, %v", c.Models[0], err)
	}
}
