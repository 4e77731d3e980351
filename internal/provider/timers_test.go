package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// slowUpstream answers after header of virtual time, then sends its body
// after body more; both waits end early, with the context's cause, when
// the attempt's context is cancelled (as a real transport does).
func slowUpstream(header, body time.Duration, answer string) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		ctx := r.Context()
		select {
		case <-time.After(header):
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
		return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
			ContentLength: -1, Body: &slowBody{ctx: ctx, wait: body, r: strings.NewReader(answer)}, Request: r}, nil
	})
}

type slowBody struct {
	ctx  context.Context
	wait time.Duration
	r    io.Reader
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.wait > 0 {
		select {
		case <-time.After(b.wait):
			b.wait = 0
		case <-b.ctx.Done():
			return 0, context.Cause(b.ctx)
		}
	}
	return b.r.Read(p)
}

func (b *slowBody) Close() error { return nil }

const timerAnswer = `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`

const timerStream = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":1,\"output_tokens\":0}}}\n\n" +
	"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"

// TestAttemptTimeouts: the response header timeout bounds the wait for the
// answer's head, the request timeout the whole attempt (body and stream
// included), each failing the attempt as a timeout with its own cause at
// its own moment; a timeout that does not fire changes nothing. In
// virtual time.
func TestAttemptTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name               string
		headerTO, request  time.Duration // the endpoint's bounds (0: none)
		header, body       time.Duration // the upstream's waits
		stream             bool
		wantCause          error // nil: the call succeeds
		wantAt             time.Duration
		wantAfterHeaderOK  bool // the head arrived: the failure is a body's
		wantBeforeResponse bool
	}{
		{name: "header timeout", headerTO: 2 * time.Second, request: 10 * time.Second, header: 5 * time.Second,
			wantCause: errHeaderTimeout, wantAt: 2 * time.Second, wantBeforeResponse: true},
		{name: "header timeout, no request timeout", headerTO: 2 * time.Second, header: 5 * time.Second,
			wantCause: errHeaderTimeout, wantAt: 2 * time.Second, wantBeforeResponse: true},
		{name: "request timeout before the header timeout", headerTO: 8 * time.Second, request: 3 * time.Second, header: 5 * time.Second,
			wantCause: context.DeadlineExceeded, wantAt: 3 * time.Second, wantBeforeResponse: true},
		{name: "request timeout alone, before the header", request: 3 * time.Second, header: 5 * time.Second,
			wantCause: context.DeadlineExceeded, wantAt: 3 * time.Second, wantBeforeResponse: true},
		{name: "request timeout in the body", headerTO: 2 * time.Second, request: 5 * time.Second, header: time.Second, body: 10 * time.Second,
			wantCause: context.DeadlineExceeded, wantAt: 5 * time.Second},
		{name: "header timeout does not bound the body", headerTO: 2 * time.Second, header: time.Second, body: 10 * time.Second,
			wantAt: 11 * time.Second},
		{name: "both in time", headerTO: 2 * time.Second, request: 5 * time.Second, header: time.Second, body: time.Second,
			wantAt: 2 * time.Second},
		{name: "no timeouts", header: time.Minute, body: time.Minute, wantAt: 2 * time.Minute},
		{name: "request timeout in a stream", headerTO: 2 * time.Second, request: 5 * time.Second, header: time.Second, body: 10 * time.Second, stream: true,
			wantCause: context.DeadlineExceeded, wantAt: 5 * time.Second},
		{name: "stream in time", headerTO: 2 * time.Second, request: 5 * time.Second, header: time.Second, body: time.Second, stream: true,
			wantAt: 2 * time.Second},
	} {
		for _, own := range []bool{false, true} {
			name := tc.name
			if own {
				name += ", the caller's context (Call.Cancel)"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					answer := timerAnswer
					if tc.stream {
						answer = timerStream
					}
					c := NewClient(slowUpstream(tc.header, tc.body, answer))
					ep := &Endpoint{ID: "m/r/p", Model: "m", UpstreamModel: "m", Provider: "p", Format: llm.FormatAnthropic,
						BaseURL: "http://upstream.invalid", ResponseHeaderTimeout: tc.headerTO, RequestTimeout: tc.request}
					req := &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 8, HasMaxTokens: true, Stream: tc.stream,
						Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
					start := time.Now()
					ctx, call := context.Background(), Call{}
					if own {
						ctx, call.Cancel = context.WithCancelCause(ctx)
					}
					res, err := c.Do(ctx, ep, req, call)
					if err == nil && res.Stream != nil {
						for err == nil {
							_, err = res.Stream.Next()
						}
						res.Stream.Close()
						if err == io.EOF {
							err = nil
						}
					}
					if at := time.Since(start); at != tc.wantAt {
						t.Errorf("ended after %v, want %v", at, tc.wantAt)
					}
					if tc.wantCause == nil {
						if err != nil {
							t.Fatalf("err %v, want success", err)
						}
						return
					}
					var pe *Error
					if !errors.As(err, &pe) || pe.Kind != KindTimeout || !errors.Is(pe.Err, tc.wantCause) {
						t.Fatalf("err %v, want a timeout caused by %v", err, tc.wantCause)
					}
					if pe.BeforeResponse != tc.wantBeforeResponse {
						t.Errorf("BeforeResponse %v, want %v", pe.BeforeResponse, tc.wantBeforeResponse)
					}
				})
			})
		}
	}
}

// TestStreamKeepsNoRequest: a stream keeps its attempt (its cancel and
// timer) for its whole life, but not the request: neither the request's
// parts nor its encoded body, which can be a long prompt.
func TestStreamKeepsNoRequest(t *testing.T) {
	c := NewClient(slowUpstream(0, 0, timerStream))
	ep := &Endpoint{ID: "m/r/p", Model: "m", UpstreamModel: "m", Provider: "p", Format: llm.FormatAnthropic,
		BaseURL: "http://upstream.invalid", RequestTimeout: time.Minute}
	req := &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 8, HasMaxTokens: true, Stream: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: strings.Repeat("a long prompt ", 100)}}}}}
	res, err := c.Do(context.Background(), ep, req, Call{})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Stream.Close()
	a := res.Stream.(*stream).end
	if a.out.Messages != nil || a.out.Model != "" || a.body.b != nil || a.body.Len() != 0 {
		t.Errorf("the stream's attempt keeps the request: %d messages, model %q, %d body bytes", len(a.out.Messages), a.out.Model, len(a.body.b))
	}
}

// TestCallerCancelsAttempt: the caller cancelling the attempt fails it as
// cancelled with the caller's cause, in the head's wait and in the body,
// whether Do derived a context of its own or used the caller's
// (Call.Cancel); with Call.Cancel, Do ends the caller's context with a
// cause of its own (OwnCause), which the caller tells from its own
// cancel. In virtual time.
func TestCallerCancelsAttempt(t *testing.T) {
	stop := errors.New("the caller's reason")
	for _, tc := range []struct {
		name         string
		header, body time.Duration
		wantBefore   bool
	}{
		{name: "waiting for the head", header: 5 * time.Second, wantBefore: true},
		{name: "in the body", header: time.Second, body: 5 * time.Second},
	} {
		for _, own := range []bool{false, true} {
			name := tc.name
			if own {
				name += ", the caller's context (Call.Cancel)"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					c := NewClient(slowUpstream(tc.header, tc.body, timerAnswer))
					ep := &Endpoint{ID: "m/r/p", Model: "m", UpstreamModel: "m", Provider: "p", Format: llm.FormatAnthropic,
						BaseURL: "http://upstream.invalid", ResponseHeaderTimeout: time.Minute, RequestTimeout: time.Minute}
					req := &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 8, HasMaxTokens: true,
						Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
					ctx, cancel := context.WithCancelCause(context.Background())
					call := Call{}
					if own {
						call.Cancel = cancel
					}
					time.AfterFunc(3*time.Second, func() { cancel(stop) })
					_, err := c.Do(ctx, ep, req, call)
					var pe *Error
					if !errors.As(err, &pe) || pe.Kind != KindCanceled || pe.Err != stop {
						t.Fatalf("err %v, want cancelled by %v", err, stop)
					}
					if pe.BeforeResponse != tc.wantBefore {
						t.Errorf("BeforeResponse %v, want %v", pe.BeforeResponse, tc.wantBefore)
					}
					if OwnCause(context.Cause(ctx)) {
						t.Errorf("the caller's cause %v counted as Do's own", context.Cause(ctx))
					}
				})
			})
		}
	}
	t.Run("Do ends the caller's context with a cause of its own", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			c := NewClient(slowUpstream(time.Second, time.Second, timerAnswer))
			ep := &Endpoint{ID: "m/r/p", Model: "m", UpstreamModel: "m", Provider: "p", Format: llm.FormatAnthropic,
				BaseURL: "http://upstream.invalid", RequestTimeout: time.Minute}
			req := &llm.Request{Format: llm.FormatAnthropic, Model: "m", MaxTokens: 8, HasMaxTokens: true,
				Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "hi"}}}}}
			ctx, cancel := context.WithCancelCause(context.Background())
			if _, err := c.Do(ctx, ep, req, Call{Cancel: cancel}); err != nil {
				t.Fatal(err)
			}
			if ctx.Err() == nil || !OwnCause(context.Cause(ctx)) {
				t.Errorf("after Do: err %v, cause %v; want ended with a cause of Do's own", ctx.Err(), context.Cause(ctx))
			}
		})
	})
}
