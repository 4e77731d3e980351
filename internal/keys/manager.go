package keys

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/keelmesh/keel/internal/fragment"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/pricing"
)

// Defaults of Options.
const (
	// DefaultRefresh is how often a Manager re-reads the keys.
	DefaultRefresh = 5 * time.Second
	// DefaultReserveOutput is the output a call that sets no max_tokens
	// reserves (an OpenAI call may omit it).
	DefaultReserveOutput = 4096
	// spendFlush is how often settled spend is written to the Store.
	spendFlush = time.Second
	// perMessage is the prompt tokens reserved per message beyond its text
	// (role and framing; the APIs count 3-4).
	perMessage = 4
)

// Options configure Open.
type Options struct {
	Store Store
	// Require refuses a call that sends no known virtual key (401).
	// Unset, a call without a virtual key is admitted unmetered; one that
	// sends a virtual key (SecretPrefix) is checked either way.
	Require bool
	// Refresh is how often the keys are re-read from the Store; 0 means
	// DefaultRefresh.
	Refresh time.Duration
	// Price is the dearest price a call for model may be served at
	// (engine.Engine.Price): reservations are priced at it. Nil, or ok
	// false, reserves $0 (the settled cost still counts).
	Price func(model string) (p pricing.Price, ok bool)
	// Now is the clock of the minute, day and month windows (UTC); nil
	// means time.Now.
	Now func() time.Time
	// Logger receives Store and Ledger failures; nil discards.
	Logger *slog.Logger
	// Ledger, when set, keeps the accounting windows fleet-wide (see
	// Ledger); nil keeps them in this process.
	Ledger Ledger
	// LedgerTimeout bounds one Ledger call; 0 means one second.
	LedgerTimeout time.Duration
}

// Manager authenticates calls by their virtual key and enforces each
// key's limits. Its methods are safe for concurrent use; Authenticate and
// Admit never block on I/O except to look up a key not seen yet.
//
// Accounting, per key and window (requests and tokens per UTC minute, USD
// per UTC day and calendar month): Admit reserves the call's estimate —
// its prompt's estimated tokens (fragment.EstimateTokens of its text, plus
// perMessage a message) plus max_tokens (DefaultReserveOutput when unset),
// priced at Options.Price — and admits it only if, for each limit,
//
//	settled in the window + reserved by calls in flight + this estimate ≤ limit
//
// (requests: admitted in the minute + 1 ≤ rpm). The check and the
// reservation are one step under the key's mutex (a multi-counter check
// no atomic can make). The settle function Admit returns replaces the
// reservation by the call's real cost and tokens. So when the last call is
// admitted the window's settled spend plus everything in flight is within
// the limit, and the window ends at most Σ(real − reserved) over the calls
// then in flight above it: zero when every reservation covers its call
// (one answer within max_tokens), and at most one call's excess per client
// that keeps one call in flight. Requests per minute are exact.
//
// Settled spend is written to the Store every second and at Close, and
// Open reads the current day's and month's back; the minute's counters
// are in memory only.
type Manager struct {
	o Options
	// byHash finds a key by its secret's SHA-256 (raw, not hex: a lookup
	// allocates nothing).
	byHash atomic.Pointer[map[[sha256.Size]byte]*state]

	mu   sync.Mutex // guards following: rebuilding byHash, byID
	byID map[string]*state

	// ledgerDown is set while the Ledger fails (logged once per outage).
	ledgerDown atomic.Bool
	// settling counts Ledger settlements in flight (Close waits for them).
	settling sync.WaitGroup

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
	retry     []Spend // spend a failed write keeps; the loop's
}

// state is one key's accounting.
type state struct {
	key atomic.Pointer[Key]

	mu     sync.Mutex // guards following
	minute int64      // the Unix minute of reqs and tokens
	// dayN and monthN number the windows of daySpent and monthSpent (Unix
	// day; year×12 + month), day and month name them (DayWindow,
	// MonthWindow), formatted when they change.
	dayN, monthN int64
	day, month   string
	// usage counts the minute's requests and tokens and the windows'
	// spend. Money is counted in nano-dollars: sums and comparisons are
	// exact (in float64 0.006 + 0.003 + 0.001 exceeds 0.01).
	usage
	inflight int
	pending  []Spend // settled, not yet written
}

// nano is an amount in US nano-dollars.
type nano int64

func toNano(usd float64) nano { return nano(math.Round(usd * 1e9)) }

func (n nano) usd() float64 { return float64(n) / 1e9 }

// Open loads the keys and the current day's and month's spend from
// o.Store and starts the background refresh and spend writer; Close
// stops them.
func Open(ctx context.Context, o Options) (*Manager, error) {
	if o.Store == nil {
		return nil, fmt.Errorf("keys: no store")
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.LedgerTimeout <= 0 {
		o.LedgerTimeout = time.Second
	}
	m := &Manager{o: o, byID: map[string]*state{}, stop: make(chan struct{}), done: make(chan struct{})}
	if err := m.reload(ctx); err != nil {
		return nil, err
	}
	now := o.Now()
	day, month := DayWindow(now), MonthWindow(now)
	ds, err := o.Store.SpendIn(ctx, day)
	if err != nil {
		return nil, fmt.Errorf("keys: reading spend: %w", err)
	}
	ms, err := o.Store.SpendIn(ctx, month)
	if err != nil {
		return nil, fmt.Errorf("keys: reading spend: %w", err)
	}
	for id, s := range m.byID {
		s.roll(now)
		s.daySpent, s.monthSpent = toNano(ds[id]), toNano(ms[id])
	}
	go m.loop()
	return m, nil
}

// Close writes the spend not yet written and stops the background work.
// Calls settled after Close are counted in memory only.
func (m *Manager) Close() error {
	m.closeOnce.Do(func() {
		m.settling.Wait()
		close(m.stop)
		<-m.done
	})
	return nil
}

func (m *Manager) loop() {
	defer close(m.done)
	flush := time.NewTicker(spendFlush)
	defer flush.Stop()
	refresh := time.NewTicker(m.o.Refresh)
	defer refresh.Stop()
	for {
		select {
		case <-flush.C:
			m.flush()
		case <-refresh.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := m.reload(ctx); err != nil {
				m.o.Logger.Warn("keys: refreshing the virtual keys failed; keeping the previous ones", "err", err)
			}
			cancel()
		case <-m.stop:
			m.flush()
			return
		}
	}
}

// flush writes the settled spend not yet written.
func (m *Manager) flush() {
	batch := m.retry
	m.retry = nil
	m.mu.Lock()
	for _, s := range m.byID {
		s.mu.Lock()
		batch = append(batch, s.pending...)
		s.pending = nil
		s.mu.Unlock()
	}
	m.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := m.o.Store.AddSpend(ctx, batch); err != nil {
		m.o.Logger.Warn("keys: writing spend failed; retrying", "err", err, "entries", len(batch))
		m.retry = batch
	}
}

// reload re-reads every key, keeping the accounting of those known.
func (m *Manager) reload(ctx context.Context) error {
	all, err := m.o.Store.Keys(ctx)
	if err != nil {
		return fmt.Errorf("keys: reading keys: %w", err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	byHash := make(map[[sha256.Size]byte]*state, len(all))
	for i := range all {
		k := all[i]
		s := m.byID[k.ID]
		if s == nil {
			s = &state{}
			m.byID[k.ID] = s
		}
		s.key.Store(&k)
		if h, ok := rawHash(k.Hash); ok {
			byHash[h] = s
		}
	}
	m.byHash.Store(&byHash)
	return nil
}

// put adds or replaces k in the lookup (after a change made here).
func (m *Manager) put(k Key) *state {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.byID[k.ID]
	if s == nil {
		s = &state{}
		m.byID[k.ID] = s
	}
	var old [sha256.Size]byte
	if p := s.key.Load(); p != nil {
		old, _ = rawHash(p.Hash)
	}
	s.key.Store(&k)
	cur := *m.byHash.Load()
	next := make(map[[sha256.Size]byte]*state, len(cur)+1)
	for h, v := range cur {
		if h != old {
			next[h] = v
		}
	}
	if h, ok := rawHash(k.Hash); ok {
		next[h] = s
	}
	m.byHash.Store(&next)
	return s
}

// lookup finds the key of hash: in memory, else in the Store (a key made
// by another process since the last refresh).
func (m *Manager) lookup(ctx context.Context, hash [sha256.Size]byte) (*state, error) {
	if p := m.byHash.Load(); p != nil {
		if s := (*p)[hash]; s != nil {
			return s, nil
		}
	}
	k, ok, err := m.o.Store.KeyByHash(ctx, hex.EncodeToString(hash[:]))
	if err != nil || !ok {
		return nil, err
	}
	return m.put(k), nil
}

// Authenticate finds the virtual key r sends (x-api-key, else
// Authorization: Bearer). It returns nil and no error for a call without
// a virtual key when keys are not required, and a 401 MESH_KEY_INVALID
// for a missing (when required), unknown or revoked one.
func (m *Manager) Authenticate(r *http.Request) (*Caller, *llm.APIError) {
	secret := presented(r.Header)
	if secret == "" || !strings.HasPrefix(secret, SecretPrefix) {
		if !m.o.Require {
			return nil, nil
		}
		if secret == "" {
			return nil, invalid("no API key: this gateway requires a virtual key (keel keys create), sent as x-api-key or Authorization: Bearer")
		}
		return nil, invalid("not a virtual key of this gateway: send the sk-keel-… key keel keys create made, not a provider key")
	}
	s, err := m.lookup(r.Context(), sha256.Sum256([]byte(secret)))
	if err != nil {
		m.o.Logger.Warn("keys: looking a key up failed", "err", err)
		return nil, &llm.APIError{Status: http.StatusServiceUnavailable, Type: llm.ErrOverloaded, MeshCode: llm.MeshOverloaded,
			Message: "the virtual key could not be checked (key store unavailable); retry shortly", MeshHeaders: map[string]string{"Retry-After": "1"}}
	}
	if s == nil {
		return nil, invalid("unknown virtual key " + display(secret) + "…")
	}
	if k := s.key.Load(); !k.Revoked.IsZero() {
		return nil, invalid(fmt.Sprintf("virtual key %s (%s…) was revoked", k.ID, k.Prefix))
	}
	return &Caller{m: m, s: s}, nil
}

// presented is the key a request sends: x-api-key when it is a virtual
// key or there is no bearer token, else the bearer token.
func presented(h http.Header) string {
	x := h.Get("X-Api-Key")
	b, _ := strings.CutPrefix(h.Get("Authorization"), "Bearer ")
	if strings.HasPrefix(x, SecretPrefix) || b == "" {
		return x
	}
	return b
}

func invalid(msg string) *llm.APIError {
	return &llm.APIError{Status: http.StatusUnauthorized, Type: llm.ErrAuthentication, MeshCode: llm.MeshKeyInvalid, Message: msg,
		MeshHeaders: map[string]string{"WWW-Authenticate": `Bearer realm="keel"`}}
}

// Caller is an authenticated client: one call's view of its key.
type Caller struct {
	m *Manager
	s *state
}

// Labels are the key's ID and team, for the call's record.
func (c *Caller) Labels() (keyID, team string) {
	k := c.s.key.Load()
	return k.ID, k.Team
}

// Admit checks req against the key's model list and limits and reserves
// its estimate (see Manager; with a Ledger, on the fleet's counters). It
// returns the function that settles the call — to be called once, with
// the call's cost in USD and its tokens (every attempt's prompt and
// output) — or the error for the client: 403 MESH_KEY_MODEL_FORBIDDEN,
// 429 MESH_KEY_RATE_LIMITED or 429 MESH_KEY_BUDGET_EXCEEDED with
// retry-after. With a Ledger, Admit waits for one round trip to it
// (bounded by Options.LedgerTimeout; on failure it admits on this
// process's counters).
func (c *Caller) Admit(ctx context.Context, req *llm.Request) (settle func(usd float64, tokens int), ae *llm.APIError) {
	k := c.s.key.Load()
	if !k.Allows(req.Model) {
		return nil, &llm.APIError{Status: http.StatusForbidden, Type: llm.ErrPermission, MeshCode: llm.MeshKeyModelForbidden,
			Message:     fmt.Sprintf("virtual key %s may not call model %q; it may call: %s", k.ID, req.Model, strings.Join(k.Models, ", ")),
			MeshHeaders: map[string]string{"X-Should-Retry": "false"}}
	}
	in := EstimatePrompt(req)
	out := DefaultReserveOutput
	if req.HasMaxTokens && req.MaxTokens > 0 {
		out = req.MaxTokens
	}
	tokens := in + out
	var usd nano
	if c.m.o.Price != nil {
		if p, ok := c.m.o.Price(req.Model); ok {
			usd = toNano(p.Cost(in, out, 0, 0))
		}
	}
	now := c.m.o.Now()
	if c.m.o.Ledger != nil {
		if settle, ae, ok := c.admitShared(ctx, k, now, tokens, usd); ok {
			return settle, ae
		}
	}
	s := c.s
	s.mu.Lock()
	s.roll(now)
	if ae := check(k, now, s.usage, tokens, usd); ae != nil {
		s.mu.Unlock()
		return nil, ae
	}
	s.reqs++
	s.inflight++
	s.resTokens += tokens
	s.resUSD += usd
	s.mu.Unlock()
	var once atomic.Bool
	return func(cost float64, used int) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		s.settle(c.m.o.Now(), k.ID, tokens, usd, toNano(cost), used)
	}, nil
}

// admitShared is Admit on the Ledger; ok false when the Ledger failed
// (the caller then admits on this process's counters).
func (c *Caller) admitShared(ctx context.Context, k *Key, now time.Time, tokens int, usd nano) (settle func(float64, int), ae *llm.APIError, ok bool) {
	m := c.m
	r := Reservation{ID: newID(), KeyID: k.ID, Minute: now.Unix() / 60, Day: DayWindow(now), Month: MonthWindow(now),
		Now: now, Deadline: now.Add(DefaultReservationTTL), Tokens: tokens, NanoUSD: int64(usd),
		RPM: k.RPM, TPM: k.TPM, DailyNano: int64(toNano(k.DailyUSD)), MonthlyNano: int64(toNano(k.MonthlyUSD))}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.o.LedgerTimeout)
	u, err := m.o.Ledger.Reserve(ctx, r)
	cancel()
	if err != nil {
		if m.ledgerDown.CompareAndSwap(false, true) {
			m.o.Logger.Warn("keys: the shared ledger failed; enforcing the limits on this replica's own counters until it answers", "err", err)
		}
		return nil, nil, false
	}
	if m.ledgerDown.CompareAndSwap(true, false) {
		m.o.Logger.Info("keys: the shared ledger answers again")
	}
	if !u.Admitted {
		fleet := usage{reqs: u.Reqs, tokens: u.Tokens, resTokens: u.ResTokens, daySpent: nano(u.DayNano), monthSpent: nano(u.MonthNano), resUSD: nano(u.ResNano)}
		if ae := check(k, now, fleet, tokens, usd); ae != nil {
			return nil, ae, true
		}
		// The counters moved between the Ledger's test and ours.
		return nil, limited(llm.MeshKeyRateLimited, now, now.Add(time.Second), true,
			fmt.Sprintf("virtual key %s's limits would be exceeded by this call", k.ID)), true
	}
	s := c.s
	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	var once atomic.Bool
	return func(cost float64, used int) {
		if !once.CompareAndSwap(false, true) {
			return
		}
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
		m.settling.Add(1)
		// Off the call's path: a reservation held a moment longer only
		// makes the limits stricter, never looser.
		go func() {
			defer m.settling.Done()
			ctx, cancel := context.WithTimeout(context.Background(), m.o.LedgerTimeout)
			defer cancel()
			if err := m.o.Ledger.Settle(ctx, r, m.o.Now(), used, int64(toNano(max(cost, 0)))); err != nil {
				// The reservation lapses at its deadline; the spend is
				// written through the Store.
				m.o.Logger.Warn("keys: settling on the shared ledger failed; writing the spend through the store", "err", err, "key", k.ID)
				s.mu.Lock()
				s.roll(m.o.Now())
				s.pendSpend(k.ID, toNano(max(cost, 0)))
				s.mu.Unlock()
			}
		}()
	}, nil, true
}

// usage is a key's counters in its current windows.
type usage struct {
	reqs, tokens, resTokens      int
	daySpent, monthSpent, resUSD nano
}

// check is Admit's test of the limits on the counters u.
func check(k *Key, now time.Time, s usage, tokens int, usd nano) *llm.APIError {
	if k.RPM > 0 && s.reqs+1 > k.RPM {
		return limited(llm.MeshKeyRateLimited, now, minuteEnd(now), true,
			fmt.Sprintf("virtual key %s made its %d requests of this minute (rpm)", k.ID, k.RPM))
	}
	if k.TPM > 0 && s.tokens+s.resTokens+tokens > k.TPM {
		if tokens > k.TPM {
			return limited(llm.MeshKeyRateLimited, now, minuteEnd(now), false,
				fmt.Sprintf("the call may use %d tokens (prompt estimate and max_tokens), more than virtual key %s's %d tokens per minute (tpm): lower max_tokens", tokens, k.ID, k.TPM))
		}
		until := minuteEnd(now)
		if s.tokens+tokens <= k.TPM {
			until = now.Add(time.Second) // calls in flight hold the rest: it may come free when they end
		}
		return limited(llm.MeshKeyRateLimited, now, until, true,
			fmt.Sprintf("virtual key %s's %d tokens per minute (tpm) would be exceeded: %d used, %d reserved by calls in flight, this call may use %d", k.ID, k.TPM, s.tokens, s.resTokens, tokens))
	}
	for _, b := range []struct {
		what         string
		limit, spent nano
		end          time.Time
	}{{"daily", toNano(k.DailyUSD), s.daySpent, dayEnd(now)}, {"monthly", toNano(k.MonthlyUSD), s.monthSpent, monthEnd(now)}} {
		if b.limit <= 0 || b.spent+s.resUSD+usd <= b.limit {
			continue
		}
		msg := fmt.Sprintf("virtual key %s's %s budget of $%s is spent: $%s spent, $%s reserved by calls in flight, this call may cost $%s",
			k.ID, b.what, usdText(b.limit.usd()), usdText(b.spent.usd()), usdText(s.resUSD.usd()), usdText(usd.usd()))
		if b.spent+usd <= b.limit {
			// Calls in flight hold the rest: it may come free when they end.
			return limited(llm.MeshKeyBudgetExceeded, now, now.Add(time.Second), true, msg)
		}
		return limited(llm.MeshKeyBudgetExceeded, now, b.end, true, msg)
	}
	return nil
}

// settle replaces a call's reservation by what it used.
func (s *state) settle(now time.Time, id string, resTokens int, resUSD, cost nano, tokens int) {
	cost = max(cost, 0)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.roll(now)
	s.inflight--
	s.resTokens -= resTokens
	s.resUSD -= resUSD
	s.tokens += tokens
	s.pendSpend(id, cost)
}

// pendSpend counts cost in the current windows and queues it for the
// Store, under s.mu.
func (s *state) pendSpend(id string, cost nano) {
	s.daySpent += cost
	s.monthSpent += cost
	if cost > 0 {
		s.pending = addSpend(s.pending, Spend{KeyID: id, Window: s.day, USD: cost.usd()})
		s.pending = addSpend(s.pending, Spend{KeyID: id, Window: s.month, USD: cost.usd()})
	}
}

func addSpend(p []Spend, sp Spend) []Spend {
	for i := range p {
		if p[i].KeyID == sp.KeyID && p[i].Window == sp.Window {
			p[i].USD += sp.USD
			return p
		}
	}
	return append(p, sp)
}

// roll starts the windows now is in, under s.mu.
func (s *state) roll(now time.Time) {
	if m := now.Unix() / 60; m != s.minute {
		s.minute, s.reqs, s.tokens = m, 0, 0
	}
	if d := now.Unix() / 86400; d != s.dayN || s.day == "" {
		s.dayN, s.day, s.daySpent = d, DayWindow(now), 0
	}
	y, mo, _ := now.UTC().Date()
	if n := int64(y)*12 + int64(mo); n != s.monthN || s.month == "" {
		s.monthN, s.month, s.monthSpent = n, MonthWindow(now), 0
	}
}

// limited is a 429 with retry-after at until (whole seconds, at least 1);
// beyond a minute x-should-retry: false, as the Anthropic SDK would
// sleep the whole wait (PROTOCOLS.md §0.7).
func limited(code string, now, until time.Time, retry bool, msg string) *llm.APIError {
	secs := max(1, int(math.Ceil(until.Sub(now).Seconds())))
	h := map[string]string{"Retry-After": strconv.Itoa(secs)}
	if !retry || secs > 60 {
		h["X-Should-Retry"] = "false"
	}
	return &llm.APIError{Status: http.StatusTooManyRequests, Type: llm.ErrRateLimit, MeshCode: code, Message: msg,
		RetryAfter: time.Duration(secs) * time.Second, MeshHeaders: h}
}

func minuteEnd(t time.Time) time.Time { return t.UTC().Truncate(time.Minute).Add(time.Minute) }

func dayEnd(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

func monthEnd(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}

func usdText(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// EstimatePrompt estimates req's prompt tokens for a reservation: its
// system prompt, messages (text, tool calls and results) and tools by
// fragment.EstimateTokens, plus perMessage a message.
func EstimatePrompt(req *llm.Request) int {
	n := fragment.EstimateTokens(req.SystemText())
	var blocks func([]llm.Block)
	blocks = func(bs []llm.Block) {
		for i := range bs {
			b := &bs[i]
			n += fragment.EstimateTokens(b.Text) + fragment.EstimateTokens(b.Thinking) + (len(b.Input)+3)/4 + (len(b.Raw)+3)/4
			blocks(b.Content)
		}
	}
	for i := range req.Messages {
		n += perMessage
		if r := req.Messages[i].Role; r == llm.RoleSystem || r == llm.RoleDeveloper {
			continue // counted in SystemText
		}
		blocks(req.Messages[i].Content)
	}
	for _, t := range req.Tools {
		n += fragment.EstimateTokens(t.Name) + fragment.EstimateTokens(t.Description) + (len(t.InputSchema)+3)/4 + (len(t.Raw)+3)/4
	}
	return n
}

// View is a key with its spend, as lists show it.
type View struct {
	Key
	// DayUSD and MonthUSD are the spend of the current UTC day and month;
	// InFlight the calls admitted and not yet settled.
	DayUSD   float64 `json:"day_usd"`
	MonthUSD float64 `json:"month_usd"`
	InFlight int     `json:"in_flight"`
}

// List returns every key with its spend, oldest first. With a Ledger the
// spend is the fleet's, read from the Store.
func (m *Manager) List(ctx context.Context) ([]View, error) {
	if err := m.reload(ctx); err != nil {
		return nil, err
	}
	now := m.o.Now()
	var day, month map[string]float64
	if m.o.Ledger != nil {
		var err error
		if day, err = m.o.Store.SpendIn(ctx, DayWindow(now)); err != nil {
			return nil, fmt.Errorf("keys: reading spend: %w", err)
		}
		if month, err = m.o.Store.SpendIn(ctx, MonthWindow(now)); err != nil {
			return nil, fmt.Errorf("keys: reading spend: %w", err)
		}
	}
	m.mu.Lock()
	out := make([]View, 0, len(m.byID))
	for _, s := range m.byID {
		s.mu.Lock()
		s.roll(now)
		v := View{Key: *s.key.Load(), DayUSD: s.daySpent.usd(), MonthUSD: s.monthSpent.usd(), InFlight: s.inflight}
		s.mu.Unlock()
		if m.o.Ledger != nil {
			v.DayUSD, v.MonthUSD = day[v.ID], month[v.ID]
		}
		out = append(out, v)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b View) int {
		if c := a.Created.Compare(b.Created); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// Create makes a key (see Create) and serves it at once.
func (m *Manager) Create(ctx context.Context, spec Spec) (Key, string, error) {
	k, secret, err := Create(ctx, m.o.Store, spec, m.o.Now())
	if err == nil {
		m.put(k)
	}
	return k, secret, err
}

// Revoke revokes a key (see Revoke); its secret stops working at once.
func (m *Manager) Revoke(ctx context.Context, id string) (Key, error) {
	k, err := Revoke(ctx, m.o.Store, id, m.o.Now())
	if err == nil {
		m.put(k)
	}
	return k, err
}

// Rotate gives a key a new secret (see Rotate); the old one stops working
// at once.
func (m *Manager) Rotate(ctx context.Context, id string) (Key, string, error) {
	k, secret, err := Rotate(ctx, m.o.Store, id)
	if err == nil {
		m.put(k)
	}
	return k, secret, err
}

// rawHash decodes a stored hex hash.
func rawHash(h string) (out [sha256.Size]byte, ok bool) {
	n, err := hex.Decode(out[:], []byte(h))
	return out, err == nil && n == sha256.Size
}
