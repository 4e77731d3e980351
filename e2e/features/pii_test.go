package features_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	ooption "github.com/openai/openai-go/v3/option"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/shadow"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/sqlite"
	"github.com/keelmesh/keel/sim"
)

// bodyRecorder keeps the body of every request the simulator received and
// of every answer it sent.
type bodyRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string
	resp []*bytes.Buffer
}

func (r *bodyRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	var b []byte
	if req.Body != nil {
		b, _ = io.ReadAll(req.Body)
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	resp, err := r.next.RoundTrip(req)
	buf := &bytes.Buffer{}
	r.mu.Lock()
	r.reqs = append(r.reqs, string(b))
	r.resp = append(r.resp, buf)
	r.mu.Unlock()
	if err == nil {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.TeeReader(resp.Body, &lockedWriter{mu: &r.mu, w: buf}), resp.Body}
	}
	return resp, err
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (r *bodyRecorder) all() (reqs, resps []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range r.reqs {
		reqs, resps = append(reqs, r.reqs[i]), append(resps, r.resp[i].String())
	}
	return reqs, resps
}

// piiMesh is an embedded mesh over the zero-latency simulator with
// detection on (a generous time budget: the budget has its own test on
// virtual time, in the engine), tweak applied to its config, and the
// recorder of what the simulator received.
func piiMesh(t *testing.T, tweak func(*config.Config)) (*keel.Mesh, *bodyRecorder) {
	t.Helper()
	fleet, err := sim.New(sim.ZeroLatency())
	if err != nil {
		t.Fatal(err)
	}
	up := &bodyRecorder{next: fleet.Transport()}
	cfg := simfleet.Config(fleet, "http://sim.test")
	cfg.PII = config.PII{Enabled: true, TimeBudget: config.Duration(time.Minute)}
	if tweak != nil {
		tweak(cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg, keel.WithUpstream(up))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m, up
}

// Five kinds of personal data, as a customer would paste them.
var piiFields = map[string]string{
	"email": "alice.smith@example.com",
	"phone": "+1 415 555 0134",
	"card":  "4111 1111 1111 1111",
	"iban":  "DE89 3704 0044 0532 0130 00",
	"ssn":   "078-05-1120",
}

const piiSystem = "Extract the customer's contact details from the message."

func piiPrompt() string {
	return "Please update my account.\nemail: " + piiFields["email"] + "\nphone: " + piiFields["phone"] + "\ncard: " + piiFields["card"] +
		"\niban: " + piiFields["iban"] + "\nssn: " + piiFields["ssn"] + "\nThanks!"
}

// TestPIIRoundTrip (issue 18 must-show): a prompt with five kinds of
// personal data → the simulator receives placeholders only → the client,
// through the official SDKs of both formats, streaming and not, gets the
// simulator's extraction answer with the original values restored; in the
// streams the simulator's 8-byte JSON deltas split the placeholders. The
// audit log holds hashes, never values.
func TestPIIRoundTrip(t *testing.T) {
	dir := t.TempDir()
	auditPath := filepath.Join(dir, "audit.db")
	m, up := piiMesh(t, func(cfg *config.Config) {
		on := true
		cfg.RequestLog = config.RequestLog{Enabled: &on, Path: filepath.Join(dir, "requests.db"), LogBodies: true}
		cfg.PII.Audit = config.PIIAudit{Path: auditPath}
	})
	ctx := context.Background()
	ac := anthropic.NewClient(aoption.WithHTTPClient(m.HTTPClient()), aoption.WithAPIKey("k"), aoption.WithoutEnvironmentDefaults(), aoption.WithoutOpenTelemetry(), aoption.WithMaxRetries(0))
	oc := openai.NewClient(ooption.WithHTTPClient(m.HTTPClient()), ooption.WithAPIKey("k"), ooption.WithMaxRetries(0))
	aParams := anthropic.MessageNewParams{Model: "sim-sonnet", MaxTokens: 512,
		System:   []anthropic.TextBlockParam{{Text: piiSystem}},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(piiPrompt()))}}
	oParams := openai.ChatCompletionNewParams{Model: "sim-sonnet", MaxCompletionTokens: openai.Int(512),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(piiSystem), openai.UserMessage(piiPrompt())}}

	calls := []struct {
		name   string
		stream bool
		run    func(t *testing.T) string
	}{
		{"anthropic", false, func(t *testing.T) string {
			msg, err := ac.Messages.New(ctx, aParams)
			if err != nil {
				t.Fatal(err)
			}
			return msg.Content[0].Text
		}},
		{"anthropic stream", true, func(t *testing.T) string {
			st := ac.Messages.NewStreaming(ctx, aParams)
			var sb strings.Builder
			for st.Next() {
				if ev := st.Current(); ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta" {
					sb.WriteString(ev.Delta.Text)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			return sb.String()
		}},
		{"openai", false, func(t *testing.T) string {
			c, err := oc.Chat.Completions.New(ctx, oParams)
			if err != nil {
				t.Fatal(err)
			}
			return c.Choices[0].Message.Content
		}},
		{"openai stream", true, func(t *testing.T) string {
			st := oc.Chat.Completions.NewStreaming(ctx, oParams)
			var sb strings.Builder
			for st.Next() {
				if ch := st.Current(); len(ch.Choices) > 0 {
					sb.WriteString(ch.Choices[0].Delta.Content)
				}
			}
			if err := st.Err(); err != nil {
				t.Fatal(err)
			}
			return sb.String()
		}},
	}
	placeholder := regexp.MustCompile(`\[(EMAIL|PHONE|CARD|IBAN|SSN)_1\]`)
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			before, _ := up.all()
			got := c.run(t)
			reqs, resps := up.all()
			if len(reqs) != len(before)+1 {
				t.Fatalf("the simulator got %d calls, want 1", len(reqs)-len(before))
			}
			sent, answer := reqs[len(reqs)-1], resps[len(resps)-1]
			for k, v := range piiFields {
				if strings.Contains(sent, v) {
					t.Errorf("the simulator received the %s %q", k, v)
				}
			}
			if n := len(placeholder.FindAllString(sent, -1)); n != 5 {
				t.Errorf("the simulator received %d placeholders, want 5: %s", n, sent)
			}
			if c.stream && !splitsPlaceholder(answer) {
				t.Errorf("no placeholder was split across the simulator's deltas: %s", answer)
			}
			var fields map[string]string
			if err := json.Unmarshal([]byte(got), &fields); err != nil {
				t.Fatalf("client answer %q: %v", got, err)
			}
			for k, v := range piiFields {
				if fields[k] != v {
					t.Errorf("client got %s = %q, want %q (answer %s)", k, fields[k], v, got)
				}
			}
		})
	}

	m.Close()
	logged := false
	// Every byte Keel stored (request log with bodies, audit log, their
	// WALs) is free of the values.
	files, _ := os.ReadDir(dir)
	for _, f := range files {
		b, _ := os.ReadFile(filepath.Join(dir, f.Name()))
		for k, v := range piiFields {
			if bytes.Contains(b, []byte(v)) {
				t.Errorf("%s holds the %s", f.Name(), k)
			}
		}
		if strings.HasPrefix(f.Name(), "requests.db") && bytes.Contains(b, []byte("[EMAIL_1]")) {
			logged = true
		}
	}
	if !logged {
		t.Error("the request log holds no body with a placeholder: log_bodies did not store the prompt")
	}
	rd, err := sqlite.OpenAuditReader(auditPath)
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rows, err := rd.Rows(ctx, sqlite.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 4*5 {
		t.Fatalf("%d audit rows, want 20 (5 per call)", len(rows))
	}
	kinds := map[string]bool{}
	for _, r := range rows {
		kinds[r.Kind] = true
		if r.Action != "redact" || r.Outcome != sqlite.AuditSent || len(r.Hash) != 64 {
			t.Errorf("audit row %+v", r)
		}
		b, _ := json.Marshal(r)
		for _, v := range piiFields {
			if strings.Contains(string(b), v) {
				t.Errorf("audit row holds %q", v)
			}
		}
	}
	for _, k := range []string{"EMAIL", "PHONE", "CARD", "IBAN", "SSN"} {
		if !kinds[k] {
			t.Errorf("no audit row of kind %s (kinds %v)", k, kinds)
		}
	}
}

// splitsPlaceholder reports whether a delta of an SSE answer (Anthropic
// text_delta or OpenAI delta.content) ends inside a placeholder.
func splitsPlaceholder(sse string) bool {
	open := regexp.MustCompile(`\[[A-Z][A-Z_0-9]*$`)
	for _, line := range strings.Split(sse, "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Delta struct {
				Text string `json:"text"`
			} `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(data), &ev) != nil {
			continue
		}
		d := ev.Delta.Text
		if len(ev.Choices) > 0 {
			d = ev.Choices[0].Delta.Content
		}
		if open.MatchString(d) {
			return true
		}
	}
	return false
}

// TestPIIBlockedErrorInBothFormats: a blocking route answers 400 with
// mesh_error_code MESH_PII_BLOCKED in the caller's error shape, naming the
// kinds and none of the values; nothing reaches the simulator.
func TestPIIBlockedErrorInBothFormats(t *testing.T) {
	m, up := piiMesh(t, func(cfg *config.Config) {
		off := false
		cfg.RequestLog.Enabled = &off
		cfg.PII.Action = "block"
	})
	prompt, _ := json.Marshal(piiPrompt())
	for _, c := range []struct{ path, body string }{
		{"/v1/messages", `{"model":"sim-sonnet","max_tokens":64,"messages":[{"role":"user","content":` + string(prompt) + `}]}`},
		{"/v1/chat/completions", `{"model":"sim-sonnet","messages":[{"role":"user","content":` + string(prompt) + `}]}`},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://keel.test"+c.path, strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), `"MESH_PII_BLOCKED"`) || !strings.Contains(string(b), "CARD, EMAIL, IBAN, PHONE, SSN") {
			t.Errorf("%s: %d %s, want 400 MESH_PII_BLOCKED naming the five kinds", c.path, resp.StatusCode, b)
		}
		for _, v := range piiFields {
			if strings.Contains(string(b), v) {
				t.Errorf("%s: the error holds %q", c.path, v)
			}
		}
	}
	if reqs, _ := up.all(); len(reqs) != 0 {
		t.Errorf("the simulator got %d calls, want 0", len(reqs))
	}
}

// TestPIIRouteOverride: models[].pii overrides the section's action for
// calls to that model only (config to engine).
func TestPIIRouteOverride(t *testing.T) {
	m, _ := piiMesh(t, func(cfg *config.Config) {
		off := false
		cfg.RequestLog.Enabled = &off
		found := false
		for i := range cfg.Models {
			if cfg.Models[i].Name == "sim-haiku" {
				cfg.Models[i].PII, found = &config.RoutePII{Action: "block"}, true
			}
		}
		if !found {
			t.Fatal("no sim-haiku in the simulator's config")
		}
	})
	prompt, _ := json.Marshal("Mail me at " + piiFields["email"])
	for model, want := range map[string]int{"sim-haiku": 400, "sim-sonnet": 200} {
		req, _ := http.NewRequest(http.MethodPost, "http://keel.test/v1/messages",
			strings.NewReader(`{"model":"`+model+`","max_tokens":32,"messages":[{"role":"user","content":`+string(prompt)+`}]}`))
		req.Header.Set("Content-Type", "application/json")
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%s: %d %s, want %d", model, resp.StatusCode, b, want)
		}
	}
}

// Personal data is redacted before the shadow path sees the request: a
// call to an alias shadowed at 100 % reaches both the primary model and
// the shadow's with placeholders only, and the client still gets the
// values back.
func TestPIIShadowSeesPlaceholdersOnly(t *testing.T) {
	m, up := piiMesh(t, func(cfg *config.Config) {
		cfg.Aliases = append(cfg.Aliases, config.Alias{Name: "contacts", Models: []string{"sim-sonnet"},
			Shadow: &shadow.Config{Percent: 100, Target: shadow.Target{Model: "sim-opus"}}})
	})
	body, _ := json.Marshal(map[string]any{"model": "contacts", "max_tokens": 512, "system": piiSystem,
		"messages": []map[string]string{{"role": "user", "content": piiPrompt()}}})
	req, _ := http.NewRequest(http.MethodPost, "http://keel.invalid/v1/messages", bytes.NewReader(body))
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := m.HTTPClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(answer), piiFields["email"]) {
		t.Fatalf("client answer %d %s, want the e-mail restored", resp.StatusCode, answer)
	}
	if err := m.Engine().DrainShadows(context.Background()); err != nil {
		t.Fatal(err)
	}
	reqs, _ := up.all()
	models := map[string]bool{}
	for _, r := range reqs {
		var b struct{ Model string }
		json.Unmarshal([]byte(r), &b)
		models[b.Model] = true
		for kind, v := range piiFields {
			if strings.Contains(r, v) {
				t.Errorf("%s received the %s value: %s", b.Model, kind, r)
			}
		}
	}
	if !models["sim-sonnet"] || !models["sim-opus"] {
		t.Errorf("upstream calls went to %v, want the primary (sim-sonnet) and the shadow (sim-opus)", models)
	}
}

// X-Mesh-PII tells the client what was found — the action and each kind's
// count, never a value — on a plain answer and in a stream's header; a
// call without personal data has none.
func TestPIIHeaderNamesKindsAndCounts(t *testing.T) {
	m, _ := piiMesh(t, nil)
	prompt, _ := json.Marshal(piiPrompt() + " Or write to " + piiFields["email"] + ".")
	for _, c := range []struct {
		name, body, want string
	}{
		{"plain", `{"model":"sim-sonnet","max_tokens":64,"messages":[{"role":"user","content":` + string(prompt) + `}]}`,
			"redact; EMAIL=2, PHONE=1, CARD=1, IBAN=1, SSN=1"},
		{"stream", `{"model":"sim-sonnet","max_tokens":64,"stream":true,"messages":[{"role":"user","content":` + string(prompt) + `}]}`,
			"redact; EMAIL=2, PHONE=1, CARD=1, IBAN=1, SSN=1"},
		{"none", `{"model":"sim-sonnet","max_tokens":64,"messages":[{"role":"user","content":"Tell me about keels."}]}`, ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, "http://keel.test/v1/messages", strings.NewReader(c.body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := m.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if got := resp.Header.Get("X-Mesh-PII"); resp.StatusCode != 200 || got != c.want {
			t.Errorf("%s: %d, X-Mesh-PII %q, want 200 %q", c.name, resp.StatusCode, got, c.want)
		}
	}
}
