package redis

import (
	"strings"
	"testing"

	"github.com/keelmesh/keel/config"
	"github.com/keelmesh/keel/internal/convstate"
	"github.com/keelmesh/keel/internal/convstate/convstatetest"
	"github.com/keelmesh/keel/internal/store/redis/redistest"
)

// The Redis backend keeps, expires and evicts as the others do (a real
// redis-server; under CI=true its absence fails the test).
func TestConversationsBackend(t *testing.T) {
	srv := redistest.Start(t)
	convstatetest.Run(t, func(t *testing.T, b convstate.Bounds) convstate.Backend {
		// A prefix per case: the cases share the server.
		st, err := New(config.Redis{URL: config.Secret(srv.URL()), KeyPrefix: strings.ReplaceAll(t.Name(), "/", ":") + ":"}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st.Conversations(b)
	})
}
