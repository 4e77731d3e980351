package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/sse"
	"github.com/keelmesh/keel/sim"
)

// A call whose context ends with ErrShuttingDown ends with its wire's
// shutdown error: a stream with the error event after the deltas it sent
// (never a bare end, never the terminator), a call not yet answered with a
// 503. A client that goes away is not told the server is shutting down.
func TestCutByShutdownEndsWithTheWireError(t *testing.T) {
	const anthropicStream = `{"model":"sim-sonnet","max_tokens":200,"stream":true,"messages":[{"role":"user","content":"Name three rivers of Europe."}]}`
	const openaiStream = `{"model":"sim-sonnet","stream":true,"messages":[{"role":"user","content":"Name three rivers of Europe."}]}`
	tests := []struct {
		name       string
		path, body string
		cause      error
		wantStatus int
		// wantLast is in the last event (a stream) or the body.
		wantLast string
		// wantType is the error type of the last event or the body.
		wantType string
	}{
		{name: "anthropic stream", path: "/v1/messages", body: anthropicStream, cause: keel.ErrShuttingDown, wantStatus: 200, wantLast: "shutting down", wantType: "overloaded_error"},
		{name: "openai stream", path: "/v1/chat/completions", body: openaiStream, cause: keel.ErrShuttingDown, wantStatus: 200, wantLast: "shutting down", wantType: "server_error"},
		{name: "anthropic call", path: "/v1/messages", body: strings.Replace(anthropicStream, `"stream":true,`, "", 1), cause: keel.ErrShuttingDown, wantStatus: 503, wantLast: "shutting down", wantType: "overloaded_error"},
		{name: "openai call", path: "/v1/chat/completions", body: strings.Replace(openaiStream, `"stream":true,`, "", 1), cause: keel.ErrShuttingDown, wantStatus: 503, wantLast: "shutting down", wantType: "server_error"},
		{name: "client gone", path: "/v1/messages", body: anthropicStream, cause: context.Canceled, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				simCfg := sim.ZeroLatency()
				for i := range simCfg.Regions {
					simCfg.Regions[i].Latency = sim.LatencySpec{TTFT: sim.Duration(10 * time.Millisecond), PerToken: sim.Duration(100 * time.Millisecond)}
				}
				fleet, err := sim.New(simCfg)
				if err != nil {
					t.Fatal(err)
				}
				cfg := simfleet.Config(fleet, "http://sim.test")
				off := false
				cfg.RequestLog.Enabled = &off
				m, err := keel.New(cfg, keel.WithUpstream(fleet.Transport()))
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()

				ctx, cancel := context.WithCancelCause(context.Background())
				req := httptest.NewRequestWithContext(ctx, http.MethodPost, tt.path, strings.NewReader(tt.body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				done := make(chan struct{})
				go func() {
					defer close(done)
					m.Handler().ServeHTTP(rec, req)
				}()
				// Every answer is at least 12 tokens, 1.2 s: at 450 ms a
				// stream has sent some deltas and a call has no answer yet.
				time.Sleep(450 * time.Millisecond)
				cancel(tt.cause)
				<-done

				if rec.Code != tt.wantStatus {
					t.Fatalf("status %d, want %d: %s", rec.Code, tt.wantStatus, rec.Body)
				}
				body := rec.Body.Bytes()
				last := body
				if tt.wantStatus == 200 {
					var evs []sse.Event
					r := sse.NewReader(bytes.NewReader(body))
					for {
						ev, err := r.Next()
						if err != nil {
							break
						}
						ev.Data = bytes.Clone(ev.Data)
						evs = append(evs, ev)
					}
					if len(evs) < 3 {
						t.Fatalf("%d events, want the deltas sent before the cut:\n%s", len(evs), body)
					}
					if bytes.Contains(body, []byte("message_stop")) || bytes.Contains(body, []byte("[DONE]")) {
						t.Errorf("a cut stream has its terminator:\n%s", body)
					}
					lastEv := evs[len(evs)-1]
					last = lastEv.Data
					if strings.Contains(tt.path, "messages") && tt.wantLast != "" && lastEv.Event != "error" {
						t.Errorf("last event %q %s, want event: error", lastEv.Event, last)
					}
				}
				if tt.wantLast == "" {
					if bytes.Contains(body, []byte("shutting down")) {
						t.Errorf("a call whose client went away was told the server is shutting down:\n%s", body)
					}
					return
				}
				var e struct {
					Error struct{ Type, Message string } `json:"error"`
				}
				if err := json.Unmarshal(last, &e); err != nil {
					t.Fatalf("last %s: %v", last, err)
				}
				if !strings.Contains(e.Error.Message, tt.wantLast) || e.Error.Type != tt.wantType {
					t.Errorf("error %+v, want type %s and a message with %q", e.Error, tt.wantType, tt.wantLast)
				}
			})
		})
	}
}
