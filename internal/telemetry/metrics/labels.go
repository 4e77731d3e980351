package metrics

import (
	"sync"
	"sync/atomic"
)

// Label values that stand for more than one value.
const (
	// Other replaces a value outside a label's allowed set, or beyond its cap.
	Other = "other"
	// None stands for an empty value (no region served the call, no model named).
	None = "none"
)

// fixedSet is a label's allowed values, fixed at construction, plus
// "other" and "none". It is immutable and safe for concurrent use.
type fixedSet struct {
	idx   map[string]int
	names []string
}

func newFixedSet(values []string) fixedSet {
	s := fixedSet{idx: make(map[string]int, len(values))}
	for _, v := range values {
		if _, dup := s.idx[v]; dup || v == "" || v == Other || v == None {
			continue
		}
		s.idx[v] = len(s.names)
		s.names = append(s.names, v)
	}
	s.names = append(s.names, Other, None)
	return s
}

func (s fixedSet) len() int { return len(s.names) }

// index returns v's position in names: "other" for an unknown value,
// "none" for "".
func (s fixedSet) index(v string) int {
	if v == "" {
		return len(s.names) - 1
	}
	if i, ok := s.idx[v]; ok {
		return i
	}
	return len(s.names) - 2
}

// cow is a small append-only map read without locks: lookups scan an
// immutable slice behind an atomic pointer; an insert copies it under mu.
// It suits the handful of keys one label combination sees.
type cow[K comparable, V any] struct {
	p  atomic.Pointer[[]cowEntry[K, V]]
	mu sync.Mutex // serialises inserts
}

type cowEntry[K comparable, V any] struct {
	k K
	v V
}

// get returns the value for k, calling mk to create it; mk's value is
// kept (and mk not called again for k) when keep is true.
func (c *cow[K, V]) get(k K, mk func(K) (v V, keep bool)) V {
	if p := c.p.Load(); p != nil {
		for _, e := range *p {
			if e.k == k {
				return e.v
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old []cowEntry[K, V]
	if p := c.p.Load(); p != nil {
		old = *p
		for _, e := range old {
			if e.k == k {
				return e.v
			}
		}
	}
	v, keep := mk(k)
	if !keep {
		return v
	}
	next := make([]cowEntry[K, V], len(old), len(old)+1)
	copy(next, old)
	next = append(next, cowEntry[K, V]{k, v})
	c.p.Store(&next)
	return v
}

// capped bounds a label whose values are not known in advance (failure
// reasons, error types): the first max distinct values pass, later ones
// become "other". Safe for concurrent use; lookups take no lock.
type capped struct {
	max  int
	vals cow[string, string]
	n    int // distinct values admitted; guarded by vals.mu
}

// value returns v itself while the cap allows it, else Other; "" is None.
func (c *capped) value(v string) string {
	if v == "" {
		return None
	}
	return c.vals.get(v, func(v string) (string, bool) {
		// mk runs under vals.mu, which guards n.
		if c.n >= c.max {
			return Other, false // not kept: overflow values must not grow the list
		}
		c.n++
		return v, true
	})
}
