package dashboard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/health"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/sse"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func rec(fallback string) *callrec.Record {
	r := &callrec.Record{Call: callrec.Call{RequestID: "r", Model: "claude-sonnet"},
		Route: callrec.Route{ServedBy: "claude-sonnet/eu-west/anthropic"}, Result: callrec.Result{Status: 200}}
	r.Fallback = fallback
	return r
}

func f(v float64) *float64 { return &v }

func TestSnapshotRates(t *testing.T) {
	cases := []struct {
		name  string
		feed  func(d *Dashboard, c *clock)
		want  Rates
		reqs  int
		falls int
	}{
		{"empty window", func(*Dashboard, *clock) {}, Rates{}, 0, 0},
		{"7 fallbacks in 100", func(d *Dashboard, c *clock) {
			for i := range 100 {
				r := rec("")
				if i%14 == 3 {
					r = rec("overloaded")
				}
				d.RequestDone(r)
			}
		}, Rates{FallbackRate: f(0.07), NormalizationOffset: f(0), QueueWaitP95MS: f(0)}, 100, 7},
		{"offset, fragments, fusions, queue wait", func(d *Dashboard, c *clock) {
			for i := range 20 {
				r := rec("")
				r.Normalization = &callrec.Normalization{Offset: -0.25}
				r.Fragments = &callrec.Fragments{Count: 4, OK: 3, Fusions: 10, FusionConflicts: 1}
				r.QueueWait = 3 * time.Millisecond
				if i == 19 {
					r.QueueWait = 400 * time.Millisecond
				}
				d.RequestDone(r)
			}
		}, Rates{FallbackRate: f(0), NormalizationOffset: f(0.25), FragmentSuccessRate: f(0.75), FusionConflictRate: f(0.1), QueueWaitP95MS: f(5)}, 20, 0},
		{"old seconds leave the window", func(d *Dashboard, c *clock) {
			for range 10 {
				d.RequestDone(rec("overloaded"))
			}
			c.advance(61 * time.Second)
			for range 4 {
				d.RequestDone(rec(""))
			}
		}, Rates{FallbackRate: f(0), NormalizationOffset: f(0), QueueWaitP95MS: f(0)}, 4, 0},
		{"the window spans seconds", func(d *Dashboard, c *clock) {
			for range 10 {
				d.RequestDone(rec("overloaded"))
				c.advance(5 * time.Second)
			}
			for range 10 {
				d.RequestDone(rec(""))
			}
		}, Rates{FallbackRate: f(0.5), NormalizationOffset: f(0), QueueWaitP95MS: f(0)}, 20, 10},
		{"errors have no offset", func(d *Dashboard, c *clock) {
			r := rec("timeout")
			r.Err = &llm.APIError{Status: 504}
			d.RequestDone(r)
		}, Rates{FallbackRate: f(1), QueueWaitP95MS: f(0)}, 1, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			clk := &clock{t: t0}
			d, err := New(Options{Now: clk.now})
			if err != nil {
				t.Fatal(err)
			}
			c.feed(d, clk)
			s := d.Snapshot()
			if s.Requests != c.reqs || s.Fallbacks != c.falls {
				t.Errorf("requests %d fallbacks %d, want %d %d", s.Requests, s.Fallbacks, c.reqs, c.falls)
			}
			got, _ := json.Marshal(s.Rates)
			want, _ := json.Marshal(c.want)
			if !bytes.Equal(got, want) {
				t.Errorf("rates (-got +want):\n-%s\n+%s", got, want)
			}
		})
	}
}

func TestRecentFallbacksNewestFirst(t *testing.T) {
	d, err := New(Options{RecentFallbacks: 3})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		r := rec("overloaded")
		r.RequestID = id
		d.RequestDone(r)
		d.RequestDone(rec("")) // not a fallback
	}
	var ids []string
	for _, fb := range d.Snapshot().Recent {
		ids = append(ids, fb.RequestID)
	}
	if strings.Join(ids, ",") != "e,d,c" {
		t.Errorf("recent = %v, want e,d,c", ids)
	}
	if _, err := New(Options{Window: -1}); err == nil {
		t.Error("New accepted a negative window")
	}
}

// Issue 13, seen 6: the state is the engine's (a down endpoint showed
// healthy), and an idle endpoint has no p95 or error rate rather than 0.
func TestSnapshotEndpoints(t *testing.T) {
	d, _ := New(Options{Endpoints: func() []fleet.Status {
		return []fleet.Status{
			{ID: "m/us-east/p", Model: "m", Region: "us-east", Provider: "p", State: fleet.StateDown, Breaker: "closed",
				Health: health.Snapshot{P95: 1500 * time.Microsecond, InFlight: 3, ErrorRate: 1, Requests: 8, Headroom: 0.5}},
			{ID: "m/eu-west/p", Model: "m", Region: "eu-west", Provider: "p", State: fleet.StateHealthy, Breaker: "closed",
				Health: health.Snapshot{Headroom: 1}},
		}
	}})
	got, _ := json.Marshal(d.Snapshot().Endpoints)
	want := `[{"id":"m/us-east/p","model":"m","region":"us-east","provider":"p","state":"down","breaker":"closed","p95_ms":1.5,"in_flight":3,"error_rate":1,"ejected":false,"cooling":false,"headroom":0.5},` +
		`{"id":"m/eu-west/p","model":"m","region":"eu-west","provider":"p","state":"healthy","breaker":"closed","p95_ms":null,"in_flight":0,"error_rate":null,"ejected":false,"cooling":false,"headroom":1}]`
	if string(got) != want {
		t.Errorf("endpoints (-got +want):\n-%s\n+%s", got, want)
	}
}

// streamWriter is a ResponseWriter the handler's goroutine writes and the
// test reads.
type streamWriter struct {
	mu     sync.Mutex // guards following
	h      http.Header
	buf    bytes.Buffer
	code   int
	writes int
}

func (w *streamWriter) Header() http.Header { return w.h }
func (w *streamWriter) WriteHeader(c int)   { w.mu.Lock(); w.code = c; w.mu.Unlock() }
func (w *streamWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(b)
}
func (w *streamWriter) Flush() { w.mu.Lock(); w.writes++; w.mu.Unlock() }

// events parses the snapshots written so far.
func (w *streamWriter) events(t *testing.T) []Snapshot {
	t.Helper()
	w.mu.Lock()
	data := append([]byte(nil), w.buf.Bytes()...)
	w.mu.Unlock()
	r := sse.NewReader(bytes.NewReader(data))
	var out []Snapshot
	for {
		ev, err := r.Next()
		if err != nil {
			return out
		}
		if ev.Event != "snapshot" {
			t.Errorf("event %q, want snapshot", ev.Event)
		}
		var s Snapshot
		if err := json.Unmarshal(ev.Data, &s); err != nil {
			t.Fatalf("event data: %v", err)
		}
		out = append(out, s)
	}
}

// In virtual time: a snapshot at once, one every 500ms, one soon after a
// change (rate-limited to one per 100ms), and the stream ends with the
// client.
func TestEventCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := New(Options{})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		w := &streamWriter{h: http.Header{}}
		done := make(chan struct{})
		go func() {
			d.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/dashboard/events", nil).WithContext(ctx))
			close(done)
		}()
		synctest.Wait()
		steps := []struct {
			name string
			do   func()
			want int // snapshots so far
		}{
			{"first snapshot at once", func() {}, 1},
			{"nothing before the interval", func() { time.Sleep(499 * time.Millisecond) }, 1},
			{"periodic push at 500ms", func() { time.Sleep(time.Millisecond) }, 2},
			{"change right after a push waits out the gap", func() { d.RequestDone(rec("overloaded")) }, 2},
			{"change pushed 100ms after the last push", func() { time.Sleep(100 * time.Millisecond) }, 3},
			{"many changes are coalesced", func() {
				for range 50 {
					d.RequestDone(rec(""))
				}
				time.Sleep(100 * time.Millisecond)
			}, 4},
			{"periodic push continues", func() { time.Sleep(300 * time.Millisecond) }, 5},
		}
		for _, s := range steps {
			s.do()
			synctest.Wait()
			if got := len(w.events(t)); got != s.want {
				t.Fatalf("%s: %d snapshots, want %d", s.name, got, s.want)
			}
		}
		ev := w.events(t)
		if r := ev[2].Rates.FallbackRate; r == nil || *r != 1 {
			t.Errorf("change push fallback rate %v, want 1", r)
		}
		if ev[3].Requests != 51 {
			t.Errorf("coalesced push saw %d requests, want 51", ev[3].Requests)
		}
		if ct := w.h.Get("Content-Type"); ct != "text/event-stream" {
			t.Errorf("Content-Type %q", ct)
		}
		if d.nsubs.Load() != 1 {
			t.Errorf("%d subscribers, want 1", d.nsubs.Load())
		}
		cancel()
		<-done
		if d.nsubs.Load() != 0 {
			t.Errorf("%d subscribers after the client left, want 0", d.nsubs.Load())
		}
	})
}

// Over a real connection: the stream flushes its first event and its
// goroutines end when the client goes away (goleak checks in TestMain).
func TestEventsOverHTTP(t *testing.T) {
	d, _ := New(Options{Interval: 20 * time.Millisecond})
	srv := httptest.NewServer(d.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/dashboard/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := sse.NewReader(bufio.NewReader(resp.Body))
	for i := range 3 {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if ev.Event != "snapshot" || !bytes.Contains(ev.Data, []byte(`"rates"`)) {
			t.Errorf("event %d = %+v", i, ev)
		}
	}
	cancel()
}

func TestPage(t *testing.T) {
	d, _ := New(Options{})
	cases := []struct {
		name, method, path string
		status             int
	}{
		{"page", http.MethodGet, "/dashboard", http.StatusOK},
		{"head", http.MethodHead, "/dashboard", http.StatusOK},
		{"post", http.MethodPost, "/dashboard", http.StatusMethodNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rr := httptest.NewRecorder()
			d.Handler().ServeHTTP(rr, httptest.NewRequest(c.method, c.path, nil))
			if rr.Code != c.status {
				t.Errorf("status %d, want %d", rr.Code, c.status)
			}
		})
	}
	rr := httptest.NewRecorder()
	d.Handler().ServeHTTP(rr, httptest.NewRequest(http.MethodGet, "/dashboard", nil))
	body := rr.Body.String()
	if !strings.HasPrefix(rr.Header().Get("Content-Type"), "text/html") {
		t.Errorf("Content-Type %q", rr.Header().Get("Content-Type"))
	}
	// Self-contained: no external scripts, styles, images or fonts.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:)?//|@import|url\(`).FindString(body); m != "" {
		t.Errorf("page references an external asset: %q", m)
	}
	for _, id := range []string{"rate-fallback", "rate-offset", "rate-fragment", "rate-conflict", "rate-queue", "endpoints", "fallbacks"} {
		if !strings.Contains(body, `id="`+id+`"`) {
			t.Errorf("page lacks #%s", id)
		}
	}
}

func BenchmarkRequestDone(b *testing.B) {
	d, _ := New(Options{})
	r := rec("overloaded")
	b.ReportAllocs()
	for b.Loop() {
		d.RequestDone(r)
	}
}

// Issue 13, seen 6: nothing was plotted over time. History holds the
// last 15 minutes in 10-second steps from the dashboard's start: calls,
// errors, fallback rate (nil without calls) and p50/p99 per served model.
func TestHistory(t *testing.T) {
	clk := &clock{t: t0}
	d, _ := New(Options{Now: clk.now})
	for i := range 10 {
		r := rec("")
		r.ServedModel = "sonnet"
		r.Duration = time.Duration(100+i) * time.Millisecond
		if i == 9 {
			r.Duration = 2 * time.Second
			r.Fallback = "overloaded"
		}
		d.RequestDone(r)
	}
	clk.advance(25 * time.Second)
	e := rec("timeout")
	e.Err = &llm.APIError{Status: 504}
	d.RequestDone(e)
	got, _ := json.Marshal(d.Snapshot().History)
	want := `[{"time":"2026-05-01T12:00:00Z","calls":10,"errors":0,"fallback_rate":0.1,"latency":{"sonnet":{"p50_ms":107.63,"p99_ms":2048}}},` +
		`{"time":"2026-05-01T12:00:10Z","calls":0,"errors":0,"fallback_rate":null,"latency":{}},` +
		`{"time":"2026-05-01T12:00:20Z","calls":1,"errors":1,"fallback_rate":1,"latency":{}}]`
	if string(got) != want {
		t.Errorf("history (-got +want):\n-%s\n+%s", got, want)
	}
	clk.advance(20 * time.Minute)
	if h := d.Snapshot().History; len(h) != historyLen || h[0].Calls != 0 || h[len(h)-1].Calls != 0 {
		t.Errorf("after 20 idle minutes: %d steps, first %+v", len(h), h[0])
	}
}

// TestSpendByModelKeyAndTeam: the dashboard shows what calls cost since it
// started, by served model, virtual key and team (issue 17: spend in the
// dashboard), dearest first, with a total; calls without a key count under
// an empty key, and past maxSpendRows new combinations go to "other".
func TestSpendByModelKeyAndTeam(t *testing.T) {
	d, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []*callrec.Record{
		{Call: callrec.Call{KeyID: "k1", Team: "search"}, Route: callrec.Route{ServedModel: "sim-opus"}, Result: callrec.Result{Cost: 0.25}},
		{Call: callrec.Call{KeyID: "k1", Team: "search"}, Route: callrec.Route{ServedModel: "sim-opus"}, Result: callrec.Result{Cost: 0.5}},
		{Call: callrec.Call{KeyID: "k2", Team: "ads"}, Route: callrec.Route{ServedModel: "sim-haiku"}, Result: callrec.Result{Cost: 0.125}},
		{Route: callrec.Route{ServedModel: "sim-haiku"}, Result: callrec.Result{Cost: 0.0625}},
		{Call: callrec.Call{Model: "sim-sonnet"}, Result: callrec.Result{Err: &llm.APIError{Status: 502}, Cost: 0.03125}}, // failed, still paid for
		{Call: callrec.Call{KeyID: "k2", Team: "ads"},
			Route: callrec.Route{ServedModel: "sim-haiku"}}, // a cache hit: nothing spent
	} {
		d.RequestDone(r)
	}
	s := d.Snapshot()
	want := []Spend{
		{Model: "sim-opus", Key: "k1", Team: "search", Calls: 2, USD: 0.75},
		{Model: "sim-haiku", Key: "k2", Team: "ads", Calls: 1, USD: 0.125},
		{Model: "sim-haiku", Calls: 1, USD: 0.0625},
		{Model: "sim-sonnet", Calls: 1, USD: 0.03125},
	}
	if !reflect.DeepEqual(s.Spend, want) {
		t.Errorf("spend (-got +want):\n-%+v\n+%+v", s.Spend, want)
	}
	if s.SpendUSD != 0.96875 {
		t.Errorf("total %v, want 0.96875", s.SpendUSD)
	}
	for i := range maxSpendRows + 10 {
		d.RequestDone(&callrec.Record{Call: callrec.Call{KeyID: fmt.Sprint("key-", i)}, Route: callrec.Route{ServedModel: "m"}, Result: callrec.Result{Cost: 1}})
	}
	s = d.Snapshot()
	if len(s.Spend) != maxSpendRows+1 {
		t.Errorf("%d rows, want %d (the cap and other)", len(s.Spend), maxSpendRows+1)
	}
	var other float64
	for _, p := range s.Spend {
		if p.Model == "other" {
			other = p.USD
		}
	}
	if want := float64(maxSpendRows + 10 - (maxSpendRows - 4)); other != want {
		t.Errorf("other row %v, want %v", other, want)
	}
}
