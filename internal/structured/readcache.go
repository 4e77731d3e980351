package structured

import (
	"container/list"
	"crypto/sha256"
	"sync"
)

// Reading a system prompt for the keys it demands (ExtractConstraints, then
// ExtractJSONDemand) costs 300-800 µs of CPU on a JSON-heavy prompt, while a
// gateway call's own overhead is tens of µs; and an application sends one
// system prompt with every call (an agent's long prompt, a service's fixed
// instructions). So a reading is kept per prompt: the readers are pure
// functions of the prompt's text, and a reading is never modified once made
// (Spec.Implied is read only), so calls with one prompt share it.
const maxReadings = 512

// readings is a mutex-guarded LRU of readings keyed by the SHA-256 of the
// system prompt (a key of 32 bytes whatever the prompt's length; entries
// hold only the small reading).
type readings struct {
	mu    sync.Mutex // guards following
	lru   *list.List // of *reading, most recent first
	byKey map[[32]byte]*list.Element
	// misses counts the prompts read (not served from the cache), for tests.
	misses int
}

type reading struct {
	key [32]byte
	imp *Implied
	ok  bool
}

var promptReadings = &readings{lru: list.New(), byKey: map[[32]byte]*list.Element{}}

// read returns what the readers make of sys: its demanded keys
// (ExtractConstraints) or else a keyless JSON demand (ExtractJSONDemand).
func (r *readings) read(sys string) (*Implied, bool) {
	key := sha256.Sum256([]byte(sys))
	r.mu.Lock()
	if el, ok := r.byKey[key]; ok {
		r.lru.MoveToFront(el)
		e := el.Value.(*reading)
		r.mu.Unlock()
		return e.imp, e.ok
	}
	r.misses++
	r.mu.Unlock()
	imp, ok := ExtractConstraints(sys)
	if !ok {
		imp, ok = ExtractJSONDemand(sys)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.byKey[key]; !dup {
		r.byKey[key] = r.lru.PushFront(&reading{key: key, imp: imp, ok: ok})
		if r.lru.Len() > maxReadings {
			old := r.lru.Remove(r.lru.Back()).(*reading)
			delete(r.byKey, old.key)
		}
	}
	return imp, ok
}
