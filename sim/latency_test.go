package sim

import (
	"context"
	"errors"
	"io"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

const (
	testTTFT     = 100 * time.Millisecond
	testPerToken = 2 * time.Millisecond
)

// oneEndpoint is a fleet of one model in one region with fixed latency.
func oneEndpoint(conc int) Config {
	return Config{
		Seed:    7,
		Models:  []ModelSpec{{Name: "m", Capability: 3, Regions: []string{"r"}}},
		Regions: []RegionSpec{{Name: "r", Latency: LatencySpec{Concurrency: conc, TTFT: Duration(testTTFT), PerToken: Duration(testPerToken)}}},
	}
}

// callDuration is how long a non-streaming call of the prompt takes.
func callDuration(cfg Config, prompt string) time.Duration {
	n := Answer(cfg, userReq("m", prompt)).Usage.OutputTokens
	return testTTFT + time.Duration(n)*testPerToken
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', -1, 64)
}

type timedResult struct {
	name  string
	took  time.Duration
	queue string
	err   error
}

// timedCall makes a non-streaming call and reports when it ended.
func timedCall(ctx context.Context, h harness, name, prompt string, start time.Time, out chan<- timedResult) {
	resp, err := h.post(ctx, FormatAnthropic, "", chatBody(FormatAnthropic, "m", prompt, false, ""))
	if err != nil {
		out <- timedResult{name: name, took: time.Since(start), err: err}
		return
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	out <- timedResult{name: name, took: time.Since(start), queue: resp.Header.Get("X-Sim-Queue-Ms"), err: err}
}

func TestQueueSecondCallWaitsForFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(1)
		f := mustNew(t, cfg)
		h := memHarness(f)
		d := callDuration(cfg, "same")
		start := time.Now()
		out := make(chan timedResult, 2)
		go timedCall(t.Context(), h, "a", "same", start, out)
		go timedCall(t.Context(), h, "b", "same", start, out)
		got := []timedResult{<-out, <-out}
		slices.SortFunc(got, func(a, b timedResult) int { return int(a.took - b.took) })
		if got[0].err != nil || got[1].err != nil {
			t.Fatal(got[0].err, got[1].err)
		}
		if got[0].took != d || got[0].queue != "0" {
			t.Errorf("first call took %v (queue %s ms), want %v (0)", got[0].took, got[0].queue, d)
		}
		if got[1].took != 2*d || got[1].queue != ms(d) {
			t.Errorf("second call took %v (queue %s ms), want %v (%s)", got[1].took, got[1].queue, 2*d, ms(d))
		}
		st, _ := f.Endpoint("m", "r")
		if st.Queued != 1 || st.QueueWait != Duration(d) || st.QueueWaitMax != Duration(d) {
			t.Errorf("queue stats %d %v %v, want 1 %v %v", st.Queued, st.QueueWait, st.QueueWaitMax, d, d)
		}
	})
}

func TestQueueIsFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(1)
		h := memHarness(mustNew(t, cfg))
		start := time.Now()
		out := make(chan timedResult, 3)
		prompts := map[string]string{"a": "first", "b": "second", "c": "third"}
		for _, name := range []string{"a", "b", "c"} {
			go timedCall(t.Context(), h, name, prompts[name], start, out)
			synctest.Wait() // the call holds the slot or waits in line
		}
		da, db, dc := callDuration(cfg, "first"), callDuration(cfg, "second"), callDuration(cfg, "third")
		want := []timedResult{{name: "a", took: da, queue: "0"}, {name: "b", took: da + db, queue: ms(da)}, {name: "c", took: da + db + dc, queue: ms(da + db)}}
		for i := range want {
			if got := <-out; got != want[i] {
				t.Errorf("call %d: got %+v, want %+v", i, got, want[i])
			}
		}
	})
}

func TestStreamTiming(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(0)
		h := memHarness(mustNew(t, cfg))
		n := Answer(cfg, userReq("m", "timing")).Usage.OutputTokens
		start := time.Now()
		resp, err := h.post(t.Context(), FormatOpenAI, "", chatBody(FormatOpenAI, "m", "timing", true, ""))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got := time.Since(start); got != testTTFT {
			t.Errorf("headers after %v, want the TTFT %v", got, testTTFT)
		}
		er := newEventReader(FormatOpenAI, resp.Body)
		for i := range n {
			readStream(FormatOpenAI, er, 1)
			if got, want := time.Since(start), testTTFT+time.Duration(i+1)*testPerToken; got != want {
				t.Fatalf("token %d at %v, want %v", i, got, want)
			}
		}
		if res := readStream(FormatOpenAI, er, -1); res.err != nil || res.deltas != 0 {
			t.Errorf("end of stream: %+v", res)
		}
		if got, want := time.Since(start), callDuration(cfg, "timing"); got != want {
			t.Errorf("stream took %v, want %v", got, want)
		}
	})
}

func TestCancelledClientFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(1)
		f := mustNew(t, cfg)
		h := memHarness(f)
		start := time.Now()
		out := make(chan timedResult, 3)
		ctxA, cancelA := context.WithCancel(t.Context())
		ctxB, cancelB := context.WithCancel(t.Context())
		go timedCall(ctxA, h, "a", "q", start, out)
		synctest.Wait()
		go timedCall(ctxB, h, "b", "q", start, out)
		synctest.Wait()
		if got := f.InFlight(); got != 2 {
			t.Fatalf("in flight %d, want 2", got)
		}
		// The waiting call gives up: it leaves the line at once.
		cancelB()
		synctest.Wait()
		if r := <-out; r.name != "b" || !errors.Is(r.err, context.Canceled) {
			t.Errorf("b: %+v, want cancelled", r)
		}
		if got := f.InFlight(); got != 1 {
			t.Errorf("in flight %d after b gave up, want 1", got)
		}
		go timedCall(t.Context(), h, "c", "q", start, out)
		time.Sleep(30 * time.Millisecond)
		// The slot holder gives up mid-TTFT: the slot goes to c at once.
		cancelA()
		synctest.Wait()
		if r := <-out; r.name != "a" || !errors.Is(r.err, context.Canceled) {
			t.Errorf("a: %+v, want cancelled", r)
		}
		d := callDuration(cfg, "q")
		if r := <-out; r.name != "c" || r.err != nil || r.queue != "30" || r.took != 30*time.Millisecond+d {
			t.Errorf("c: %+v, want queue 30 ms and done at %v", r, 30*time.Millisecond+d)
		}
		if got := f.InFlight(); got != 0 {
			t.Errorf("in flight %d at the end, want 0", got)
		}
	})
}

func TestClosedStreamFreesSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, oneEndpoint(1))
		h := memHarness(f)
		resp, err := h.post(t.Context(), FormatAnthropic, "", chatBody(FormatAnthropic, "m", "close me", true, ""))
		if err != nil {
			t.Fatal(err)
		}
		readStream(FormatAnthropic, newEventReader(FormatAnthropic, resp.Body), 2)
		resp.Body.Close()
		synctest.Wait()
		if got := f.InFlight(); got != 0 {
			t.Errorf("in flight %d after the client closed the stream, want 0", got)
		}
		st, _ := f.Endpoint("m", "r")
		if st.OutputTokens != 0 {
			t.Errorf("an unfinished stream counted %d output tokens", st.OutputTokens)
		}
	})
}

func TestHangUntilClientGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := mustNew(t, oneEndpoint(1))
		f.AddFault(Fault{Kind: KindHang, Count: 1})
		h := memHarness(f)
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		start := time.Now()
		_, err := h.post(ctx, FormatAnthropic, "", chatBody(FormatAnthropic, "m", "x", false, ""))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Hour {
			t.Errorf("err %v after %v, want deadline exceeded after 1h", err, time.Since(start))
		}
		synctest.Wait()
		if got := f.InFlight(); got != 0 {
			t.Errorf("in flight %d, want 0", got)
		}
	})
}

func TestSlowFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(0)
		f := mustNew(t, cfg)
		f.AddFault(Fault{Kind: KindSlow, Factor: 4, Count: 1})
		h := memHarness(f)
		d := callDuration(cfg, "slow")
		for i, want := range []time.Duration{4 * d, d} {
			out := make(chan timedResult, 1)
			timedCall(t.Context(), h, "x", "slow", time.Now(), out)
			if r := <-out; r.err != nil || r.took != want {
				t.Errorf("call %d took %v (%v), want %v", i, r.took, r.err, want)
			}
		}
	})
}

func TestHeavyTail(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(0)
		cfg.Regions[0].Latency.PerToken = 0
		cfg.Regions[0].Latency.TailProb = 0.05
		cfg.Regions[0].Latency.TailFactor = 20
		f := mustNew(t, cfg)
		h := memHarness(f)
		const n = 2000
		slow := 0
		for range n {
			out := make(chan timedResult, 1)
			timedCall(t.Context(), h, "x", "tail", time.Now(), out)
			switch r := <-out; r.took {
			case testTTFT:
			case 20 * testTTFT:
				slow++
			default:
				t.Fatalf("call took %v, want %v or %v", r.took, testTTFT, 20*testTTFT)
			}
		}
		st, _ := f.Endpoint("m", "r")
		if int64(slow) != st.TailHits {
			t.Errorf("slow calls %d, stats tail_hits %d", slow, st.TailHits)
		}
		if ratio := float64(slow) / n; ratio < 0.04 || ratio > 0.06 {
			t.Errorf("tail ratio %.4f, want 0.05 ± 0.01", ratio)
		}
	})
}

func TestLognormalTTFT(t *testing.T) {
	ep := &endpoint{lat: LatencySpec{TTFT: Duration(30 * time.Millisecond), TTFTSigma: 0.5}, rng: newRNG(1)}
	var ds []time.Duration
	for range 4001 {
		d, f := ep.draw(1, false, 0)
		if f != 1 {
			t.Fatalf("factor %v without a tail", f)
		}
		ds = append(ds, d)
	}
	slices.Sort(ds)
	if med := ds[len(ds)/2]; med < 28*time.Millisecond || med > 32*time.Millisecond {
		t.Errorf("median %v, want about 30ms", med)
	}
	// exp(0.5 × 1.645) ≈ 2.28: the 95th percentile is about 68ms.
	if p95 := ds[len(ds)*95/100]; p95 < 60*time.Millisecond || p95 > 76*time.Millisecond {
		t.Errorf("p95 %v, want about 68ms", p95)
	}
}

func TestConcurrencyLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(3)
		f := mustNew(t, cfg)
		h := memHarness(f)
		d := callDuration(cfg, "same")
		start := time.Now()
		out := make(chan timedResult, 7)
		var wg sync.WaitGroup
		for range 7 {
			wg.Go(func() { timedCall(t.Context(), h, "x", "same", start, out) })
		}
		wg.Wait()
		close(out)
		var took []time.Duration
		for r := range out {
			took = append(took, r.took)
		}
		slices.Sort(took)
		want := []time.Duration{d, d, d, 2 * d, 2 * d, 2 * d, 3 * d}
		if !slices.Equal(took, want) {
			t.Errorf("durations %v, want %v", took, want)
		}
	})
}

// With Config.RequestDraws a call's latency is its own: the same calls in
// another order draw the same, and a conversation's next call on the
// endpoint draws afresh (a hedge or a retry is a fresh draw), still
// lognormal about the median.
func TestRequestDrawsIgnoreArrivalOrder(t *testing.T) {
	lat := LatencySpec{TTFT: Duration(30 * time.Millisecond), TTFTSigma: 0.5, TailProb: 0.05, TailFactor: 20}
	order := func(hs ...uint64) map[[2]uint64]time.Duration {
		ep := &endpoint{name: "m@r", lat: lat, rng: newRNG(1)}
		got := map[[2]uint64]time.Duration{}
		seen := map[uint64]uint64{}
		for _, h := range hs {
			d, f := ep.draw(7, true, h)
			got[[2]uint64{h, seen[h]}] = time.Duration(float64(d) * f)
			seen[h]++
		}
		return got
	}
	a, b := order(1, 2, 1, 3), order(3, 1, 1, 2)
	if !maps.Equal(a, b) {
		t.Errorf("draws depend on arrival order: %v and %v", a, b)
	}
	if a[[2]uint64{1, 0}] == a[[2]uint64{1, 1}] {
		t.Errorf("a conversation's second call drew its first's %v", a[[2]uint64{1, 0}])
	}
	ep := &endpoint{name: "m@r", lat: LatencySpec{TTFT: lat.TTFT, TTFTSigma: 0.5}}
	var ds []time.Duration
	for h := range uint64(4001) {
		d, _ := ep.draw(7, true, h%97)
		ds = append(ds, d)
	}
	slices.Sort(ds)
	if med := ds[len(ds)/2]; med < 28*time.Millisecond || med > 32*time.Millisecond {
		t.Errorf("median %v, want about 30ms", med)
	}
}

// slow_start delays the first token only: a non-streaming call takes
// Factor × the time to first token plus the usual time per token.
func TestSlowStartFault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := oneEndpoint(0)
		f := mustNew(t, cfg)
		f.AddFault(Fault{Kind: KindSlowStart, Factor: 4, Count: 1})
		h := memHarness(f)
		d := callDuration(cfg, "slow")
		for i, want := range []time.Duration{d + 3*testTTFT, d} {
			out := make(chan timedResult, 1)
			timedCall(t.Context(), h, "x", "slow", time.Now(), out)
			if r := <-out; r.err != nil || r.took != want {
				t.Errorf("call %d took %v (%v), want %v", i, r.took, r.err, want)
			}
		}
	})
}
