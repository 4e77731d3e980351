package attempt

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/affinity"
	"github.com/keelmesh/keel/internal/cacheroute"
	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/policy"
	"github.com/keelmesh/keel/internal/provider"
	"github.com/keelmesh/keel/internal/resilience"
	"github.com/keelmesh/keel/internal/route"
	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: hedges and drained losers end
// with their call.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The package's harness: upstreams answering Anthropic's Messages API
// (PROTOCOLS.md §1: the JSON answer and its error shape) in memory, with
// a scripted delay, so that tests run in testing/synctest bubbles on
// virtual time; a Runner over them and a call's Exec on one route.

// upstream is one scripted endpoint: its n-th call (from 0) waits
// delay(n), then answers text, or status with an Anthropic error body,
// or, when words is set, streams them (cut: the connection breaks after
// them, before the message's end).
type upstream struct {
	id     string
	delay  func(n int) time.Duration
	status int
	text   string
	words  []string
	cut    bool

	mu    sync.Mutex
	calls int
}

func (u *upstream) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls
}

// upstreams serves each upstream at http://<id>.test.
type upstreams map[string]*upstream

func (us upstreams) RoundTrip(req *http.Request) (*http.Response, error) {
	u := us[strings.TrimSuffix(req.URL.Host, ".test")]
	if u == nil {
		return nil, fmt.Errorf("no upstream for host %q", req.URL.Host)
	}
	if req.Body != nil {
		io.Copy(io.Discard, req.Body)
		req.Body.Close()
	}
	u.mu.Lock()
	n := u.calls
	u.calls++
	u.mu.Unlock()
	if u.delay != nil {
		t := time.NewTimer(u.delay(n))
		defer t.Stop()
		select {
		case <-t.C:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	if u.words != nil {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: u.stream(),
			ContentLength: -1, Request: req}, nil
	}
	status, body := 200, ""
	if u.status != 0 {
		// Anthropic's error body (PROTOCOLS.md §1).
		status, body = u.status, `{"type":"error","error":{"type":"invalid_request_error","message":"scripted"}}`
	} else {
		b, _ := json.Marshal(u.text)
		body = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":` + string(b) +
			`}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`
	}
	return &http.Response{StatusCode: status, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: req}, nil
}

// stream is u's answer as Anthropic's Messages stream (PROTOCOLS.md §1:
// message_start, content_block_start, text deltas, then content_block_stop,
// message_delta with the usage and message_stop unless it is cut).
func (u *upstream) stream() io.ReadCloser {
	ev := func(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }
	var b strings.Builder
	b.WriteString(ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":7,"output_tokens":0}}}`))
	b.WriteString(ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`))
	for _, w := range u.words {
		j, _ := json.Marshal(w)
		b.WriteString(ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(j)+`}}`))
	}
	if u.cut {
		return io.NopCloser(io.MultiReader(strings.NewReader(b.String()), errReader{io.ErrUnexpectedEOF}))
	}
	b.WriteString(ev("content_block_stop", `{"type":"content_block_stop","index":0}`))
	b.WriteString(ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, len(u.words))))
	b.WriteString(ev("message_stop", `{"type":"message_stop"}`))
	return io.NopCloser(strings.NewReader(b.String()))
}

// errReader fails every read with err (a connection that broke).
type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

// endpoints are the live endpoints of model m on the upstreams ids, in
// order (ids "m/<id>/p").
func endpoints(t testing.TB, ids ...string) []*fleet.Endpoint {
	t.Helper()
	var out []*fleet.Endpoint
	for _, id := range ids {
		pe := &provider.Endpoint{ID: "m/" + id + "/p", Model: "m", UpstreamModel: "m", Region: id, Provider: "p", Format: llm.FormatAnthropic,
			BaseURL: "http://" + id + ".test", Capability: 3, ContextWindow: 100_000, StreamIdleTimeout: 30 * time.Second}
		ep, err := fleet.New(pe, fleet.Config{})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, ep)
	}
	return out
}

// testRoute is a route over eps with fresh budgets.
func testRoute(t testing.TB, strategy route.Strategy, eps ...*fleet.Endpoint) Route {
	t.Helper()
	rb, err := resilience.NewBudget(resilience.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	hb, err := resilience.NewHedgeBudget(resilience.BudgetConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return Route{Name: "m", Cands: eps, Strategy: strategy, Retries: rb, Hedges: hb, Key: t}
}

// observed collects the events a Runner reports.
type observed struct {
	mu       sync.Mutex
	attempts []observe.AttemptEvent
	hedges   []observe.HedgeEvent
}

func (o *observed) attempt(ev observe.AttemptEvent) {
	o.mu.Lock()
	o.attempts = append(o.attempts, ev)
	o.mu.Unlock()
}

func (o *observed) hedge(ev observe.HedgeEvent) {
	o.mu.Lock()
	o.hedges = append(o.hedges, ev)
	o.mu.Unlock()
}

// testRunner is a Runner over rt (nil: no upstream), with d's other
// dependencies (zero: the engine's defaults) and the events into o.
func testRunner(t testing.TB, rt http.RoundTripper, d Deps, o *observed) *Runner {
	t.Helper()
	d.Client = provider.NewClient(rt)
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.Rand == nil {
		d.Rand = func(int) int { return 0 }
	}
	if d.MaxAttempts == 0 {
		d.MaxAttempts = 4
	}
	backoff, err := resilience.NewBackoff(resilience.BackoffConfig{})
	if err != nil {
		t.Fatal(err)
	}
	d.Retry = &policy.Retry{MaxAttempts: d.MaxAttempts, Backoff: backoff, Now: d.Now}
	if d.CacheRoute == nil {
		cr, err := cacheroute.New(affinity.Config{}, policy.ColdSpendConfig{})
		if err != nil {
			t.Fatal(err)
		}
		d.CacheRoute = cr
	}
	if d.HedgingOff == nil {
		d.HedgingOff, d.RecoveryOff = new(atomic.Bool), new(atomic.Bool)
	}
	if o != nil {
		d.OnAttempt, d.OnHedge = o.attempt, o.hedge
	}
	return New(d)
}

// ask is a one-turn request.
func ask(stream bool) *llm.Request {
	return &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 64, HasMaxTokens: true, Stream: stream,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Tell me a story."}}}}}
}

// newCall is an Exec of req on rt with a fresh record.
func newCall(r *Runner, rt Route, req *llm.Request) (*Exec, *callrec.Record) {
	rec := &callrec.Record{}
	x := r.NewExec(rt, req, Call{RequestID: "t"}, rec)
	x.Policy = route.Policy{Strategy: rt.Strategy}
	return x, rec
}

// kinds lists the record's attempts as "endpoint kind outcome".
func kinds(rec *callrec.Record) []string {
	var out []string
	for _, a := range rec.Attempts {
		out = append(out, a.Endpoint+" "+a.Kind+" "+a.Outcome)
	}
	return out
}

// run runs x's primary pass with a fresh context.
func run(x *Exec) (*Attempt, error) {
	return x.Run(context.Background(), x.req, policy.AttemptPrimary)
}
