package bench

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestEmbeddedScenarios loads every shipped scenario and checks what the
// issue asks of each.
func TestEmbeddedScenarios(t *testing.T) {
	tests := []struct {
		name  string
		check func(t *testing.T, s *Scenario)
	}{
		{"steady", func(t *testing.T, s *Scenario) {
			if len(s.Timeline) != 0 {
				t.Errorf("steady has a timeline: %v", s.Timeline)
			}
		}},
		{"heavy-tail", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "slow" || f.Rate != 0.05 || f.Factor != 20 {
				t.Errorf("fault = %+v, want slow at 5 %% x20", f)
			}
		}},
		{"heavy-tail-two-regions", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "slow" || f.Rate != 0.05 || f.Factor != 20 || s.Load.Model != "sim-llama" || !s.Load.Stream {
				t.Errorf("fault = %+v on %s (stream %v), want slow at 5 %% x20 on sim-llama's streams", f, s.Load.Model, s.Load.Stream)
			}
		}},
		{"region-outage", func(t *testing.T, s *Scenario) {
			got := []string{s.Timeline[0].String(), s.Timeline[1].String()}
			if got[0] != "t=10s region_down us-east" || got[1] != "t=40s region_up us-east" {
				t.Errorf("timeline = %q", got)
			}
			q := s.Quick()
			if q.Timeline[0].At.D() != time.Second || q.Timeline[1].At.D() != 4*time.Second || q.Load.Duration.D() != 6*time.Second {
				t.Errorf("quick timeline = %v %v over %v, want 1s 4s over 6s", q.Timeline[0].At, q.Timeline[1].At, q.Load.Duration)
			}
		}},
		{"rate-limit-storm", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "rate_limit" || f.RetryAfter.D() != 2*time.Second {
				t.Errorf("fault = %+v, want rate_limit with retry_after 2s", f)
			}
		}},
		{"overload", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "overloaded" || f.Model != "sim-sonnet" {
				t.Errorf("fault = %+v, want overloaded on sim-sonnet", f)
			}
			// The mesh is called with the alias (fallback across models);
			// the bare simulator, which has none, with its first model.
			if s.Load.Model != "sim-default" || s.Load.DirectModel != "sim-sonnet" {
				t.Errorf("model %q, direct_model %q; want sim-default and sim-sonnet", s.Load.Model, s.Load.DirectModel)
			}
		}},
		{"malformed-json", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "malformed_json" || f.Rate != 0.032 || !s.Load.JSON {
				t.Errorf("fault = %+v json=%v, want malformed_json at 3.2 %% with JSON requests", f, s.Load.JSON)
			}
		}},
		{"stream-cuts", func(t *testing.T, s *Scenario) {
			f := (*s.Timeline[0].Faults)[0]
			if f.Kind != "stream_cut" || !s.Load.Stream {
				t.Errorf("fault = %+v stream=%v, want stream_cut on streams", f, s.Load.Stream)
			}
		}},
		{"provider-throttle", func(t *testing.T, s *Scenario) {
			fs := *s.Timeline[0].Faults
			if s.Load.Model != "sim-claude" || len(fs) != 2 || fs[0].Kind != "rate_limit" || fs[0].Region != "us-east" || fs[1].Region != "ap-south" {
				t.Errorf("model %q, faults %+v; want rate_limit on sim-claude's two Anthropic-API regions", s.Load.Model, fs)
			}
			if s.Timeline[1].Faults == nil || len(*s.Timeline[1].Faults) != 0 {
				t.Error("the throttling never stops")
			}
		}},
	}
	if got, want := len(ScenarioNames()), len(tests); got != want {
		t.Errorf("%d embedded scenarios %v, want %d", got, ScenarioNames(), want)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := LoadScenario(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tt.name || s.Load.Rate <= 0 || s.Load.QuickDuration <= 0 || s.Load.Model == "" {
				t.Errorf("scenario = %+v, want name %s, a rate and a quick duration", s, tt.name)
			}
			tt.check(t, s)
		})
	}
}

// TestParseScenarioErrors checks that a malformed scenario gives one line
// naming the problem.
func TestParseScenarioErrors(t *testing.T) {
	const load = "load: {rate: 10, duration: 10s}\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"unknown key", load + "timelime: []\n", "timelime"},
		{"bad duration", "load: {rate: 10, duration: soon}\n", "invalid duration"},
		{"no duration", "load: {rate: 10}\n", "load.duration"},
		{"bad format", "load: {rate: 10, duration: 1s, format: grpc}\n", "load.format"},
		{"two actions in a step", load + "timeline:\n  - {at: 1s, region_down: a, region_up: a}\n", "timeline[0]: want exactly one"},
		{"step after the end", load + "timeline:\n  - {at: 11s, region_down: a}\n", "timeline[0].at"},
		{"steps out of order", load + "timeline:\n  - {at: 5s, region_down: a}\n  - {at: 1s, region_up: a}\n", "timeline[1].at"},
		{"unknown fault kind", load + "timeline:\n  - at: 1s\n    faults: [{kind: gremlins}]\n", "gremlins"},
		{"unknown fault key", load + "timeline:\n  - at: 1s\n    faults: [{kind: slow, speed: 3}]\n", "speed"},
		{"not yaml", "load: [\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScenario([]byte(tt.yaml))
			if err == nil {
				t.Fatal("no error")
			}
			if msg := err.Error(); strings.Contains(msg, "\n") || !strings.Contains(msg, tt.want) {
				t.Errorf("error = %q, want one line containing %q", msg, tt.want)
			}
		})
	}
}

// TestLoadScenarioRefs covers names, files, and unknown names.
func TestLoadScenarioRefs(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mine.yaml")
	os.WriteFile(good, []byte("load: {rate: 5, duration: 2s}\n"), 0o644)
	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("load: {rate: 5, duration: 2s, colour: red}\n"), 0o644)
	tests := []struct {
		name, ref, wantName, wantErr string
	}{
		{"embedded", "steady", "steady", ""},
		{"file named after itself", good, "mine", ""},
		{"unknown name", "hurricane", "", `unknown scenario "hurricane" (known: `},
		{"missing file", filepath.Join(dir, "none.yaml"), "", "no such file"},
		{"malformed file", bad, "", "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := LoadScenario(tt.ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("error = %v, want one line containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Name != tt.wantName {
				t.Errorf("name = %q, want %q", s.Name, tt.wantName)
			}
		})
	}
	if _, err := LoadScenario("hurricane"); !errors.Is(err, ErrUnknownScenario) {
		t.Errorf("unknown name error %v is not ErrUnknownScenario", err)
	}
}

// modelRT answers every call and records the model each asked for.
type modelRT struct {
	mu     sync.Mutex // guards following
	models []string
}

func (m *modelRT) RoundTrip(r *http.Request) (*http.Response, error) {
	var body struct{ Model string }
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	json.Unmarshal(b, &body)
	m.mu.Lock()
	m.models = append(m.models, body.Model)
	m.mu.Unlock()
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(anthropicOK)), Request: r}, nil
}

// TestDirectModel checks that a direct target calls direct_model and a
// gateway the scenario's model, and that a scenario reads the key.
func TestDirectModel(t *testing.T) {
	s, err := ParseScenario([]byte("load: {rate: 10, duration: 1s, model: sim-default, direct_model: sim-sonnet}\n"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		req    Request
		direct bool
		want   string
	}{
		{name: "direct target", req: s.Load.Request, direct: true, want: "sim-sonnet"},
		{name: "gateway", req: s.Load.Request, want: "sim-default"},
		{name: "direct target without direct_model", req: Request{Model: "sim-opus"}, direct: true, want: "sim-opus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := &modelRT{}
				tg := fakeTarget(tt.name, rt)
				tg.Direct = tt.direct
				if _, err := Run(t.Context(), Options{Targets: []Target{tg}, Request: tt.req, Rate: 10, Duration: time.Second}); err != nil {
					t.Fatal(err)
				}
				if len(rt.models) == 0 || slices.ContainsFunc(rt.models, func(m string) bool { return m != tt.want }) {
					t.Errorf("models called %v, want only %s", rt.models, tt.want)
				}
			})
		})
	}
}
