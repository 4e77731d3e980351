package sim

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/keelmesh/keel/internal/inproc"
)

// cancelAt is a context that is cancelled at the moment its Err is called
// for the n-th time (its Done channel closes then): a deterministic way to
// cancel a handler in the middle of its work.
type cancelAt struct {
	context.Context
	mu    sync.Mutex
	n     int
	calls int
	done  chan struct{}
}

func newCancelAt(n int) *cancelAt {
	return &cancelAt{Context: context.Background(), n: n, done: make(chan struct{})}
}

func (c *cancelAt) Done() <-chan struct{} { return c.done }

func (c *cancelAt) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	if c.calls == c.n {
		close(c.done)
	}
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func (c *cancelAt) errCalls() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// headerRecorder records whether a handler answered at all.
type headerRecorder struct {
	h      http.Header
	status int
	body   strings.Builder
}

func (r *headerRecorder) Header() http.Header { return r.h }
func (r *headerRecorder) WriteHeader(s int) {
	if r.status == 0 {
		r.status = s
	}
}

func (r *headerRecorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.WriteString(string(b))
}

// A call whose context is cancelled while the fleet works through a
// 100,000-message request stops at the next look at its context (every
// checkEvery messages): the handler returns without answering and frees
// the call's accounting.
func TestSimCancelStopsGeneration(t *testing.T) {
	for _, format := range formats {
		t.Run(format.String(), func(t *testing.T) {
			f, err := New(withMaxMessages(ZeroLatency(), 100_000))
			if err != nil {
				t.Fatal(err)
			}
			body := manyMessagesBody(format, "sim-sonnet", 100_000)
			// The handler looks at its context once after reading the body;
			// cancelling at the third look is cancelling in the middle of
			// merging the messages.
			const at = 3
			ctx := newCancelAt(at)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+TransportHost+apiPath(format), strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Anthropic-Version", "2026-10-21")
			w := &headerRecorder{h: http.Header{}}
			f.Handler().ServeHTTP(w, req) // returns: the handler is done

			if w.status != 0 {
				t.Errorf("the handler answered %d %q to a cancelled call", w.status, w.body.String())
			}
			if got := ctx.errCalls(); got != at {
				t.Errorf("the handler looked at its context %d times, want %d: it went on after the cancellation", got, at)
			}
			st := f.Stats().Total
			if st.Requests != 1 || st.InFlight != 0 || len(st.ByStatus) != 0 || st.InputTokens != 0 {
				t.Errorf("stats = %+v, want one request, none in flight, no answer", st)
			}
		})
	}
}

// Through Transport, a call of 100,000 messages whose client gives up
// returns the context's error, and the handler behind it returns too
// (nothing left running once the bubble is idle), without answering.
func TestSimCancelledHugeRequestReturns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, err := New(withMaxMessages(DefaultConfig(), 100_000))
		if err != nil {
			t.Fatal(err)
		}
		handlerDone := make(chan struct{})
		var answered int
		tr := &inproc.Transport{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(handlerDone)
			rec := &headerRecorder{h: w.Header()}
			f.Handler().ServeHTTP(rec, r)
			answered = rec.status
		}), ResetError: errConnReset}
		client := &http.Client{Transport: tr}
		ctx, cancel := context.WithCancel(context.Background())
		body := manyMessagesBody(FormatOpenAI, "sim-sonnet", 100_000)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+TransportHost+apiPath(FormatOpenAI), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		cancel() // the client leaves before the fleet has done anything
		_, err = client.Do(req)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v, want context.Canceled", err)
		}
		synctest.Wait()
		select {
		case <-handlerDone:
		default:
			t.Fatal("the handler is still running after its client left")
		}
		if answered != 0 {
			t.Errorf("the handler answered %d to a cancelled call", answered)
		}
		if st := f.Stats().Total; st.InFlight != 0 || len(st.ByStatus) != 0 {
			t.Errorf("stats = %+v, want none in flight and no answer", st)
		}
	})
}
