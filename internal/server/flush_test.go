package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
)

// flushRecorder is a ResponseWriter that keeps, at each Flush, what had
// been written so far.
type flushRecorder struct {
	*httptest.ResponseRecorder
	flushed chan string // what was written so far, at each Flush
	mu      sync.Mutex  // guards Write
}

func (f *flushRecorder) Flush() {
	f.mu.Lock()
	body := f.Body.String()
	f.mu.Unlock()
	f.flushed <- body
}

// Write is guarded too: the test reads Body while the handler writes.
func (f *flushRecorder) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ResponseRecorder.Write(p)
}

// pipeUpstream answers model calls with a stream the test writes into.
type pipeUpstream struct{ pr *io.PipeReader }

func (u pipeUpstream) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	if r.Method != http.MethodPost {
		return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"data":[]}`)), Request: r}, nil
	}
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: u.pr, Request: r}, nil
}

// TestStreamFirstEventsInOneFlush: the events a stream has at hand when it
// is committed (message_start, the block start, a ping, the first delta:
// read while waiting for the first content) reach the client in one write,
// not one flush each (issue 15: time to first token); and an event is
// never held while Keel waits on the upstream for the next one.
func TestStreamFirstEventsInOneFlush(t *testing.T) {
	pr, pw := io.Pipe()
	cfg, err := config.Parse([]byte(`request_log: {enabled: false}
providers:
  - {name: a, type: anthropic, base_url: "http://up.test"}
models:
  - {name: claude-x, endpoints: [{provider: a}]}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	m, err := keel.New(cfg, keel.WithUpstream(pipeUpstream{pr}))
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ev := func(name, data string) string { return "event: " + name + "\ndata: " + data + "\n\n" }
	head := ev("message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}}`) +
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`) +
		ev("ping", `{"type": "ping"}`) +
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`)
	tail := []string{
		ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`),
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
		ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":2}}`),
		ev("message_stop", `{"type":"message_stop"}`),
	}
	rec := &flushRecorder{ResponseRecorder: httptest.NewRecorder(), flushed: make(chan string, 64)}
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/messages",
		strings.NewReader(`{"model":"claude-x","max_tokens":9,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Host = "127.0.0.1"
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.Handler().ServeHTTP(rec, req)
	}()
	go io.WriteString(pw, head)
	next := func(what string) string {
		select {
		case b := <-rec.flushed:
			return b
		case <-time.After(10 * time.Second):
			t.Fatalf("no flush within 10s after %s: an event was held while Keel waited on the upstream", what)
		}
		return ""
	}
	if first := next("the first events"); first != head {
		t.Errorf("first flush:\n%s\nwant the four events the upstream sent first, in one write:\n%s", first, head)
	}
	// Each later event arrives alone: it is flushed before Keel reads on.
	sent := head
	for i, e := range tail {
		if _, err := io.WriteString(pw, e); err != nil {
			t.Fatal(err)
		}
		sent += e
		if i == len(tail)-1 {
			pw.Close()
		}
		if got := next("event " + strconv.Itoa(i+1)); got != sent {
			t.Errorf("flush %d:\n%s\nwant everything sent so far:\n%s", i+2, got, sent)
		}
	}
	<-done
	if got, want := rec.Body.String(), head+strings.Join(tail, ""); !bytes.Equal([]byte(got), []byte(want)) {
		t.Errorf("stream changed on the way:\n got %s\nwant %s", got, want)
	}
}
