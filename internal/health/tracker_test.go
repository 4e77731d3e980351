package health

import (
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"
)

func newTestTracker(t *testing.T, cfg Config) (*Tracker, *fakeClock) {
	t.Helper()
	clk := newFakeClock()
	cfg.Now = clk.Now
	tr, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr, clk
}

func ok(d time.Duration) Outcome { return Outcome{Latency: d, Status: 200} }

func failed(kind string, status int) Outcome {
	return Outcome{Latency: time.Millisecond, Failure: true, Kind: kind, Status: status}
}

func TestTrackerConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"alpha above one", Config{Alpha: 1.5}},
		{"negative capacity", Config{Capacity: -1}},
		{"ejection rate above one", Config{EjectionErrorRate: 2}},
		{"max ejection below base", Config{BaseEjection: time.Minute, MaxEjection: time.Second}},
		{"negative sub-windows", Config{SubWindows: -3}},
		{"negative min requests", Config{EjectionMinRequests: -3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.cfg); !errors.Is(err, ErrInvalidConfig) {
				t.Errorf("New error = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := New(Config{}); err != nil {
		t.Errorf("New(zero config) = %v", err)
	}
}

func TestTrackerStatistics(t *testing.T) {
	tr, _ := newTestTracker(t, Config{Alpha: 0.5})
	if got := tr.Snapshot(); got.Headroom != 1 || got.ExpectedLatency != time.Second || got.P50 != 0 {
		t.Errorf("empty snapshot = %+v, want headroom 1, expected latency = prior 1s, no percentiles", got)
	}
	d1, d2 := tr.Begin(), tr.Begin()
	if got := tr.Snapshot().InFlight; got != 2 {
		t.Errorf("InFlight = %d, want 2", got)
	}
	d1(Outcome{Latency: 100 * time.Millisecond, TTFT: 20 * time.Millisecond})
	d2(Outcome{Latency: 200 * time.Millisecond, TTFT: 40 * time.Millisecond})
	tr.Begin()(failed("status", 500))
	tr.Begin()(Outcome{Latency: 300 * time.Millisecond})

	s := tr.Snapshot()
	// EWMA with alpha 0.5: 100 → 150 → 225ms.
	want := Snapshot{
		P50:             bucketMid(bucketOf(200 * time.Millisecond)),
		P95:             bucketMid(bucketOf(300 * time.Millisecond)),
		P99:             bucketMid(bucketOf(300 * time.Millisecond)),
		TTFTP50:         bucketMid(bucketOf(20 * time.Millisecond)),
		TTFTP95:         bucketMid(bucketOf(40 * time.Millisecond)),
		EWMA:            225 * time.Millisecond,
		ErrorRate:       0.25,
		ExpectedLatency: 300 * time.Millisecond, // 225ms / (1 - 0.25)
		Headroom:        1,
		Requests:        4,
	}
	if s != want {
		t.Errorf("Snapshot() (-got +want):\n-%+v\n+%+v", s, want)
	}
	if got := tr.ExpectedLatency(); got != want.ExpectedLatency {
		t.Errorf("ExpectedLatency() = %v, want %v", got, want.ExpectedLatency)
	}
}

func TestTrackerErrorRateCapped(t *testing.T) {
	tr, _ := newTestTracker(t, Config{EjectionErrorRate: -1})
	tr.Begin()(ok(100 * time.Millisecond))
	for range 99 {
		tr.Begin()(failed("status", 500))
	}
	if got, want := tr.ExpectedLatency(), time.Second; got != want {
		t.Errorf("ExpectedLatency() = %v, want %v (error rate capped at 0.9)", got, want)
	}
}

func TestQueueWait(t *testing.T) {
	tests := []struct {
		name     string
		capacity int
		learn    int // successes finished with this many in flight
		inflight int
		want     time.Duration
	}{
		{name: "one at a time learns capacity one", learn: 1, inflight: 5, want: 400 * time.Millisecond},
		{name: "configured capacity not reached", capacity: 4, learn: 1, inflight: 4, want: 0},
		{name: "configured capacity exceeded", capacity: 2, learn: 1, inflight: 5, want: 150 * time.Millisecond},
		{name: "learned capacity", learn: 4, inflight: 6, want: 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, _ := newTestTracker(t, Config{Capacity: tt.capacity})
			dones := make([]func(Outcome), tt.learn)
			for i := range dones {
				dones[i] = tr.Begin()
			}
			for _, d := range dones {
				d(ok(100 * time.Millisecond))
			}
			for range tt.inflight {
				tr.Begin()
			}
			s := tr.Snapshot()
			if s.QueueWait != tt.want {
				t.Errorf("QueueWait (-got +want):\n-%v\n+%v", s.QueueWait, tt.want)
			}
			if s.ExpectedLatency != 100*time.Millisecond+tt.want {
				t.Errorf("ExpectedLatency = %v, want EWMA + queue wait = %v", s.ExpectedLatency, 100*time.Millisecond+tt.want)
			}
		})
	}
}

func TestLearnedCapacityIgnoresSlowCompletions(t *testing.T) {
	tr, _ := newTestTracker(t, Config{})
	tr.Begin()(ok(100 * time.Millisecond))
	dones := make([]func(Outcome), 4)
	for i := range dones {
		dones[i] = tr.Begin()
	}
	for _, d := range dones {
		d(ok(time.Second)) // queued: more than twice the EWMA (100, 190, 271, 344ms)
	}
	if got := tr.learnedCap.Load(); got != 1 {
		t.Errorf("learned capacity = %d, want 1", got)
	}
}

func TestParseHeadroom(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		want   float64
		found  bool
	}{
		{name: "none", header: nil, want: 1},
		{name: "anthropic requests", header: map[string]string{"anthropic-ratelimit-requests-remaining": "25", "anthropic-ratelimit-requests-limit": "100"}, want: 0.25, found: true},
		{name: "anthropic tokens lower", header: map[string]string{
			"anthropic-ratelimit-requests-remaining": "90", "anthropic-ratelimit-requests-limit": "100",
			"anthropic-ratelimit-tokens-remaining": "1000", "anthropic-ratelimit-tokens-limit": "10000",
		}, want: 0.1, found: true},
		{name: "openai requests", header: map[string]string{"x-ratelimit-remaining-requests": "3", "x-ratelimit-limit-requests": "4"}, want: 0.75, found: true},
		{name: "openai tokens", header: map[string]string{"x-ratelimit-remaining-tokens": "0", "x-ratelimit-limit-tokens": "4000"}, want: 0, found: true},
		{name: "remaining without limit", header: map[string]string{"x-ratelimit-remaining-tokens": "5"}, want: 1},
		{name: "garbage", header: map[string]string{"x-ratelimit-remaining-requests": "many", "x-ratelimit-limit-requests": "4"}, want: 1},
		{name: "zero limit", header: map[string]string{"x-ratelimit-remaining-requests": "0", "x-ratelimit-limit-requests": "0"}, want: 1},
		{name: "remaining above limit clamps", header: map[string]string{"x-ratelimit-remaining-requests": "9", "x-ratelimit-limit-requests": "4"}, want: 1, found: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, found := parseHeadroom(h)
			if got != tt.want || found != tt.found {
				t.Errorf("parseHeadroom (-got +want):\n-%v %v\n+%v %v", got, found, tt.want, tt.found)
			}
		})
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{name: "none"},
		{name: "seconds", header: map[string]string{"retry-after": "1"}, want: time.Second, ok: true},
		{name: "fractional seconds", header: map[string]string{"retry-after": "0.5"}, want: 500 * time.Millisecond, ok: true},
		{name: "milliseconds win", header: map[string]string{"retry-after": "2", "retry-after-ms": "1500"}, want: 1500 * time.Millisecond, ok: true},
		{name: "http date", header: map[string]string{"retry-after": now.Add(30 * time.Second).Format(http.TimeFormat)}, want: 30 * time.Second, ok: true},
		{name: "date in the past", header: map[string]string{"retry-after": now.Add(-time.Minute).Format(http.TimeFormat)}},
		{name: "zero", header: map[string]string{"retry-after": "0"}},
		{name: "negative", header: map[string]string{"retry-after": "-4"}},
		{name: "garbage", header: map[string]string{"retry-after": "soon"}},
		{name: "bad ms falls back", header: map[string]string{"retry-after-ms": "x", "retry-after": "3"}, want: 3 * time.Second, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := ParseRetryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Errorf("ParseRetryAfter (-got +want):\n-%v %v\n+%v %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestTrackerHeadroom(t *testing.T) {
	tr, _ := newTestTracker(t, Config{})
	h := http.Header{}
	h.Set("anthropic-ratelimit-requests-remaining", "10")
	h.Set("anthropic-ratelimit-requests-limit", "40")
	tr.Begin()(Outcome{Latency: time.Millisecond, Header: h})
	tr.Begin()(Outcome{Latency: time.Millisecond, Header: http.Header{}}) // no rate-limit headers: keep the last value
	if got := tr.Snapshot().Headroom; got != 0.25 {
		t.Errorf("Headroom = %v, want 0.25", got)
	}
}

func TestTrackerCooldown(t *testing.T) {
	withHeader := func(o Outcome, k, v string) Outcome {
		o.Header = http.Header{}
		o.Header.Set(k, v)
		return o
	}
	tests := []struct {
		name    string
		outcome Outcome
		want    time.Duration // cooling period; 0 = none
	}{
		{name: "429 with retry-after field", outcome: Outcome{Failure: true, Status: 429, RetryAfter: time.Second}, want: time.Second},
		{name: "529 with retry-after-ms header", outcome: withHeader(Outcome{Failure: true, Status: 529}, "retry-after-ms", "750"), want: 750 * time.Millisecond},
		{name: "503 with retry-after header", outcome: withHeader(Outcome{Failure: true, Status: 503}, "retry-after", "2"), want: 2 * time.Second},
		{name: "429 without retry-after", outcome: Outcome{Failure: true, Status: 429}},
		{name: "500 with retry-after", outcome: Outcome{Failure: true, Status: 500, RetryAfter: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk := newTestTracker(t, Config{})
			start := clk.Now()
			tr.Begin()(tt.outcome)
			s := tr.Snapshot()
			if tt.want == 0 {
				if s.Cooling || !s.CoolingUntil.IsZero() || tr.Unavailable() != "" {
					t.Fatalf("cooling = %v until %v, unavailable %q; want none", s.Cooling, s.CoolingUntil, tr.Unavailable())
				}
				return
			}
			if !s.Cooling || !s.CoolingUntil.Equal(start.Add(tt.want)) {
				t.Errorf("cooling = %v until %v, want until %v", s.Cooling, s.CoolingUntil, start.Add(tt.want))
			}
			clk.Advance(tt.want - time.Nanosecond)
			if got := tr.Unavailable(); got != "cooling" {
				t.Errorf("Unavailable() just before the end = %q, want cooling", got)
			}
			clk.Advance(time.Nanosecond)
			if got := tr.Unavailable(); got != "" {
				t.Errorf("Unavailable() at the end = %q, want empty", got)
			}
		})
	}
}

func TestCooldownKeepsLatest(t *testing.T) {
	tr, clk := newTestTracker(t, Config{ConsecutiveGatewayFailures: -1, EjectionErrorRate: -1})
	start := clk.Now()
	tr.Begin()(Outcome{Failure: true, Status: 429, RetryAfter: 5 * time.Second})
	tr.Begin()(Outcome{Failure: true, Status: 429, RetryAfter: time.Second})
	if got := tr.Snapshot().CoolingUntil; !got.Equal(start.Add(5 * time.Second)) {
		t.Errorf("CoolingUntil = %v, want %v (a shorter retry-after does not shorten it)", got, start.Add(5*time.Second))
	}
}

func TestEjection(t *testing.T) {
	type step struct {
		advance time.Duration
		outcome Outcome
		count   int
	}
	tests := []struct {
		name  string
		cfg   Config
		steps []step
		want  time.Duration // ejected for, from the last step; 0 = not ejected
	}{
		{name: "three connect failures", steps: []step{{outcome: failed(KindConnect, 0), count: 3}}, want: 2 * time.Second},
		{name: "three 503s", steps: []step{{outcome: failed("status", 503), count: 3}}, want: 2 * time.Second},
		{name: "reset, timeout, 502", steps: []step{
			{outcome: failed(KindReset, 0), count: 1}, {outcome: failed(KindTimeout, 0), count: 1}, {outcome: failed("status", 502), count: 1},
		}, want: 2 * time.Second},
		{name: "two gateway failures", steps: []step{{outcome: failed(KindConnect, 0), count: 2}}},
		{name: "a success resets the run", steps: []step{
			{outcome: failed(KindConnect, 0), count: 2}, {outcome: ok(time.Millisecond), count: 1}, {outcome: failed(KindConnect, 0), count: 2},
		}},
		{name: "429s are not gateway failures", cfg: Config{EjectionErrorRate: -1}, steps: []step{{outcome: failed("status", 429), count: 5}}},
		{name: "error-rate spike", steps: []step{
			{outcome: ok(time.Millisecond), count: 5}, {outcome: failed("status", 500), count: 5},
		}, want: 2 * time.Second},
		{name: "error rate below minimum requests", steps: []step{
			{outcome: ok(time.Millisecond), count: 4}, {outcome: failed("status", 500), count: 5},
		}},
		{name: "consecutive disabled", cfg: Config{ConsecutiveGatewayFailures: -1}, steps: []step{{outcome: failed(KindConnect, 0), count: 9}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, clk := newTestTracker(t, tt.cfg)
			for _, s := range tt.steps {
				clk.Advance(s.advance)
				for range s.count {
					tr.Begin()(s.outcome)
				}
			}
			s := tr.Snapshot()
			if tt.want == 0 {
				if s.Ejected || tr.Unavailable() != "" {
					t.Fatalf("ejected until %v, want not ejected", s.EjectedUntil)
				}
				return
			}
			if want := clk.Now().Add(tt.want); !s.Ejected || !s.EjectedUntil.Equal(want) || tr.Unavailable() != "ejected" {
				t.Errorf("ejected = %v until %v, want until %v", s.Ejected, s.EjectedUntil, want)
			}
		})
	}
}

// TestEjectionGrows walks an endpoint through repeated ejections: each one
// lasts one BaseEjection longer up to MaxEjection, outcomes during an
// ejection are ignored, and the count starts over after a quiet MaxEjection.
func TestEjectionGrows(t *testing.T) {
	tr, clk := newTestTracker(t, Config{BaseEjection: time.Second, MaxEjection: 3 * time.Second})
	eject := func() {
		for range 3 {
			tr.Begin()(failed(KindConnect, 0))
		}
	}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second} {
		eject()
		if got := tr.Snapshot().EjectedUntil.Sub(clk.Now()); got != want {
			t.Fatalf("ejection %d lasts %v, want %v", i+1, got, want)
		}
		eject() // late failures while ejected change nothing
		clk.Advance(want - time.Nanosecond)
		if got := tr.Unavailable(); got != "ejected" {
			t.Fatalf("ejection %d: Unavailable() before the end = %q", i+1, got)
		}
		clk.Advance(time.Nanosecond)
		if got := tr.Unavailable(); got != "" {
			t.Fatalf("ejection %d: Unavailable() at the end = %q", i+1, got)
		}
		tr.Begin()(ok(time.Millisecond))
	}
	clk.Advance(3 * time.Second)
	eject()
	if got := tr.Snapshot().EjectedUntil.Sub(clk.Now()); got != time.Second {
		t.Errorf("ejection after a quiet period lasts %v, want 1s", got)
	}
}

func TestTrackerWindowExpiry(t *testing.T) {
	tr, clk := newTestTracker(t, Config{EjectionErrorRate: -1})
	tr.Begin()(ok(50 * time.Millisecond))
	tr.Begin()(failed("status", 500))
	clk.Advance(30 * time.Second)
	s := tr.Snapshot()
	if s.Requests != 0 || s.ErrorRate != 0 || s.P50 != 0 {
		t.Errorf("after the window: requests %d, error rate %v, p50 %v; want all zero", s.Requests, s.ErrorRate, s.P50)
	}
	if s.EWMA != 50*time.Millisecond {
		t.Errorf("EWMA = %v, want 50ms (the EWMA does not expire)", s.EWMA)
	}
}

func TestTrackerConcurrent(t *testing.T) {
	tr, _ := newTestTracker(t, Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 2000 {
				done := tr.Begin()
				if i%50 == 0 {
					tr.Snapshot()
				}
				done(Outcome{Latency: time.Duration(g+i) * time.Millisecond, Failure: i%10 == 9, Status: 500})
			}
		})
	}
	wg.Wait()
	s := tr.Snapshot()
	if s.InFlight != 0 || s.Requests != 16000 || math.Abs(s.ErrorRate-0.1) > 1e-9 {
		t.Errorf("in flight %d, requests %d, error rate %v; want 0, 16000, 0.1", s.InFlight, s.Requests, s.ErrorRate)
	}
}

func BenchmarkTrackerDone(b *testing.B) {
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(Config{Now: c.now})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				o := Outcome{Latency: 120 * time.Millisecond, TTFT: 30 * time.Millisecond, Status: 200}
				for pb.Next() {
					tr.Begin()(o)
				}
			})
		})
	}
}

func BenchmarkSnapshot(b *testing.B) {
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(Config{Now: c.now})
			if err != nil {
				b.Fatal(err)
			}
			for i := range 10000 {
				tr.Begin()(Outcome{Latency: time.Duration(i) * 50 * time.Microsecond, TTFT: time.Duration(i) * 5 * time.Microsecond})
			}
			b.ReportAllocs()
			for b.Loop() {
				tr.Snapshot()
			}
		})
	}
}

func BenchmarkExpectedLatency(b *testing.B) {
	for _, c := range benchClocks {
		b.Run(c.name, func(b *testing.B) {
			tr, err := New(Config{Now: c.now})
			if err != nil {
				b.Fatal(err)
			}
			tr.Begin()(ok(100 * time.Millisecond))
			b.ReportAllocs()
			for b.Loop() {
				tr.ExpectedLatency()
			}
		})
	}
}

func TestP95MatchesSnapshot(t *testing.T) {
	tr, _ := newTestTracker(t, Config{})
	for i := range 200 {
		done := tr.Begin()
		done(Outcome{Latency: time.Duration(i+1) * time.Millisecond, TTFT: time.Duration(i+1) * 100 * time.Microsecond, Status: 200})
	}
	s := tr.Snapshot()
	if got := tr.P95(false); got != s.P95 || got == 0 {
		t.Errorf("P95(false) = %v, Snapshot.P95 = %v", got, s.P95)
	}
	if got := tr.P95(true); got != s.TTFTP95 || got == 0 {
		t.Errorf("P95(true) = %v, Snapshot.TTFTP95 = %v", got, s.TTFTP95)
	}
}

// Another process's ejection and headroom, applied to this tracker.
func TestTrackerEjectAndHeadroom(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr, err := New(Config{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	tr.Eject(now.Add(2 * time.Second))
	tr.Eject(now.Add(time.Second)) // shorter: kept at 2s
	if got := tr.Unavailable(); got != "ejected" {
		t.Errorf("Unavailable after Eject (-got +want):\n-%q\n+%q", got, "ejected")
	}
	if ej, _ := tr.Until(); !ej.Equal(now.Add(2 * time.Second)) {
		t.Errorf("ejected until %v, want %v", ej, now.Add(2*time.Second))
	}
	for _, tt := range []struct{ set, want float64 }{{0.25, 0.25}, {-1, 0}, {7, 1}} {
		tr.SetHeadroom(tt.set)
		if got := tr.Headroom(); got != tt.want {
			t.Errorf("SetHeadroom(%v): Headroom (-got +want):\n-%v\n+%v", tt.set, got, tt.want)
		}
	}
}

// TestNoLatencyCountsOnlyOutcome: a token count's success dilutes the
// error rate but leaves the latency statistics as the model calls made
// them.
func TestNoLatencyCountsOnlyOutcome(t *testing.T) {
	tr, _ := newTestTracker(t, Config{Alpha: 0.5})
	tr.Begin()(ok(400 * time.Millisecond))
	tr.Begin()(failed("status", 500))
	tr.Begin()(Outcome{Latency: time.Millisecond, Status: 200, NoLatency: true})
	tr.Begin()(Outcome{Latency: time.Millisecond, Status: 200, NoLatency: true})
	s := tr.Snapshot()
	if s.EWMA != 400*time.Millisecond || s.P50 != bucketMid(bucketOf(400*time.Millisecond)) {
		t.Errorf("EWMA %v P50 %v, want the model call's 400ms alone", s.EWMA, s.P50)
	}
	if s.ErrorRate != 0.25 || s.Requests != 4 || s.InFlight != 0 {
		t.Errorf("error rate %v requests %d in flight %d, want 0.25, 4, 0", s.ErrorRate, s.Requests, s.InFlight)
	}
}

// A cancelled attempt's time to first token (a lower bound: a hedge race's
// loser before its first token) enters the TTFT histogram, as its latency
// enters the latency one, and nothing else.
func TestCancelledTTFTIsRecorded(t *testing.T) {
	tr, _ := newTestTracker(t, Config{})
	done := tr.Begin()
	done(Outcome{Cancelled: true, Latency: 300 * time.Millisecond, TTFT: 300 * time.Millisecond})
	s := tr.Snapshot()
	if p95 := tr.P95(true); p95 < 250*time.Millisecond || p95 != s.TTFTP95 {
		t.Errorf("TTFT p95 %v (snapshot %v), want the cancelled attempt's 300ms", p95, s.TTFTP95)
	}
	if s.Requests != 0 || s.EWMA != 0 {
		t.Errorf("requests %d, EWMA %v: a cancelled attempt counts in neither", s.Requests, s.EWMA)
	}
}
