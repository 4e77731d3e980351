package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ValveConfig tunes the mesh-aware safety valve: when the share of calls
// that needed a fallback passes Threshold over Window (with at least
// MinRequests calls), every call goes straight to its route's primary
// endpoint — one attempt, no retry, hedge, fallback or continuation — for
// Hold, and an alert is logged and posted to Webhook. Zero values are the
// defaults.
type ValveConfig struct {
	Disabled    bool
	Threshold   float64       // default 0.05
	Window      time.Duration // default 60s
	MinRequests int           // default 50
	Hold        time.Duration // default 30s
	Webhook     string
	// Post sends the webhook body; nil uses http.DefaultClient.
	Post func(ctx context.Context, url string, body []byte) error
}

// valve counts calls and fallbacks in one-second buckets. Its state is read
// on every call with one atomic load; counting takes a short lock.
type valve struct {
	cfg       ValveConfig
	openUntil atomic.Int64 // unix ns; 0 = closed

	mu      sync.Mutex // guards following
	buckets []valveBucket
	tripped bool
}

type valveBucket struct {
	sec       int64
	requests  int
	fallbacks int
}

func newValve(c ValveConfig) *valve {
	if c.Threshold == 0 {
		c.Threshold = 0.05
	}
	if c.Window <= 0 {
		c.Window = time.Minute
	}
	if c.MinRequests == 0 {
		c.MinRequests = 50
	}
	if c.Hold <= 0 {
		c.Hold = 30 * time.Second
	}
	n := int(c.Window / time.Second)
	if n < 1 {
		n = 1
	}
	return &valve{cfg: c, buckets: make([]valveBucket, n)}
}

// open reports whether calls must take the pass-through path now.
func (v *valve) open(now time.Time) bool {
	u := v.openUntil.Load()
	return u != 0 && now.UnixNano() < u
}

// ValveState is the safety valve's state for the admin API and dashboards.
type ValveState struct {
	Enabled      bool      `json:"enabled"`
	Open         bool      `json:"open"`
	OpenUntil    time.Time `json:"open_until,omitzero"`
	FallbackRate float64   `json:"fallback_rate"`
	Requests     int       `json:"window_requests"`
	Threshold    float64   `json:"threshold"`
}

// observe counts one finished call and trips or resets the valve. It
// returns an alert event name when the state changed.
func (v *valve) observe(now time.Time, fallback bool) (event string, rate float64, n int) {
	sec := now.Unix()
	v.mu.Lock()
	defer v.mu.Unlock()
	b := &v.buckets[sec%int64(len(v.buckets))]
	if b.sec != sec {
		*b = valveBucket{sec: sec}
	}
	b.requests++
	if fallback {
		b.fallbacks++
	}
	rate, n = v.rateLocked(sec)
	switch {
	case v.open(now):
	case n >= v.cfg.MinRequests && rate > v.cfg.Threshold:
		v.openUntil.Store(now.Add(v.cfg.Hold).UnixNano())
		v.tripped = true
		// Start the next judgement from a clean window.
		for i := range v.buckets {
			v.buckets[i] = valveBucket{}
		}
		return "safety_valve_open", rate, n
	case v.tripped:
		v.tripped = false
		return "safety_valve_closed", rate, n
	}
	return "", rate, n
}

func (v *valve) rateLocked(sec int64) (float64, int) {
	req, fb := 0, 0
	for _, b := range v.buckets {
		if b.sec > sec-int64(len(v.buckets)) && b.sec <= sec {
			req += b.requests
			fb += b.fallbacks
		}
	}
	if req == 0 {
		return 0, 0
	}
	return float64(fb) / float64(req), req
}

func (v *valve) state(now time.Time) ValveState {
	v.mu.Lock()
	rate, n := v.rateLocked(now.Unix())
	v.mu.Unlock()
	s := ValveState{Enabled: !v.cfg.Disabled, Open: v.open(now), FallbackRate: rate, Requests: n, Threshold: v.cfg.Threshold}
	if s.Open {
		s.OpenUntil = time.Unix(0, v.openUntil.Load())
	}
	return s
}

// Valve returns the safety valve's state.
func (e *Engine) Valve() ValveState { return e.valve.state(e.now()) }

// alert logs a valve transition and posts it to the webhook, off the
// request path.
func (e *Engine) alert(event string, rate float64, n int) {
	e.log.Warn("keel: "+event, "fallback_rate", rate, "window_requests", n, "threshold", e.valve.cfg.Threshold)
	url := e.valve.cfg.Webhook
	if url == "" || e.closed.Load() {
		return
	}
	body, _ := json.Marshal(map[string]any{"event": event, "fallback_rate": rate, "window_requests": n, "time": e.now().UTC()})
	post := e.valve.cfg.Post
	if post == nil {
		post = func(ctx context.Context, url string, body []byte) error {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return nil
		}
	}
	e.probes.Add(1)
	go func() {
		defer e.probes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := post(ctx, url, body); err != nil {
			e.log.Warn("keel: safety valve webhook failed", "err", err)
		}
	}()
}
