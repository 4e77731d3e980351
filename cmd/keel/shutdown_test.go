package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/sim"
)

// shutdownServe is keel serve in front of a simulator whose model "slow"
// streams one token every perToken and whose model "fast" answers at once.
type shutdownServe struct {
	addr   string
	cancel context.CancelFunc // the SIGTERM
	done   chan error         // runServe's result
	client *http.Client
}

func startShutdownServe(t *testing.T, perToken time.Duration, drain, grace string) *shutdownServe {
	t.Helper()
	simCfg := sim.ZeroLatency()
	for i := range simCfg.Regions {
		if simCfg.Regions[i].Name == "us-east" {
			simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond), PerToken: sim.Duration(perToken)}
		}
	}
	u := "SIMURL"
	yaml := fmt.Sprintf(`server:
  drain_delay: %s
  shutdown_timeout: %s
request_log:
  enabled: false
providers:
  - {name: sim, type: anthropic, base_url: %s}
models:
  - name: slow
    endpoints:
      - {provider: sim, region: us-east, base_url: %s/r/us-east, upstream_model: sim-haiku}
  - name: fast
    endpoints:
      - {provider: sim, region: eu-west, base_url: %s/r/eu-west, upstream_model: sim-haiku}
`, drain, grace, u, u, u)
	ss := startSimServe(t, simCfg, yaml)
	s := &shutdownServe{addr: ss.addr, cancel: ss.cancel, done: ss.done}
	tr := &http.Transport{MaxIdleConnsPerHost: 200}
	t.Cleanup(tr.CloseIdleConnections)
	s.client = &http.Client{Transport: tr}
	return s
}

// streamCall is one streamed call as its client saw it.
type streamCall struct {
	format  string        // "anthropic" or "openai"
	started chan struct{} // closed at the first text delta (or the end)
	ended   chan struct{} // closed when the body has ended; then events and err are set
	events  []sse.Event   // Data copied
	err     error         // reading the body; nil at a clean end
}

// stream starts a streamed call to model in format and reads it to its end.
func (s *shutdownServe) stream(format, model string, i int) (*streamCall, error) {
	c := &streamCall{format: format, started: make(chan struct{}), ended: make(chan struct{})}
	path, body := "/v1/messages", fmt.Sprintf(`{"model":%q,"max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Tell me about rivers, call %d."}]}`, model, i)
	if format == "openai" {
		path, body = "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"stream":true,"messages":[{"role":"user","content":"Tell me about rivers, call %d."}]}`, model, i)
	}
	resp, err := s.client.Post("http://"+s.addr+path, "application/json", strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("%s stream %d: %w", format, i, err)
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("%s stream %d: status %d: %s", format, i, resp.StatusCode, b)
	}
	go func() {
		defer close(c.ended)
		defer resp.Body.Close()
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				if err != io.EOF {
					c.err = err
				}
				break
			}
			ev.Data = bytes.Clone(ev.Data)
			c.events = append(c.events, ev)
			if isTextDelta(format, ev) {
				select {
				case <-c.started:
				default:
					close(c.started)
				}
			}
		}
		select {
		case <-c.started:
		default:
			close(c.started)
		}
	}()
	return c, nil
}

// startStreams starts n streamed calls to model, alternating the formats,
// and returns once each has received its first text delta.
func (s *shutdownServe) startStreams(t *testing.T, model string, n int) []*streamCall {
	t.Helper()
	calls := make([]*streamCall, n)
	var wg sync.WaitGroup
	for i := range calls {
		format := "anthropic"
		if i%2 == 1 {
			format = "openai"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.stream(format, model, i)
			if err != nil {
				t.Error(err)
				return
			}
			calls[i] = c
			<-c.started
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	return calls
}

func isTextDelta(format string, ev sse.Event) bool {
	if format == "anthropic" {
		return ev.Event == "content_block_delta"
	}
	var chunk struct {
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	return json.Unmarshal(ev.Data, &chunk) == nil && len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != ""
}

// wait waits for runServe to return, at most limit after the SIGTERM at
// start, and returns its error.
func (s *shutdownServe) wait(t *testing.T, start time.Time, limit time.Duration) error {
	t.Helper()
	select {
	case err := <-s.done:
		if took := time.Since(start); took > limit {
			t.Errorf("serve returned %v after SIGTERM, want at most %v", took, limit)
		}
		return err
	case <-time.After(limit + 5*time.Second):
		t.Fatalf("serve did not return within %v of SIGTERM", limit+5*time.Second)
		return nil
	}
}

// finish waits until every stream's body has ended.
func finish(t *testing.T, calls []*streamCall, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for i, c := range calls {
		select {
		case <-c.ended:
		case <-deadline:
			t.Fatalf("stream %d still open", i)
		}
	}
}

// A stream still running at the end of the shutdown timeout ends with its
// wire's error event (never a bare close), /readyz answers 503 during the
// drain delay while new calls are still served, and keel serve exits with
// an error naming the calls it cut, within drain + grace + 1s.
func TestShutdownCutsStreamsWithTheWireErrorEvent(t *testing.T) {
	const drain, grace = time.Second, 500 * time.Millisecond
	s := startShutdownServe(t, 500*time.Millisecond, drain.String(), grace.String())
	calls := s.startStreams(t, "slow", 100)

	start := time.Now()
	s.cancel()
	readyz := func() int {
		resp, err := s.client.Get("http://" + s.addr + "/readyz")
		if err != nil {
			t.Fatalf("/readyz during the drain delay: %v", err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for readyz() != http.StatusServiceUnavailable {
		if time.Since(start) > drain/2 {
			t.Fatalf("/readyz did not answer 503 within %v of SIGTERM", drain/2)
		}
		time.Sleep(2 * time.Millisecond) // polling a condition: SetReady runs on serve's goroutine
	}
	resp, err := s.client.Post("http://"+s.addr+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"fast","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatalf("a new call during the drain delay: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a new call during the drain delay: status %d: %s", resp.StatusCode, b)
	}
	if time.Since(start) >= drain {
		t.Fatalf("the checks during the drain delay took %v, longer than the delay", time.Since(start))
	}

	err = s.wait(t, start, drain+grace+time.Second+500*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "100 calls") || !strings.Contains(err.Error(), "cut") {
		t.Errorf("serve returned %v, want the error that 100 calls were cut", err)
	}
	if c, err := net.DialTimeout("tcp", s.addr, time.Second); err == nil {
		c.Close()
		t.Error("keel serve still accepts connections after it returned")
	}
	finish(t, calls, time.Second)
	counts := map[string]int{}
	for i, c := range calls {
		counts[c.format]++
		if err := cutEnd(c); err != nil {
			t.Errorf("%s stream %d: %v", c.format, i, err)
		}
	}
	if counts["anthropic"] != 50 || counts["openai"] != 50 {
		t.Errorf("streams per format %v, want 50 of each", counts)
	}
}

// cutEnd checks that c ended cleanly, after text deltas, with its wire's
// shutdown error event and no terminator.
func cutEnd(c *streamCall) error {
	if c.err != nil {
		return fmt.Errorf("body ended with %v, want a clean end after the error event", c.err)
	}
	if len(c.events) < 2 {
		return fmt.Errorf("%d events, want deltas then the error event", len(c.events))
	}
	last := c.events[len(c.events)-1]
	var body struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(last.Data, &body); err != nil {
		return fmt.Errorf("last event %s %s: %v", last.Event, last.Data, err)
	}
	for _, ev := range c.events {
		if ev.Event == "message_stop" || string(ev.Data) == "[DONE]" {
			return fmt.Errorf("a cut stream has its terminator %s %s", ev.Event, ev.Data)
		}
	}
	if !strings.Contains(body.Error.Message, "shutting down") {
		return fmt.Errorf("last event %s %s, want the shutdown error", last.Event, last.Data)
	}
	if c.format == "anthropic" && (last.Event != "error" || body.Type != "error" || body.Error.Type != "overloaded_error") {
		return fmt.Errorf("last event %s %s, want event: error with an overloaded_error", last.Event, last.Data)
	}
	return nil
}

// Streams that finish within the shutdown timeout end complete, with no
// error event, and keel serve returns nil as soon as they have, an open
// dashboard event stream notwithstanding. A drain delay of 0s closes the
// listener at once.
func TestShutdownLetsShortStreamsFinish(t *testing.T) {
	const grace = 10 * time.Second
	s := startShutdownServe(t, 20*time.Millisecond, "0s", grace.String())
	dash, err := s.client.Get("http://" + s.addr + "/dashboard/events")
	if err != nil {
		t.Fatal(err)
	}
	defer dash.Body.Close()
	if _, err := sse.NewReader(dash.Body).Next(); err != nil {
		t.Fatalf("dashboard events: status %d: %v", dash.StatusCode, err)
	}
	calls := s.startStreams(t, "slow", 20)
	start := time.Now()
	s.cancel()
	// Every stream ends within about 2 s (at most 48 words at 20 ms a token).
	if err := s.wait(t, start, grace/2); err != nil {
		t.Errorf("serve returned %v, want nil: every stream finished", err)
	}
	finish(t, calls, time.Second)
	for i, c := range calls {
		if c.err != nil {
			t.Errorf("%s stream %d: body ended with %v", c.format, i, c.err)
			continue
		}
		last := c.events[len(c.events)-1]
		want := "message_stop"
		got := last.Event
		if c.format == "openai" {
			want, got = "[DONE]", string(last.Data)
		}
		if got != want {
			t.Errorf("%s stream %d ended with %s %s, want %s", c.format, i, last.Event, last.Data, want)
		}
		for _, ev := range c.events {
			if ev.Event == "error" || bytes.Contains(ev.Data, []byte(`"error"`)) {
				t.Errorf("%s stream %d has an error event: %s", c.format, i, ev.Data)
			}
		}
	}
}
