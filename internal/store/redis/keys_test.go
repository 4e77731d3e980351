package redis

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/keys"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
)

// keyPrice is $1 in and $2 out per MTok.
var keyPrice = pricing.Price{InputPerMTok: 1, OutputPerMTok: 2}

func newKeyStore(t *testing.T, url string) *KeyStore {
	t.Helper()
	// A generous timeout: the 250ms default is a production bound, and a
	// loaded CI machine exceeded it (a replica then answered "key store
	// unavailable" in TestFleetLimitsExactAcrossReplicas).
	st, err := New(config.Redis{URL: config.Secret(url), KeyPrefix: "test:", Timeout: config.Duration(5 * time.Second)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st.Keys()
}

// fleetManager is one replica's keys.Manager on the fleet's Redis.
func fleetManager(t *testing.T, ks *KeyStore, now func() time.Time) *keys.Manager {
	t.Helper()
	m, err := keys.Open(context.Background(), keys.Options{Store: ks, Ledger: ks, Require: true, Now: now,
		Price: func(string) (pricing.Price, bool) { return keyPrice, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func keyRequest(secret string) *http.Request {
	r, _ := http.NewRequest(http.MethodPost, "http://keel/v1/messages", nil)
	r.Header.Set("X-Api-Key", secret)
	return r
}

func keyCall(in, out int) *llm.Request {
	return &llm.Request{Model: "m", MaxTokens: out, HasMaxTokens: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: strings.Repeat("word ", in*3/4)}}}}}
}

// The Redis key store keeps keys by hash, never the secret, and a
// rotation drops the old hash's index.
func TestRedisKeyStoreKeepsOnlyTheHash(t *testing.T) {
	srv := redistest.Start(t)
	ks := newKeyStore(t, srv.URL())
	ctx := context.Background()
	k, secret, err := keys.Create(ctx, ks, keys.Spec{Name: "ci", Team: "search", Limits: keys.Limits{RPM: 5}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	all, err := ks.c.HGetAll(ctx, "test:keys").Result()
	if err != nil {
		t.Fatal(err)
	}
	idx, _ := ks.c.HGetAll(ctx, "test:keys:hash").Result()
	for f, v := range all {
		if strings.Contains(f+v, secret) || strings.Contains(f+v, secret[len(keys.SecretPrefix):]) {
			t.Fatalf("the stored key holds its secret: %s", v)
		}
	}
	if idx[keys.Hash(secret)] != k.ID {
		t.Fatalf("hash index %v, want %s → %s", idx, keys.Hash(secret), k.ID)
	}
	got, ok, err := ks.KeyByHash(ctx, keys.Hash(secret))
	if err != nil || !ok || got.ID != k.ID || got.Team != "search" || got.RPM != 5 || got.Hash != k.Hash {
		t.Fatalf("KeyByHash: %+v %v %v, want %+v", got, ok, err, k)
	}
	_, rotated, err := keys.Rotate(ctx, ks, k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := ks.KeyByHash(ctx, keys.Hash(secret)); ok {
		t.Error("the old secret's hash still finds the key after a rotation")
	}
	if got, ok, _ := ks.KeyByHash(ctx, keys.Hash(rotated)); !ok || got.ID != k.ID {
		t.Error("the rotated secret does not find the key")
	}
	if err := ks.UpdateKey(ctx, keys.Key{ID: "key_missing"}); !errors.Is(err, keys.ErrNotFound) {
		t.Errorf("updating a missing key: %v, want ErrNotFound", err)
	}
}

// Three replicas share one Redis and 50 clients spread over them share a
// key: the requests admitted in the minute are exactly its rpm across the
// fleet (each replica alone would admit rpm), the daily budget is never
// exceeded and is used up to within one reservation, and a key made on
// one replica works on the others at once.
func TestFleetLimitsExactAcrossReplicas(t *testing.T) {
	srv := redistest.Start(t)
	start := time.Now()
	now := func() time.Time { return start } // one minute, one day
	var fleet []*keys.Manager
	for range 3 {
		fleet = append(fleet, fleetManager(t, newKeyStore(t, srv.URL()), now))
	}
	const clients = 50
	for _, c := range []struct {
		name   string
		limits keys.Limits
	}{
		{"rpm", keys.Limits{RPM: 137}},
		{"daily budget", keys.Limits{DailyUSD: 0.05}},
		{"tpm", keys.Limits{TPM: 77_777}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, secret, err := fleet[0].Create(context.Background(), keys.Spec{Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			admitted, spent, tokens := 0, 0.0, 0
			var wg sync.WaitGroup
			for i := range clients {
				m := fleet[i%len(fleet)]
				wg.Go(func() {
					for {
						caller, ae := m.Authenticate(keyRequest(secret))
						if ae != nil {
							t.Errorf("replica %d: %v, want the key made on replica 0 served", i%len(fleet), ae)
							return
						}
						settle, ae := caller.Admit(context.Background(), keyCall(500, 500))
						if ae != nil && ae.MeshHeaders["Retry-After"] == "1" {
							time.Sleep(time.Millisecond) // calls in flight hold the rest
							continue
						}
						if ae != nil {
							return
						}
						cost := keyPrice.Cost(400, 450, 0, 0)
						mu.Lock()
						admitted++
						spent += cost
						tokens += 850
						mu.Unlock()
						settle(cost, 850)
					}
				})
			}
			wg.Wait()
			switch c.name {
			case "rpm":
				if admitted != 137 {
					t.Errorf("%d admitted in the minute across three replicas, want exactly 137", admitted)
				}
			case "daily budget":
				reserve := keyPrice.Cost(500, 500, 0, 0)
				if spent > 0.05+1e-12 || spent < 0.05-reserve {
					t.Errorf("spent $%v over %d calls, want within ($%v, $0.05]", spent, admitted, 0.05-reserve)
				}
			case "tpm":
				if tokens > 77_777 || tokens < 77_777-1000 {
					t.Errorf("%d tokens used, want within (76777, 77777]", tokens)
				}
			}
		})
	}
	// Every replica's list shows the fleet's spend once it is settled.
	waitFor(t, 5*time.Second, "the budget key's spend in every replica's list", func() bool {
		for _, m := range fleet {
			vs, err := m.List(context.Background())
			if err != nil {
				return false
			}
			var total float64
			for _, v := range vs {
				total += v.DayUSD
			}
			if total < 0.04 {
				return false
			}
		}
		return true
	})
}

// A reservation whose replica died with the call in flight is released at
// its deadline, not held to the window's end.
func TestLapsedReservationIsReleased(t *testing.T) {
	srv := redistest.Start(t)
	ks := newKeyStore(t, srv.URL())
	ctx := context.Background()
	now := time.Now()
	r := keys.Reservation{ID: "r1", KeyID: "key_x", Minute: now.Unix() / 60, Day: keys.DayWindow(now), Month: keys.MonthWindow(now),
		Now: now, Deadline: now.Add(time.Minute), Tokens: 900, NanoUSD: 5e8, DailyNano: 1e9}
	if u, err := ks.Reserve(ctx, r); err != nil || !u.Admitted {
		t.Fatalf("first reservation: %+v %v", u, err)
	}
	r2 := r
	r2.ID = "r2"
	r2.NanoUSD = 6e8
	if u, err := ks.Reserve(ctx, r2); err != nil || u.Admitted || u.ResNano != 5e8 {
		t.Fatalf("second reservation while the first holds $0.5 of $1: %+v %v, want refused seeing $0.5 reserved", u, err)
	}
	r2.Now = now.Add(time.Minute + time.Millisecond) // r1's replica never settled
	if u, err := ks.Reserve(ctx, r2); err != nil || !u.Admitted || u.ResNano != 0 {
		t.Fatalf("after r1's deadline: %+v %v, want admitted with nothing reserved", u, err)
	}
	if err := ks.Settle(ctx, r2, r2.Now, 800, 4e8); err != nil {
		t.Fatal(err)
	}
	if err := ks.Settle(ctx, r2, r2.Now, 800, 4e8); err != nil { // a settlement repeated releases nothing twice
		t.Fatal(err)
	}
	res, _ := ks.c.HGetAll(ctx, "test:kres:key_x").Result()
	if res["tok"] != "0" || res["usd"] != "0" {
		t.Errorf("reservations left %v, want tok 0 usd 0", res)
	}
	day, _ := ks.SpendIn(ctx, keys.DayWindow(now))
	if day["key_x"] != 0.8 {
		t.Errorf("day spend $%v, want $0.8 (two settlements of $0.4)", day["key_x"])
	}
}

// With Redis gone the replicas keep serving: each admits on its own
// counters (logged), and the fleet's counters resume when Redis returns.
func TestLedgerDownAdmitsLocally(t *testing.T) {
	srv := redistest.Start(t)
	ks := newKeyStore(t, srv.URL())
	m := fleetManager(t, ks, time.Now)
	_, secret, err := m.Create(context.Background(), keys.Spec{Limits: keys.Limits{RPM: 3}})
	if err != nil {
		t.Fatal(err)
	}
	caller, ae := m.Authenticate(keyRequest(secret))
	if ae != nil {
		t.Fatal(ae)
	}
	srv.Kill()
	for i := range 3 {
		settle, ae := caller.Admit(context.Background(), keyCall(10, 10))
		if ae != nil {
			t.Fatalf("call %d with Redis down: %v, want admitted on local counters", i, ae)
		}
		settle(0, 20)
	}
	if _, ae := caller.Admit(context.Background(), keyCall(10, 10)); ae == nil || ae.MeshCode != llm.MeshKeyRateLimited {
		t.Errorf("fourth call with Redis down: %v, want the local rpm of 3 enforced", ae)
	}
}

// BenchmarkAdmit is one admission and its settlement of a key with every
// limit set: on the fleet's ledger (one Lua script on a loopback Redis;
// the settlement's script runs off the call's path) and on the process's
// own counters.
func BenchmarkAdmit(b *testing.B) {
	srv := redistest.Start(b)
	st, err := New(config.Redis{URL: config.Secret(srv.URL()), KeyPrefix: "bench:"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ks := st.Keys()
	for _, shared := range []bool{false, true} {
		name := "local"
		o := keys.Options{Store: ks, Require: true, Price: func(string) (pricing.Price, bool) { return keyPrice, true }}
		if shared {
			name, o.Ledger = "redis", ks
		}
		b.Run(name, func(b *testing.B) {
			m, err := keys.Open(context.Background(), o)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			_, secret, err := m.Create(context.Background(), keys.Spec{Limits: keys.Limits{RPM: 1 << 30, TPM: 1 << 40, DailyUSD: 1e9, MonthlyUSD: 1e9}})
			if err != nil {
				b.Fatal(err)
			}
			caller, ae := m.Authenticate(keyRequest(secret))
			if ae != nil {
				b.Fatal(ae)
			}
			req := keyCall(200, 100)
			b.ReportAllocs()
			for b.Loop() {
				settle, ae := caller.Admit(context.Background(), req)
				if ae != nil {
					b.Fatal(ae)
				}
				settle(0.0001, 300)
			}
		})
	}
}
