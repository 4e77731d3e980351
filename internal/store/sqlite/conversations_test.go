package sqlite

import (
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
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
