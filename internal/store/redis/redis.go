// Package redis shares a mesh's endpoint observations and budgets between
// its replicas through Redis: it implements fleet.SharedState with
// github.com/redis/go-redis/v9.
//
// What each replica observes (an endpoint down or back, an ejection, a
// retry-after cooldown, a breaker opening or closing, the rate-limit
// headroom) goes to the others on the pub/sub channel PREFIX+"obs" and into
// the hash PREFIX+"ep:"+ENDPOINT, which a replica reads when it starts or
// reconnects. The retry and hedge budgets are one token bucket per route
// in PREFIX+"budget:"+KEY, leased by a Lua script that deposits and takes
// in one step. Latency summaries go to PREFIX+"latency:"+ENDPOINT, one
// field per replica, for people and dashboards. Calibrations go to the hash
// PREFIX+"calibrations" when a replica starts or reloads
// (ShareCalibrations), the newest of each id kept.
//
// A Store is safe for concurrent use. Publish never blocks: it queues for
// a writer goroutine and drops when the queue is full or Redis is down.
// Start runs a subscriber goroutine that reconnects with backoff (50ms
// doubling to 2s) whenever Redis cannot be reached, re-reads the fleet's
// state and republishes this replica's; Up reports the link (the
// mesh_shared_state_up gauge). Close stops both goroutines.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/fleet"
)

// Timing of the link to Redis.
const (
	// firstRetry and maxRetry bound the reconnection backoff.
	firstRetry = 50 * time.Millisecond
	maxRetry   = 2 * time.Second
	// pingEvery is how long the subscriber waits for a message before it
	// pings; a ping unanswered as long again marks Redis down (a Redis
	// that stopped answering without closing the connection).
	pingEvery = time.Second
	// queueSize bounds the observations waiting for the writer.
	queueSize = 4096
	// maxBatch is the most observations written in one round trip.
	maxBatch = 256
	// stateTTL keeps an endpoint's hash an hour after its last write;
	// latencyTTL a replica's latency summary 30s.
	stateTTL   = time.Hour
	latencyTTL = 30 * time.Second
	// budgetTTL drops the bucket of a route no replica serves any more.
	budgetTTL = time.Hour
)

// Hash fields of an endpoint's state.
const (
	fDown     = "down"
	fEjected  = "ejected"
	fCooling  = "cooling"
	fOpen     = "open"
	fHeadroom = "headroom"
)

// leaseScript deposits ARGV[1] milli-tokens into the bucket KEYS[1] (capacity
// ARGV[3]; a missing bucket starts full), takes up to ARGV[2] from it and
// returns what it took. The take comes out of the deposit before the
// capacity applies: a replica settling a round's deposits at once must not
// lose what a bucket refilled request by request would have let it spend.
const leaseScript = `
local cap = tonumber(ARGV[3])
local cur = tonumber(redis.call('GET', KEYS[1]) or cap) + tonumber(ARGV[1])
local take = math.max(math.min(cur, tonumber(ARGV[2])), 0)
redis.call('SET', KEYS[1], math.min(cur - take, cap), 'PX', ARGV[4])
return take
`

// Store is a link to the Redis a mesh's replicas share.
type Store struct {
	client  *goredis.Client
	prefix  string
	channel string
	timeout time.Duration
	id      string // this replica, to skip its own messages
	log     *slog.Logger
	now     func() time.Time

	up atomic.Bool
	// linked is closed the first time the store links (fleet state read).
	linked     chan struct{}
	linkedOnce sync.Once
	out        chan fleet.Observation
	dropped    atomic.Int64
	stop       chan struct{}
	// base is cancelled by Close, ending the goroutines' commands.
	base    context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	started atomic.Bool

	mu sync.Mutex // guards following
	// ps is the subscription in use, closed to make the subscriber
	// reconnect (after a failed write) or stop.
	ps     *goredis.PubSub
	closed bool
}

// New builds a Store from the config's redis section (defaults applied).
// It does no I/O: Start connects, and retries until Redis answers.
func New(cfg config.Redis, log *slog.Logger) (*Store, error) {
	opt, err := goredis.ParseURL(cfg.URL.Value())
	if err != nil {
		// go-redis's errors may quote the url, which may hold a password.
		return nil, errors.New("redis.url: not a redis:// url")
	}
	if cfg.Password != "" {
		opt.Password = cfg.Password.Value()
	}
	timeout := time.Duration(cfg.Timeout)
	if timeout <= 0 {
		timeout = time.Duration(config.DefaultRedisTimeout)
	}
	prefix := cfg.KeyPrefix
	if prefix == "" {
		prefix = config.DefaultRedisKeyPrefix
	}
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = timeout, timeout, timeout
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = -1 // fail fast: the caller falls back to local state
	opt.DialerRetries = 1
	opt.Protocol = 2
	opt.DisableIdentity = true
	opt.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// go-redis logs every failed dial to stderr, every 50ms while Redis is
	// down (the lease loop); the Store logs an outage once instead.
	quietOnce.Do(func() { goredis.SetLogger(quiet{}) })
	var b [8]byte
	rand.Read(b[:])
	s := &Store{
		client: goredis.NewClient(opt), prefix: prefix, channel: prefix + "obs", timeout: timeout,
		id: hex.EncodeToString(b[:]), log: log, now: time.Now,
		out: make(chan fleet.Observation, queueSize), stop: make(chan struct{}), linked: make(chan struct{}),
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

var quietOnce sync.Once

// quiet is go-redis's logger, discarding (go-redis has one per process).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Up reports whether the replica is linked to Redis: subscribed, synced,
// and its last write and lease succeeded.
func (s *Store) Up() bool { return s.up.Load() }

// Linked is closed once the store has first linked to Redis and applied
// the fleet's state: a replica that waits for it before serving starts
// with the fleet's view.
func (s *Store) Linked() <-chan struct{} { return s.linked }

// Dropped counts observations not sent: the queue was full or Redis down.
func (s *Store) Dropped() int64 { return s.dropped.Load() }

// Start implements fleet.SharedState: it starts the subscriber and the
// writer. Call it once.
func (s *Store) Start(apply func(fleet.Observation), current func() []fleet.Observation) {
	if !s.started.CompareAndSwap(false, true) {
		return
	}
	s.wg.Add(2)
	go s.subscribe(apply, current)
	go s.write()
}

// Publish implements fleet.SharedState: it queues o for the writer, or
// drops it when the queue is full.
func (s *Store) Publish(o fleet.Observation) {
	select {
	case s.out <- o:
	default:
		s.dropped.Add(1)
	}
}

// Close stops the goroutines and closes the connections. Observations
// still queued are dropped.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.cancel()
	if s.ps != nil {
		s.ps.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	s.up.Store(false)
	return s.client.Close()
}

// fail marks Redis down (logging once per outage) and makes the subscriber
// reconnect, which re-syncs before marking it up again.
func (s *Store) fail(what string, err error) {
	if s.up.Swap(false) {
		s.log.Warn("shared state: Redis unreachable; serving with this replica's own state until it returns", "op", what, "err", err)
	}
	s.mu.Lock()
	if s.ps != nil {
		s.ps.Close()
		s.ps = nil
	}
	s.mu.Unlock()
}

// subscribe keeps a subscription to the channel, applying the other
// replicas' observations, and reconnects with backoff when it breaks.
func (s *Store) subscribe(apply func(fleet.Observation), current func() []fleet.Observation) {
	defer s.wg.Done()
	wait := firstRetry
	logged := false
	for {
		linked, err := s.session(s.base, apply, current)
		select {
		case <-s.stop:
			return
		default:
		}
		if linked {
			wait = firstRetry
		}
		if s.up.Swap(false) {
			s.log.Warn("shared state: Redis unreachable; serving with this replica's own state until it returns", "err", err)
		} else if !logged {
			s.log.Warn("shared state: cannot reach Redis; serving with this replica's own state until it answers", "err", err)
		}
		logged = true
		t := time.NewTimer(wait)
		select {
		case <-s.stop:
			t.Stop()
			return
		case <-t.C:
		}
		wait = min(2*wait, maxRetry)
	}
}

// session is one connection: subscribe, read the fleet's state, publish
// this replica's, then apply messages until the connection fails. linked
// reports that it got that far.
func (s *Store) session(ctx context.Context, apply func(fleet.Observation), current func() []fleet.Observation) (linked bool, err error) {
	ps := s.client.Subscribe(ctx)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		ps.Close()
		return false, nil
	}
	s.ps = ps
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.ps == ps {
			s.ps = nil
		}
		s.mu.Unlock()
		ps.Close()
	}()
	if err := ps.Subscribe(ctx, s.channel); err != nil {
		return false, err
	}
	if _, err := ps.ReceiveTimeout(ctx, s.timeout); err != nil { // the subscription's confirmation
		return false, err
	}
	if err := s.sync(ctx, apply); err != nil {
		return false, err
	}
	if !s.up.Swap(true) {
		s.log.Info("shared state: linked to Redis; fleet state read", "channel", s.channel)
	}
	s.linkedOnce.Do(func() { close(s.linked) })
	for _, o := range current() {
		s.Publish(o) // after up: the writer drops what comes while down
	}
	pinged := false
	for {
		msg, err := ps.ReceiveTimeout(ctx, pingEvery)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				if err := ps.Ping(ctx); err != nil {
					return true, err
				}
				pinged = true
				continue
			}
			return true, err
		}
		pinged = false
		if m, ok := msg.(*goredis.Message); ok {
			if o, ok := s.decode(m.Payload); ok {
				apply(o)
			}
		}
	}
}

// wire is an observation as published: times in Unix milliseconds.
type wire struct {
	Replica  string  `json:"r"`
	Endpoint string  `json:"e"`
	Kind     string  `json:"k"`
	Until    int64   `json:"u,omitempty"`
	Headroom float64 `json:"h,omitempty"`
}

func (s *Store) decode(payload string) (fleet.Observation, bool) {
	var w wire
	if err := json.Unmarshal([]byte(payload), &w); err != nil || w.Replica == s.id || w.Endpoint == "" {
		return fleet.Observation{}, false
	}
	o := fleet.Observation{Endpoint: w.Endpoint, Kind: fleet.ObservationKind(w.Kind), Headroom: w.Headroom}
	if w.Until != 0 {
		o.Until = time.UnixMilli(w.Until)
	}
	return o, true
}

// sync reads every endpoint's hash and applies what is still in force.
func (s *Store) sync(ctx context.Context, apply func(fleet.Observation)) error {
	var keys []string
	iter := s.client.Scan(ctx, 0, s.prefix+"ep:*", 256).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.MapStringStringCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.HGetAll(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return err
	}
	now := s.now()
	for i, k := range keys {
		id := strings.TrimPrefix(k, s.prefix+"ep:")
		for _, o := range stateObservations(id, cmds[i].Val(), now) {
			apply(o)
		}
	}
	return nil
}

// stateObservations turns an endpoint's hash into the observations still
// in force at now.
func stateObservations(id string, h map[string]string, now time.Time) []fleet.Observation {
	var out []fleet.Observation
	if h[fDown] == "1" {
		out = append(out, fleet.Observation{Endpoint: id, Kind: fleet.ObsDown})
	}
	for _, f := range []struct {
		field string
		kind  fleet.ObservationKind
	}{{fEjected, fleet.ObsEjected}, {fCooling, fleet.ObsCooling}, {fOpen, fleet.ObsBreakerOpen}} {
		ms, err := strconv.ParseInt(h[f.field], 10, 64)
		if err == nil && time.UnixMilli(ms).After(now) {
			out = append(out, fleet.Observation{Endpoint: id, Kind: f.kind, Until: time.UnixMilli(ms)})
		}
	}
	if v, err := strconv.ParseFloat(h[fHeadroom], 64); err == nil {
		out = append(out, fleet.Observation{Endpoint: id, Kind: fleet.ObsHeadroom, Headroom: v})
	}
	return out
}

// write sends queued observations in batches, one round trip each, while
// Redis is up; while it is down they are dropped (the subscriber
// republishes this replica's state when it reconnects).
func (s *Store) write() {
	defer s.wg.Done()
	ctx := s.base
	batch := make([]fleet.Observation, 0, maxBatch)
	for {
		select {
		case <-s.stop:
			return
		case o := <-s.out:
			batch = append(batch[:0], o)
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case o := <-s.out:
				batch = append(batch, o)
			default:
				break fill
			}
		}
		if !s.up.Load() {
			s.dropped.Add(int64(len(batch)))
			continue
		}
		if err := s.send(ctx, batch); err != nil {
			s.dropped.Add(int64(len(batch)))
			s.fail("publish", err)
		}
	}
}

// send writes a batch: each observation into its endpoint's hash (or the
// latency hash) and, but for latency summaries, onto the channel.
func (s *Store) send(ctx context.Context, batch []fleet.Observation) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	for _, o := range batch {
		if o.Kind == fleet.ObsLatency {
			k := s.prefix + "latency:" + o.Endpoint
			pipe.HSet(ctx, k, s.id, fmt.Sprintf("p50_ms=%.3f p95_ms=%.3f at=%d",
				float64(o.P50)/1e6, float64(o.P95)/1e6, s.now().UnixMilli()))
			pipe.PExpire(ctx, k, latencyTTL)
			continue
		}
		w := wire{Replica: s.id, Endpoint: o.Endpoint, Kind: string(o.Kind), Headroom: o.Headroom}
		if !o.Until.IsZero() {
			// Rounded up: a replica never ends a cooldown before the one
			// that saw the retry-after.
			w.Until = (o.Until.UnixNano() + 999_999) / 1_000_000
		}
		k := s.prefix + "ep:" + o.Endpoint
		switch o.Kind {
		case fleet.ObsDown:
			pipe.HSet(ctx, k, fDown, "1")
		case fleet.ObsUp:
			pipe.HSet(ctx, k, fDown, "0")
		case fleet.ObsEjected:
			pipe.HSet(ctx, k, fEjected, w.Until)
		case fleet.ObsCooling:
			pipe.HSet(ctx, k, fCooling, w.Until)
		case fleet.ObsBreakerOpen:
			pipe.HSet(ctx, k, fOpen, w.Until)
		case fleet.ObsBreakerClosed:
			pipe.HSet(ctx, k, fOpen, "0")
		case fleet.ObsHeadroom:
			pipe.HSet(ctx, k, fHeadroom, strconv.FormatFloat(o.Headroom, 'g', 4, 64))
		default:
			continue
		}
		pipe.PExpire(ctx, k, stateTTL)
		b, _ := json.Marshal(w)
		pipe.Publish(ctx, s.channel, b)
	}
	_, err := pipe.Exec(ctx)
	return err
}

// Lease implements fleet.SharedState: every lease in one pipeline.
func (s *Store) Lease(ctx context.Context, leases []fleet.Lease) error {
	if len(leases) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	pipe := s.client.Pipeline()
	cmds := make([]*goredis.Cmd, len(leases))
	ttl := budgetTTL.Milliseconds()
	for i, l := range leases {
		cmds[i] = pipe.Eval(ctx, leaseScript, []string{s.prefix + "budget:" + l.Key}, l.Deposit, l.Want, l.Burst, ttl)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		s.fail("lease", err)
		return err
	}
	for i := range leases {
		n, err := cmds[i].Int64()
		if err != nil {
			return fmt.Errorf("lease %s: %w", leases[i].Key, err)
		}
		leases[i].Granted = n
	}
	return nil
}
