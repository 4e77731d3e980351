package relay

import (
	"context"
	"sync"
	"time"

	"github.com/keelmesh/keel/internal/llm"
)

// Pump reads a leg in its own goroutine, so that a reader can wait on two
// legs at once (a slow-stream race). Its last item is the error that
// ended the leg, which it keeps for reads after the channel is closed.
type Pump struct {
	ch   chan Item
	stop chan struct{}
	done chan struct{} // closed when the goroutine returned
	once sync.Once
	err  error
}

// pumpDepth is how many events a pump reads ahead of its reader.
const pumpDepth = 64

// NewPump starts reading with read until it returns an error.
func NewPump(read func() (*llm.Event, error)) *Pump {
	p := &Pump{ch: make(chan Item, pumpDepth), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		for {
			ev, err := read()
			if err != nil {
				p.err = err
			}
			select {
			case p.ch <- Item{Ev: ev, Err: err}:
			case <-p.stop:
				return
			}
			if err != nil {
				close(p.ch)
				return
			}
		}
	}()
	return p
}

// Prepend is a read that returns buf's events, then next's.
func Prepend(buf []*llm.Event, next func() (*llm.Event, error)) func() (*llm.Event, error) {
	return func() (*llm.Event, error) {
		if len(buf) > 0 {
			ev := buf[0]
			buf = buf[1:]
			return ev, nil
		}
		return next()
	}
}

// Items delivers the pump's reads, the ending error last.
func (p *Pump) Items() <-chan Item { return p.ch }

// Ready reports whether a read is waiting.
func (p *Pump) Ready() bool { return len(p.ch) > 0 }

// Next is the pump's next read.
func (p *Pump) Next() (*llm.Event, error) {
	it, ok := <-p.ch
	if !ok {
		return nil, p.err
	}
	return it.Ev, it.Err
}

// Halt stops the pump's goroutine once its read returns (the caller
// cancels the leg so that it does); Wait returns once it did.
func (p *Pump) Halt() { p.once.Do(func() { close(p.stop) }) }

// Wait returns once the pump's goroutine did.
func (p *Pump) Wait() { <-p.done }

// End cancels the leg the pump reads (cancel) and returns once the pump's
// goroutine did: the leg's stream may then be closed (a stream is read
// and closed by one goroutine at a time).
func (p *Pump) End(cancel func()) {
	cancel()
	p.Halt()
	p.Wait()
}

// Patience is how long from now a race's continuation may take to extend
// the text: base (twice the hedge delay) to its first event; then, once it
// is made (made) and re-asked for the whole answer (splice, Leg.Splice),
// which must first repeat the text the client has (out tokens), as long
// again plus twice the time its endpoint takes to stream that text at its
// normal pace (gap per token; 0 while unknown).
func Patience(base time.Duration, made, splice bool, out int, gap time.Duration) time.Duration {
	if !made || !splice {
		return base
	}
	return base + 2*time.Duration(out+1)*gap
}

// Contest is the two legs of a slow-stream race as an Upstream runs it
// (its Race): the current leg read by one pump, and the continuation —
// attempted on its own pump's goroutine, then read by it — of type A (the
// Upstream's attempt). The Upstream decides Won and Lost with what it
// gets back.
type Contest[A any] struct {
	cur, cont *Pump

	mu   sync.Mutex // guards following
	b    A
	made bool
	leg  Leg
	lost bool
}

// Made is what attempting a continuation gives a Contest: the attempt, its
// kind (Leg), the events its attempt read first and its stream's read.
type Made[A any] struct {
	Attempt A
	Leg     Leg
	First   []*llm.Event
	Next    func() (*llm.Event, error)
}

// StartContest starts a race: cur reads the current leg; try attempts the
// continuation on the continuation's pump, and drop discards one made
// after the race was lost.
func StartContest[A any](cur *Pump, try func() (Made[A], error), drop func(A)) *Contest[A] {
	c := &Contest[A]{cur: cur}
	var read func() (*llm.Event, error)
	c.cont = NewPump(func() (*llm.Event, error) {
		if read != nil {
			return read()
		}
		m, err := try()
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		lost := c.lost
		if !lost {
			c.b, c.made, c.leg = m.Attempt, true, m.Leg
		}
		c.mu.Unlock()
		if lost {
			drop(m.Attempt)
			return nil, context.Canceled
		}
		read = Prepend(m.First, m.Next)
		return read()
	})
	return c
}

// Current delivers the current leg's events, Hedge the continuation's.
func (c *Contest[A]) Current() <-chan Item { return c.cur.Items() }
func (c *Contest[A]) Hedge() <-chan Item   { return c.cont.Items() }

// Leg is the continuation's kind, once it was made.
func (c *Contest[A]) Leg() Leg {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leg
}

// Continuation is the continuation and its kind; made is false before it
// was made.
func (c *Contest[A]) Continuation() (b A, leg Leg, made bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b, c.leg, c.made
}

// Pumps are the current leg's pump and the continuation's.
func (c *Contest[A]) Pumps() (cur, cont *Pump) { return c.cur, c.cont }

// Lose marks the race lost and, once cancel (which ends the continuation's
// attempt or stream) was called, stops the continuation's pump and waits
// for it: a continuation made meanwhile is dropped by the pump. It
// returns the continuation when it was made before.
func (c *Contest[A]) Lose(cancel func()) (b A, made bool) {
	c.mu.Lock()
	c.lost = true
	b, made = c.b, c.made
	c.mu.Unlock()
	cancel()
	c.cont.Halt()
	c.cont.Wait()
	return b, made
}
