package main

import (
	"io"
	"sync"
	"time"
)

// lineBuffer batches log lines into few writes: at thousands of requests a
// second, one write system call per request's log line was a measurable
// share of keel serve's CPU. A line waits at most delay (or until size
// bytes are pending) before it is written; Close writes what is left.
type lineBuffer struct {
	out   io.Writer
	delay time.Duration
	size  int

	mu    sync.Mutex
	buf   []byte
	timer *time.Timer
	armed bool
}

func newLineBuffer(out io.Writer, delay time.Duration, size int) *lineBuffer {
	b := &lineBuffer{out: out, delay: delay, size: size, buf: make([]byte, 0, size)}
	b.timer = time.AfterFunc(time.Hour, b.Flush)
	b.timer.Stop()
	return b
}

// Write queues p; it never splits one call's bytes across writes.
func (b *lineBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.buf)+len(p) > b.size && len(b.buf) > 0 {
		if err := b.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(p) >= b.size {
		return b.out.Write(p)
	}
	b.buf = append(b.buf, p...)
	if !b.armed {
		b.armed = true
		b.timer.Reset(b.delay)
	}
	return len(p), nil
}

// Flush writes what is pending.
func (b *lineBuffer) Flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *lineBuffer) flushLocked() error {
	b.armed = false
	if len(b.buf) == 0 {
		return nil
	}
	_, err := b.out.Write(b.buf)
	b.buf = b.buf[:0]
	return err
}

// Close stops the timer and writes what is pending.
func (b *lineBuffer) Close() error {
	b.timer.Stop()
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushLocked()
}
