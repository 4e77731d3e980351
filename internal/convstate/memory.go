package convstate

import (
	"container/list"
	"context"
	"sync"
	"time"
)

// Memory is a Backend in this process's memory, for a mesh without a
// request log or Redis (an embedded keel.New): it keeps the values as they
// are (nothing is encoded), and its conversations end with the process.
// Entries are dropped oldest stored first. Safe for concurrent use; no
// method blocks but on its mutex.
type Memory struct {
	bounds Bounds

	mu    sync.Mutex // guards following
	byID  map[string]*list.Element
	order *list.List // of *memEntry, oldest stored first
	bytes int64
}

type memEntry struct {
	id      string
	c       *Conversation
	size    int64
	expires time.Time
}

// NewMemory returns an empty Memory enforcing b.
func NewMemory(b Bounds) *Memory {
	return &Memory{bounds: b, byID: map[string]*list.Element{}, order: list.New()}
}

var _ Backend = (*Memory)(nil)

// Put implements Backend.
func (m *Memory) Put(_ context.Context, id string, c *Conversation, now, expires time.Time) error {
	size := c.Size()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.remove(id)
	if m.bounds.MaxBytes > 0 && size > m.bounds.MaxBytes || !expires.After(now) {
		return nil
	}
	m.byID[id] = m.order.PushBack(&memEntry{id: id, c: c, size: size, expires: expires})
	m.bytes += size
	for m.order.Len() > 0 {
		front := m.order.Front().Value.(*memEntry)
		over := m.bounds.MaxEntries > 0 && m.order.Len() > m.bounds.MaxEntries ||
			m.bounds.MaxBytes > 0 && m.bytes > m.bounds.MaxBytes
		if !over && front.expires.After(now) {
			break
		}
		m.remove(front.id)
	}
	return nil
}

// Get implements Backend.
func (m *Memory) Get(_ context.Context, id string, now time.Time) (*Conversation, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byID[id]
	if !ok {
		return nil, ErrNotFound
	}
	e := el.Value.(*memEntry)
	if !e.expires.After(now) {
		m.remove(id)
		return nil, ErrNotFound
	}
	return e.c, nil
}

// Delete implements Backend.
func (m *Memory) Delete(_ context.Context, id string, now time.Time) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	el, ok := m.byID[id]
	if !ok {
		return false, nil
	}
	live := el.Value.(*memEntry).expires.After(now)
	m.remove(id)
	return live, nil
}

// Len returns the entries held and their total size, expired ones not yet
// dropped included.
func (m *Memory) Len() (entries int, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.order.Len(), m.bytes
}

// remove drops id's entry, if any. m.mu must be held.
func (m *Memory) remove(id string) {
	el, ok := m.byID[id]
	if !ok {
		return
	}
	m.order.Remove(el)
	delete(m.byID, id)
	m.bytes -= el.Value.(*memEntry).size
}
