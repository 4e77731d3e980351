// Package convstatetest is the conformance suite of convstate.Backend: every
// backend (memory, SQLite, Redis) runs the same cases, so that they keep,
// expire and evict alike and give back what they were given. Time is the
// caller's (the Backend methods take now), so expiry is tested without
// waiting.
package convstatetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/llm"
)

// t0 is the suite's virtual start.
var t0 = time.Date(2026, 12, 7, 8, 0, 0, 0, time.UTC)

// entry is a conversation of a user turn and a tool call whose response
// object holds fill.
func entry(id, fill string) *convstate.Conversation {
	return &convstate.Conversation{ID: id, Endpoint: "ep", Created: t0,
		Messages: []llm.Message{
			{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "weather?"}}, ContentIsString: true},
			{Role: llm.RoleAssistant, Content: []llm.Block{{Type: llm.BlockToolUse, ID: "call_1", Name: "get_weather", Input: json.RawMessage(`{"city":"Oslo"}`)}}},
		},
		Response: json.RawMessage(`{"id":"` + id + `","fill":"` + fill + `"}`)}
}

// Run runs the suite; open returns an empty backend enforcing b.
func Run(t *testing.T, open func(t *testing.T, b convstate.Bounds) convstate.Backend) {
	ctx := context.Background()
	hour := t0.Add(time.Hour)
	put := func(t *testing.T, be convstate.Backend, c *convstate.Conversation, at time.Time) {
		t.Helper()
		if err := be.Put(ctx, c.ID, c, at, at.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("round_trip", func(t *testing.T) {
		be := open(t, convstate.Bounds{})
		put(t, be, entry("resp_1", "a"), t0)
		wantGet(t, be, "resp_1", t0, entry("resp_1", "a"))
		put(t, be, entry("resp_1", "b"), t0)
		wantGet(t, be, "resp_1", t0, entry("resp_1", "b"))
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
		put(t, be, entry("resp_ttl", "x"), t0)
		wantGet(t, be, "resp_ttl", hour.Add(-time.Nanosecond), entry("resp_ttl", "x"))
		wantMissing(t, be, "resp_ttl", hour)
		if ok, err := be.Delete(ctx, "resp_ttl", hour); err != nil || ok {
			t.Fatalf("Delete of an expired entry = %v, %v; want false", ok, err)
		}
	})
	t.Run("expired_entries_make_room", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxEntries: 2})
		put(t, be, entry("old0", "x"), t0)
		put(t, be, entry("old1", "x"), t0)
		later := hour.Add(time.Minute)
		put(t, be, entry("new", "y"), later)
		wantGet(t, be, "new", later, entry("new", "y"))
	})
	t.Run("max_entries_evicts_oldest", func(t *testing.T) {
		be := open(t, convstate.Bounds{MaxEntries: 3})
		for i := range 5 {
			put(t, be, entry(fmt.Sprint("resp_", i), "x"), t0.Add(time.Duration(i)*time.Second))
		}
		now := t0.Add(time.Minute)
		wantMissing(t, be, "resp_0", now)
		wantMissing(t, be, "resp_1", now)
		for i := 2; i < 5; i++ {
			wantGet(t, be, fmt.Sprint("resp_", i), now, entry(fmt.Sprint("resp_", i), "x"))
		}
	})
	t.Run("max_bytes_evicts_oldest", func(t *testing.T) {
		fill := strings.Repeat("b", 40)
		size := entry("resp_0", fill).Size()
		be := open(t, convstate.Bounds{MaxBytes: 2*size + size/2})
		for i := range 4 {
			put(t, be, entry(fmt.Sprint("resp_", i), fill), t0.Add(time.Duration(i)*time.Second))
		}
		now := t0.Add(time.Minute)
		wantMissing(t, be, "resp_0", now)
		wantMissing(t, be, "resp_1", now)
		wantGet(t, be, "resp_2", now, entry("resp_2", fill))
		wantGet(t, be, "resp_3", now, entry("resp_3", fill))
		// Replacing an entry counts its size once.
		put(t, be, entry("resp_3", fill), now)
		wantGet(t, be, "resp_2", now, entry("resp_2", fill))
		// An entry over the whole bound is not kept, and evicts nothing.
		put(t, be, entry("huge", strings.Repeat("h", int(3*size))), now)
		wantMissing(t, be, "huge", now)
		wantGet(t, be, "resp_2", now, entry("resp_2", fill))
	})
	t.Run("delete_frees_room", func(t *testing.T) {
		size := entry("a", "x").Size()
		be := open(t, convstate.Bounds{MaxEntries: 2, MaxBytes: 2 * size})
		put(t, be, entry("a", "x"), t0)
		put(t, be, entry("b", "x"), t0.Add(time.Second))
		if ok, err := be.Delete(ctx, "a", t0); err != nil || !ok {
			t.Fatalf("Delete = %v, %v", ok, err)
		}
		at := t0.Add(2 * time.Second)
		put(t, be, entry("c", "x"), at)
		wantGet(t, be, "b", at, entry("b", "x"))
		wantGet(t, be, "c", at, entry("c", "x"))
	})
}

func wantGet(t *testing.T, be convstate.Backend, id string, now time.Time, want *convstate.Conversation) {
	t.Helper()
	got, err := be.Get(context.Background(), id, now)
	if err != nil {
		t.Fatalf("Get(%s) at %s: %v", id, now.Sub(t0), err)
	}
	if !got.Created.Equal(want.Created) {
		t.Fatalf("Get(%s).Created = %v; want %v", id, got.Created, want.Created)
	}
	g, w := *got, *want
	g.Created, w.Created = time.Time{}, time.Time{}
	if !reflect.DeepEqual(g, w) {
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		t.Fatalf("Get(%s):\n got %s\nwant %s", id, gb, wb)
	}
}

func wantMissing(t *testing.T, be convstate.Backend, id string, now time.Time) {
	t.Helper()
	got, err := be.Get(context.Background(), id, now)
	if !errors.Is(err, convstate.ErrNotFound) {
		t.Fatalf("Get(%s) at %s = %v, %v; want ErrNotFound", id, now.Sub(t0), got, err)
	}
}
