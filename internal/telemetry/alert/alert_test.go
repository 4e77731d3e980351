package alert

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/observe"
	"github.com/keelmesh/keel/internal/telemetry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.FixedZone("CEST", 2*3600))

var (
	opened = observe.ValveEvent{Event: observe.ValveEventOpen, FallbackRate: 0.0625, Requests: 112, Threshold: 0.05,
		OpenUntil: t0.Add(30 * time.Second), Time: t0}
	closed = observe.ValveEvent{Event: observe.ValveEventClosed, FallbackRate: 0, Requests: 3, Threshold: 0.05, Time: t0.Add(31 * time.Second)}
)

// hook is an httptest server that records the posts it gets.
type hook struct {
	*httptest.Server
	mu    sync.Mutex // guards following
	posts []string   // "content-type body"
}

func newHook(t *testing.T, status int) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.posts = append(h.posts, r.Method+" "+r.Header.Get("Content-Type")+" "+string(b))
		h.mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) got() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.posts...)
}

func newWebhook(t *testing.T, o Options) *Webhook {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func diff(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("%s (-got +want):\n-%s\n+%s", what, strings.Join(got, "\n-"), strings.Join(want, "\n+"))
	}
}

// TestPostsValveEvents: each event is posted, in order, with the body Keel
// has always sent (the time in UTC).
func TestPostsValveEvents(t *testing.T) {
	tests := []struct {
		name   string
		status int
		want   Stats
	}{
		{"accepted", http.StatusNoContent, Stats{Sent: 2}},
		{"refused", http.StatusInternalServerError, Stats{Failed: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHook(t, tt.status)
			w := newWebhook(t, Options{URL: h.URL + "/alerts", Client: h.Client()})
			w.OnValve(opened)
			w.OnValve(closed)
			if err := w.Shutdown(context.Background()); err != nil {
				t.Fatalf("Shutdown: %v", err)
			}
			diff(t, "posts", h.got(), []string{
				`POST application/json {"event":"safety_valve_open","fallback_rate":0.0625,"time":"2026-05-01T10:00:00Z","window_requests":112}`,
				`POST application/json {"event":"safety_valve_closed","fallback_rate":0,"time":"2026-05-01T10:00:31Z","window_requests":3}`,
			})
			if got := w.Stats(); got != tt.want {
				t.Errorf("Stats() (-got +want):\n-%+v\n+%+v", got, tt.want)
			}
		})
	}
}

// TestOnValveNeverBlocks: with the poster stuck on a slow webhook and the
// queue full, OnValve drops and counts instead of waiting.
func TestOnValveNeverBlocks(t *testing.T) {
	arrived, release := make(chan struct{}, 4), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-release
	}))
	defer srv.Close()
	w := newWebhook(t, Options{URL: srv.URL, Client: srv.Client(), QueueSize: 1})
	w.OnValve(opened)
	<-arrived         // the poster is inside the first post
	w.OnValve(closed) // queued
	w.OnValve(opened) // dropped
	w.OnValve(closed) // dropped
	if got, want := w.Stats(), (Stats{Dropped: 2}); got != want {
		t.Errorf("Stats() while stuck (-got +want):\n-%+v\n+%+v", got, want)
	}
	close(release)
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got, want := w.Stats(), (Stats{Sent: 2, Dropped: 2}); got != want {
		t.Errorf("Stats() after Shutdown (-got +want):\n-%+v\n+%+v", got, want)
	}
	w.OnValve(opened) // after Shutdown: dropped, no panic
	if got := w.Stats().Dropped; got != 3 {
		t.Errorf("Dropped after Shutdown = %d, want 3", got)
	}
}

// hang is a transport whose requests never answer: each waits for its
// context and reports when it ended.
type hang struct{ ended chan time.Time }

func (h hang) RoundTrip(r *http.Request) (*http.Response, error) {
	<-r.Context().Done()
	h.ended <- time.Now()
	return nil, r.Context().Err()
}

// TestTimeoutBoundsAPost: a webhook that never answers costs one Timeout,
// exactly, and counts as failed.
func TestTimeoutBoundsAPost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hang{make(chan time.Time, 1)}
		w := newWebhook(t, Options{URL: "http://alerts.example/hook", Timeout: 2 * time.Second, Client: &http.Client{Transport: h}})
		start := time.Now()
		w.OnValve(opened)
		if got := (<-h.ended).Sub(start); got != 2*time.Second {
			t.Errorf("post ended after %v, want 2s", got)
		}
		if err := w.Shutdown(context.Background()); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
		if got, want := w.Stats(), (Stats{Failed: 1}); got != want {
			t.Errorf("Stats() (-got +want):\n-%+v\n+%+v", got, want)
		}
	})
}

// TestShutdownGivesUp: Shutdown waits no longer than its context, cancels
// the post in flight and drops the queued events.
func TestShutdownGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := hang{make(chan time.Time, 1)}
		w := newWebhook(t, Options{URL: "https://alerts.example/hook", Timeout: time.Minute, Client: &http.Client{Transport: h}})
		w.OnValve(opened)
		w.OnValve(closed)
		synctest.Wait() // the first post is in flight
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := w.Shutdown(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Shutdown error = %v, want context.DeadlineExceeded", err)
		}
		if got := time.Since(start); got != time.Second {
			t.Errorf("Shutdown took %v, want 1s", got)
		}
		if got, want := w.Stats(), (Stats{Failed: 1, Dropped: 1}); got != want {
			t.Errorf("Stats() (-got +want):\n-%+v\n+%+v", got, want)
		}
		if err := w.Shutdown(context.Background()); err != nil {
			t.Errorf("second Shutdown: %v", err)
		}
	})
}

func TestNewRejectsBadOptions(t *testing.T) {
	tests := []struct {
		name string
		o    Options
	}{
		{"no URL", Options{}},
		{"relative URL", Options{URL: "/hook"}},
		{"not http", Options{URL: "ftp://alerts.example/hook"}},
		{"unparsable URL", Options{URL: "http://[::1"}},
		{"negative timeout", Options{URL: "http://alerts.example", Timeout: -time.Second}},
		{"negative queue", Options{URL: "http://alerts.example", QueueSize: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if w, err := New(tt.o); err == nil {
				w.Shutdown(context.Background())
				t.Fatal("New accepted the options")
			}
		})
	}
}

// TestReceivesValveEventsThroughMulti: composed with other observers, the
// Webhook still gets the engine's valve events.
func TestReceivesValveEventsThroughMulti(t *testing.T) {
	h := newHook(t, http.StatusOK)
	w := newWebhook(t, Options{URL: h.URL, Client: h.Client()})
	obs := telemetry.Multi(callrec.ObserverFunc(func(*callrec.Record) {}), w)
	vo, ok := obs.(observe.ValveObserver)
	if !ok {
		t.Fatalf("Multi's observer %T is not an observe.ValveObserver", obs)
	}
	vo.OnValve(opened)
	obs.RequestDone(&callrec.Record{})
	if err := w.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(h.got()); got != 1 {
		t.Errorf("%d posts, want 1", got)
	}
}
