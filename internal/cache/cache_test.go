package cache

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestTTLExpiry: an entry is served until TTL after it was stored and not
// at TTL, in the bubble's virtual time (the LRU's default clock).
func TestTTLExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, err := New[string](Config{TTL: time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Put("k", "v", 1)
		time.Sleep(time.Minute - time.Nanosecond)
		if v, ok := c.Get("k"); !ok || v != "v" {
			t.Fatalf("just before the TTL: Get = %q, %v; want v, true", v, ok)
		}
		time.Sleep(time.Nanosecond)
		if v, ok := c.Get("k"); ok {
			t.Fatalf("at the TTL: Get = %q, true; want a miss", v)
		}
		if c.Len() != 0 || c.Bytes() != 0 {
			t.Fatalf("after expiry: %d entries, %d bytes; want 0, 0", c.Len(), c.Bytes())
		}
	})
}

// TestDefaultTTL: the zero Config keeps an entry 5 minutes.
func TestDefaultTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := New[int](Config{}, nil)
		c.Put("k", 1, 1)
		time.Sleep(DefaultTTL - time.Second)
		if _, ok := c.Get("k"); !ok {
			t.Fatal("miss before the default TTL")
		}
		time.Sleep(time.Second)
		if _, ok := c.Get("k"); ok {
			t.Fatal("hit at the default TTL")
		}
	})
}

// TestBounds: Put evicts the least recently used entries until both the
// entry and the byte bound hold.
func TestBounds(t *testing.T) {
	type put struct {
		key  string
		size int64
	}
	for _, tc := range []struct {
		name string
		cfg  Config
		puts []put
		// touch is read after the puts but before the last one.
		touch     string
		wantKeys  []string
		wantGone  []string
		wantBytes int64
	}{
		{name: "max entries evicts the oldest", cfg: Config{MaxEntries: 2},
			puts: []put{{"a", 1}, {"b", 1}, {"c", 1}}, wantKeys: []string{"b", "c"}, wantGone: []string{"a"}, wantBytes: 2},
		{name: "a read makes an entry recent", cfg: Config{MaxEntries: 2},
			puts: []put{{"a", 1}, {"b", 1}, {"c", 1}}, touch: "a", wantKeys: []string{"a", "c"}, wantGone: []string{"b"}, wantBytes: 2},
		{name: "max bytes evicts until it holds", cfg: Config{MaxBytes: 10},
			puts: []put{{"a", 4}, {"b", 4}, {"c", 6}}, wantKeys: []string{"c", "b"}, wantGone: []string{"a"}, wantBytes: 10},
		{name: "max bytes evicts several", cfg: Config{MaxBytes: 10},
			puts: []put{{"a", 4}, {"b", 4}, {"c", 9}}, wantKeys: []string{"c"}, wantGone: []string{"a", "b"}, wantBytes: 9},
		{name: "larger than max bytes is not stored", cfg: Config{MaxBytes: 10},
			puts: []put{{"a", 4}, {"big", 11}}, wantKeys: []string{"a"}, wantGone: []string{"big"}, wantBytes: 4},
		{name: "a replaced key counts once", cfg: Config{MaxBytes: 10},
			puts: []put{{"a", 4}, {"a", 6}}, wantKeys: []string{"a"}, wantBytes: 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New[string](tc.cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, p := range tc.puts {
				if i == len(tc.puts)-1 && tc.touch != "" {
					c.Get(tc.touch)
				}
				c.Put(p.key, p.key, p.size)
			}
			for _, k := range tc.wantKeys {
				if _, ok := c.Get(k); !ok {
					t.Errorf("Get(%q) missed; want a hit", k)
				}
			}
			for _, k := range tc.wantGone {
				if _, ok := c.Get(k); ok {
					t.Errorf("Get(%q) hit; want it evicted", k)
				}
			}
			if got := c.Bytes(); got != tc.wantBytes {
				t.Errorf("Bytes() = %d, want %d", got, tc.wantBytes)
			}
			if got := c.Len(); got != len(tc.wantKeys) {
				t.Errorf("Len() = %d, want %d", got, len(tc.wantKeys))
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"negative ttl", Config{TTL: -1}},
		{"negative max entries", Config{MaxEntries: -1}},
		{"negative max bytes", Config{MaxBytes: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New[int](tc.cfg, nil); !errors.Is(err, ErrConfig) {
				t.Fatalf("New: err = %v, want ErrConfig", err)
			}
		})
	}
}
