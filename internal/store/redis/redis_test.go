package redis

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/fleet"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
)

// Every test leaves no goroutine behind: Close ends the subscriber, the
// writer and go-redis's pools.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// replica is a Store started with an apply that records observations.
type replica struct {
	*Store
	got chan fleet.Observation
}

func newReplica(t *testing.T, url string, current ...fleet.Observation) *replica {
	t.Helper()
	st, err := New(config.Redis{URL: config.Secret(url), KeyPrefix: "test:"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Store: st, got: make(chan fleet.Observation, 64)}
	st.Start(func(o fleet.Observation) { r.got <- o }, func() []fleet.Observation { return current })
	t.Cleanup(func() { st.Close() })
	return r
}

// waitFor polls cond every millisecond until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", d, what)
		}
		time.Sleep(time.Millisecond)
	}
}

// next returns the next observation r applies, failing after d.
func (r *replica) next(t *testing.T, d time.Duration) fleet.Observation {
	t.Helper()
	select {
	case o := <-r.got:
		return o
	case <-time.After(d):
		t.Fatalf("no observation within %v", d)
		return fleet.Observation{}
	}
}

func TestObservationReachesTheOtherReplicasOnly(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newReplica(t, srv.URL()), newReplica(t, srv.URL())
	waitFor(t, 5*time.Second, "both replicas linked", func() bool { return a.Up() && b.Up() })
	until := time.Now().Add(time.Second).Truncate(time.Millisecond)
	start := time.Now()
	a.Publish(fleet.Observation{Endpoint: "m/eu/p", Kind: fleet.ObsCooling, Until: until})
	got := b.next(t, time.Second)
	lag := time.Since(start)
	want := fleet.Observation{Endpoint: "m/eu/p", Kind: fleet.ObsCooling, Until: until}
	if got.Endpoint != want.Endpoint || got.Kind != want.Kind || !got.Until.Equal(want.Until) {
		t.Errorf("b applied %+v, want %+v", got, want)
	}
	if lag > 100*time.Millisecond {
		t.Errorf("the observation took %v to arrive, want milliseconds", lag)
	}
	select {
	case o := <-a.got:
		t.Errorf("a applied its own observation %+v", o)
	case <-time.After(50 * time.Millisecond):
	}
	t.Logf("published to applied: %v", lag)
}

func TestLateReplicaReadsTheFleetState(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, srv.URL())
	waitFor(t, 5*time.Second, "a linked", a.Up)
	until := time.Now().Add(10 * time.Second).Truncate(time.Millisecond)
	for _, o := range []fleet.Observation{
		{Endpoint: "m/us/p", Kind: fleet.ObsDown},
		{Endpoint: "m/eu/p", Kind: fleet.ObsCooling, Until: until},
		{Endpoint: "m/eu/p", Kind: fleet.ObsEjected, Until: time.Now().Add(-time.Second)}, // over: not applied
		{Endpoint: "m/ap/p", Kind: fleet.ObsBreakerOpen, Until: until},
		{Endpoint: "m/ap/p", Kind: fleet.ObsBreakerClosed},
	} {
		a.Publish(o)
	}
	ctx := context.Background()
	waitFor(t, 5*time.Second, "state written", func() bool {
		v, _ := a.client.HGet(ctx, "test:ep:m/ap/p", fOpen).Result()
		return v == "0"
	})
	start := time.Now()
	c := newReplica(t, srv.URL())
	got := map[string]fleet.Observation{}
	for range 2 {
		o := c.next(t, time.Second)
		got[o.Endpoint+" "+string(o.Kind)] = o
	}
	if o, ok := got["m/us/p down"]; !ok {
		t.Errorf("the late replica did not learn m/us/p is down: %v", got)
	} else if o.Kind != fleet.ObsDown {
		t.Errorf("got %+v", o)
	}
	if o := got["m/eu/p cooling"]; !o.Until.Equal(until) {
		t.Errorf("cooling until %v, want %v", o.Until, until)
	}
	select {
	case o := <-c.got:
		t.Errorf("the late replica applied %+v: an ejection over, or a breaker closed since", o)
	case <-time.After(50 * time.Millisecond):
	}
	t.Logf("late replica converged in %v", time.Since(start))
}

func TestLeaseIsOneBucketForEveryReplica(t *testing.T) {
	srv := redistest.Start(t)
	a, b := newReplica(t, srv.URL()), newReplica(t, srv.URL())
	ctx := context.Background()
	tests := []struct {
		name    string
		r       *replica
		lease   fleet.Lease
		granted int64
	}{
		{"a new bucket starts full", a, fleet.Lease{Key: "retry/m", Want: 3000, Burst: 5000}, 3000},
		{"the other replica gets the rest", b, fleet.Lease{Key: "retry/m", Want: 3000, Burst: 5000}, 2000},
		{"empty", a, fleet.Lease{Key: "retry/m", Want: 1000, Burst: 5000}, 0},
		{"deposits refill it", b, fleet.Lease{Key: "retry/m", Deposit: 1500, Want: 1000, Burst: 5000}, 1000},
		{"what is left", a, fleet.Lease{Key: "retry/m", Want: 1000, Burst: 5000}, 500},
		{"deposits stop at the burst", a, fleet.Lease{Key: "retry/m", Deposit: 99000, Burst: 5000}, 0},
		{"a take comes out of the deposit before the burst applies", a, fleet.Lease{Key: "retry/m", Deposit: 4000, Want: 8000, Burst: 5000}, 8000},
		{"and the rest is capped", b, fleet.Lease{Key: "retry/m", Deposit: 4000, Want: 9000, Burst: 5000}, 5000},
		{"full again", b, fleet.Lease{Key: "retry/m", Deposit: 5000, Want: 5000, Burst: 5000}, 5000},
		{"and empty", b, fleet.Lease{Key: "retry/m", Want: 1, Burst: 5000}, 0},
		{"another key is another bucket", a, fleet.Lease{Key: "hedge/m", Want: 1000, Burst: 2000}, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ls := []fleet.Lease{tt.lease}
			if err := tt.r.Lease(ctx, ls); err != nil {
				t.Fatal(err)
			}
			if ls[0].Granted != tt.granted {
				t.Errorf("granted %d, want %d", ls[0].Granted, tt.granted)
			}
		})
	}
}

// Redis killed: the store reports down, refuses leases at once, drops
// observations; restarted: it links again, and this replica's current
// state reaches the others.
func TestRedisDownAndBack(t *testing.T) {
	srv := redistest.Start(t)
	until := time.Now().Add(time.Minute).Truncate(time.Millisecond)
	a := newReplica(t, srv.URL(), fleet.Observation{Endpoint: "m/eu/p", Kind: fleet.ObsCooling, Until: until})
	b := newReplica(t, srv.URL())
	waitFor(t, 5*time.Second, "both linked", func() bool { return a.Up() && b.Up() })
	for len(b.got) > 0 {
		<-b.got // a's state published when it linked
	}
	srv.Kill()
	waitFor(t, 3*time.Second, "a reports Redis down", func() bool { return !a.Up() })
	ctx := context.Background()
	start := time.Now()
	if err := a.Lease(ctx, []fleet.Lease{{Key: "retry/m", Want: 1000, Burst: 5000}}); err == nil {
		t.Error("a lease succeeded with Redis down")
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("a failed lease took %v", d)
	}
	before := a.Dropped()
	a.Publish(fleet.Observation{Endpoint: "m/us/p", Kind: fleet.ObsDown})
	waitFor(t, time.Second, "the observation published while down counted as dropped", func() bool { return a.Dropped() > before })
	srv.Restart()
	waitFor(t, 5*time.Second, "both linked again", func() bool { return a.Up() && b.Up() })
	o := b.next(t, 2*time.Second)
	if o.Endpoint != "m/eu/p" || o.Kind != fleet.ObsCooling || !o.Until.Equal(until) {
		t.Errorf("after the restart b applied %+v, want a's cooldown", o)
	}
}

// A Redis that stops answering without closing its connections (paused):
// leases fail within the timeout, the store reports down within two ping
// intervals, and links again when Redis answers.
func TestRedisSlow(t *testing.T) {
	srv := redistest.Start(t)
	a := newReplica(t, srv.URL())
	waitFor(t, 5*time.Second, "a linked", a.Up)
	srv.Pause()
	start := time.Now()
	err := a.Lease(context.Background(), []fleet.Lease{{Key: "retry/m", Want: 1000, Burst: 5000}})
	if err == nil {
		t.Error("a lease succeeded with Redis paused")
	}
	if d := time.Since(start); d > 2*time.Duration(config.DefaultRedisTimeout) {
		t.Errorf("the failed lease took %v, want about the 250ms timeout", d)
	}
	waitFor(t, 3*pingEvery, "a reports Redis down", func() bool { return !a.Up() })
	srv.Resume()
	waitFor(t, 5*time.Second, "a linked again", a.Up)
	t.Logf("lease failed after %v", time.Since(start).Round(time.Millisecond))
}
