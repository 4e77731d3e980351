package features_test

import (
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel"
	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/simfleet"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
	"github.com/keelmesh/keel/sim"
)

// Issue 17: with a redis section the exact cache is the fleet's. An answer
// replica A stored serves replica B (no upstream call from B), in both
// formats, streamed and not, as it served A's client; with Redis gone a
// replica still answers (from its own memory, else upstream).
func TestCacheSharedAcrossReplicas(t *testing.T) {
	rs := redistest.Start(t)
	// replica is a mesh on rs; the replicas of one subtest share a prefix.
	replica := func(t *testing.T) (*keel.Mesh, *countingRT) {
		t.Helper()
		fleet, err := sim.New(sim.ZeroLatency())
		if err != nil {
			t.Fatal(err)
		}
		up := &countingRT{rt: fleet.Transport()}
		cfg := simfleet.Config(fleet, "http://sim.invalid")
		cfg.Cache.Enabled = true
		cfg.Redis = config.Redis{URL: config.Secret(rs.URL()), KeyPrefix: strings.ReplaceAll(t.Name(), "/", ":") + ":"}
		if got := cfg.CacheStore(); got != config.CacheStoreRedis {
			t.Fatalf("cache.store = %q with a redis section, want redis by default", got)
		}
		m, err := keel.New(cfg, keel.WithUpstream(up))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		return m, up
	}
	for _, tc := range []struct {
		name          string
		openai        bool
		first, second bool // stream?
		temp          float64
	}{
		{name: "anthropic/plain-then-stream", second: true, temp: 0},
		{name: "anthropic/stream-then-plain", first: true, temp: 0},
		{name: "openai/plain-then-plain", openai: true, temp: 0},
		{name: "openai/stream-then-stream", openai: true, first: true, second: true, temp: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, upA := replica(t)
			b, upB := replica(t)
			ask := func(m *keel.Mesh, stream bool) answer {
				if tc.openai {
					return askOpenAI(t, m, stream, tc.temp)
				}
				return askAnthropic(t, m, stream, tc.temp)
			}
			first := ask(a, tc.first)
			// A's write reaches Redis off its call's path.
			deadline := time.Now().Add(5 * time.Second)
			var second answer
			for {
				second = ask(b, tc.second)
				if second.header.Get("X-Mesh-Cache") == "hit" || time.Now().After(deadline) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if got := second.header.Get("X-Mesh-Cache"); got != "hit" {
				t.Fatalf("replica B: X-Mesh-Cache %q, want hit from A's answer", got)
			}
			if second.text != first.text || first.text == "" {
				t.Errorf("replica B answered %q, want A's %q", second.text, first.text)
			}
			if n := upA.posts.Load(); n != 1 {
				t.Errorf("replica A upstream calls = %d, want 1", n)
			}
			// B's misses before A's write landed went upstream and stored
			// their own answer; the hit itself made no call.
			before := upB.posts.Load()
			if third := ask(b, tc.second); third.header.Get("X-Mesh-Cache") != "hit" || upB.posts.Load() != before {
				t.Errorf("replica B again: %q with %d more upstream calls, want a hit with none", third.header.Get("X-Mesh-Cache"), upB.posts.Load()-before)
			}
		})
	}
	t.Run("redis-down", func(t *testing.T) {
		a, up := replica(t)
		first := askAnthropic(t, a, false, 0)
		rs.Kill()
		again := askAnthropic(t, a, false, 0)
		if again.header.Get("X-Mesh-Cache") != "hit" || again.text != first.text || up.posts.Load() != 1 {
			t.Errorf("Redis down: %q, %d upstream calls, want a hit from the replica's memory", again.header.Get("X-Mesh-Cache"), up.posts.Load())
		}
		other := askOpenAI(t, a, false, 0)
		if other.text == "" || other.header.Get("X-Mesh-Cache") != "miss" {
			t.Errorf("Redis down, a new request: %q %q, want answered upstream (miss)", other.text, other.header.Get("X-Mesh-Cache"))
		}
	})
}
