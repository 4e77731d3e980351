package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/chain"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/provider"
)

// The engine's test harness: endpoints scripted by behaviour, served in
// memory (no sockets, so tests run in testing/synctest bubbles on virtual
// time), a call through the engine, and assertions on attempts, served-by,
// status and exact virtual durations.

// reply is what a scripted endpoint answers to one call.
type reply struct {
	// delay before the response header.
	delay  time.Duration
	status int
	header map[string]string
	body   string // a JSON body (non-streaming or error)
	// events are SSE events written one by one, each after its gap.
	events []sseEvent
	// cut ends the body with an unexpected EOF after the events; stall
	// holds it open until the caller gives up.
	cut, stall bool
	// reset fails the call as a connection reset before any response.
	reset bool
}

type sseEvent struct {
	gap  time.Duration
	data string // the whole event text, "event: x\ndata: {...}\n\n"
}

// callLog is one call an endpoint received.
type callLog struct {
	at   time.Time
	body map[string]any
}

// scripted is one upstream whose answer to its n-th call (from 0) is
// script(n, body).
type scripted struct {
	id     string
	format llm.Format
	script func(n int, body map[string]any) reply
	// up, when set, answers the prober's GET /models (down endpoints fail
	// it like the calls).
	up func() bool

	mu    sync.Mutex
	calls []callLog
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *scripted) callTimes() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []time.Time
	for _, c := range s.calls {
		out = append(out, c.at)
	}
	return out
}

func (s *scripted) lastBody() map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[len(s.calls)-1].body
}

// harness serves scripted endpoints by host.
type harness struct {
	t     *testing.T
	byID  map[string]*scripted
	order []*scripted
}

func newHarness(t *testing.T, eps ...*scripted) *harness {
	h := &harness{t: t, byID: map[string]*scripted{}}
	for _, s := range eps {
		h.byID[s.id] = s
		h.order = append(h.order, s)
	}
	return h
}

func errReset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

func (h *harness) RoundTrip(req *http.Request) (*http.Response, error) {
	s := h.byID[strings.TrimSuffix(req.URL.Host, ".test")]
	if s == nil {
		return nil, fmt.Errorf("no scripted endpoint for host %q", req.URL.Host)
	}
	if req.Method == http.MethodGet { // the prober
		if s.up != nil && !s.up() {
			return nil, errRefused()
		}
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"data":[]}`)), Request: req}, nil
	}
	n, body := h.logCall(s, req)
	if s.up != nil && !s.up() {
		return nil, errRefused()
	}
	r := s.script(n, body)
	if err := wait(req.Context(), r.delay); err != nil {
		return nil, err
	}
	if r.reset {
		return nil, errReset()
	}
	return r.response(req), nil
}

func errRefused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

// logCall records req as s's next call: its index from 0 and its body.
func (h *harness) logCall(s *scripted, req *http.Request) (int, map[string]any) {
	var body map[string]any
	if req.Body != nil {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		if err := json.Unmarshal(b, &body); err != nil {
			h.t.Errorf("endpoint %s: request body does not parse: %v", s.id, err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.calls)
	s.calls = append(s.calls, callLog{at: time.Now(), body: body})
	return n, body
}

// wait waits d, or returns ctx's error when it ends first.
func wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// response is the reply r as the upstream's answer to req: a JSON body,
// or an event stream written as scripted.
func (r reply) response(req *http.Request) *http.Response {
	if r.status == 0 {
		r.status = 200
	}
	hdr := http.Header{}
	for k, v := range r.header {
		hdr.Set(k, v)
	}
	if r.events == nil {
		if hdr.Get("Content-Type") == "" {
			hdr.Set("Content-Type", "application/json")
		}
		return &http.Response{StatusCode: r.status, Header: hdr, Body: io.NopCloser(strings.NewReader(r.body)), ContentLength: int64(len(r.body)), Request: req}
	}
	hdr.Set("Content-Type", "text/event-stream")
	return &http.Response{StatusCode: r.status, Header: hdr, Body: r.stream(req.Context()), ContentLength: -1, Request: req}
}

// stream writes r's events with their gaps, then ends as scripted
// (stalled until ctx ends, cut, or closed); ctx ending closes it.
func (r reply) stream(ctx context.Context) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		for _, ev := range r.events {
			if err := wait(ctx, ev.gap); err != nil {
				pw.CloseWithError(err)
				return
			}
			if _, err := io.WriteString(pw, ev.data); err != nil {
				return
			}
		}
		switch {
		case r.stall:
			<-ctx.Done()
			pw.CloseWithError(ctx.Err())
		case r.cut:
			pw.CloseWithError(io.ErrUnexpectedEOF)
		default:
			pw.Close()
		}
	}()
	go func() {
		<-ctx.Done()
		pw.CloseWithError(ctx.Err())
	}()
	return pr
}

// endpoints turns the scripted upstreams into provider endpoints of model
// (ids "model/region/p"), in order.
func (h *harness) endpoints(model string, ids ...string) []*provider.Endpoint {
	var out []*provider.Endpoint
	for _, id := range ids {
		s := h.byID[id]
		base := "http://" + id + ".test"
		if s.format == llm.FormatOpenAI {
			base += "/v1"
		}
		out = append(out, &provider.Endpoint{ID: model + "/" + id + "/p", Model: model, UpstreamModel: model, Region: id, Provider: "p",
			Format: s.format, BaseURL: base, Capability: 3, ContextWindow: 100_000, StreamIdleTimeout: 30 * time.Second})
	}
	return out
}

// engine builds an Engine over eps with o's other options.
func (h *harness) engine(o Options, eps ...*provider.Endpoint) *Engine {
	h.t.Helper()
	o.Endpoints = append(o.Endpoints, eps...)
	o.Client = provider.NewClient(h)
	if o.Stages.Structured == nil {
		o.Stages = stages(h.t, chain.Config{})
	}
	e, err := newEngine(o)
	if err != nil {
		h.t.Fatalf("engine.New: %v", err)
	}
	h.t.Cleanup(e.Close)
	return e
}

// newEngine is New with the feature stages o.Stages holds or, when none
// were built, chain.Build's defaults (as every mesh has them).
func newEngine(o Options) (*Engine, error) {
	if o.Stages.Structured == nil {
		st, err := chain.Build(chain.Config{})
		if err != nil {
			return nil, err
		}
		o.Stages = st
	}
	return New(o)
}

// stages builds the feature stages of c for a test's engine, its safety
// valve off (as the harness's engines have it).
func stages(t testing.TB, c chain.Config) chain.Stages {
	t.Helper()
	c.Valve.Disabled = true
	st, err := chain.Build(c)
	if err != nil {
		t.Fatalf("chain.Build: %v", err)
	}
	return st
}

// ask is a one-turn request.
func ask(format llm.Format, model string, stream bool) *llm.Request {
	return &llm.Request{Format: format, Model: model, MaxTokens: 64, HasMaxTokens: true, Stream: stream,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Tell me a story."}}}}}
}

// result is a finished call as the client saw it.
type result struct {
	text     string
	err      *llm.APIError
	errEvent *llm.APIError
	stopped  bool
	usage    llm.Usage
	rec      *Record
	took     time.Duration
}

// call runs req through e to its end (reading a stream to its end).
func call(t *testing.T, e *Engine, req *llm.Request) result {
	t.Helper()
	start := time.Now()
	out, err := e.Do(context.Background(), req, Call{RequestID: "t"})
	var r result
	if err != nil {
		r.err = err.(*llm.APIError)
		r.took = time.Since(start)
		return r
	}
	r.rec = out.Record
	if out.Stream == nil {
		r.text = out.Response.Text()
		r.usage = out.Response.Usage
		r.took = time.Since(start)
		return r
	}
	var b strings.Builder
	for {
		ev, err := out.Stream.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		switch ev.Type {
		case llm.EventBlockDelta:
			if ev.DeltaType == llm.DeltaText {
				b.WriteString(ev.Delta)
			}
		case llm.EventMessageDelta:
			if ev.Usage != nil {
				r.usage = *ev.Usage
			}
		case llm.EventMessageStop:
			r.stopped = true
		case llm.EventError:
			r.errEvent = ev.Err
		}
	}
	out.Stream.Close()
	r.text = b.String()
	r.took = time.Since(start)
	return r
}

// The wire answers the scripts use.

func anthropicJSON(text string) reply {
	b, _ := json.Marshal(text)
	return reply{body: `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":` + string(b) +
		`}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":7,"output_tokens":3}}`}
}

func anthropicError(status int, typ string, retryAfter string) reply {
	r := reply{status: status, body: `{"type":"error","error":{"type":"` + typ + `","message":"scripted"}}`}
	if retryAfter != "" {
		r.header = map[string]string{"retry-after": retryAfter}
	}
	return r
}

// anthropicStream streams words; complete adds the terminal events.
func anthropicStream(words []string, gap time.Duration, complete bool) reply {
	ev := func(typ, data string) sseEvent { return sseEvent{data: "event: " + typ + "\ndata: " + data + "\n\n"} }
	evs := []sseEvent{
		ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"stop_reason":null,"usage":{"input_tokens":7,"output_tokens":0}}}`),
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
	}
	for _, w := range words {
		b, _ := json.Marshal(w)
		e := ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(b)+`}}`)
		e.gap = gap
		evs = append(evs, e)
	}
	if complete {
		evs = append(evs, ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, len(words))),
			ev("message_stop", `{"type":"message_stop"}`))
	}
	return reply{events: evs}
}

// openaiStream streams words as chat.completion.chunk events; complete adds
// the finish chunk, the usage chunk (prompt_tokens promptTokens) and [DONE].
func openaiStream(words []string, gap time.Duration, complete bool, promptTokens int) reply {
	chunk := func(delta string) sseEvent {
		return sseEvent{gap: gap, data: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n"}
	}
	evs := []sseEvent{{data: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"}}
	for _, w := range words {
		b, _ := json.Marshal(w)
		evs = append(evs, chunk(`{"content":`+string(b)+`}`))
	}
	if complete {
		evs = append(evs,
			sseEvent{data: `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n"},
			sseEvent{data: fmt.Sprintf(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}}`, promptTokens, len(words), promptTokens+len(words)) + "\n\n"},
			sseEvent{data: "data: [DONE]\n\n"})
	}
	return reply{events: evs}
}

func always(r reply) func(int, map[string]any) reply {
	return func(int, map[string]any) reply { return r }
}
