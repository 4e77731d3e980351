package pipeline

import (
	"io"

	"github.com/keelmesh/keel/internal/llm"
)

// Map wraps src so that each event passes through f on its way up (f
// returns the event to pass, which may be ev itself or a copy; it must not
// modify ev, which may be shared). Map keeps src's readiness.
func Map(src Events, f func(ev *llm.Event) *llm.Event) Events {
	return &mapped{src: src, f: f}
}

type mapped struct {
	src Events
	f   func(*llm.Event) *llm.Event
}

func (m *mapped) Next() (*llm.Event, error) {
	ev, err := m.src.Next()
	if err != nil {
		return ev, err
	}
	return m.f(ev), nil
}

func (m *mapped) Close() error { return m.src.Close() }
func (m *mapped) Ready() bool  { return Ready(m.src) }

// Tap wraps src so that f sees each event on its way up, unchanged.
func Tap(src Events, f func(ev *llm.Event)) Events {
	return Map(src, func(ev *llm.Event) *llm.Event { f(ev); return ev })
}

// Transform wraps src so that t decides, per event from below, which
// events go up in its place: it appends them to out and returns it. An
// empty result holds the event back (t keeps it); several release what t
// held. Events t returns are sent before src is read again. A wrapped
// stream is ready only when it has events queued (any event from below may
// be held back).
func Transform(src Events, t func(ev *llm.Event, out []*llm.Event) []*llm.Event) Events {
	return &transformed{src: src, t: t}
}

type transformed struct {
	src   Events
	t     func(*llm.Event, []*llm.Event) []*llm.Event
	queue []*llm.Event
}

func (s *transformed) Next() (*llm.Event, error) {
	for len(s.queue) == 0 {
		ev, err := s.src.Next()
		if err != nil {
			return ev, err
		}
		s.queue = s.t(ev, s.queue[:0])
	}
	ev := s.queue[0]
	s.queue = s.queue[1:]
	return ev, nil
}

func (s *transformed) Close() error { return s.src.Close() }
func (s *transformed) Ready() bool  { return len(s.queue) > 0 }

// Finally wraps src so that f runs exactly once, after src is closed,
// however the stream ended (read to its end, failed, or left by the
// client). Closing the wrapper again does nothing.
func Finally(src Events, f func()) Events {
	return &finally{src: src, f: f}
}

type finally struct {
	src    Events
	f      func()
	closed bool
}

func (s *finally) Next() (*llm.Event, error) {
	if s.closed {
		return nil, io.EOF
	}
	return s.src.Next()
}

func (s *finally) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	err := s.src.Close()
	s.f()
	return err
}

func (s *finally) Ready() bool { return !s.closed && Ready(s.src) }

// Slice is a stream of events already made (a cached answer re-emitted, a
// fused answer): Next returns them in order, then io.EOF. It is always
// ready.
func Slice(evs []*llm.Event) Events { return &slice{evs: evs} }

type slice struct{ evs []*llm.Event }

func (s *slice) Next() (*llm.Event, error) {
	if len(s.evs) == 0 {
		return nil, io.EOF
	}
	ev := s.evs[0]
	s.evs = s.evs[1:]
	return ev, nil
}

func (s *slice) Close() error { s.evs = nil; return nil }
func (s *slice) Ready() bool  { return len(s.evs) > 0 }
