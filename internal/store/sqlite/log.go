// Package sqlite is Keel's request log: one row per client call and one per
// upstream attempt, in an embedded SQLite database (modernc.org/sqlite, pure
// Go), written off the hot path; and, in a file of its own, the
// personal-data audit log (audit.go).
//
// A *Log is an callrec.Observer. RequestDone never blocks and does no I/O: it
// puts the Record on a bounded queue, and when the queue is full the Record is
// dropped and counted (Dropped). A single writer goroutine owns every write:
// every FlushInterval, or as soon as BatchSize Records are queued, it takes
// the Records off the queue, converts them to rows and inserts them in
// batched transactions; it also enforces retention (at Open and then hourly
// by the configured clock). Every method of *Log is safe for concurrent use.
//
// Prompt and answer bodies are not stored unless Config.LogBodies is set; the
// Record carries no bodies, so they come from Config.Bodies.
//
// The database runs in WAL mode with synchronous=NORMAL: a crash of the
// machine (not of the process) may lose the last committed batches, never
// corrupt the file. Readers (OpenReader, Query) do not block the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver

	"github.com/keelmesh/keel/internal/callrec"
)

// Defaults of Config's zero fields.
const (
	DefaultPath          = "keel-requests.db"
	DefaultRetentionDays = 30
	DefaultQueueSize     = 8192
	DefaultBatchSize     = 256
	DefaultFlushInterval = 200 * time.Millisecond
)

// pruneEvery is how often retention runs after Open, by Config.Now.
const pruneEvery = time.Hour

// busyTimeoutMS is how long a connection waits for a lock held by another
// connection (a reader checkpointing, a second process) before failing.
const busyTimeoutMS = 5000

// Config configures Open. The zero value of every field is its default.
type Config struct {
	// Path is the database file (default "keel-requests.db"); it is created
	// if missing.
	Path string
	// RetentionDays is how long rows are kept (default 30); older rows are
	// deleted at Open and every hour.
	RetentionDays int
	// QueueSize bounds the Records waiting for the writer (default 8192);
	// beyond it RequestDone drops.
	QueueSize int
	// BatchSize is the most Records written in one transaction (default 256).
	BatchSize int
	// FlushInterval is the longest a queued Record waits before its batch is
	// written (default 200ms).
	FlushInterval time.Duration
	// LogBodies stores prompt and answer bodies (from Bodies). Off by default:
	// bodies are never written unless it is set.
	LogBodies bool
	// Bodies returns the prompt and answer of a Record. It is called on the
	// writer goroutine, only when LogBodies is set; nil stores no bodies.
	Bodies func(r *callrec.Record) (prompt, answer string)
	// Now is the clock of retention (default time.Now).
	Now func() time.Time
	// Logger receives write failures; nil discards.
	Logger *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Path == "" {
		c.Path = DefaultPath
	}
	if c.RetentionDays == 0 {
		c.RetentionDays = DefaultRetentionDays
	}
	if c.QueueSize == 0 {
		c.QueueSize = DefaultQueueSize
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.FlushInterval == 0 {
		c.FlushInterval = DefaultFlushInterval
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case c.RetentionDays < 0:
		return c, fmt.Errorf("retention_days: want a positive number of days, got %d", c.RetentionDays)
	case c.QueueSize < 0:
		return c, fmt.Errorf("queue_size: want a positive size, got %d", c.QueueSize)
	case c.BatchSize < 0:
		return c, fmt.Errorf("batch_size: want a positive size, got %d", c.BatchSize)
	case c.FlushInterval < 0:
		return c, fmt.Errorf("flush_interval: want a positive duration, got %s", c.FlushInterval)
	}
	return c, nil
}

// Log is the request log. Build it with Open and release it with Close.
type Log struct {
	lifecycle
	cfg   Config
	queue chan *callrec.Record
	kick  chan struct{} // a batch is ready: wakes the writer before its tick
	hooks hooks
	w     writer // the writer goroutine's (see writer)

	dropped atomic.Uint64
	written atomic.Uint64
	failed  atomic.Uint64
}

var _ callrec.Observer = (*Log)(nil)

// hooks are test hooks of open.
type hooks struct {
	// gate holds the writer before it reads the queue until it is closed.
	gate <-chan struct{}
	// discard makes the writer drop batches instead of writing them.
	discard bool
}

// Open opens (creating if needed) the request log at cfg.Path, brings its
// schema up to date, deletes rows older than the retention and starts the
// writer. Close it to flush and stop the writer.
func Open(cfg Config) (*Log, error) { return open(cfg, hooks{}) }

func open(cfg Config, h hooks) (*Log, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("opening request log: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(cfg.Path, false))
	if err != nil {
		return nil, fmt.Errorf("opening request log %s: %w", cfg.Path, err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening request log %s: %w", cfg.Path, err)
	}
	l := &Log{
		cfg:       cfg,
		lifecycle: newLifecycle("request log", db),
		queue:     make(chan *callrec.Record, cfg.QueueSize),
		kick:      make(chan struct{}, 1),
		hooks:     h,
	}
	if err := l.prune(context.Background()); err != nil {
		db.Close()
		return nil, fmt.Errorf("opening request log %s: %w", cfg.Path, err)
	}
	go l.run()
	return l, nil
}

// dsn is the modernc.org/sqlite data source name of path: WAL, synchronous
// NORMAL, a busy timeout, and read-only when ro. With WAL, NORMAL syncs at
// checkpoints rather than at every commit, which suits a request log: a
// machine crash may cost it the last batches, never its integrity.
func dsn(path string, ro bool) string {
	esc := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(path)
	q := fmt.Sprintf("_pragma=busy_timeout(%d)", busyTimeoutMS)
	if ro {
		return "file:" + esc + "?mode=ro&" + q
	}
	// The writer appends: a small page cache (256 KiB, not SQLite's 2 MiB)
	// serves it as well and keeps keel serve's memory down.
	return "file:" + esc + "?" + q + "&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=cache_size(-256)&_txlock=immediate"
}

// migrate creates the version table and applies the missing migrations,
// each in its own transaction.
func migrate(db *sql.DB) error { return migrateVersioned(db, "schema_version", migrations) }

// migrateVersioned applies the missing migrations of a schema versioned
// in table, each in its own transaction.
func migrateVersioned(db *sql.DB, table string, ms []string) error {
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (version INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating %s: %w", table, err)
	}
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM `+table).Scan(&v)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reading %s: %w", table, err)
	}
	if v > len(ms) {
		return fmt.Errorf("%s %d is newer than this keel (%d)", table, v, len(ms))
	}
	for ; v < len(ms); v++ {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return fmt.Errorf("migrating to version %d: %w", v+1, err)
		}
		_, err = tx.ExecContext(ctx, ms[v])
		if err == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM `+table)
		}
		if err == nil {
			_, err = tx.ExecContext(ctx, `INSERT INTO `+table+` (version) VALUES (?)`, v+1)
		}
		if err == nil {
			err = tx.Commit()
		} else {
			tx.Rollback()
		}
		if err != nil {
			return fmt.Errorf("migrating to version %d: %w", v+1, err)
		}
	}
	return nil
}

// schemaVersion reads the version table; 0 when it is empty.
func schemaVersion(ctx context.Context, db *sql.DB) (int, error) {
	var v int
	err := db.QueryRowContext(ctx, `SELECT version FROM schema_version`).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return v, nil
}

// RequestDone queues r for the writer. It never blocks: when the queue is
// full, or the Log is closed, r is dropped and counted by Dropped. r must not
// be modified afterwards (the engine's Record contract).
func (l *Log) RequestDone(r *callrec.Record) {
	if r == nil {
		return
	}
	if l.closed.Load() {
		l.dropped.Add(1)
		return
	}
	select {
	case l.queue <- r:
		// The writer sleeps until its tick or a full batch: waking a parked
		// goroutine costs the caller ~10-20 µs, so only every BatchSize-th
		// call pays it.
		if len(l.queue) >= l.cfg.BatchSize {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	default:
		l.dropped.Add(1)
	}
}

// Dropped is the number of Records not queued because the queue was full or
// the Log closed.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Written is the number of Records written to the database.
func (l *Log) Written() uint64 { return l.written.Load() }

// Failed is the number of Records lost because their batch failed to write
// (each failure is also logged).
func (l *Log) Failed() uint64 { return l.failed.Load() }

// Flush blocks until every Record queued before the call has been written
// (or failed to write), and runs retention if it is due. It returns the
// first write error of that flush, or ctx's error.
func (l *Log) Flush(ctx context.Context) error { return l.waitFlush(ctx) }

// Close writes the queued Records, stops the writer and closes the
// database. Records delivered after Close are dropped and counted (one
// delivered at the same instant as Close may be lost uncounted). It is safe
// to call more than once; later calls return the first result.
func (l *Log) Close() error { return l.shutdown() }

// run is the writer goroutine: the only code that writes to the database
// after Open.
func (l *Log) run() {
	defer close(l.done)
	defer l.w.close()
	if l.hooks.gate != nil {
		select {
		case <-l.hooks.gate:
		case <-l.stop:
		}
	}
	ctx := context.Background()
	batch := make([]*callrec.Record, 0, l.cfg.BatchSize)
	lastPrune := l.cfg.Now()
	tick := time.NewTicker(l.cfg.FlushInterval)
	defer tick.Stop()
	// drain moves what is queued now (not what arrives meanwhile, so that a
	// rate beyond the writer's cannot hold it here) into batch, writing each
	// full batch.
	drain := func() error {
		var first error
		for range len(l.queue) {
			batch = append(batch, <-l.queue)
			if len(batch) == cap(batch) {
				first = firstErr(first, l.write(ctx, batch))
				batch = batch[:0]
			}
		}
		return first
	}
	flush := func() error {
		err := drain()
		if len(batch) > 0 {
			err = firstErr(err, l.write(ctx, batch))
			batch = batch[:0]
		}
		return err
	}
	housekeep := func() error {
		if now := l.cfg.Now(); now.Sub(lastPrune) >= pruneEvery {
			lastPrune = now
			return l.prune(ctx)
		}
		return nil
	}
	for {
		select {
		case <-l.kick:
			drain()
		case <-tick.C:
			flush()
			if err := housekeep(); err != nil {
				l.cfg.Logger.Warn("request log retention failed", slog.Any("err", err))
			}
		case reply := <-l.flush:
			err := flush()
			reply <- firstErr(err, housekeep())
		case <-l.stop:
			flush()
			return
		}
	}
}

// firstErr returns the first non-nil error.
func firstErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// prune deletes the rows that started before the retention window.
func (l *Log) prune(ctx context.Context) error {
	cutoff := l.cfg.Now().Add(-time.Duration(l.cfg.RetentionDays) * 24 * time.Hour).UnixNano()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("applying retention: %w", err)
	}
	defer tx.Rollback()
	for _, q := range []string{
		`DELETE FROM attempts WHERE request_seq IN (SELECT seq FROM requests WHERE time_ns < ?)`,
		`DELETE FROM bodies WHERE request_seq IN (SELECT seq FROM requests WHERE time_ns < ?)`,
		`DELETE FROM requests WHERE time_ns < ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, cutoff); err != nil {
			return fmt.Errorf("applying retention: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("applying retention: %w", err)
	}
	return nil
}

// tables are the tables write inserts into, indexed by tRequests, tAttempts
// and tBodies.
var tables = [...]struct {
	name string
	cols []string
}{
	tRequests: {"requests", []string{"seq", "id", "time_ns", "duration_ms", "ttft_ms", "format", "model",
		"served_endpoint", "served_model", "served_region", "served_provider", "status", "mesh_error_code",
		"fallback", "attempts", "retries", "hedges", "hedge_won", "recovered", "fragments", "fragments_ok",
		"fusions", "fusion_conflicts", "normalization_offset", "repairs", "tokens_in", "tokens_out",
		"tokens_cache_read", "tokens_cache_write", "cost_usd", "queue_wait_ms", "stream", "domain", "legacy", "stage", "key_id", "team",
		"cache", "semantic_cache", "cache_similarity", "tokens_cache_write_5m", "tokens_cache_write_1h"}},
	tAttempts: {"attempts", []string{"request_seq", "idx", "endpoint", "model", "region", "kind",
		"outcome", "status", "start_ms", "duration_ms", "wait_ms", "bytes", "winner", "tokens_in", "tokens_out", "cost_usd"}},
	tBodies: {"bodies", []string{"request_seq", "prompt", "answer"}},
}

const (
	tRequests = iota
	tAttempts
	tBodies
	numTables
)

// maxChunkLog is log2 of the most rows one INSERT statement writes. 32
// requests rows bind 1,120 variables, far below SQLite's limit (32,766);
// BenchmarkWrite measured 16, 32 and 64 rows alike, as the cost of binding
// each value then dominates.
const maxChunkLog = 5

// insertSQL is the statement inserting rows rows into tables[t].
func insertSQL(t, rows int) string {
	cols := tables[t].cols
	row := "(" + strings.Repeat("?, ", len(cols)-1) + "?)"
	var b strings.Builder
	b.WriteString("INSERT INTO " + tables[t].name + " (" + strings.Join(cols, ", ") + ") VALUES ")
	for i := range rows {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(row)
	}
	return b.String()
}

const selectMaxSeq = `SELECT coalesce(max(seq), 0) FROM requests`

// writer is what write keeps between batches: a connection of its own
// (rawConn: SQLite's C API, not database/sql, see there why), opened at the
// first batch, and statements prepared on it once. Holding one connection
// also keeps its page cache warm: SQLite drops a connection's cache when
// another connection has written since. Only the goroutine that calls write
// (run) uses it.
type writer struct {
	conn *rawConn // nil before the first batch and after a failed one
	// maxSeq and insert are prepared on conn at first use; insert[t][k]
	// inserts 1<<k rows into tables[t].
	maxSeq uintptr
	insert [numTables][maxChunkLog + 1]uintptr
	// vals holds a batch's values for each table; reused by the next batch.
	vals [numTables][]value
}

// close finalizes the statements and closes the connection.
func (w *writer) close() {
	if w.conn == nil {
		return
	}
	for t := range w.insert {
		for k, s := range w.insert[t] {
			if s != 0 {
				w.conn.finalize(s)
				w.insert[t][k] = 0
			}
		}
	}
	if w.maxSeq != 0 {
		w.conn.finalize(w.maxSeq)
		w.maxSeq = 0
	}
	w.conn.close()
	w.conn = nil
}

// write inserts batch in one transaction. On failure the whole batch is
// counted in Failed and logged.
func (l *Log) write(ctx context.Context, batch []*callrec.Record) error {
	if l.hooks.discard {
		return nil
	}
	err := l.insert(ctx, batch)
	if err != nil {
		l.failed.Add(uint64(len(batch)))
		l.cfg.Logger.Warn("request log write failed", slog.Int("records", len(batch)), slog.Any("err", err))
		return fmt.Errorf("writing %d records: %w", len(batch), err)
	}
	l.written.Add(uint64(len(batch)))
	return nil
}

// insert writes batch with multi-row INSERT statements, in chunks of
// 1<<maxChunkLog rows and the remainder in decreasing powers of two: one
// statement per chunk rather than per row spares the per-statement work,
// which cost more than the rows themselves.
//
// It numbers the requests rows itself, so that the attempts and bodies rows
// can name their request without a last-insert id per row: each transaction
// reads max(seq) and counts on from it, as SQLite would. Reading it inside
// the transaction, which holds the write lock from its start (BEGIN
// IMMEDIATE), keeps the numbering right after a rolled-back batch and when
// another process writes to the same file.
//
// After a failure the transaction is rolled back and the writer's
// connection closed; the next batch starts afresh.
func (l *Log) insert(_ context.Context, batch []*callrec.Record) error {
	w := &l.w
	if w.conn == nil {
		c, err := openRaw(l.cfg.Path)
		if err != nil {
			return err
		}
		w.conn = c
	}
	bodies := l.cfg.LogBodies && l.cfg.Bodies != nil
	err := w.prepare(bodies)
	if err == nil {
		err = w.conn.exec("BEGIN IMMEDIATE")
		if err == nil {
			if err = l.insertRows(batch, bodies); err == nil {
				err = w.conn.exec("COMMIT")
			}
			if err != nil {
				w.conn.exec("ROLLBACK")
			}
		}
	}
	if err != nil {
		w.close()
	}
	return err
}

// insertRows inserts the rows of batch, in the writer's transaction.
func (l *Log) insertRows(batch []*callrec.Record, bodies bool) error {
	w := &l.w
	seq, err := w.conn.queryInt64(w.maxSeq)
	if err != nil {
		return err
	}
	req, att, bod := w.vals[tRequests][:0], w.vals[tAttempts][:0], w.vals[tBodies][:0]
	for _, r := range batch {
		seq++
		code := ""
		if r.Err != nil {
			code = r.Err.MeshCode
		}
		fr, st, sem := callrec.Part(r.Fragments), callrec.Part(r.Structured), callrec.Part(r.Semantic)
		req = append(req, vInt(seq),
			vText(r.RequestID), vInt(r.Start.UnixNano()), vReal(ms(r.Duration)), vReal(ms(r.TTFT)), vText(r.Format.String()), vText(r.Model),
			vText(r.ServedBy), vText(r.ServedModel), vText(r.ServedRegion), vText(r.ServedProvider), vInt(int64(r.Status)), vText(code),
			vText(r.Fallback), vInt(int64(len(r.Attempts))), vInt(int64(r.Retries)), vInt(int64(r.Hedges)), vBool(r.HedgeWon),
			vInt(int64(r.Recovered)), vInt(int64(fr.Count)), vInt(int64(fr.OK)), vInt(int64(fr.Fusions)),
			vInt(int64(fr.FusionConflicts)), vReal(callrec.Part(r.Normalization).Offset), vText(strings.Join(st.Repairs, "\n")),
			vInt(int64(r.Usage.InputTokens)), vInt(int64(r.Usage.OutputTokens)), vInt(int64(r.Usage.CacheReadTokens)),
			vInt(int64(r.Usage.CacheWriteTokens)), vReal(r.Cost), vReal(ms(r.QueueWait)), vBool(r.Stream), vText(r.Domain), vBool(r.Legacy), vText(r.Stage), vText(r.KeyID), vText(r.Team),
			vText(r.CacheStatus()), vText(sem.Status), vReal(sem.Similarity),
			vInt(int64(r.Usage.CacheWriteTokens-r.Usage.CacheWrite1h())), vInt(int64(r.Usage.CacheWrite1h())))
		for i, a := range r.Attempts {
			var start, dur float64
			if !a.Start.IsZero() {
				start = ms(a.Start.Sub(r.Start))
				if !a.End.IsZero() {
					dur = ms(a.End.Sub(a.Start))
				}
			}
			att = append(att, vInt(seq), vInt(int64(i)), vText(a.Endpoint), vText(a.Model), vText(a.Region), vText(a.Kind),
				vText(a.Outcome), vInt(int64(a.Status)), vReal(start), vReal(dur), vReal(ms(a.Wait)), vInt(a.Bytes), vBool(a.Winner),
				vInt(int64(a.InputTokens)), vInt(int64(a.OutputTokens)), vReal(a.Cost))
		}
		if bodies {
			if prompt, answer := l.cfg.Bodies(r); prompt != "" || answer != "" {
				bod = append(bod, vInt(seq), vText(prompt), vText(answer))
			}
		}
	}
	w.vals = [numTables][]value{req, att, bod}
	// The slices are kept for their capacity: drop the values, bodies above
	// all, once written.
	defer func() {
		for _, v := range w.vals {
			clear(v)
		}
	}()
	for t, vals := range w.vals {
		if err := w.exec(t, vals); err != nil {
			return err
		}
	}
	return nil
}

// prepare prepares the statements not yet prepared, those of bodies only
// when bodies is set.
func (w *writer) prepare(bodies bool) error {
	if w.maxSeq == 0 {
		s, err := w.conn.prepare(selectMaxSeq)
		if err != nil {
			return err
		}
		w.maxSeq = s
	}
	for t := range numTables {
		if t == tBodies && !bodies {
			continue
		}
		for k, s := range w.insert[t] {
			if s != 0 {
				continue
			}
			s, err := w.conn.prepare(insertSQL(t, 1<<k))
			if err != nil {
				return err
			}
			w.insert[t][k] = s
		}
	}
	return nil
}

// exec inserts the rows whose values are vals into tables[t].
func (w *writer) exec(t int, vals []value) error {
	n := len(tables[t].cols)
	for len(vals) > 0 {
		k := min(maxChunkLog, bits.Len(uint(len(vals)/n))-1)
		m := n << k // the values of 1<<k rows
		if err := w.conn.run(w.insert[t][k], vals[:m]); err != nil {
			return err
		}
		vals = vals[m:]
		// A batch is milliseconds of CPU: yield between chunks so calls
		// waiting for this core are not held up behind it (at 1k req/s
		// whole batches added ~1 ms to the p99 of calls).
		runtime.Gosched()
	}
	return nil
}

// ms is d in (fractional) milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
