package sqlite

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
	"github.com/keelmesh/keel/internal/llm"
)

func TestConversationsBackend(t *testing.T) {
	convstatetest.Run(t, func(t *testing.T, b convstate.Bounds) convstate.Backend {
		c, err := OpenConversations(filepath.Join(t.TempDir(), "keel-requests.db"), b)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	})
}

// The conversations share the request log's file: both schemas migrate
// there, each in its own version table, in either order.
func TestConversationsShareTheRequestLogFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "keel-requests.db")
	c, err := OpenConversations(path, convstate.Bounds{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := Open(Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	c, err = OpenConversations(path, convstate.Bounds{})
	if err != nil {
		t.Fatalf("reopening beside the request log: %v", err)
	}
	c.Close()
}

// BenchmarkConversationsPutGet is one stored turn and its follow-up's read
// (a conversation with a 4 KiB response object), under the default
// bounds: what a Responses call with store adds on the request path.
func BenchmarkConversationsPutGet(b *testing.B) {
	c, err := OpenConversations(filepath.Join(b.TempDir(), "keel-requests.db"), convstate.Config{}.Bounds())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
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
