package keys

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// memStore is an in-memory Store for the accounting tests (the SQLite one
// is tested in internal/store/sqlite and end to end at the root).
type memStore struct {
	mu    sync.Mutex
	keys  []Key
	spend map[[2]string]float64
}

func (s *memStore) CreateKey(_ context.Context, k Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = append(s.keys, k)
	return nil
}

func (s *memStore) UpdateKey(_ context.Context, k Key) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.keys {
		if s.keys[i].ID == k.ID {
			s.keys[i] = k
			return nil
		}
	}
	return ErrNotFound
}

func (s *memStore) Keys(context.Context) ([]Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.keys), nil
}

func (s *memStore) KeyByHash(_ context.Context, h string) (Key, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range s.keys {
		if k.Hash == h {
			return k, true, nil
		}
	}
	return Key{}, false, nil
}

func (s *memStore) AddSpend(_ context.Context, sp []Spend) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.spend == nil {
		s.spend = map[[2]string]float64{}
	}
	for _, x := range sp {
		s.spend[[2]string{x.KeyID, x.Window}] += x.USD
	}
	return nil
}

func (s *memStore) SpendIn(_ context.Context, w string) (map[string]float64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]float64{}
	for k, v := range s.spend {
		if k[1] == w {
			out[k[0]] = v
		}
	}
	return out, nil
}

// price is $1 per million input tokens and $2 per million output tokens:
// a call of 1000-token prompt estimate and max_tokens 1000 reserves
// $0.003.
var price = pricing.Price{InputPerMTok: 1, OutputPerMTok: 2}

// request is a call whose prompt estimate is exactly prompt tokens (one
// message: perMessage plus the text's 4 bytes a token) and max_tokens out.
func request(model string, prompt, out int) *llm.Request {
	return &llm.Request{Model: model, MaxTokens: out, HasMaxTokens: true,
		Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: strings.Repeat("abcd", prompt-perMessage)}}}}}
}

func newManager(t *testing.T, st Store, now func() time.Time, require bool) *Manager {
	t.Helper()
	m, err := Open(context.Background(), Options{Store: st, Require: require, Now: now,
		Price: func(string) (pricing.Price, bool) { return price, true }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func withKey(secret string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	if secret != "" {
		r.Header.Set("X-Api-Key", secret)
	}
	return r
}

func TestSecretFormat(t *testing.T) {
	a, b := NewSecret(), NewSecret()
	if !strings.HasPrefix(a, SecretPrefix) || len(a) != len(SecretPrefix)+52 || a == b || strings.ToLower(a) != a {
		t.Errorf("secrets %q %q: want sk-keel- and 52 lower-case base32 characters, each new", a, b)
	}
	if h := Hash(a); len(h) != 64 || h == Hash(b) {
		t.Errorf("hash %q", h)
	}
}

func TestAuthenticate(t *testing.T) {
	st := &memStore{}
	now := func() time.Time { return time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC) }
	good, goodSecret, _ := Create(context.Background(), st, Spec{Team: "search"}, now())
	_, revokedSecret, _ := Create(context.Background(), st, Spec{}, now())
	for _, c := range []struct {
		name    string
		require bool
		hdr     map[string]string
		wantID  string
		wantErr int
	}{
		{name: "x-api-key", require: true, hdr: map[string]string{"X-Api-Key": goodSecret}, wantID: good.ID},
		{name: "bearer (anthropic sdk v2, openai)", require: true, hdr: map[string]string{"Authorization": "Bearer " + goodSecret}, wantID: good.ID},
		{name: "virtual key wins over a provider key", require: true, hdr: map[string]string{"Authorization": "Bearer sk-ant-x", "X-Api-Key": goodSecret}, wantID: good.ID},
		{name: "missing, required", require: true, wantErr: 401},
		{name: "provider key, required", require: true, hdr: map[string]string{"X-Api-Key": "sk-ant-provider"}, wantErr: 401},
		{name: "unknown", require: true, hdr: map[string]string{"X-Api-Key": SecretPrefix + "nope"}, wantErr: 401},
		{name: "revoked", require: true, hdr: map[string]string{"X-Api-Key": revokedSecret}, wantErr: 401},
		{name: "missing, not required: unmetered", require: false},
		{name: "provider key, not required: unmetered", require: false, hdr: map[string]string{"Authorization": "Bearer sk-proj-x"}},
		{name: "revoked, not required: still refused", require: false, hdr: map[string]string{"X-Api-Key": revokedSecret}, wantErr: 401},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newManager(t, st, now, c.require)
			if _, err := m.Revoke(context.Background(), revokedSecret[:displayLen]); err != nil {
				t.Fatal(err)
			}
			r := withKey("")
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			caller, ae := m.Authenticate(r)
			var gotID string
			var gotErr int
			if caller != nil {
				gotID, _ = caller.Labels()
			}
			if ae != nil {
				gotErr = ae.Status
				if ae.MeshCode != llm.MeshKeyInvalid || ae.Type != llm.ErrAuthentication {
					t.Errorf("error %+v: want authentication_error MESH_KEY_INVALID", ae)
				}
			}
			if gotID != c.wantID || gotErr != c.wantErr {
				t.Errorf("(-got +want)\n-key %q status %d\n+key %q status %d", gotID, gotErr, c.wantID, c.wantErr)
			}
		})
	}
}

// TestAdmitLimits walks one key through its limits on an injected clock:
// each step is an admission (and, when it passes, a settlement) and what
// the client gets.
func TestAdmitLimits(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 23, 59, 10, 0, time.UTC) // 50 s to the minute's, day's and month's end
	type step struct {
		at            time.Duration // after t0
		model         string
		prompt, out   int
		hold          bool    // keep the call in flight
		release       bool    // settle the call held, at $0.001, before this step
		cost          float64 // settled cost (default: the reservation)
		wantStatus    int
		wantCode      string
		wantRetry     string
		wantNoRetries bool // x-should-retry: false
	}
	for _, c := range []struct {
		name   string
		limits Limits
		steps  []step
	}{
		{name: "models", limits: Limits{Models: []string{"sim-haiku", "fast"}}, steps: []step{
			{model: "fast", prompt: 10, out: 10},
			{model: "sim-opus", prompt: 10, out: 10, wantStatus: 403, wantCode: llm.MeshKeyModelForbidden, wantNoRetries: true},
		}},
		{name: "requests per minute, exact", limits: Limits{RPM: 2}, steps: []step{
			{prompt: 10, out: 10},
			{prompt: 10, out: 10},
			{prompt: 10, out: 10, wantStatus: 429, wantCode: llm.MeshKeyRateLimited, wantRetry: "50"},
			{at: 50 * time.Second, prompt: 10, out: 10}, // the next minute
		}},
		{name: "tokens per minute count reservations in flight", limits: Limits{TPM: 1000}, steps: []step{
			{prompt: 100, out: 400, hold: true}, // 500 reserved
			{prompt: 100, out: 401, wantStatus: 429, wantCode: llm.MeshKeyRateLimited, wantRetry: "1"}, // 500 + 501 > 1000, the 500 in flight
			{prompt: 100, out: 400}, // 500 + 500
			{prompt: 500, out: 600, wantStatus: 429, wantCode: llm.MeshKeyRateLimited, wantRetry: "50", wantNoRetries: true}, // never fits
		}},
		{name: "daily budget: retry-after at midnight", limits: Limits{DailyUSD: 0.01}, steps: []step{
			{prompt: 1000, out: 1000, cost: 0.006},
			{prompt: 1000, out: 1000, cost: 0.003}, // $0.009 spent
			{prompt: 1000, out: 1000, wantStatus: 429, wantCode: llm.MeshKeyBudgetExceeded, wantRetry: "50"}, // + $0.003 > $0.01
			{prompt: 500, out: 250}, // + $0.001 fits exactly
			{prompt: 4, out: 1, wantStatus: 429, wantCode: llm.MeshKeyBudgetExceeded, wantRetry: "50"},
			{at: 50 * time.Second, prompt: 1000, out: 1000}, // a new day
		}},
		{name: "calls in flight hold the budget: retry in a second", limits: Limits{DailyUSD: 0.005}, steps: []step{
			{prompt: 1000, out: 1000, hold: true}, // $0.003 reserved
			{prompt: 1000, out: 1000, wantStatus: 429, wantCode: llm.MeshKeyBudgetExceeded, wantRetry: "1"},
			{prompt: 1000, out: 1000, release: true}, // the held call settled at $0.001 first
		}},
		{name: "monthly budget outlives the day", limits: Limits{MonthlyUSD: 0.004}, steps: []step{
			{at: -30 * time.Hour, prompt: 1000, out: 1000},
			{prompt: 1000, out: 1000, wantStatus: 429, wantCode: llm.MeshKeyBudgetExceeded, wantRetry: "50", wantNoRetries: false},
		}},
		{name: "monthly budget: x-should-retry false days before the month's end", limits: Limits{MonthlyUSD: 0.004}, steps: []step{
			{at: -72 * time.Hour, prompt: 1000, out: 1000},
			{at: -72 * time.Hour, prompt: 1000, out: 1000, wantStatus: 429, wantCode: llm.MeshKeyBudgetExceeded, wantRetry: "259250", wantNoRetries: true},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := &memStore{}
			var at time.Time
			m := newManager(t, st, func() time.Time { return at }, true)
			_, secret, err := m.Create(context.Background(), Spec{Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			var held func(float64, int)
			for i, s := range c.steps {
				at = t0.Add(s.at)
				if s.model == "" {
					s.model = "sim-haiku"
				}
				caller, ae := m.Authenticate(withKey(secret))
				if ae != nil {
					t.Fatal(ae)
				}
				if s.release {
					held(0.001, 0)
					held = nil
				}
				settle, ae := caller.Admit(context.Background(), request(s.model, s.prompt, s.out))
				var got step
				if ae != nil {
					got = step{wantStatus: ae.Status, wantCode: ae.MeshCode, wantRetry: ae.MeshHeaders["Retry-After"], wantNoRetries: ae.MeshHeaders["X-Should-Retry"] == "false"}
				}
				want := step{wantStatus: s.wantStatus, wantCode: s.wantCode, wantRetry: s.wantRetry, wantNoRetries: s.wantNoRetries}
				if got != want {
					t.Fatalf("step %d (-got +want)\n-%d %s retry-after %q no-retry %v (%v)\n+%d %s retry-after %q no-retry %v", i,
						got.wantStatus, got.wantCode, got.wantRetry, got.wantNoRetries, ae, want.wantStatus, want.wantCode, want.wantRetry, want.wantNoRetries)
				}
				if ae != nil {
					continue
				}
				cost := s.cost
				if cost == 0 {
					cost = price.Cost(s.prompt, s.out, 0, 0)
				}
				if s.hold {
					held = settle
					continue
				}
				settle(cost, s.prompt+s.out)
			}
		})
	}
}

// TestConcurrentAdmissionsAreExact: 50 clients, each with one call in
// flight at a time, share a key. The requests admitted per minute are
// exactly rpm; the budget's spend never exceeds it when reservations
// cover the calls, and it is used up to within one reservation.
func TestConcurrentAdmissionsAreExact(t *testing.T) {
	const clients = 50
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		m := newManager(t, st, time.Now, true)
		for _, c := range []struct {
			name   string
			limits Limits
		}{
			{"rpm", Limits{RPM: 137}},
			{"daily budget", Limits{DailyUSD: 0.5}},
			{"tpm", Limits{TPM: 77_777}},
		} {
			_, secret, err := m.Create(context.Background(), Spec{Limits: c.limits})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			admitted, spent, tokens := 0, 0.0, 0
			var wg sync.WaitGroup
			for range clients {
				wg.Go(func() {
					for {
						caller, _ := m.Authenticate(withKey(secret))
						settle, ae := caller.Admit(context.Background(), request("m", 500, 500))
						if ae != nil && ae.MeshHeaders["Retry-After"] == "1" {
							time.Sleep(time.Millisecond) // calls in flight hold the rest
							continue
						}
						if ae != nil {
							return
						}
						time.Sleep(time.Millisecond) // the call, in virtual time
						cost := price.Cost(400, 450, 0, 0)
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
					t.Errorf("rpm: %d admitted in the minute, want exactly 137", admitted)
				}
			case "daily budget":
				reserve := price.Cost(500, 500, 0, 0)
				if spent > 0.5+1e-12 || spent < 0.5-reserve {
					t.Errorf("daily budget: spent $%v over %d calls, want within ($%v, $0.5]", spent, admitted, 0.5-reserve)
				}
			case "tpm":
				if tokens > 77_777 || tokens < 77_777-1000 {
					t.Errorf("tpm: %d tokens used, want within (76777, 77777]", tokens)
				}
			}
		}
	})
}

// A key revoked or created by another process (keel keys) takes effect:
// a new key at once, a revocation at the next refresh.
func TestChangesFromAnotherProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		m, err := Open(context.Background(), Options{Store: st, Require: true, Refresh: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		k, secret, _ := Create(context.Background(), st, Spec{}, time.Now()) // elsewhere
		if _, ae := m.Authenticate(withKey(secret)); ae != nil {
			t.Fatalf("a key created elsewhere: %v, want it served at once", ae)
		}
		if _, err := Revoke(context.Background(), st, k.ID, time.Now()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5*time.Second + time.Millisecond)
		if _, ae := m.Authenticate(withKey(secret)); ae == nil || ae.Status != 401 {
			t.Fatalf("revoked elsewhere, after one refresh: %v, want 401", ae)
		}
		_, rotated, err := m.Rotate(context.Background(), k.ID)
		if err == nil || rotated != "" {
			t.Errorf("rotating a revoked key: %v", err)
		}
	})
}

// Settled spend reaches the store within a second and survives a restart.
func TestSpendPersists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &memStore{}
		m, err := Open(context.Background(), Options{Store: st, Require: true,
			Price: func(string) (pricing.Price, bool) { return price, true }})
		if err != nil {
			t.Fatal(err)
		}
		_, secret, _ := m.Create(context.Background(), Spec{Limits: Limits{DailyUSD: 0.005}})
		caller, _ := m.Authenticate(withKey(secret))
		settle, _ := caller.Admit(context.Background(), request("m", 1000, 1000))
		settle(0.004, 2000)
		time.Sleep(time.Second + time.Millisecond)
		day, _ := st.SpendIn(context.Background(), DayWindow(time.Now()))
		if got := day[caller.s.key.Load().ID]; got != 0.004 {
			t.Errorf("stored day spend $%v, want $0.004 a second after", got)
		}
		m.Close()
		m2, err := Open(context.Background(), Options{Store: st, Require: true,
			Price: func(string) (pricing.Price, bool) { return price, true }})
		if err != nil {
			t.Fatal(err)
		}
		defer m2.Close()
		c2, _ := m2.Authenticate(withKey(secret))
		if _, ae := c2.Admit(context.Background(), request("m", 1000, 1000)); ae == nil || ae.MeshCode != llm.MeshKeyBudgetExceeded {
			t.Errorf("after a restart: %v, want the day's $0.004 spent counted (MESH_KEY_BUDGET_EXCEEDED)", ae)
		}
	})
}
