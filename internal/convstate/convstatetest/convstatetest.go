// Package convstatetest is the conformance suite of convstate.Backend: every
// backend (memory, SQLite, Redis) runs the same cases, so that they keep,
// expire and evict alike. Time is the caller's (the Backend methods take
// now), so expiry is tested without waiting.
package convstatetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
)

// t0 is the suite's virtual start.
var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

// Run runs the suite; open returns an empty backend enforcing b.
func Run(t *testing.T, open func(t *testing.T, b convstate.Bounds) convstate.Backend) {
	ctx := context.Background()
	hour := t0.Add(time.Hour)
	t.Run("round_trip", func(t *testing.T) {
		be := open(t, convstate.Bounds{})
		if err := be.Put(ctx, "resp_1", []byte(`{"a":1}`), t0, hour); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "resp_1", t0, `{"a":1}`)
		if err := be.Put(ctx, "resp_1", []byte(`{"a":2}`), t0, hour); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "resp_1", t0, `{"a":2}`)
		wantMissing(t, be, "resp_2", t0)
		if ok, err := be.Delete(ctx, "resp_1", t0); err != nil || !ok {
			t.Fatalf("Delete = %v, %v; want true", ok, err)
		}
		wantMissing(t, be, "resp_1", t0)
		if ok, err := be.Delete(ctx, "resp_1", t0); err != nil || ok {
			t.Fatalf("second Delete = %v, %v; want false", ok, err)
		}
	})
	t.Run("ttl", func(t *testing.T) {
		be := open(t, convstate.Bounds{})
		if err := be.Put(ctx, "resp_ttl", []byte("x"), t0, hour); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "resp_ttl", hour.Add(-time.Nanosecond), "x")
		wantMissing(t, be, "resp_ttl", hour)
		if ok, err := be.Delete(ctx, "resp_ttl", hour); err != nil || ok {
			t.Fatalf("Delete of an expired entry = %v, %v; want false", ok, err)
		}
		// Expired entries do not count against the bounds.
	})
	t.Run("expired_entries_make_room", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxEntries: 2})
		for i := range 2 {
			if err := be.Put(ctx, fmt.Sprint("old", i), []byte("x"), t0, hour); err != nil {
				t.Fatal(err)
			}
		}
		later := hour.Add(time.Minute)
		if err := be.Put(ctx, "new", []byte("y"), later, later.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "new", later, "y")
	})
	t.Run("max_entries_evicts_oldest", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxEntries: 3})
		for i := range 5 {
			at := t0.Add(time.Duration(i) * time.Second)
			if err := be.Put(ctx, fmt.Sprint("resp_", i), []byte(fmt.Sprint(i)), at, at.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		now := t0.Add(time.Minute)
		wantMissing(t, be, "resp_0", now)
		wantMissing(t, be, "resp_1", now)
		for i := 2; i < 5; i++ {
			wantGet(t, be, fmt.Sprint("resp_", i), now, fmt.Sprint(i))
		}
	})
	t.Run("delete_frees_room", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxEntries: 2, MaxBytes: 10})
		for i, id := range []string{"a", "b"} {
			at := t0.Add(time.Duration(i) * time.Second)
			if err := be.Put(ctx, id, []byte("12345"), at, at.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		if ok, err := be.Delete(ctx, "a", t0); err != nil || !ok {
			t.Fatalf("Delete = %v, %v", ok, err)
		}
		at := t0.Add(2 * time.Second)
		if err := be.Put(ctx, "c", []byte("12345"), at, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "b", at, "12345")
		wantGet(t, be, "c", at, "12345")
	})
	t.Run("max_bytes_evicts_oldest", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxBytes: 100})
		val := bytes.Repeat([]byte("b"), 40)
		for i := range 4 {
			at := t0.Add(time.Duration(i) * time.Second)
			if err := be.Put(ctx, fmt.Sprint("resp_", i), val, at, at.Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}
		now := t0.Add(time.Minute)
		wantMissing(t, be, "resp_0", now)
		wantMissing(t, be, "resp_1", now)
		wantGet(t, be, "resp_2", now, string(val))
		wantGet(t, be, "resp_3", now, string(val))
		// Replacing an entry counts its size once.
		if err := be.Put(ctx, "resp_3", val, now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantGet(t, be, "resp_2", now, string(val))
		// An entry over the whole bound is not kept, and evicts nothing.
		if err := be.Put(ctx, "huge", bytes.Repeat([]byte("h"), 101), now, now.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		wantMissing(t, be, "huge", now)
		wantGet(t, be, "resp_2", now, string(val))
	})
}

func wantGet(t *testing.T, be convstate.Backend, id string, now time.Time, want string) {
	t.Helper()
	got, err := be.Get(context.Background(), id, now)
	if err != nil {
		t.Fatalf("Get(%s) at %s: %v; want %q", id, now.Sub(t0), err, want)
	}
	if string(got) != want {
		t.Fatalf("Get(%s) = %q; want %q", id, got, want)
	}
}

func wantMissing(t *testing.T, be convstate.Backend, id string, now time.Time) {
	t.Helper()
	got, err := be.Get(context.Background(), id, now)
	if !errors.Is(err, convstate.ErrNotFound) {
		t.Fatalf("Get(%s) at %s = %q, %v; want ErrNotFound", id, now.Sub(t0), got, err)
	}
}
