package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/keelmesh/keel/internal/callrec"
	"github.com/keelmesh/keel/internal/llm"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// t0 is the start of every test's timeline.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

// fakeClock is a settable clock for retention.
type fakeClock struct {
	mu  sync.Mutex // guards following
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func openTest(t *testing.T, cfg Config, h hooks) *Log {
	t.Helper()
	if cfg.Path == "" {
		cfg.Path = filepath.Join(t.TempDir(), "requests.db")
	}
	if cfg.Now == nil {
		cfg.Now = (&fakeClock{now: t0}).Now
	}
	l, err := open(cfg, h)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func collect(t *testing.T, seq func(func(*Row, error) bool)) []*Row {
	t.Helper()
	var out []*Row
	for r, err := range seq {
		if err != nil {
			t.Fatalf("query: %v", err)
		}
		out = append(out, r)
	}
	return out
}

func flush(t *testing.T, l *Log) {
	t.Helper()
	if err := l.Flush(context.Background()); err != nil {
		t.Fatalf("flush: %v", err)
	}
}

// hedged is a streamed call whose hedge won after a 429 fallback.
func hedged() *callrec.Record {
	s := t0.Add(time.Minute)
	return &callrec.Record{
		Call: callrec.Call{RequestID: "req-hedged", Start: s, Duration: 812345678 * time.Nanosecond, TTFT: 98765432 * time.Nanosecond,
			Format: llm.FormatAnthropic, Model: "claude-x", Stream: true, KeyID: "key_0123456789abcdef", Team: "search"},
		Route: callrec.Route{Domain: "code", Legacy: true, Stage: "hedging", ServedBy: "claude-x@eu", ServedModel: "claude-x",
			ServedRegion: "eu", ServedProvider: "anthropic", Fallback: "rate_limited", Retries: 1, Hedges: 1, HedgeWon: true, Recovered: 1,
			QueueWait: 15 * time.Millisecond, Attempts: []callrec.Attempt{
				{Endpoint: "claude-x@us", Model: "claude-x", Region: "us", Kind: "primary", Outcome: "rate_limited", Status: 429,
					Start: s.Add(time.Millisecond), End: s.Add(21 * time.Millisecond), Bytes: 120},
				{Endpoint: "claude-x@eu", Model: "claude-x", Region: "eu", Kind: "retry", Outcome: "cancelled_loser",
					Start: s.Add(36 * time.Millisecond), End: s.Add(400 * time.Millisecond), Wait: 15 * time.Millisecond,
					InputTokens: 2000, OutputTokens: 340, Cost: 0.0111},
				{Endpoint: "claude-x@eu2", Model: "claude-x", Region: "eu", Kind: "hedge", Outcome: "ok", Status: 200,
					Start: s.Add(236 * time.Millisecond), End: s.Add(812 * time.Millisecond), Bytes: 4096, Winner: true},
			}},
		Result: callrec.Result{Status: 200,
			Usage: llm.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 800, CacheWriteTokens: 5}, Cost: 0.012345},
		Normalization: &callrec.Normalization{Offset: -0.15},
		Cache:         &callrec.Cache{Status: "miss"},
		Semantic:      &callrec.Semantic{Status: "error"},
		Structured:    &callrec.Structured{Repairs: []string{"strip_fence", "close_brace"}},
		Fragments:     &callrec.Fragments{Count: 3, OK: 2, Fusions: 4, FusionConflicts: 1},
	}
}

func hedgedRow() *Row {
	return &Row{
		Seq: 1, RequestID: "req-hedged", Start: t0.Add(time.Minute), Duration: 812345678 * time.Nanosecond, TTFT: 98765432 * time.Nanosecond,
		Format: "anthropic", Model: "claude-x", Stream: true, Domain: "code", Legacy: true, Stage: "hedging",
		KeyID: "key_0123456789abcdef", Team: "search", Cache: "miss", SemanticCache: "error",
		ServedEndpoint: "claude-x@eu", ServedModel: "claude-x", ServedRegion: "eu", ServedProvider: "anthropic",
		Fallback: "rate_limited", Retries: 1, Hedges: 1, HedgeWon: true, Recovered: 1, QueueWait: 15 * time.Millisecond,
		Status: 200, TokensIn: 1200, TokensOut: 340, TokensCacheRead: 800, TokensCacheWrite: 5, TokensCacheWrite5m: 5,
		CostUSD: 0.012345, Repairs: []string{"strip_fence", "close_brace"}, NormalizationOffset: -0.15,
		Fragments: 3, FragmentsOK: 2, Fusions: 4, FusionConflicts: 1,
		Attempts: []Attempt{
			{Endpoint: "claude-x@us", Model: "claude-x", Region: "us", Kind: "primary", Outcome: "rate_limited", Status: 429,
				Start: time.Millisecond, Duration: 20 * time.Millisecond, Bytes: 120, UsageRecorded: true},
			{Endpoint: "claude-x@eu", Model: "claude-x", Region: "eu", Kind: "retry", Outcome: "cancelled_loser",
				Start: 36 * time.Millisecond, Duration: 364 * time.Millisecond, Wait: 15 * time.Millisecond,
				InputTokens: 2000, OutputTokens: 340, CostUSD: 0.0111, UsageRecorded: true},
			{Endpoint: "claude-x@eu2", Model: "claude-x", Region: "eu", Kind: "hedge", Outcome: "ok", Status: 200,
				Start: 236 * time.Millisecond, Duration: 576 * time.Millisecond, Bytes: 4096, Winner: true, UsageRecorded: true},
		},
	}
}

func TestRoundTrip(t *testing.T) {
	failed := &callrec.Record{
		Call: callrec.Call{RequestID: "req-failed", Start: t0.Add(2 * time.Minute), Duration: 3 * time.Second, Format: llm.FormatOpenAI,
			Model: "gpt-y"},
		Route: callrec.Route{Fallback: "overloaded",
			Attempts: []callrec.Attempt{{Endpoint: "gpt-y@us", Kind: "primary", Outcome: "overloaded", Status: 529,
				Start: t0.Add(2 * time.Minute), End: t0.Add(2*time.Minute + time.Second)}}},
		Result: callrec.Result{Status: 503, Err: &llm.APIError{Status: 503, MeshCode: "mesh_fallback_exhausted", Message: "gave up"}},
	}
	failedRow := &Row{Seq: 2, RequestID: "req-failed", Start: t0.Add(2 * time.Minute), Duration: 3 * time.Second,
		Format: "openai", Model: "gpt-y", Status: 503, Fallback: "overloaded", MeshErrorCode: "mesh_fallback_exhausted",
		Attempts: []Attempt{{Endpoint: "gpt-y@us", Kind: "primary", Outcome: "overloaded", Status: 529, Duration: time.Second, UsageRecorded: true}}}
	bare := &callrec.Record{Call: callrec.Call{RequestID: "req-bare", Start: t0.Add(3 * time.Minute)}, Result: callrec.Result{Status: 400}}
	bareRow := &Row{Seq: 3, RequestID: "req-bare", Start: t0.Add(3 * time.Minute), Status: 400, Format: "unknown"}
	// A semantic cache hit: no attempt, the similarity recorded.
	semantic := &callrec.Record{
		Call:     callrec.Call{RequestID: "req-semantic", Start: t0.Add(4 * time.Minute), Format: llm.FormatOpenAI, Model: "support"},
		Route:    callrec.Route{ServedBy: "gpt-y@us", ServedModel: "gpt-y"},
		Result:   callrec.Result{Status: 200},
		Cache:    &callrec.Cache{Status: "hit"},
		Semantic: &callrec.Semantic{Status: "hit", Similarity: 0.9164},
	}
	semanticRow := &Row{Seq: 4, RequestID: "req-semantic", Start: t0.Add(4 * time.Minute), Status: 200, Format: "openai", Model: "support",
		ServedEndpoint: "gpt-y@us", ServedModel: "gpt-y", Cache: "hit", SemanticCache: "hit", CacheSimilarity: 0.9164}

	tests := []struct {
		name  string
		in    []*callrec.Record
		since time.Time
		want  []*Row
	}{
		{name: "all", in: []*callrec.Record{hedged(), failed, bare, semantic}, since: t0, want: []*Row{hedgedRow(), failedRow, bareRow, semanticRow}},
		{name: "since excludes older", in: []*callrec.Record{hedged(), failed, bare}, since: t0.Add(2 * time.Minute), want: []*Row{failedRow, bareRow}},
		{name: "none", in: []*callrec.Record{hedged()}, since: t0.Add(time.Hour), want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := openTest(t, Config{}, hooks{})
			for _, r := range tt.in {
				l.RequestDone(r)
			}
			flush(t, l)
			got := collect(t, l.Query(context.Background(), tt.since))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d rows, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if !reflect.DeepEqual(got[i], tt.want[i]) {
					t.Errorf("row %d (-got +want):\n-%+v\n+%+v", i, *got[i], *tt.want[i])
				}
			}
			if l.Written() != uint64(len(tt.in)) || l.Dropped() != 0 || l.Failed() != 0 {
				t.Errorf("written %d dropped %d failed %d, want %d 0 0", l.Written(), l.Dropped(), l.Failed(), len(tt.in))
			}
		})
	}
}

// TestWriterOpensThePathAsIs: the writer's own connection (rawConn) opens
// the file the pool's connections open, whatever characters its name has,
// and stores strings byte for byte, empty ones as ” (not NULL), long ones
// past its first string buffer.
func TestWriterOpensThePathAsIs(t *testing.T) {
	for _, name := range []string{"a?b#c%25 d.db", "file:x.db", "重要.db"} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			t.Chdir(dir)
			long := strings.Repeat("é", 5000) // 10,000 bytes
			l := openTest(t, Config{Path: name, LogBodies: true, Bodies: func(r *callrec.Record) (string, string) {
				return long, "答"
			}}, hooks{})
			r := &callrec.Record{Call: callrec.Call{RequestID: "req-é", Start: t0.Add(time.Minute), Model: "模型"}, Result: callrec.Result{Status: 200}}
			l.RequestDone(r)
			flush(t, l)
			got := collect(t, l.Query(context.Background(), t0))
			want := &Row{Seq: 1, RequestID: "req-é", Start: t0.Add(time.Minute), Status: 200, Format: "unknown", Model: "模型"}
			if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
				t.Fatalf("rows %+v, want one %+v", got, want)
			}
			var prompt, answer string
			if err := l.db.QueryRow(`SELECT prompt, answer FROM bodies WHERE request_seq = 1`).Scan(&prompt, &answer); err != nil {
				t.Fatal(err)
			}
			if prompt != long || answer != "答" {
				t.Errorf("bodies %d and %q bytes, want %d and %q", len(prompt), answer, len(long), "答")
			}
			var nulls int
			if err := l.db.QueryRow(`SELECT count(*) FROM requests WHERE mesh_error_code IS NULL OR fallback IS NULL OR repairs IS NULL`).Scan(&nulls); err != nil {
				t.Fatal(err)
			}
			if nulls != 0 {
				t.Errorf("%d rows with an empty string stored as NULL", nulls)
			}
			if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
				t.Errorf("the log is not at %q: %v", name, err)
			}
		})
	}
}

func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	gate := make(chan struct{})
	l := openTest(t, Config{QueueSize: 4}, hooks{gate: gate})
	r := hedged()
	start := time.Now()
	for range 1000 {
		l.RequestDone(r)
	}
	// 1000 non-blocking calls take microseconds; a blocked send would never
	// return, so this bound only catches a send that waits for the writer.
	if d := time.Since(start); d > time.Second {
		t.Errorf("1000 RequestDone calls with a full queue took %v", d)
	}
	if got := l.Dropped(); got != 996 {
		t.Errorf("Dropped() = %d, want 996", got)
	}
	close(gate)
	flush(t, l)
	if got := len(collect(t, l.Query(context.Background(), t0))); got != 4 {
		t.Errorf("rows = %d, want the 4 queued", got)
	}
}

func TestRetention(t *testing.T) {
	clock := &fakeClock{now: t0}
	path := filepath.Join(t.TempDir(), "requests.db")
	at := func(id string, ago time.Duration) *callrec.Record {
		return &callrec.Record{Call: callrec.Call{RequestID: id, Start: clock.Now().Add(-ago)},
			Route: callrec.Route{Attempts: []callrec.Attempt{{Endpoint: "e", Kind: "primary"}}}}
	}
	ids := func(l *Log) string {
		var s []string
		for _, r := range collect(t, l.Query(context.Background(), time.Time{})) {
			s = append(s, r.RequestID)
		}
		return strings.Join(s, ",")
	}

	l := openTest(t, Config{Path: path, RetentionDays: 2, Now: clock.Now}, hooks{})
	l.RequestDone(at("old", 3*24*time.Hour))
	l.RequestDone(at("edge", 2*24*time.Hour-2*time.Hour))
	l.RequestDone(at("new", time.Hour))
	flush(t, l) // not an hour since Open: nothing pruned yet
	if got := ids(l); got != "old,edge,new" {
		t.Fatalf("before retention: %s", got)
	}
	clock.Advance(time.Hour)
	flush(t, l) // an hour has passed: the hourly retention runs
	if got := ids(l); got != "edge,new" {
		t.Fatalf("after an hour: %s, want edge,new", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	clock.Advance(24 * time.Hour)
	l = openTest(t, Config{Path: path, RetentionDays: 2, Now: clock.Now}, hooks{})
	if got := ids(l); got != "new" { // retention at Open
		t.Fatalf("after reopen a day later: %s, want new", got)
	}
	var orphans int
	if err := l.db.QueryRow(`SELECT count(*) FROM attempts WHERE request_seq NOT IN (SELECT seq FROM requests)`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d attempts rows outlived their request", orphans)
	}
}

func TestBodies(t *testing.T) {
	tests := []struct {
		name      string
		logBodies bool
		want      int
	}{
		{name: "off by default", logBodies: false, want: 0},
		{name: "log_bodies", logBodies: true, want: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := 0
			l := openTest(t, Config{LogBodies: tt.logBodies, Bodies: func(*callrec.Record) (string, string) {
				called++
				return "the prompt", "the answer"
			}}, hooks{})
			l.RequestDone(hedged())
			flush(t, l)
			var n int
			if err := l.db.QueryRow(`SELECT count(*) FROM bodies WHERE prompt = 'the prompt' AND answer = 'the answer'`).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != tt.want || called != tt.want {
				t.Errorf("bodies rows %d, hook calls %d, want %d", n, called, tt.want)
			}
		})
	}
}

func TestCloseFlushesAndDropsAfter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.db")
	l := openTest(t, Config{Path: path, FlushInterval: time.Hour}, hooks{})
	l.RequestDone(hedged())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	l.RequestDone(hedged())
	if l.Dropped() != 1 {
		t.Errorf("Dropped() after Close = %d, want 1", l.Dropped())
	}
	if err := l.Flush(context.Background()); err == nil {
		t.Error("Flush after Close succeeded")
	}
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if got := collect(t, r.Query(context.Background(), t0)); len(got) != 1 || !reflect.DeepEqual(got[0], hedgedRow()) {
		t.Errorf("after Close the reader sees %d rows, want the hedged row", len(got))
	}
}

func TestReaderWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.db")
	l := openTest(t, Config{Path: path}, hooks{})
	l.RequestDone(hedged())
	flush(t, l)
	r, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l.RequestDone(hedged())
	flush(t, l)
	if got := len(collect(t, r.Query(context.Background(), t0))); got != 2 {
		t.Errorf("reader sees %d rows, want 2", got)
	}
}

func TestQueryStopsEarly(t *testing.T) {
	l := openTest(t, Config{}, hooks{})
	for range 5 {
		l.RequestDone(hedged())
	}
	flush(t, l)
	n := 0
	for _, err := range l.Query(context.Background(), t0) {
		if err != nil {
			t.Fatal(err)
		}
		if n++; n == 2 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for r, err := range l.Query(ctx, t0) {
		if err == nil || r != nil {
			t.Fatalf("cancelled query yielded %v, %v", r, err)
		}
	}
}

func TestOpenReaderErrors(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte(strings.Repeat("not a database\n", 100)), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t (x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	tests := []struct {
		name, path, want string
	}{
		{name: "missing", path: filepath.Join(dir, "nope.db"), want: "no such file"},
		{name: "directory", path: dir, want: "is a directory"},
		{name: "not sqlite", path: text, want: "not a keel request log"},
		{name: "other sqlite", path: other, want: "not a keel request log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := OpenReader(tt.path)
			if err == nil {
				r.Close()
				t.Fatal("OpenReader succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "nope.db")); !os.IsNotExist(err) {
		t.Errorf("OpenReader created the missing file")
	}
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.db")
	l := openTest(t, Config{Path: path}, hooks{})
	l.RequestDone(hedged())
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openTest(t, Config{Path: path}, hooks{}) // reopening migrates nothing and keeps the rows
	if got := len(collect(t, l.Query(context.Background(), t0))); got != 1 {
		t.Fatalf("after reopen: %d rows, want 1", got)
	}
	if v, err := schemaVersion(context.Background(), l.db); err != nil || v != len(migrations) {
		t.Fatalf("version %d, %v; want %d", v, err, len(migrations))
	}
	if _, err := l.db.Exec(`UPDATE schema_version SET version = 99`); err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Open(Config{Path: path}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Errorf("Open of a newer schema: %v", err)
	}
	if _, err := OpenReader(path); err == nil || !strings.Contains(err.Error(), "unsupported schema version 99") {
		t.Errorf("OpenReader of a newer schema: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{name: "retention", cfg: Config{RetentionDays: -1}, want: "retention_days"},
		{name: "queue", cfg: Config{QueueSize: -1}, want: "queue_size"},
		{name: "batch", cfg: Config{BatchSize: -1}, want: "batch_size"},
		{name: "flush", cfg: Config{FlushInterval: -time.Second}, want: "flush_interval"},
		{name: "unwritable path", cfg: Config{Path: filepath.Join(t.TempDir(), "missing-dir", "x.db")}, want: "opening request log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := Open(tt.cfg)
			if err == nil {
				l.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestWALMode(t *testing.T) {
	l := openTest(t, Config{}, hooks{})
	var mode string
	var sync int
	if err := l.db.QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if err := l.db.QueryRow(`PRAGMA synchronous`).Scan(&sync); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" || sync != 1 {
		t.Errorf("journal_mode %q synchronous %d, want wal 1 (NORMAL)", mode, sync)
	}
}

// TestSeqAcrossBatches writes batches of sizes that take every chunk size, a
// batch that fails half-way, batches from a second Log on the same file (as
// a second process would) and batches after reopening the file. Every
// request must get the next seq, and its attempts and bodies must join to it.
func TestSeqAcrossBatches(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "requests.db")
	cfg := Config{Path: path, LogBodies: true, Bodies: func(r *callrec.Record) (string, string) {
		return "prompt of " + r.RequestID, "answer of " + r.RequestID
	}}
	// Each Log's writer is held: the test calls write, the writer's code
	// path, with batches of exact sizes.
	openHeld := func() *Log { return openTest(t, cfg, hooks{gate: make(chan struct{})}) }

	n := 0
	var want []*callrec.Record // the Records written, in order
	// batch makes size Records; the nth starts n seconds after t0 and has
	// n%5 attempts, so that attempts rows span chunks unevenly.
	batch := func(size int) []*callrec.Record {
		var b []*callrec.Record
		for range size {
			n++
			start := t0.Add(time.Duration(n) * time.Second)
			r := &callrec.Record{Call: callrec.Call{RequestID: fmt.Sprintf("req-%03d", n), Start: start, Model: "m"},
				Result: callrec.Result{Status: 200}}
			for i := range n % 5 {
				r.Attempts = append(r.Attempts, callrec.Attempt{Endpoint: fmt.Sprintf("%s/%d", r.RequestID, i),
					Kind: "retry", Status: 500 + i, Bytes: int64(n),
					Start: start.Add(time.Duration(i) * time.Millisecond), End: start.Add(time.Duration(i+1) * time.Millisecond)})
			}
			b = append(b, r)
		}
		return b
	}
	write := func(l *Log, size int) {
		t.Helper()
		b := batch(size)
		if err := l.write(ctx, b); err != nil {
			t.Fatalf("writing %d records: %v", size, err)
		}
		want = append(want, b...)
	}

	l := openHeld()
	for _, size := range []int{1, 40, 77, 3, 32} { // 77 = 32+32+8+4+1
		write(l, size)
	}

	// A trigger fails the batch at an attempts row, after all its requests
	// rows and some of its attempts rows are in.
	if _, err := l.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON attempts WHEN NEW.endpoint = 'poison'
		BEGIN SELECT RAISE(ABORT, 'poisoned attempt'); END`); err != nil {
		t.Fatal(err)
	}
	poisoned := batch(50)
	poisoned[45].Attempts = append(poisoned[45].Attempts, callrec.Attempt{Endpoint: "poison"})
	if err := l.write(ctx, poisoned); err == nil || !strings.Contains(err.Error(), "poisoned attempt") {
		t.Fatalf("poisoned batch: %v, want the trigger's error", err)
	}
	if l.Failed() != 50 {
		t.Errorf("Failed() = %d, want 50", l.Failed())
	}
	write(l, 5)

	l2 := openHeld()
	write(l2, 7)
	write(l, 6)
	write(l2, 2)
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openHeld()
	write(l, 10)
	write(l, 1)

	got := collect(t, l.Query(ctx, time.Time{}))
	if len(got) != len(want) {
		t.Fatalf("got %d rows, want %d", len(got), len(want))
	}
	for i, row := range got {
		r := want[i]
		if row.Seq != int64(i+1) || row.RequestID != r.RequestID || len(row.Attempts) != len(r.Attempts) {
			t.Fatalf("row %d: seq %d %s with %d attempts, want seq %d %s with %d",
				i, row.Seq, row.RequestID, len(row.Attempts), i+1, r.RequestID, len(r.Attempts))
		}
		for j, a := range row.Attempts {
			if a.Endpoint != r.Attempts[j].Endpoint || a.Status != r.Attempts[j].Status || a.Bytes != r.Attempts[j].Bytes ||
				a.Start != time.Duration(j)*time.Millisecond || a.Duration != time.Millisecond {
				t.Errorf("%s attempt %d: %+v, want %+v", r.RequestID, j, a, r.Attempts[j])
			}
		}
	}

	var attempts, bytes, joinedBodies, allBodies int64
	if err := l.db.QueryRow(`SELECT count(*), coalesce(sum(a.bytes), 0) FROM attempts a
		JOIN requests r ON r.seq = a.request_seq AND a.endpoint LIKE r.id || '/%'`).Scan(&attempts, &bytes); err != nil {
		t.Fatal(err)
	}
	if err := l.db.QueryRow(`SELECT count(*) FROM bodies b JOIN requests r ON r.seq = b.request_seq
		WHERE b.prompt = 'prompt of ' || r.id AND b.answer = 'answer of ' || r.id`).Scan(&joinedBodies); err != nil {
		t.Fatal(err)
	}
	if err := l.db.QueryRow(`SELECT count(*) FROM bodies`).Scan(&allBodies); err != nil {
		t.Fatal(err)
	}
	var wantAttempts, wantBytes int64
	for _, r := range want {
		wantAttempts += int64(len(r.Attempts))
		for _, a := range r.Attempts {
			wantBytes += a.Bytes
		}
	}
	if attempts != wantAttempts || bytes != wantBytes {
		t.Errorf("attempts joined to their request: %d rows of %d bytes, want %d of %d", attempts, bytes, wantAttempts, wantBytes)
	}
	if joinedBodies != int64(len(want)) || allBodies != int64(len(want)) {
		t.Errorf("bodies: %d joined to their request of %d, want %d", joinedBodies, allBodies, len(want))
	}
}

// A log written before schema version 4 has no stage and no per-attempt
// usage: the Reader reads it as "not recorded" without migrating it, and
// Open migrates it keeping its rows.
func TestOldLogStaysReadable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.db")
	db, err := sql.Open("sqlite", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	stmts := []string{`CREATE TABLE schema_version (version INTEGER NOT NULL)`, `INSERT INTO schema_version (version) VALUES (3)`}
	stmts = append(stmts, migrations[:3]...)
	stmts = append(stmts,
		`INSERT INTO requests VALUES (1, 'old', 60000000000, 5, 0, 'anthropic', 'm', 'm@us', 'm', 'us', 'p', 200, '', '', 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, '', 10, 5, 0, 0, 0.25, 0, 0, '', 1)`,
		`INSERT INTO attempts VALUES (1, 0, 'm@us', 'm', 'us', 'primary', 'ok', 200, 0, 5, 0, 0, 0)`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	want := &Row{Seq: 1, RequestID: "old", Start: time.Unix(60, 0).UTC(), Duration: 5 * time.Millisecond, Format: "anthropic", Model: "m",
		ServedEndpoint: "m@us", ServedModel: "m", ServedRegion: "us", ServedProvider: "p", Status: 200, TokensIn: 10, TokensOut: 5,
		CostUSD: 0.25, Legacy: true,
		Attempts: []Attempt{{Endpoint: "m@us", Model: "m", Region: "us", Kind: "primary", Outcome: "ok", Status: 200, Duration: 5 * time.Millisecond}}}

	rd, err := OpenReader(path)
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, rd.Query(context.Background(), time.Time{}))
	rd.Close()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("reader of a version 3 log (-got +want):\n-%+v\n+%+v", got, *want)
	}

	l := openTest(t, Config{Path: path, RetentionDays: 36500}, hooks{})
	if v, err := schemaVersion(context.Background(), l.db); err != nil || v != len(migrations) {
		t.Fatalf("after Open: version %d, %v; want %d", v, err, len(migrations))
	}
	got = collect(t, l.Query(context.Background(), time.Time{}))
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("migrated version 3 log (-got +want):\n-%+v\n+%+v", got, *want)
	}
}
