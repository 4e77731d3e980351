package sim

import (
	"context"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/llm"
)

const extractSchema = `{"type":"object","properties":{"company":{"type":"string"},"revenue":{"type":"number"},"employees":{"type":"integer"},"audited":{"type":"boolean"},"risk":{"type":"string","enum":["low","medium","high"]},"ceo":{"type":"string"}},"required":["company","revenue"],"additionalProperties":false}`

const extractInput = "## Balance sheet\nSome prose about the quarter.\ncompany: Acme Holdings\n- revenue: $1,520.37\nEmployees: 412\naudited: yes\nrisk: medium\nrevenue: 99\n"

func extractReq(model, system, schema, input string) *llm.Request {
	r := userReq(model, input)
	if system != "" {
		r.System = []llm.Block{{Type: llm.BlockText, Text: system}}
	}
	if schema != "" {
		r.ResponseFormat = &llm.ResponseFormat{Type: "json_schema", Name: "x", Schema: json.RawMessage(schema)}
	}
	return r
}

func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("answer is not a JSON object: %v: %q", err, s)
	}
	return m
}

func TestExtractGroundTruth(t *testing.T) {
	got := GroundTruth(extractInput + "not a field line\n: empty key\nx:\n9lives: no\n* Net Income: 12\n")
	want := map[string]string{"company": "Acme Holdings", "revenue": "$1,520.37", "employees": "412", "audited": "yes", "risk": "medium", "net_income": "12"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("GroundTruth (-got +want):\n%v\n%v", got, want)
	}
}

func TestExtractAnswers(t *testing.T) {
	cases := []struct {
		name   string
		system string
		schema string
		input  string
		want   map[string]any // nil: not an extraction
	}{
		{"schema", "", extractSchema, extractInput,
			map[string]any{"company": "Acme Holdings", "revenue": 1520.37, "employees": 412.0, "audited": true, "risk": "medium", "ceo": nil}},
		{"system asks, no schema", "Extract the fields as JSON.", "", "company: Acme\nquarter: Q3\n",
			map[string]any{"company": "Acme", "quarter": "Q3"}},
		{"schema and unparseable number stays text", "", `{"type":"object","properties":{"revenue":{"type":"number"}}}`, "revenue: unknown",
			map[string]any{"revenue": "unknown"}},
		{"schema without any field line", "", extractSchema, "Tell me about Acme", nil},
		{"field lines without schema or instruction", "", "", "company: Acme", nil},
		{"instruction without field lines", "Extract the fields.", "", "nothing here", nil},
	}
	cfg := DefaultConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := extractReq("sim-sonnet", tc.system, tc.schema, tc.input)
			text := Answer(cfg, r).Text()
			if tc.want == nil {
				if strings.Contains(text, "Acme") {
					t.Errorf("not an extraction, but the answer reads the input: %q", text)
				}
				return
			}
			if got := decodeObject(t, text); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("answer (-got +want):\n%v\n%v", got, tc.want)
			}
		})
	}
	// Tool calls take precedence over extraction.
	r := toolReq("get_weather please\ncity: Paris", nil, "get_weather")
	r.System = []llm.Block{{Type: llm.BlockText, Text: "extract fields"}}
	if a := Answer(cfg, r); a.StopReason != llm.StopToolUse {
		t.Errorf("tool request answered %q (%s)", a.Text(), a.StopReason)
	}
}

// With ExtractionErrorRate p, each field of each call is wrong with
// probability p, independently across calls; wrong values keep their type
// and enum.
func TestExtractErrorRate(t *testing.T) {
	truth := map[string]any{"company": "Acme Holdings", "revenue": 1520.37, "employees": 412.0, "audited": true, "risk": "medium"}
	cases := []struct {
		name    string
		rate    float64
		lo, hi  float64 // bounds on the observed field error rate
		samples int
	}{
		{"never", 0, 0, 0, 50},
		{"ten percent", 0.1, 0.07, 0.13, 600},
		{"always", 1, 1, 1, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Models[1].ExtractionErrorRate = tc.rate
			r := extractReq("sim-sonnet", "", extractSchema, extractInput)
			wrong, total := 0, 0
			for n := range tc.samples {
				got := decodeObject(t, AnswerSample(cfg, r, uint64(n+1)).Text())
				for k, want := range truth {
					total++
					if reflect.DeepEqual(got[k], want) {
						continue
					}
					wrong++
					if reflect.TypeOf(got[k]) != reflect.TypeOf(want) {
						t.Errorf("sample %d: %s = %#v changed type from %#v", n, k, got[k], want)
					}
					if k == "risk" && got[k] != "low" && got[k] != "high" {
						t.Errorf("sample %d: risk %v is outside the enum", n, got[k])
					}
				}
				if got["ceo"] != nil {
					t.Errorf("absent field ceo = %v, want null", got["ceo"])
				}
			}
			if rate := float64(wrong) / float64(total); rate < tc.lo || rate > tc.hi {
				t.Errorf("observed field error rate %.3f, want within [%.2f, %.2f]", rate, tc.lo, tc.hi)
			}
		})
	}
}

// TestExtractErrorGrowsWithInput: ExtractionErrorPerKTok adds to the field
// error rate per thousand input tokens, so the same model errs more on a
// longer input.
func TestExtractErrorGrowsWithInput(t *testing.T) {
	truth := map[string]any{"company": "Acme Holdings", "revenue": 1520.37, "employees": 412.0, "audited": true, "risk": "medium"}
	filler := strings.Repeat("The quarter was uneventful and the board met twice. ", 40)
	for _, tc := range []struct {
		name  string
		input string
		perK  float64
	}{
		{"short", extractInput, 3},
		{"long", filler + extractInput, 3},
		{"saturates", extractInput, 1000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Models[1].ExtractionErrorPerKTok = tc.perK
			r := extractReq("sim-sonnet", "", extractSchema, tc.input)
			tokens := AnswerSample(cfg, r, 0).Usage.InputTokens
			want := min(1, tc.perK*float64(tokens)/1000)
			const samples = 600
			wrong, total := 0, 0
			for n := range samples {
				got := decodeObject(t, AnswerSample(cfg, r, uint64(n+1)).Text())
				for k, v := range truth {
					total++
					if !reflect.DeepEqual(got[k], v) {
						wrong++
					}
				}
			}
			rate := float64(wrong) / float64(total)
			if rate < 0.8*want-0.01 || rate > 1.2*want+0.01 {
				t.Errorf("%d input tokens: observed field error rate %.3f, want about %.3f", tokens, rate, want)
			}
		})
	}
}

// Through the fleet (Anthropic structured outputs), replicas of one request
// err independently: over many calls the answers disagree somewhere.
func TestExtractThroughFleet(t *testing.T) {
	cfg := ZeroLatency()
	cfg.Models[2].ExtractionErrorRate = 0.3
	f, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := memHarness(f)
	in, _ := json.Marshal(extractInput)
	body := `{"model":"sim-haiku","max_tokens":400,"output_config":{"format":{"type":"json_schema","schema":` + extractSchema + `}},"messages":[{"role":"user","content":` + string(in) + `}]}`
	seen := map[string]int{}
	for range 10 {
		resp, err := h.post(context.Background(), FormatAnthropic, "", body)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var out struct{ Content []struct{ Text string } }
		if json.Unmarshal(b, &out) != nil || len(out.Content) != 1 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		m := decodeObject(t, out.Content[0].Text)
		seen[out.Content[0].Text]++
		if _, ok := m["company"]; !ok {
			t.Fatalf("no company field: %v", m)
		}
	}
	if len(seen) < 2 {
		t.Errorf("10 calls at a 30 %% field error rate all answered the same: %v", seen)
	}
}
