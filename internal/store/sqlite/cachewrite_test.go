package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

// Issue 28: the log keeps the cache writes split by TTL (schema version
// 8), which the report prices apart; a row of an older log, migrated,
// reads every write as 5-minute, as it was priced before.
func TestCacheWriteSplit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.db")
	l := openTest(t, Config{Path: path}, hooks{})
	rec := &callrec.Record{Call: callrec.Call{RequestID: "split", Start: t0}, Result: callrec.Result{Status: 200, Usage: llm.Usage{InputTokens: 10, CacheReadTokens: 100,
		CacheWriteTokens: 30_000, CacheWrite5mTokens: 10_000, CacheWrite1hTokens: 20_000}}}
	old := &callrec.Record{Call: callrec.Call{RequestID: "old", Start: t0.Add(1)}, Result: callrec.Result{Status: 200, Usage: llm.Usage{CacheWriteTokens: 7}}}
	l.RequestDone(rec)
	l.RequestDone(old)
	if err := l.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	// What migrating a version 7 log leaves in its rows.
	if _, err := l.db.Exec(`UPDATE requests SET tokens_cache_write_5m = NULL, tokens_cache_write_1h = NULL WHERE id = 'old'`); err != nil {
		t.Fatal(err)
	}
	got := collect(t, l.Query(context.Background(), t0))
	if len(got) != 2 {
		t.Fatalf("%d rows, want 2", len(got))
	}
	for i, want := range [][3]int{{30_000, 10_000, 20_000}, {7, 7, 0}} {
		r := got[i]
		if r.TokensCacheWrite != want[0] || r.TokensCacheWrite5m != want[1] || r.TokensCacheWrite1h != want[2] {
			t.Errorf("%s: writes %d (5m %d, 1h %d), want %d (%d, %d)", r.RequestID, r.TokensCacheWrite, r.TokensCacheWrite5m, r.TokensCacheWrite1h, want[0], want[1], want[2])
		}
	}
}
