package resilience

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ErrOpen is returned by Breaker.Allow while the breaker is open, or
// half-open with all probe slots taken.
var ErrOpen = errors.New("circuit breaker open")

// State is a circuit breaker's state.
type State int32

// The breaker's states.
const (
	// Closed lets every call through and watches the failures.
	Closed State = iota
	// Open rejects every call until its open interval ends.
	Open
	// HalfOpen lets a limited number of probe calls through to decide
	// between Closed and Open.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return fmt.Sprintf("State(%d)", int32(s))
}

// BreakerConfig configures a Breaker. The zero value is the documented
// default. It is also what Keel's config file decodes resilience.breaker
// into; fields tagged yaml:"-" are not settable there.
type BreakerConfig struct {
	// Window is the rolling window over which the failure rate is measured.
	// Zero means 10s.
	Window time.Duration `yaml:"window"`
	// Buckets is the number of slices the window is cut into; the window
	// rolls one bucket at a time. Zero means 10.
	Buckets int `yaml:"-"`
	// MinRequests is the number of calls the window must hold before the
	// failure rate can open the breaker. Zero means 10.
	MinRequests int `yaml:"min_requests"`
	// FailureRate opens the breaker when failures/calls in the window reach
	// it, in (0, 1]. Zero means 0.5.
	FailureRate float64 `yaml:"failure_rate"`
	// ConsecutiveFailures opens the breaker after that many failures in a
	// row, whatever the window says. Zero means 5; negative disables it.
	ConsecutiveFailures int `yaml:"consecutive_failures"`
	// OpenFor is how long the breaker stays open the first time. Each
	// re-open from half-open doubles it, up to MaxOpenFor; a close resets
	// it. Zero means 5s.
	OpenFor time.Duration `yaml:"open_for"`
	// MaxOpenFor caps the open interval. Zero means 60s.
	MaxOpenFor time.Duration `yaml:"-"`
	// HalfOpenProbes is the number of probe calls allowed at once while
	// half-open. Zero means 2.
	HalfOpenProbes int `yaml:"half_open_probes"`
	// SuccessesToClose is the number of successful probes that close the
	// breaker. Zero means 2.
	SuccessesToClose int `yaml:"successes_to_close"`
	// Now is the clock. Nil means time.Now.
	Now func() time.Time `yaml:"-" json:"-"`
	// OnStateChange, if set, is called on every transition, after the
	// breaker's lock is released, on the goroutine that made the transition
	// or on one already reporting an earlier one: calls never overlap and
	// arrive in transition order. It may call the Breaker's methods; it
	// must not block, since it runs on a caller's path.
	OnStateChange func(from, to State) `yaml:"-" json:"-"`
}

// Window bookkeeping packs one bucket into a uint64: the bucket's slot
// number (24 bits, modulo 2^24), its calls (20 bits) and its failures
// (20 bits). Counts saturate at about a million per bucket.
const (
	slotBits  = 24
	countBits = 20
	slotMask  = 1<<slotBits - 1
	countMask = 1<<countBits - 1
)

// Breaker is a per-endpoint circuit breaker. Closed, it counts outcomes in
// a bucketed rolling window and opens when at least MinRequests calls were
// seen with a failure rate of at least FailureRate, or after
// ConsecutiveFailures failures in a row. Open, it rejects calls for an
// interval that doubles on every re-open. Then it goes half-open and admits
// at most HalfOpenProbes concurrent probes: SuccessesToClose successes close
// it, any failure re-opens it.
//
// A Breaker is safe for concurrent use and never blocks. The closed path
// (Allow and its done callback) is lock-free and allocation-free; state
// transitions and half-open probes take a short lock, and transitions are
// reported to OnStateChange once it is released.
type Breaker struct {
	width       int64 // bucket width in ns
	nbuckets    int64
	minRequests uint64
	rate        float64
	consecMax   int64
	openFor     time.Duration
	maxOpenFor  time.Duration
	probes      int
	toClose     int
	now         func() time.Time
	onChange    func(from, to State)
	start       time.Time
	closedDone  func(ok bool)

	state     atomic.Int32
	openUntil atomic.Int64 // ns since start
	consec    atomic.Int64
	buckets   []atomic.Uint64

	mu         sync.Mutex // guards following
	gen        uint64     // bumped on every transition; stale probes are ignored
	curOpenFor time.Duration
	probesOut  int
	probesOK   int
	// pending holds transitions not yet reported to onChange; notifying is
	// set while a goroutine reports them (spare is its other buffer).
	pending, spare []transition
	notifying      bool
}

// transition is one state change waiting to be reported.
type transition struct{ from, to State }

// NewBreaker validates cfg, fills in defaults and returns a closed Breaker.
func NewBreaker(cfg BreakerConfig) (*Breaker, error) {
	if cfg.Window == 0 {
		cfg.Window = 10 * time.Second
	}
	if cfg.Buckets == 0 {
		cfg.Buckets = 10
	}
	if cfg.MinRequests == 0 {
		cfg.MinRequests = 10
	}
	if cfg.FailureRate == 0 {
		cfg.FailureRate = 0.5
	}
	if cfg.ConsecutiveFailures == 0 {
		cfg.ConsecutiveFailures = 5
	}
	if cfg.OpenFor == 0 {
		cfg.OpenFor = 5 * time.Second
	}
	if cfg.MaxOpenFor == 0 {
		cfg.MaxOpenFor = 60 * time.Second
	}
	if cfg.HalfOpenProbes == 0 {
		cfg.HalfOpenProbes = 2
	}
	if cfg.SuccessesToClose == 0 {
		cfg.SuccessesToClose = 2
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	switch {
	case cfg.Buckets < 1 || cfg.Buckets > 1000:
		return nil, fmt.Errorf("breaker buckets %d outside [1, 1000]: %w", cfg.Buckets, ErrInvalidConfig)
	case cfg.Window < time.Duration(cfg.Buckets)*time.Millisecond:
		return nil, fmt.Errorf("breaker window %v shorter than 1ms per bucket: %w", cfg.Window, ErrInvalidConfig)
	case cfg.MinRequests < 1:
		return nil, fmt.Errorf("breaker min requests %d below 1: %w", cfg.MinRequests, ErrInvalidConfig)
	case !(cfg.FailureRate > 0 && cfg.FailureRate <= 1):
		return nil, fmt.Errorf("breaker failure rate %v outside (0, 1]: %w", cfg.FailureRate, ErrInvalidConfig)
	case cfg.OpenFor < 0:
		return nil, fmt.Errorf("breaker open interval %v is negative: %w", cfg.OpenFor, ErrInvalidConfig)
	case cfg.MaxOpenFor < cfg.OpenFor:
		return nil, fmt.Errorf("breaker max open interval %v below open interval %v: %w", cfg.MaxOpenFor, cfg.OpenFor, ErrInvalidConfig)
	case cfg.HalfOpenProbes < 1:
		return nil, fmt.Errorf("breaker half-open probes %d below 1: %w", cfg.HalfOpenProbes, ErrInvalidConfig)
	case cfg.SuccessesToClose < 1:
		return nil, fmt.Errorf("breaker successes to close %d below 1: %w", cfg.SuccessesToClose, ErrInvalidConfig)
	}
	b := &Breaker{
		width:       int64(cfg.Window) / int64(cfg.Buckets),
		nbuckets:    int64(cfg.Buckets),
		minRequests: uint64(cfg.MinRequests),
		rate:        cfg.FailureRate,
		consecMax:   int64(cfg.ConsecutiveFailures),
		openFor:     cfg.OpenFor,
		maxOpenFor:  cfg.MaxOpenFor,
		probes:      cfg.HalfOpenProbes,
		toClose:     cfg.SuccessesToClose,
		now:         cfg.Now,
		onChange:    cfg.OnStateChange,
		start:       cfg.Now(),
		buckets:     make([]atomic.Uint64, cfg.Buckets),
	}
	b.closedDone = b.record
	return b, nil
}

// Allow asks to make one call. It returns ErrOpen if the call must not be
// made; otherwise the caller must make the call and then invoke done exactly
// once with whether it succeeded. Only failures of the endpoint should count
// as failures (a caller's bad request is a success for the breaker).
func (b *Breaker) Allow() (done func(ok bool), err error) {
	switch State(b.state.Load()) {
	case Closed:
		return b.closedDone, nil
	case Open:
		if b.since() < b.openUntil.Load() {
			return nil, ErrOpen
		}
	}
	return b.allowSlow()
}

func (b *Breaker) allowSlow() (func(ok bool), error) {
	b.mu.Lock()
	defer b.unlock()
	b.expireLocked()
	switch State(b.state.Load()) {
	case Closed:
		return b.closedDone, nil
	case Open:
		return nil, ErrOpen
	}
	if b.probesOut >= b.probes {
		return nil, ErrOpen
	}
	b.probesOut++
	gen := b.gen
	return func(ok bool) { b.probeDone(gen, ok) }, nil
}

// State returns the current state. An open breaker whose interval has ended
// turns half-open here (and OnStateChange fires), as it would on Allow.
func (b *Breaker) State() State {
	s := State(b.state.Load())
	if s == Open && b.since() >= b.openUntil.Load() {
		b.mu.Lock()
		b.expireLocked()
		s = State(b.state.Load())
		b.unlock()
	}
	return s
}

func (b *Breaker) since() int64 { return int64(b.now().Sub(b.start)) }

// record is the done callback of calls admitted while closed.
func (b *Breaker) record(ok bool) {
	now := b.since()
	b.count(now, ok)
	if ok {
		if b.consec.Load() != 0 {
			b.consec.Store(0)
		}
		return
	}
	n := b.consec.Add(1)
	if State(b.state.Load()) != Closed {
		return
	}
	if (b.consecMax > 0 && n >= b.consecMax) || b.rateTripped(now) {
		b.mu.Lock()
		if State(b.state.Load()) == Closed {
			b.openLocked(now)
		}
		b.unlock()
	}
}

func (b *Breaker) probeDone(gen uint64, ok bool) {
	b.mu.Lock()
	defer b.unlock()
	if gen != b.gen {
		return // the breaker moved on since this probe was admitted
	}
	b.probesOut--
	if !ok {
		b.openLocked(b.since())
		return
	}
	b.probesOK++
	if b.probesOK >= b.toClose {
		for i := range b.buckets {
			b.buckets[i].Store(0)
		}
		b.consec.Store(0)
		b.curOpenFor = 0
		b.setLocked(Closed)
	}
}

// openLocked opens the breaker: for OpenFor after a close, for twice the
// previous interval (capped) after a failed half-open.
func (b *Breaker) openLocked(now int64) {
	if b.curOpenFor == 0 {
		b.curOpenFor = b.openFor
	} else {
		b.curOpenFor = min(2*b.curOpenFor, b.maxOpenFor)
	}
	b.openUntil.Store(now + int64(b.curOpenFor))
	b.setLocked(Open)
}

// expireLocked turns an open breaker whose interval has ended half-open.
func (b *Breaker) expireLocked() {
	if State(b.state.Load()) == Open && b.since() >= b.openUntil.Load() {
		b.probesOut, b.probesOK = 0, 0
		b.setLocked(HalfOpen)
	}
}

func (b *Breaker) setLocked(to State) {
	from := State(b.state.Swap(int32(to)))
	b.gen++
	if b.onChange != nil && from != to {
		b.pending = append(b.pending, transition{from, to})
	}
}

// unlock releases mu, first reporting the transitions made under it to
// onChange with mu released. One goroutine reports at a time, batch after
// batch until none is left, so calls never overlap and keep their order; a
// transition made meanwhile (even by onChange itself) waits for it.
func (b *Breaker) unlock() {
	if b.notifying || len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	b.notifying = true
	defer func() {
		b.notifying = false
		b.mu.Unlock()
	}()
	for len(b.pending) > 0 {
		batch := b.pending
		b.pending = b.spare[:0]
		b.report(batch)
		b.spare = batch[:0]
	}
}

// report calls onChange for each transition with mu released, and takes mu
// again on the way out even if onChange panics.
func (b *Breaker) report(batch []transition) {
	b.mu.Unlock()
	defer b.mu.Lock()
	for _, t := range batch {
		b.onChange(t.from, t.to)
	}
}

// count adds one outcome to the bucket of the current slot, resetting the
// bucket first if it still holds an older slot.
func (b *Breaker) count(now int64, ok bool) {
	slot := uint64(now/b.width) & slotMask
	bk := &b.buckets[int64(slot)%b.nbuckets]
	for {
		old := bk.Load()
		var calls, fails uint64
		if old>>(2*countBits) == slot {
			calls, fails = old>>countBits&countMask, old&countMask
		}
		calls = min(calls+1, countMask)
		if !ok {
			fails = min(fails+1, countMask)
		}
		if bk.CompareAndSwap(old, slot<<(2*countBits)|calls<<countBits|fails) {
			return
		}
	}
}

// rateTripped reports whether the window holds at least MinRequests calls
// with a failure rate of at least FailureRate.
func (b *Breaker) rateTripped(now int64) bool {
	cur := uint64(now/b.width) & slotMask
	var calls, fails uint64
	for i := range b.buckets {
		w := b.buckets[i].Load()
		if (cur-w>>(2*countBits))&slotMask < uint64(b.nbuckets) {
			calls += w >> countBits & countMask
			fails += w & countMask
		}
	}
	return calls >= b.minRequests && float64(fails) >= b.rate*float64(calls)
}

// OpenUntil reports whether the breaker is open and, if so, when its open
// interval ends: two atomic loads, for routing views.
func (b *Breaker) OpenUntil() (time.Time, bool) {
	if State(b.state.Load()) != Open {
		return time.Time{}, false
	}
	return b.start.Add(time.Duration(b.openUntil.Load())), true
}

// Trip opens the breaker until at least until, whatever its state: another
// process sharing the endpoint saw it fail (Keel's replicas share breaker
// state). An open interval ending later than until is kept; an until in the
// past does nothing. The interval doubling on re-open is not advanced.
func (b *Breaker) Trip(until time.Time) {
	u := int64(until.Sub(b.start))
	b.mu.Lock()
	defer b.unlock()
	if u <= b.since() || State(b.state.Load()) == Open && b.openUntil.Load() >= u {
		return
	}
	b.openUntil.Store(u)
	b.probesOut, b.probesOK = 0, 0
	b.setLocked(Open)
}

// Reset closes the breaker, as enough successful probes would: another
// process sharing the endpoint found it serving again. It reports whether
// the breaker was not closed before.
func (b *Breaker) Reset() bool {
	b.mu.Lock()
	defer b.unlock()
	if State(b.state.Load()) == Closed {
		return false
	}
	for i := range b.buckets {
		b.buckets[i].Store(0)
	}
	b.consec.Store(0)
	b.curOpenFor = 0
	b.setLocked(Closed)
	return true
}
