// Package alert posts the safety valve's openings and closings to a
// webhook (resilience.safety_valve.webhook). A *Webhook is an
// observe.ValveObserver: OnValve runs on the request's goroutine, so it only
// queues the event — a bounded queue, an event arriving when it is full is
// dropped and counted — and one goroutine of the Webhook's own posts the
// queue in order, each post bounded by a timeout. The engine itself does
// no I/O for an alert.
//
// The body is the JSON object Keel has always sent:
//
//	{"event":"safety_valve_open","fallback_rate":0.062,"time":"2026-05-01T12:00:00Z","window_requests":113}
//
// with event safety_valve_open or safety_valve_closed and time in UTC.
//
// A Webhook is safe for concurrent use. Its goroutine runs from New until
// Shutdown.
package alert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/observe"
)

// Defaults for Options' zero values.
const (
	DefaultTimeout   = 5 * time.Second
	DefaultQueueSize = 16
)

// Options configure New. Only URL is required.
type Options struct {
	// URL receives a POST per valve event; it must be absolute http(s).
	URL string
	// Timeout bounds one post, from connecting to reading the answer's
	// status; 0 means DefaultTimeout.
	Timeout time.Duration
	// QueueSize bounds the events waiting to be posted; 0 means
	// DefaultQueueSize.
	QueueSize int
	// Client sends the posts; nil means http.DefaultClient.
	Client *http.Client
	// Logger receives failed posts and dropped events; nil discards.
	Logger *slog.Logger
}

// Stats counts what became of the events given to OnValve.
type Stats struct {
	// Sent were posted and answered with a 2xx status.
	Sent uint64
	// Failed were posted without a 2xx answer (an error, a timeout or
	// another status).
	Failed uint64
	// Dropped were never posted: the queue was full, or Shutdown had begun
	// or gave up on them.
	Dropped uint64
}

// Webhook is the safety valve's alert poster. See the package doc.
type Webhook struct {
	url     string
	timeout time.Duration
	client  *http.Client
	log     *slog.Logger

	queue chan observe.ValveEvent
	// base is the parent of every post's context; Shutdown cancels it
	// when its own context ends first.
	base   context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when the poster goroutine returns

	sent, failed, dropped atomic.Uint64

	// mu is taken once per valve event, never per request.
	mu     sync.Mutex // guards following
	closed bool       // queue is closed
}

// New validates o and starts the Webhook's poster goroutine; Shutdown
// stops it.
func New(o Options) (*Webhook, error) {
	u, err := url.Parse(o.URL)
	switch {
	case o.URL == "":
		return nil, errors.New("alert: empty webhook URL")
	case err != nil:
		return nil, fmt.Errorf("alert: webhook URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("alert: webhook URL %q is not an absolute http or https URL", o.URL)
	case o.Timeout < 0:
		return nil, fmt.Errorf("alert: negative timeout %v", o.Timeout)
	case o.QueueSize < 0:
		return nil, fmt.Errorf("alert: negative queue size %d", o.QueueSize)
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Client == nil {
		o.Client = http.DefaultClient
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Webhook{url: o.URL, timeout: o.Timeout, client: o.Client, log: o.Logger,
		queue: make(chan observe.ValveEvent, o.QueueSize), done: make(chan struct{})}
	w.base, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// RequestDone does nothing: a Webhook is an callrec.Observer only to be
// composed with the others (telemetry.Multi) for its OnValve.
func (w *Webhook) RequestDone(*callrec.Record) {}

// OnValve queues ev for posting and returns at once; when the queue is
// full, or Shutdown has begun, ev is dropped and counted.
func (w *Webhook) OnValve(ev observe.ValveEvent) {
	w.mu.Lock()
	closed := w.closed
	if !closed {
		select {
		case w.queue <- ev:
			w.mu.Unlock()
			return
		default:
		}
	}
	w.mu.Unlock()
	w.dropped.Add(1)
	w.log.Warn("keel: safety valve webhook: event dropped", "event", ev.Event, "shut_down", closed)
}

// Stats returns the counts so far.
func (w *Webhook) Stats() Stats {
	return Stats{Sent: w.sent.Load(), Failed: w.failed.Load(), Dropped: w.dropped.Load()}
}

// Shutdown stops taking events and waits for the queued ones to be posted.
// If ctx ends first it cancels the post in flight, drops the rest, waits
// for the poster goroutine to return and returns ctx's error. Calling it
// again returns at once.
func (w *Webhook) Shutdown(ctx context.Context) error {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	defer w.cancel()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		w.cancel()
		<-w.done
		return ctx.Err()
	}
}

func (w *Webhook) run() {
	defer close(w.done)
	for ev := range w.queue {
		if w.base.Err() != nil {
			w.dropped.Add(1) // Shutdown gave up
			continue
		}
		if err := w.post(ev); err != nil {
			w.failed.Add(1)
			w.log.Warn("keel: safety valve webhook failed", "event", ev.Event, "err", err)
			continue
		}
		w.sent.Add(1)
	}
}

// payload is the webhook body. Its fields are in the order encoding/json
// gave the map Keel used to send (sorted keys), so the bytes are unchanged.
type payload struct {
	Event          string    `json:"event"`
	FallbackRate   float64   `json:"fallback_rate"`
	Time           time.Time `json:"time"`
	WindowRequests int       `json:"window_requests"`
}

// maxDrain bounds how much of an answer's body is read before closing it,
// so the connection can be reused.
const maxDrain = 4 << 10

func (w *Webhook) post(ev observe.ValveEvent) error {
	body, err := json.Marshal(payload{Event: ev.Event, FallbackRate: ev.FallbackRate, Time: ev.Time.UTC(), WindowRequests: ev.Requests})
	if err != nil {
		return fmt.Errorf("encoding body: %w", err)
	}
	ctx, cancel := context.WithTimeout(w.base, w.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := w.client.Do(req)
	if err != nil {
		return fmt.Errorf("posting: %w", err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("webhook answered %s", resp.Status)
	}
	return nil
}
