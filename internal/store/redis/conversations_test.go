package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
	"github.com/keelmesh/keel/internal/llm"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
)

// The Redis backend keeps, expires and evicts as the others do (a real
// redis-server; under CI=true its absence fails the test).
func TestConversationsBackend(t *testing.T) {
	srv := redistest.Start(t)
	convstatetest.Run(t, func(t *testing.T, b convstate.Bounds) convstate.Backend {
		// A prefix per case: the cases share the server.
		// A generous timeout: a loaded CI machine can exceed the 250ms default.
		st, err := New(config.Redis{URL: config.Secret(srv.URL()), KeyPrefix: strings.ReplaceAll(t.Name(), "/", ":") + ":", Timeout: config.Duration(5 * time.Second)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st.Conversations(b)
	})
}

// BenchmarkConversationsPutGet is one stored turn and its follow-up's read
// (a conversation with a 4 KiB response object) on a loopback
// redis-server, under the default bounds.
func BenchmarkConversationsPutGet(b *testing.B) {
	srv := redistest.Start(b)
	st, err := New(config.Redis{URL: config.Secret(srv.URL()), KeyPrefix: "bench:", Timeout: config.Duration(time.Second)}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	c := st.Conversations(convstate.Config{}.Bounds())
	ctx := context.Background()
	conv := &convstate.Conversation{ID: "resp_x", Messages: []llm.Message{{Role: llm.RoleUser, Content: []llm.Block{{Type: llm.BlockText, Text: "Hello there"}}}},
		Response: []byte(`{"id":"resp_x","pad":"` + strings.Repeat("x", 4096) + `"}`)}
	now := time.Now()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		id := "resp_" + strconv.Itoa(i)
		if err := c.Put(ctx, id, conv, now, now.Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
		if _, err := c.Get(ctx, id, now); err != nil {
			b.Fatal(err)
		}
	}
}
