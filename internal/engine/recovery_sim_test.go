package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/chain"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/sim"
)

// Must show: cut, stall and missing-terminator recovery in both client
// formats against simulated providers of each continuation kind (the
// simulator models each as the real provider does: an OpenAI-format
// endpoint of kind none starts a new answer after a trailing assistant
// message): the exact full text once and a clean finish, or the wire's
// error event; never a duplicate.
func TestStreamRecoveryByContinuationKind(t *testing.T) {
	kinds := []struct {
		kind   provider.Continuation
		format llm.Format
	}{
		{provider.ContinuePrefill, llm.FormatAnthropic}, // Anthropic
		{provider.ContinueNone, llm.FormatOpenAI},       // OpenAI
		{provider.ContinueFinalMessage, llm.FormatOpenAI},
		{provider.ContinuePrefix, llm.FormatOpenAI},
	}
	faults := []string{sim.KindStreamCut, sim.KindStall, sim.KindNoTerminator}
	for _, k := range kinds {
		for _, fault := range faults {
			for _, client := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
				for _, temp := range []float64{0, 1} {
					name := fmt.Sprintf("%s/%s/%s client/temperature %v", k.kind, fault, client, temp)
					t.Run(name, func(t *testing.T) {
						synctest.Test(t, func(t *testing.T) {
							recoveryCase(t, k.kind, k.format, fault, client, temp)
						})
					})
				}
			}
		}
	}
}

func recoveryCase(t *testing.T, kind provider.Continuation, upstream llm.Format, fault string, client llm.Format, temp float64) {
	e, fleet, region := recoveryEngine(t, kind, upstream)
	req := ask(client, "x", true)
	req.Messages[0].Content[0].Text = "Tell me a long story about a lighthouse keeper."
	req.MaxTokens = 40
	tt := temp
	req.Temperature = &tt
	clean := call(t, e, req)
	if !clean.stopped || clean.errEvent != nil || clean.text == "" {
		t.Fatalf("clean call: %q stopped %v error %v", clean.text, clean.stopped, clean.errEvent)
	}
	if err := fleet.SetFaults([]sim.Fault{{Kind: fault, Region: region, AfterTokens: 6, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	r := call(t, e, req)
	if temp == 0 && (clean.text != call(t, e, req).text) {
		t.Fatal("the simulator's answer at temperature 0 is not reproducible")
	}
	assertRecovered(t, r, clean, temp)
}

// recoveryEngine is an engine over a simulated model sim-x of the given
// upstream format and continuation kind in two regions (alias x, ordered,
// no hedging, no valve), the fleet and the first region, where faults go.
func recoveryEngine(t *testing.T, kind provider.Continuation, upstream llm.Format) (*Engine, *sim.Fleet, string) {
	cfg := sim.ZeroLatency()
	for i := range cfg.Regions {
		cfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(20 * time.Millisecond), PerToken: sim.Duration(5 * time.Millisecond)}
	}
	m := cfg.Models[1] // sim-sonnet
	m.Name = "sim-x"
	m.Regions = []string{cfg.Regions[0].Name, cfg.Regions[1].Name}
	if upstream == llm.FormatOpenAI {
		m.Formats = []string{"openai"}
		m.Continuation = sim.Continuation(kind)
	} else {
		m.Formats = []string{"anthropic"}
	}
	cfg.Models = []sim.ModelSpec{m}
	fleet, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var eps []*provider.Endpoint
	for _, r := range m.Regions {
		eps = append(eps, &provider.Endpoint{ID: "sim-x/" + r + "/sim", Model: "sim-x", UpstreamModel: "sim-x", Region: r, Provider: "sim",
			Format: upstream, BaseURL: fleet.BaseURL(r, upstream), Continuation: kind, Capability: 3, ContextWindow: 200_000,
			StreamIdleTimeout: 30 * time.Second})
	}
	e, err := newEngine(Options{Endpoints: eps, Client: provider.NewClient(fleet.Transport()),
		Aliases:    map[string]Alias{"x": {Models: []string{"sim-x"}, Strategy: "ordered"}},
		Resilience: Resilience{DisableHedging: true}, Stages: stages(t, chain.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, fleet, m.Regions[0]
}

// assertRecovered: the faulted stream r ended with a clean finish (the
// clean answer exactly at temperature 0, one recovery) or, above
// temperature 0 only, the error event; never both or neither, never a
// duplicate.
func assertRecovered(t *testing.T, r, clean result, temp float64) {
	t.Helper()
	switch {
	case r.stopped && r.errEvent == nil:
		if temp == 0 && r.text != clean.text {
			t.Fatalf("recovered text %q, want exactly %q", r.text, clean.text)
		}
		if r.rec.Recovered != 1 {
			t.Errorf("recovered %d, want 1", r.rec.Recovered)
		}
	case r.errEvent != nil && !r.stopped:
		if temp == 0 {
			t.Fatalf("at temperature 0 the stream must recover; got error event %v after %q", r.errEvent, r.text)
		}
	default:
		t.Fatalf("stopped %v error %v: a stream ends with a clean finish or the error event, not both or neither", r.stopped, r.errEvent)
	}
	// Never a duplicate: no run of the first delivered words appears twice.
	if first := firstWords(r.text, 4); first != "" && strings.Count(r.text, first) > 1 {
		t.Errorf("text repeats %q: %q", first, r.text)
	}
}

func firstWords(s string, n int) string {
	f := strings.Fields(s)
	if len(f) < n {
		return ""
	}
	return strings.Join(f[:n], " ")
}

// bodyRecorder passes calls to next and keeps each POST body's
// max_tokens or max_completion_tokens (-1 when absent).
type bodyRecorder struct {
	next http.RoundTripper
	mu   sync.Mutex
	max  []int
}

func (b *bodyRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.Body != nil {
		raw, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		var body struct {
			MaxTokens           *int `json:"max_tokens"`
			MaxCompletionTokens *int `json:"max_completion_tokens"`
		}
		_ = json.Unmarshal(raw, &body)
		n := -1
		if body.MaxTokens != nil {
			n = *body.MaxTokens
		} else if body.MaxCompletionTokens != nil {
			n = *body.MaxCompletionTokens
		}
		b.mu.Lock()
		b.max = append(b.max, n)
		b.mu.Unlock()
	}
	return b.next.RoundTrip(r)
}

func (b *bodyRecorder) maxTokens() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.max)
}

// Must show (issue 25): llama.cpp's llama-server continues a trailing
// assistant message but echoes it (PROTOCOLS.md §6.2); a stream recovered
// on such a server after a cut (a killed server) or a stall is exactly the
// uninterrupted answer, and the continuation asks only for the tokens the
// client has left (max_tokens less the tokens delivered), so the recovered
// answer stops where the uninterrupted one did.
func TestEchoingContinuationRecoveredExactly(t *testing.T) {
	for _, fault := range []string{sim.KindStreamCut, sim.KindStall} {
		for _, client := range []llm.Format{llm.FormatAnthropic, llm.FormatOpenAI} {
			for _, maxTokens := range []int{12, 200} {
				t.Run(fmt.Sprintf("%s/%s client/max_tokens %d", fault, client, maxTokens), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) {
						echoCase(t, fault, client, maxTokens)
					})
				})
			}
		}
	}
}

func echoCase(t *testing.T, fault string, client llm.Format, maxTokens int) {
	const cutAfter = 5
	cfg := sim.ZeroLatency()
	for i := range cfg.Regions {
		cfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(20 * time.Millisecond), PerToken: sim.Duration(5 * time.Millisecond)}
	}
	m := cfg.Models[1]
	m.Name = "llama"
	m.Regions = []string{cfg.Regions[0].Name, cfg.Regions[1].Name}
	m.Formats = []string{"openai"}
	m.Continuation = sim.ContinuePrefill
	m.EchoPrefill = true // llama-server, PROTOCOLS.md §6.2
	cfg.Models = []sim.ModelSpec{m}
	fleet, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var eps []*provider.Endpoint
	for _, r := range m.Regions {
		eps = append(eps, &provider.Endpoint{ID: "llama/" + r, Model: "llama", UpstreamModel: "llama", Region: r, Provider: "llamacpp",
			Format: llm.FormatOpenAI, BaseURL: fleet.BaseURL(r, llm.FormatOpenAI), Continuation: provider.ContinuePrefill,
			Capability: 3, ContextWindow: 200_000, StreamIdleTimeout: 30 * time.Second})
	}
	rec := &bodyRecorder{next: fleet.Transport()}
	e, err := newEngine(Options{Endpoints: eps, Client: provider.NewClient(rec),
		Aliases:    map[string]Alias{"x": {Models: []string{"llama"}, Strategy: "ordered"}},
		Resilience: Resilience{DisableHedging: true}, Stages: stages(t, chain.Config{})})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	req := ask(client, "x", true)
	req.Messages[0].Content[0].Text = "Tell me a long story about a lighthouse keeper."
	req.MaxTokens = maxTokens
	zero := 0.0
	req.Temperature = &zero
	clean := call(t, e, req)
	if !clean.stopped || clean.errEvent != nil || clean.text == "" {
		t.Fatalf("clean call: %q stopped %v error %v", clean.text, clean.stopped, clean.errEvent)
	}
	if err := fleet.SetFaults([]sim.Fault{{Kind: fault, Region: m.Regions[0], AfterTokens: cutAfter, Count: 1}}); err != nil {
		t.Fatal(err)
	}
	before := len(rec.maxTokens())
	r := call(t, e, req)
	if !r.stopped || r.errEvent != nil {
		t.Fatalf("recovered stream: stopped %v error %v after %q", r.stopped, r.errEvent, r.text)
	}
	if r.rec.Recovered != 1 {
		t.Fatalf("recovered %d times, want 1", r.rec.Recovered)
	}
	if r.text != clean.text {
		t.Errorf("recovered text\n%q\nwant exactly\n%q", r.text, clean.text)
	}
	sent := rec.maxTokens()[before:]
	if want := []int{maxTokens, maxTokens - cutAfter}; !slices.Equal(sent, want) {
		t.Errorf("max_tokens sent upstream %v, want %v (the continuation asks for what the client has left)", sent, want)
	}
}
