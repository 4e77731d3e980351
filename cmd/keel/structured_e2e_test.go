package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/keelmesh/keel/internal/structured"
	"github.com/keelmesh/keel/sim"
)

// simServe is a `keel serve` (runServe over loopback) in front of a
// simulator on loopback.
type simServe struct {
	addr   string
	cancel context.CancelFunc // the SIGTERM
	done   chan error         // runServe's result
}

// startSimServe starts a simulator with simCfg and `keel serve` on yaml,
// with SIMURL replaced by the simulator's address. Both stop with the
// test (the simulator closed without waiting: streams the server cut may
// still be ending there).
func startSimServe(t *testing.T, simCfg sim.Config, yaml string) *simServe {
	t.Helper()
	fleet, err := sim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := fleet.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { go srv.Close() })
	path := filepath.Join(t.TempDir(), "keel.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(yaml, "SIMURL", srv.URL())), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &simServe{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan string, 1)
	go func() { s.done <- runServe(ctx, path, "127.0.0.1:0", true, io.Discard, ready) }()
	t.Cleanup(cancel)
	select {
	case s.addr = <-ready:
	case err := <-s.done:
		t.Fatalf("serve ended: %v", err)
	}
	return s
}

// serveWith is startSimServe for tests that only call it: the server is
// stopped, and waited for, at the test's end.
func serveWith(t *testing.T, simCfg sim.Config, yaml string) string {
	t.Helper()
	s := startSimServe(t, simCfg, yaml)
	t.Cleanup(func() { s.cancel(); <-s.done })
	return s.addr
}

func postJSON(t *testing.T, url, body string, header map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

// The debug trace's structured object, as a client reads it.
type traceStructured struct {
	Structured struct {
		SchemaSource  string          `json:"schema_source"`
		Sentence      string          `json:"sentence"`
		Required      []string        `json:"required"`
		Schema        json.RawMessage `json:"schema"`
		InvalidAnswer string          `json:"invalid_answer"`
		Repairs       []string        `json:"repairs"`
	} `json:"structured"`
	Execute struct {
		Attempts []struct {
			Kind            string  `json:"kind"`
			Bytes           int64   `json:"bytes"`
			CostUSD         float64 `json:"cost_usd"`
			UpstreamRequest string  `json:"upstream_request"`
		} `json:"attempts"`
	} `json:"execute"`
	Response struct {
		CostUSD float64 `json:"cost_usd"`
	} `json:"response"`
}

// Must show (issue 13): "must include" in English and in Chinese, with a
// model that takes no schema (structured_outputs: none, as one without
// structured outputs is configured) and answers without a demanded key:
// Keel re-asks, and the debug trace explains it (X-Mesh-Schema: implied).
// Issue 25: an implied schema never fails the call by default (implied:
// guess): the client gets the model's own answer, as direct, with
// X-Mesh-Schema-Violation naming the keys; under implied: strict it is a
// 502 MESH_SCHEMA_VIOLATION naming the missing key.
func TestServeImpliedMustIncludeViolation(t *testing.T) {
	simCfg := sim.ZeroLatency()
	for i := range simCfg.Models {
		simCfg.Models[i].StructuredOutputs = "unsupported"
	}
	for _, mode := range []string{"guess", "strict"} {
		addr := serveWith(t, simCfg, `server: {shutdown_timeout: 1s, drain_delay: 0s}
structured_output: {implied: `+mode+`}
request_log: {enabled: false}
providers:
  - {name: sim, type: anthropic, base_url: SIMURL}
models:
  - name: sim-haiku
    structured_outputs: none
    price: {input_per_mtok: 1, output_per_mtok: 5}
    endpoints: [{provider: sim, region: us-east, base_url: SIMURL/r/us-east}]
`)
		prompts := map[string]string{
			"en": "Extract the fields from the incident report. Respond in JSON format. The output must include risk_level, mitigation_steps, confidence_score.",
			"zh": "从事故报告中提取字段。以 JSON 格式输出，必须包含 risk_level、mitigation_steps、confidence_score",
		}
		for lang, sys := range prompts {
			t.Run(mode+"/"+lang, func(t *testing.T) {
				body, _ := json.Marshal(map[string]any{"model": "sim-haiku", "max_tokens": 200, "system": sys,
					"messages": []map[string]any{{"role": "user", "content": "risk_level: high\nmitigation_steps: patch the gateways"}}})
				resp, b := postJSON(t, "http://"+addr+"/v1/messages", string(body), map[string]string{"anthropic-version": "2023-06-01", "X-Mesh-Debug": "true"})
				if mode == "guess" {
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d: %s; want the model's answer", resp.StatusCode, b)
					}
					if got := resp.Header.Get("X-Mesh-Schema-Violation"); got != "risk_level,mitigation_steps,confidence_score" {
						t.Errorf("X-Mesh-Schema-Violation = %q, want the keys", got)
					}
					var m struct {
						Content []struct{ Text string }
					}
					if err := json.Unmarshal(b, &m); err != nil || len(m.Content) == 0 || !strings.Contains(m.Content[0].Text, "risk_level") {
						t.Fatalf("answer %s, want the model's own answer", b)
					}
				} else if resp.StatusCode != http.StatusBadGateway {
					t.Fatalf("status %d: %s", resp.StatusCode, b)
				}
				var eb struct {
					Type  string `json:"type"`
					Error struct {
						Type, Message string
						Code          string `json:"mesh_error_code"`
					} `json:"error"`
				}
				if mode == "strict" {
					if err := json.Unmarshal(b, &eb); err != nil || eb.Type != "error" {
						t.Fatalf("not an Anthropic error body: %s", b)
					}
					if !strings.Contains(string(b), "MESH_SCHEMA_VIOLATION") || !strings.Contains(eb.Error.Message, "confidence_score") {
						t.Fatalf("error does not name the missing key: %s", b)
					}
				}
				if got := resp.Header.Get("X-Mesh-Schema"); got != "implied" {
					t.Errorf("X-Mesh-Schema = %q, want implied", got)
				}
				tr := getTrace(t, addr, resp.Header.Get("X-Mesh-Trace-Id"))
				st := tr.Structured
				if st.SchemaSource != "implied" || !strings.Contains(st.Sentence, "risk_level") ||
					strings.Join(st.Required, ",") != "risk_level,mitigation_steps,confidence_score" {
					t.Errorf("structured = %+v", st)
				}
				s, err := structured.Compile(st.Schema)
				if err != nil {
					t.Fatalf("trace schema %s: %v", st.Schema, err)
				}
				if len(s.Validate([]byte(`{"risk_level":"high","mitigation_steps":"x","confidence_score":1}`))) != 0 {
					t.Errorf("trace schema %s rejects a complete answer", st.Schema)
				}
				if !strings.Contains(st.InvalidAnswer, "risk_level") || strings.Contains(st.InvalidAnswer, "confidence_score") {
					t.Errorf("invalid_answer = %q", st.InvalidAnswer)
				}
				if st.Repairs == nil {
					t.Error("repairs is null, want an array")
				}
				// implied: guess never re-asks for the keys it read
				// (they are a guess: STYLE 23); strict asks once.
				at := tr.Execute.Attempts
				if mode == "guess" && len(at) != 1 {
					t.Fatalf("attempts %+v, want the answer alone", at)
				}
				if mode == "strict" && (len(at) != 2 || at[1].Kind != "reask") {
					t.Fatalf("attempts %+v, want the answer and one re-ask", at)
				}
				for i, a := range at {
					if a.Bytes <= 0 || a.CostUSD <= 0 || !strings.Contains(a.UpstreamRequest, `"model"`) {
						t.Errorf("attempt %d: bytes %d, cost %g, upstream_request %.80q", i, a.Bytes, a.CostUSD, a.UpstreamRequest)
					}
					if strings.Contains(a.UpstreamRequest, "output_config") {
						t.Errorf("attempt %d sent a schema to a structured_outputs: none model", i)
					}
				}
				if tr.Response.CostUSD <= 0 {
					t.Errorf("failed call that used tokens costs %g", tr.Response.CostUSD)
				}
			})
		}
	}
}

func getTrace(t *testing.T, addr, id string) traceStructured {
	t.Helper()
	if id == "" {
		t.Fatal("no request id header")
	}
	resp, err := http.Get("http://" + addr + "/debug/traces/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("trace %s: %d %s", id, resp.StatusCode, b)
	}
	var tr traceStructured
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatalf("trace: %v: %s", err, b)
	}
	return tr
}

// Must show (issue 13): mesh_behavior.output_schema with a plain prompt on
// the simulator → 200, valid JSON, one attempt, on either wire: the schema
// reaches the model in its own form.
func TestServeOutputSchemaPlainPrompt(t *testing.T) {
	addr := serveWith(t, sim.ZeroLatency(), `server: {shutdown_timeout: 1s, drain_delay: 0s}
request_log: {enabled: false}
providers:
  - {name: sa, type: anthropic, base_url: SIMURL}
  - {name: so, type: openai, base_url: SIMURL/v1}
models:
  - name: sim-sonnet
    endpoints: [{provider: sa, region: us-east, base_url: SIMURL/r/us-east}]
  - name: sim-opus
    endpoints: [{provider: so, region: us-east, base_url: SIMURL/r/us-east/v1}]
`)
	const schema = `{"type":"object","properties":{"risk_level":{"type":"string","enum":["low","medium","high"]},"mitigation_steps":{"type":"array","items":{"type":"string"}},"confidence_score":{"type":"number"}},"required":["risk_level","mitigation_steps","confidence_score"]}`
	s, err := structured.Compile(json.RawMessage(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, model, body string }{
		{"/v1/messages", "sim-sonnet", `{"model":"sim-sonnet","max_tokens":300,"messages":[{"role":"user","content":"Assess the risk of moving the database."}],"mesh_behavior":{"output_schema":` + schema + `}}`},
		{"/v1/chat/completions", "sim-opus", `{"model":"sim-opus","messages":[{"role":"user","content":"Assess the risk of moving the database."}],"mesh_behavior":{"output_schema":` + schema + `}}`},
		{"/v1/chat/completions", "sim-sonnet", `{"model":"sim-sonnet","messages":[{"role":"user","content":"Assess the risk of moving the database."}],"mesh_behavior":{"output_schema":` + schema + `}}`},
	} {
		t.Run(c.path+"/"+c.model, func(t *testing.T) {
			resp, b := postJSON(t, "http://"+addr+c.path, c.body, map[string]string{"anthropic-version": "2023-06-01", "X-Mesh-Debug": "true"})
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var text string
			if strings.Contains(c.path, "messages") {
				var m struct{ Content []struct{ Type, Text string } }
				json.Unmarshal(b, &m)
				for _, bl := range m.Content {
					text += bl.Text
				}
			} else {
				var cc struct {
					Choices []struct{ Message struct{ Content string } }
				}
				json.Unmarshal(b, &cc)
				if len(cc.Choices) > 0 {
					text = cc.Choices[0].Message.Content
				}
			}
			if v := s.Validate([]byte(text)); len(v) != 0 {
				t.Fatalf("answer %q invalid: %v", text, v)
			}
			if resp.Header.Get("X-Mesh-Schema") != "given" || resp.Header.Get("X-Mesh-Reasked") != "" {
				t.Errorf("X-Mesh-Schema %q, X-Mesh-Reasked %q", resp.Header.Get("X-Mesh-Schema"), resp.Header.Get("X-Mesh-Reasked"))
			}
			tr := getTrace(t, addr, resp.Header.Get("X-Mesh-Trace-Id"))
			if n := len(tr.Execute.Attempts); n != 1 {
				t.Fatalf("%d attempts, want 1", n)
			}
			if tr.Structured.SchemaSource != "given" {
				t.Errorf("schema_source %q", tr.Structured.SchemaSource)
			}
			if up := tr.Execute.Attempts[0].UpstreamRequest; !strings.Contains(up, "output_config") && !strings.Contains(up, "response_format") {
				t.Errorf("schema not sent upstream: %s", fmt.Sprintf("%.300s", up))
			}
		})
	}
}
