package convstate_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
)

func TestWriteBehindBackend(t *testing.T) {
	convstatetest.Run(t, func(t *testing.T, b convstate.Bounds) convstate.Backend {
		w := convstate.NewWriteBehind(convstate.NewMemory(b), b, 0, nil)
		t.Cleanup(w.Close)
		return w
	})
}

// gatedBackend is a durable backend whose Puts wait until the gate opens.
type gatedBackend struct {
	*convstate.Memory
	gate chan struct{}
	mu   sync.Mutex
	puts int
}

func (g *gatedBackend) Put(ctx context.Context, key string, c *convstate.Conversation, now, expires time.Time) error {
	<-g.gate
	g.mu.Lock()
	g.puts++
	g.mu.Unlock()
	return g.Memory.Put(ctx, key, c, now, expires)
}

// TestWriteBehindPutDoesNotWaitForTheDurableStore: Put returns while the
// durable backend is still writing, the conversation is read from the front
// at once, and Close writes what was queued.
func TestWriteBehindPutDoesNotWaitForTheDurableStore(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	back := &gatedBackend{Memory: convstate.NewMemory(convstate.Bounds{}), gate: make(chan struct{})}
	w := convstate.NewWriteBehind(back, convstate.Bounds{}, 4, nil)
	c := &convstate.Conversation{ID: "resp_1", Response: []byte(`{"id":"resp_1"}`)}
	put := make(chan error, 1)
	go func() { put <- w.Put(ctx, "resp_1", c, now, now.Add(time.Hour)) }()
	if err := <-put; err != nil {
		t.Fatalf("Put: %v", err)
	}
	got, err := w.Get(ctx, "resp_1", now)
	if err != nil || got.ID != "resp_1" {
		t.Fatalf("Get from the front = %v, %v", got, err)
	}
	back.mu.Lock()
	n := back.puts
	back.mu.Unlock()
	if n != 0 {
		t.Fatalf("durable Puts before the gate opened: %d", n)
	}
	close(back.gate)
	w.Close()
	if got, err := back.Get(ctx, "resp_1", now); err != nil || got.ID != "resp_1" {
		t.Fatalf("durable store after Close = %v, %v; want the queued write", got, err)
	}
}

// TestWriteBehindReadsTheDurableStoreOnAFrontMiss: a conversation the front
// does not hold (stored by an earlier process) is read from the durable store.
func TestWriteBehindReadsTheDurableStoreOnAFrontMiss(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1_700_000_000, 0)
	back := convstate.NewMemory(convstate.Bounds{})
	if err := back.Put(ctx, "resp_old", &convstate.Conversation{ID: "resp_old"}, now, now.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	w := convstate.NewWriteBehind(back, convstate.Bounds{}, 0, nil)
	defer w.Close()
	if got, err := w.Get(ctx, "resp_old", now); err != nil || got.ID != "resp_old" {
		t.Fatalf("Get = %v, %v; want the durable store's entry", got, err)
	}
	if ok, err := w.Delete(ctx, "resp_old", now); err != nil || !ok {
		t.Fatalf("Delete = %v, %v; want true", ok, err)
	}
	if _, err := w.Get(ctx, "resp_old", now); err == nil {
		t.Fatal("Get after Delete found the entry")
	}
}

// TestEncodeOnlyReads: Encode leaves the conversation as it was, so a
// write-behind store can encode one while a GET reads it (a data race
// under -race when Encode set Response to nil for a moment).
func TestEncodeOnlyReads(t *testing.T) {
	c := &convstate.Conversation{ID: "resp_1", Response: []byte(`{"id":"resp_1"}`)}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 100 {
			if _, err := convstate.Encode(c); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for range 100 {
		if string(c.Response) != `{"id":"resp_1"}` {
			t.Fatalf("Response changed under Encode: %q", c.Response)
		}
	}
	wg.Wait()
}
