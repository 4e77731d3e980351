package main

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

type countingWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	return w.buf.Write(p)
}

func (w *countingWriter) state() (string, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.writes
}

func TestLineBufferBatchesWithinDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		out := &countingWriter{}
		b := newLineBuffer(out, 50*time.Millisecond, 1<<10)
		for i := range 10 {
			b.Write([]byte(strings.Repeat("x", i) + "\n"))
		}
		if s, n := out.state(); n != 0 || s != "" {
			t.Fatalf("written before the delay: %d writes", n)
		}
		time.Sleep(50 * time.Millisecond)
		synctest.Wait()
		s, n := out.state()
		if n != 1 || strings.Count(s, "\n") != 10 {
			t.Fatalf("after the delay: %d writes, %d lines; want 1 write of 10 lines", n, strings.Count(s, "\n"))
		}
		b.Write([]byte("last\n"))
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		if s, n := out.state(); n != 2 || !strings.HasSuffix(s, "last\n") {
			t.Fatalf("Close did not write the pending line: %d writes, %q", n, s)
		}
	})
}

func TestLineBufferFlushesWhenFull(t *testing.T) {
	out := &countingWriter{}
	b := newLineBuffer(out, time.Hour, 100)
	line := []byte(strings.Repeat("y", 39) + "\n") // 40 bytes
	for range 5 {
		b.Write(line)
	}
	// 2 lines fit in 100 bytes; the 3rd and 5th writes flushed first.
	s, n := out.state()
	if n != 2 || len(s) != 160 {
		t.Fatalf("%d writes of %d bytes, want 2 writes of 160", n, len(s))
	}
	big := []byte(strings.Repeat("z", 300) + "\n")
	b.Write(big)
	b.Close()
	s, _ = out.state()
	if len(s) != 5*40+len(big) || !strings.HasSuffix(s, string(big)) {
		t.Fatalf("lines lost or reordered: %d bytes", len(s))
	}
}
